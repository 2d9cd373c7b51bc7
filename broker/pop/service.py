"""POP consumption on a broker: lease, ack, change invisible time, with the state in the journal.

    service = PopService(store=..., topics=..., groups=..., offsets=..., directory=...)
    service.load()                       # replay the journal (before serving)
    batch = await service.pop(request)   # leases, holding up to poll time for a message
    service.ack(group, topic, queue, offset, pop_ms)
    service.change(group, topic, queue, offset, pop_ms, invisible_ms)

A popped message is leased to the group (`leases.py`) and every lease and ack is in the journal
(`journal.py`) before it is answered. Redelivery is in place: a message whose lease expired is
leased again from its own queue with its delivery attempt counted (RocketMQ 5 copies it to a
retry topic through its revive service; the effect for a consumer is the same, and the queue's
order is kept, which FIFO groups need). A message whose lease expires after the group's last
allowed attempt (`retryMaxTimes` + 1 deliveries) is written to `%DLQ%<group>` and acked.
The group's consumer offset is the lease floor: every message below it is acked.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from shoal.broker.filter import (
    FilterError,
    MessageFilter,
    compile_filter,
    is_tag_type,
    keep_matching,
    parse_subscription,
)
from shoal.broker.group_manager import SubscriptionGroupManager
from shoal.broker.pop.journal import PopJournal, ack_record, floor_record, lease_record
from shoal.broker.pop.leases import Lease, PopLeases, QueueLeases
from shoal.broker.pop.limits import POP_MAX_MESSAGES, POP_MAX_POLL_MS, POP_SCAN_UNITS
from shoal.broker.topic_manager import PERM_READ, PERM_WRITE, TopicManager
from shoal.formats.message_id import offset_msg_id
from shoal.formats.properties import (
    DELAY_TIME_LEVEL,
    ORIGIN_MESSAGE_ID,
    RETRY_TOPIC,
    decode_properties,
    encode_properties,
)
from shoal.formats.record import decode_header, reconsume_times_offset
from shoal.formats.topics import dlq_topic
from shoal.protocol import ResponseCode
from shoal.store import Arrivals, GetMessageStatus, MessageStore, MessageToStore
from shoal.store.metadata import ConsumerOffsetTable

log = logging.getLogger(__name__)

INIT_MODE_MIN = 1
"""RocketMQ 5's ConsumeInitMode.MIN: a new group starts at the queue's start; MAX (0) at its end,
unless the queue's first message is still in memory (initPopOffsetByCheckMsgInMem)."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class PopRefused(Exception):
    """A pop the broker will not serve: (ResponseCode, remark)."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


@dataclass(frozen=True, slots=True)
class PopRequest:
    group: str
    topic: str
    queue_id: int
    """-1: every readable queue of the topic."""
    max_messages: int
    invisible_ms: int
    poll_ms: int
    message_filter: MessageFilter
    fifo: bool = False
    init_mode: int = 0


@dataclass(slots=True)
class PopBatch:
    """What one pop leased: the records (reconsume times = attempt - 1) and, per record, its queue,
    offset and attempt; all under one lease identity, `pop_ms`."""

    pop_ms: int
    records: list[bytes] = field(default_factory=list)
    positions: list[tuple[int, int, int]] = field(default_factory=list)
    rest: int = 0
    """Messages left in the popped queues after this batch (restNum)."""


def message_filter_of(expression_type: str | None, expression: str | None) -> MessageFilter:
    """The filter of a pop's expression (TAG or SQL92); FilterError when it does not compile."""
    if is_tag_type(expression_type):
        return MessageFilter(parse_subscription(expression), None, None)
    return MessageFilter(None, compile_filter(expression_type, expression), None)


class PopService:
    def __init__(
        self,
        *,
        store: MessageStore,
        topics: TopicManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetTable,
        directory: Path,
        on_append: Callable[[], None],
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self.store = store
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.on_append = on_append
        self.clock = clock
        self.leases = PopLeases()
        self.journal = PopJournal(directory)
        self._waiters: dict[tuple[str, int], list[asyncio.Future[None]]] = {}
        self._last_pop_ms = 0
        self._rotation = itertools.count()

    # --- life ---
    def load(self) -> None:
        self.journal.load(self.leases)
        for (group, topic, queue_id), queue in self.leases.items():
            self.offsets.commit(group, topic, queue_id, queue.floor)

    def close(self) -> None:
        self.journal.rewrite(self.leases)
        self.journal.close()

    async def tick(self) -> None:
        """From the broker's timer: compact the journal when it has grown (on the loop: no record
        may be appended meanwhile), else fsync it (in a thread: a slow disk never stalls the loop)."""
        if not self.journal.compact_if_due(self.leases):
            await asyncio.to_thread(self.journal.sync)

    def on_dispatch(self, arrivals: Arrivals) -> None:
        """A store listener: wake the pops waiting on the queues messages arrived in."""
        if self._waiters:
            for topic, queue_id in arrivals:
                self._wake(topic, queue_id)

    def _wake(self, topic: str, queue_id: int) -> None:
        """Let the pops waiting on a queue look again (a message arrived, or a lease now ends sooner)."""
        waiters = self._waiters.pop((topic, queue_id), None)
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    # --- pop ---
    async def pop(self, request: PopRequest) -> PopBatch:
        """Lease what is visible now; if nothing is, wait for an arrival or an expiry, up to the
        poll time."""
        deadline = self.clock() + min(max(request.poll_ms, 0), POP_MAX_POLL_MS)
        while True:
            batch = self.pop_now(request)
            now = self.clock()
            if batch.records or now >= deadline:
                return batch
            wake_at = deadline
            queue_ids = self._queue_ids(request)
            for queue_id in queue_ids:
                queue = self.leases.get(request.group, request.topic, queue_id)
                expiry = queue.next_visible_ms() if queue is not None else None
                if expiry is not None:
                    wake_at = min(wake_at, max(expiry, now + 1))
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[None] = loop.create_future()
            for queue_id in queue_ids:
                self._waiters.setdefault((request.topic, queue_id), []).append(waiter)
            try:
                await asyncio.wait_for(waiter, (wake_at - now) / 1000)
            except TimeoutError:
                pass
            finally:
                for queue_id in queue_ids:
                    waiters = self._waiters.get((request.topic, queue_id))
                    if waiters is not None and waiter in waiters:
                        waiters.remove(waiter)
                        if not waiters:
                            del self._waiters[(request.topic, queue_id)]

    def pop_now(self, request: PopRequest) -> PopBatch:
        """Lease up to `max_messages` visible messages: expired leases first, then new ones."""
        group = self.groups.find_or_create(request.group)
        if group is None:
            raise PopRefused(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{request.group}] does not exist"
            )
        now = self.clock()
        pop_ms = max(now, self._last_pop_ms + 1)  # distinct per pop: it identifies the leases
        self._last_pop_ms = pop_ms
        batch = PopBatch(pop_ms)
        room = min(max(request.max_messages, 1), POP_MAX_MESSAGES)
        max_deliveries = group.retry_max_times + 1
        records: list[bytes] = []
        for queue_id in self._queue_ids(request):
            if len(batch.records) >= room:
                break
            queue = self._open(request, queue_id)
            if request.fifo and queue.locked(now):
                continue
            lease = Lease(pop_ms, now + request.invisible_ms, 0)
            records.clear()
            before = len(batch.records)
            for offset, attempt in queue.visible_again(now):
                if len(batch.records) >= room:
                    break
                self._lease_again(request, queue_id, queue, offset, attempt, lease, max_deliveries, batch, records)
            if request.fifo and len(batch.records) > before:
                self.journal.append(b"".join(records))
                continue  # a FIFO queue hands out its earliest unacked messages before anything newer
            if len(batch.records) < room:
                self._lease_new(request, queue_id, queue, lease, room, batch, records)
            self.journal.append(b"".join(records))
            batch.rest += max(self.store.max_offset_in_queue(request.topic, queue_id) - queue.cursor, 0)
        return batch

    def _queue_ids(self, request: PopRequest) -> list[int]:
        topic = self.topics.get(request.topic)
        if topic is None:
            raise PopRefused(ResponseCode.TOPIC_NOT_EXIST, f"topic[{request.topic}] not exist, apply first please!")
        if not topic.perm & PERM_READ:
            raise PopRefused(ResponseCode.NO_PERMISSION, f"the topic[{request.topic}] peeking message is forbidden")
        if request.queue_id < 0:  # every queue, starting at a different one each time: none starves
            count = topic.read_queue_nums
            start = next(self._rotation) % count if count else 0
            return [(start + index) % count for index in range(count)]
        if request.queue_id >= topic.read_queue_nums:
            raise PopRefused(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{request.queue_id}] is illegal, topic:[{request.topic}] "
                f"topicConfig.readQueueNums:[{topic.read_queue_nums}]",
            )
        return [request.queue_id]

    def _open(self, request: PopRequest, queue_id: int) -> QueueLeases:
        queue = self.leases.get(request.group, request.topic, queue_id)
        if queue is None:
            queue = self.leases.open(request.group, request.topic, queue_id, self._start(request, queue_id))
        low = self.store.min_offset_in_queue(request.topic, queue_id)
        if queue.floor < low:  # retention removed what the group had not acked: go on from what is left
            log.warning(
                "pop of %s on %s-%d: offsets %d..%d were deleted before they were acked",
                request.group,
                request.topic,
                queue_id,
                queue.floor,
                low,
            )
            queue.move_to(low)
            self.journal.append(floor_record(request.group, request.topic, queue_id, low, low))
        return queue

    def _start(self, request: PopRequest, queue_id: int) -> int:
        committed = self.offsets.query(request.group, request.topic, queue_id)
        if committed >= 0:
            return committed
        low = self.store.min_offset_in_queue(request.topic, queue_id)
        if request.init_mode == INIT_MODE_MIN or (
            low <= 0 and not self.store.queue_head_on_disk(request.topic, queue_id)
        ):
            return low
        return self.store.max_offset_in_queue(request.topic, queue_id)

    def _lease_again(
        self,
        request: PopRequest,
        queue_id: int,
        queue: QueueLeases,
        offset: int,
        attempt: int,
        lease: Lease,
        max_deliveries: int,
        batch: PopBatch,
        records: list[bytes],
    ) -> None:
        found = self.store.get_messages(request.topic, queue_id, offset, 1)
        try:
            if found.status is not GetMessageStatus.FOUND or not found.messages or found.queue_offsets[0] != offset:
                queue.skip(offset)  # gone from the store (retention): nothing left to deliver
                records.append(ack_record(request.group, request.topic, queue_id, offset))
                return
            view = found.messages[0]
            if attempt >= max_deliveries:
                self._to_dead_letters(request.group, view)
                queue.ack(offset, None)
                records.append(ack_record(request.group, request.topic, queue_id, offset))
                self.offsets.commit(request.group, request.topic, queue_id, queue.floor)
                return
            again = Lease(lease.pop_ms, lease.visible_at_ms, attempt + 1)
            queue.lease(offset, again)
            records.append(lease_record(request.group, request.topic, queue_id, offset, again))
            batch.records.append(_with_attempt(view, again.attempt))
            batch.positions.append((queue_id, offset, again.attempt))
        finally:
            found.release()

    def _lease_new(
        self,
        request: PopRequest,
        queue_id: int,
        queue: QueueLeases,
        lease: Lease,
        room: int,
        batch: PopBatch,
        records: list[bytes],
    ) -> None:
        message_filter = request.message_filter
        tag_codes = message_filter.tag_codes
        tag_filter = None if tag_codes is None else tag_codes.__contains__
        scanned = 0
        while len(batch.records) < room and scanned < POP_SCAN_UNITS:
            start = queue.cursor
            found = self.store.get_messages(request.topic, queue_id, start, room - len(batch.records), tag_filter)
            if found.status not in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE):
                found.release()
                return
            if message_filter.reads_properties:
                keep_matching(found, message_filter)
            leased = set(found.queue_offsets)
            first = Lease(lease.pop_ms, lease.visible_at_ms, 1)
            for view, offset in zip(found.messages, found.queue_offsets, strict=True):
                queue.lease(offset, first)
                records.append(lease_record(request.group, request.topic, queue_id, offset, first))
                batch.records.append(_with_attempt(view, 1))
                batch.positions.append((queue_id, offset, 1))
            found.release()
            end = max(found.next_begin_offset, start)
            for offset in range(start, end):
                if offset not in leased:  # filtered out: the group never sees it
                    queue.skip(offset)
                    records.append(ack_record(request.group, request.topic, queue_id, offset))
            self.offsets.commit(request.group, request.topic, queue_id, queue.floor)
            scanned += end - start
            if end == start:
                return

    def _to_dead_letters(self, group: str, view: memoryview) -> None:
        """Store a message that used up its deliveries in %DLQ%<group>, as RocketMQ does."""
        record = decode_header(view, 0)
        properties = decode_properties(
            view[record.properties_position : record.properties_position + record.properties_length]
        )
        target = dlq_topic(group)
        self.topics.create_if_absent(target, 1, PERM_READ | PERM_WRITE)
        properties.setdefault(RETRY_TOPIC, record.topic)
        properties.setdefault(ORIGIN_MESSAGE_ID, offset_msg_id(record.store_host, record.physical_offset))
        properties.pop(DELAY_TIME_LEVEL, None)
        message = MessageToStore(
            topic=target,
            queue_id=0,
            body=bytes(view[record.body_position : record.body_position + record.body_length]),
            properties=encode_properties(properties),
            flag=record.flag,
            sysflag=record.sysflag,
            born_timestamp_ms=record.born_timestamp,
            born_host=record.born_host,
            reconsume_times=record.reconsume_times + 1,
        )
        result = self.store.append_message(message)
        if result.append is None:
            raise PopRefused(
                ResponseCode.SYSTEM_ERROR,
                f"moving a message to {target} failed: {result.remark or result.status.value}",
            )
        self.on_append()
        log.info("message %d of %s moved to %s after its last delivery", record.queue_offset, record.topic, target)

    # --- ack, change ---
    def ack(self, group: str, topic: str, queue_id: int, offset: int, pop_ms: int) -> bool:
        """End a lease; False when `pop_ms` no longer names it (it expired and was leased again,
        or its invisible time was changed)."""
        queue = self.leases.get(group, topic, queue_id)
        if queue is None or not queue.ack(offset, pop_ms):
            return False
        self.journal.append(ack_record(group, topic, queue_id, offset))
        self.offsets.commit(group, topic, queue_id, queue.floor)
        return True

    def change(self, group: str, topic: str, queue_id: int, offset: int, pop_ms: int, invisible_ms: int) -> int | None:
        """Make a leased message visible again in `invisible_ms`: the new lease's pop time, or
        None when `pop_ms` no longer names a lease."""
        queue = self.leases.get(group, topic, queue_id)
        lease = queue.leases.get(offset) if queue is not None else None
        if queue is None or lease is None or lease.pop_ms != pop_ms:
            return None
        now = self.clock()
        new_pop_ms = max(now, self._last_pop_ms + 1, pop_ms + 1)
        self._last_pop_ms = new_pop_ms
        renewed = Lease(new_pop_ms, now + invisible_ms, lease.attempt)
        queue.lease(offset, renewed)
        self.journal.append(lease_record(group, topic, queue_id, offset, renewed))
        self._wake(topic, queue_id)  # a pop already waiting must see the message come back in time
        return new_pop_ms


def _with_attempt(view: memoryview, attempt: int) -> bytes:
    """A copy of the record whose RECONSUMETIMES says how often it was delivered before."""
    record = bytearray(view)
    sysflag = int.from_bytes(record[36:40], "big", signed=True)
    at = reconsume_times_offset(sysflag)
    record[at : at + 4] = (attempt - 1).to_bytes(4, "big", signed=True)
    return bytes(record)


__all__ = ["FilterError", "PopBatch", "PopRefused", "PopRequest", "PopService", "message_filter_of"]
