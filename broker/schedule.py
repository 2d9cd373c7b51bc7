"""ScheduleMessageService: delayed delivery by delay level (RocketMQ 4.x) and by delivery time (5.x).

Delay levels (spec §10.1-10.2). A message sent with `DELAY=n` is stored in SCHEDULE_TOPIC_XXXX,
queue n-1 (n clamped to the highest level), with REAL_TOPIC / REAL_QID naming where it goes;
its ConsumeQueue tagsCode is its delivery time (store time + the level's delay, set by the
Dispatcher through `schedule_tags_code_hook`). Each level's queue is FIFO with one delay, so its
head is always the next message due; `config/delayOffset.json` holds, per level, the next queue
offset to deliver.

Delivery times (RocketMQ 5 clients): TIMER_DELIVER_MS (epoch ms), TIMER_DELAY_SEC,
TIMER_DELAY_MS (relative, turned into TIMER_DELIVER_MS at the broker) and the legacy
`__STARTDELIVERTIME` (epoch ms). Such a message is stored in `rmq_sys_wheel_timer` with the
delivery time as tagsCode, and indexed in memory by `shoal.broker.timer.TimerIndex`, whose
progress is `config/timerOffset.json`.

One task on the broker's event loop does all deliveries, in rounds of at most
`SCHEDULE_ROUND_DELIVERIES_MAX_COUNT` messages (its bounds live in broker/limits.py): read due
units, copy each record to its real topic and queue (DELAY removed, everything else as stored: body,
flag, sysflag, born time and host, reconsume times), then let the Dispatcher index the new records.
Between rounds the loop serves requests; when nothing is due the task sleeps until the earliest
delivery time, and a newly dispatched delayed message that is due earlier wakes it.

Restarts: progress is persisted every `flushDelayOffsetInterval` and at shutdown, but only up to a
round whose delivered records the flusher had already made durable, so a crash (even a power
loss) never loses a message; the messages delivered after the last persisted round are delivered
again (at-least-once).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import enum
import logging
import struct
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from shoal.broker import limits
from shoal.broker.timer import (
    TIMER_PROGRESS_FILE_NAME,
    TimerIndex,
    TimerProgress,
    load_timer_progress,
    save_timer_progress,
)
from shoal.formats.consume_queue_unit import BLANK_UNIT_SIZE_FIELD
from shoal.formats.properties import (
    DELAY_TIME_LEVEL,
    NAME_VALUE_SEPARATOR,
    REAL_QUEUE_ID,
    REAL_TOPIC,
    START_DELIVER_TIME,
    TIMER_DELAY_MS,
    TIMER_DELAY_SEC,
    TIMER_DELIVER_MS,
    decode_properties,
    encode_properties,
)
from shoal.formats.record import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, RecordHeader, decode_header
from shoal.formats.store_layout import DELAY_OFFSET_FILE_NAME
from shoal.formats.topics import SCHEDULE_TOPIC, TIMER_TOPIC, TRANS_HALF_TOPIC
from shoal.store import (
    Arrivals,
    MessageStore,
    MessageToStore,
    PutStatus,
    StoreError,
    TagsCodeHook,
    TagsCodeRule,
)
from shoal.store.metadata import DelayOffsetTable

log = logging.getLogger(__name__)

TIMER_REQUEST_PROPERTIES = (TIMER_DELAY_SEC, TIMER_DELAY_MS, START_DELIVER_TIME)
"""Turned into TIMER_DELIVER_MS when a message is parked, so a re-sent copy is not delayed again."""

UNKNOWN_LEVEL_DELAY_MS = 1000
"""computeDeliverTimestamp: a DELAY value outside the level table waits 1 s."""
_PARKING_TOPICS = frozenset({SCHEDULE_TOPIC, TIMER_TOPIC})
_MAGIC_CODES = (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)


@dataclass(frozen=True, slots=True)
class Timing:
    """When a message is to be delivered: after a delay level, or at an epoch millisecond."""

    level: int = 0
    deliver_ms: int = 0

    def __post_init__(self) -> None:
        assert (self.level > 0) != (self.deliver_ms > 0), self


_DELAY_MARKER = DELAY_TIME_LEVEL + NAME_VALUE_SEPARATOR
_START_DELIVER_TIME_MARKER = START_DELIVER_TIME + NAME_VALUE_SEPARATOR
"""How the names start a segment: substring tests on them cost what literals do (a helper call
per send would double may_be_timed's ~150 ns); a false positive only costs a decode."""
_TIMER_PREFIX = "TIMER_"
TIMED_MARKERS = (_DELAY_MARKER, _TIMER_PREFIX, _START_DELIVER_TIME_MARKER)
"""`may_be_timed`'s substrings, for a reader that tests them all in one call."""


def may_be_timed(properties: str | None) -> bool:
    """Cheap test on the wire property string, so ordinary sends never decode it."""
    if not properties:
        return False
    return _DELAY_MARKER in properties or _TIMER_PREFIX in properties or _START_DELIVER_TIME_MARKER in properties


def _integer_property(properties: Mapping[str, str], name: str) -> int | None:
    text = properties.get(name)
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"property {name}={text!r} is not an integer") from None


def timing_of(
    properties: Mapping[str, str], now_ms: int, *, timer_enabled: bool, timer_max_delay_ms: int
) -> Timing | None:
    """The timing a sent message asks for; None to deliver at once. ValueError: refuse it.

    DELAY <= 0 and delivery times not in the future mean "now" (RocketMQ 5 stores such a timer
    message as an ordinary one). A message with both a level and a delivery time is refused, as
    RocketMQ 5 does, and so is a delivery time beyond `timerMaxDelaySec`."""
    level = _integer_property(properties, DELAY_TIME_LEVEL) or 0
    deliver_ms = None
    if timer_enabled:
        absolute = _integer_property(properties, TIMER_DELIVER_MS)
        delay_s = _integer_property(properties, TIMER_DELAY_SEC)
        delay_ms = _integer_property(properties, TIMER_DELAY_MS)
        legacy = _integer_property(properties, START_DELIVER_TIME)
        if absolute is not None:
            deliver_ms = absolute
        elif delay_s is not None:
            deliver_ms = now_ms + delay_s * 1000
        elif delay_ms is not None:
            deliver_ms = now_ms + delay_ms
        elif legacy is not None:
            deliver_ms = legacy
    if deliver_ms is not None and deliver_ms > now_ms:
        if level > 0:
            raise ValueError("a message cannot have both a delay level and a delivery time")
        if deliver_ms - now_ms > timer_max_delay_ms:
            raise ValueError(
                f"delivery time {deliver_ms} is more than {timer_max_delay_ms} ms ahead (timerMaxDelaySec)"
            )
        return Timing(deliver_ms=deliver_ms)
    return Timing(level=level) if level > 0 else None


def park(message: MessageToStore, timing: Timing, level_count: int) -> MessageToStore:
    """The record to store for a delayed message (CommitLog.asyncPutMessage's delay branch):
    SCHEDULE_TOPIC_XXXX queue level-1 (level clamped, DELAY rewritten) or the timer topic with
    TIMER_DELIVER_MS, both with REAL_TOPIC / REAL_QID. Raises StoreError when the properties
    grow past their limit."""
    assert level_count > 0
    properties = decode_properties(message.properties)
    if timing.level > 0:
        level = min(timing.level, level_count)
        properties[DELAY_TIME_LEVEL] = str(level)
        topic, queue_id = SCHEDULE_TOPIC, level - 1
    else:
        for name in TIMER_REQUEST_PROPERTIES:
            properties.pop(name, None)
        properties[TIMER_DELIVER_MS] = str(timing.deliver_ms)
        topic, queue_id = TIMER_TOPIC, 0
    properties[REAL_TOPIC] = message.topic
    properties[REAL_QUEUE_ID] = str(message.queue_id)
    return dataclasses.replace(message, topic=topic, queue_id=queue_id, properties=encode_properties(properties))


def unpark(record: RecordHeader, body: bytes, properties: dict[str, str]) -> MessageToStore | None:
    """The message to deliver for a parked record (messageTimeup), or None when it cannot be
    delivered: no real topic, or the transaction half topic (RocketMQ discards those since
    4.6.0: a half message carrying DELAY would loop, spec §11.6). DELAY is removed; REAL_TOPIC,
    REAL_QID and TIMER_DELIVER_MS stay, as a record delivered by RocketMQ keeps them."""
    real_topic = properties.get(REAL_TOPIC)
    real_queue = properties.get(REAL_QUEUE_ID, "")
    if not real_topic or not real_queue.isdigit():
        log.error("delayed record at %d has no REAL_TOPIC/REAL_QID: dropped", record.physical_offset)
        return None
    if real_topic == TRANS_HALF_TOPIC:
        log.error("delayed record at %d targets %s: discarded (spec §11.6)", record.physical_offset, real_topic)
        return None
    properties.pop(DELAY_TIME_LEVEL, None)
    return MessageToStore(
        topic=real_topic,
        queue_id=int(real_queue),
        body=body,
        properties=encode_properties(properties),
        flag=record.flag,
        sysflag=record.sysflag,
        born_timestamp_ms=record.born_timestamp,
        born_host=record.born_host,
        reconsume_times=record.reconsume_times,
        prepared_transaction_offset=record.prepared_transaction_offset,
    )


def schedule_tags_code_hook(levels_ms: tuple[int, ...]) -> TagsCodeHook:
    """tagsCode of parked messages = delivery time (spec §2.2; computeDeliverTimestamp)."""

    def hook(topic: str, properties: dict[str, str], store_timestamp: int, _default: int) -> int | None:
        if topic == SCHEDULE_TOPIC:
            level = properties.get(DELAY_TIME_LEVEL, "")
            if level.isdigit() and 1 <= int(level) <= len(levels_ms):
                return store_timestamp + levels_ms[int(level) - 1]
            return store_timestamp + UNKNOWN_LEVEL_DELAY_MS
        if topic == TIMER_TOPIC:
            text = properties.get(TIMER_DELIVER_MS, "")
            return int(text) if text.isdigit() else store_timestamp
        return None

    return hook


def schedule_tags_code_rule(levels_ms: tuple[int, ...]) -> TagsCodeRule:
    """The store's tagsCode rule for the parking topics (given when it is built, so records
    re-dispatched by recovery get the right tagsCode too)."""
    return TagsCodeRule(schedule_tags_code_hook(levels_ms), _PARKING_TOPICS)


class Outcome(enum.Enum):
    DELIVERED = "delivered"
    SKIPPED = "skipped"  # cannot ever be delivered (logged); move on
    RETRY = "retry"  # the store refused the put for now; try the same message again later


class Snapshot(NamedTuple):
    """Progress after a round, persistable once the CommitLog is flushed to `commitlog_end`."""

    commitlog_end: int
    level_offsets: dict[int, int]
    timer: TimerProgress


class ScheduleMessageService:
    """Delivers parked messages when due. `start()` on the broker's loop, `await stop()`."""

    def __init__(
        self,
        store: MessageStore,
        levels_ms: tuple[int, ...],
        config_dir: Path,
        *,
        persist_interval_s: float = 10.0,
        timer_pending_max_count: int | None = None,
    ) -> None:
        assert levels_ms and persist_interval_s > 0
        self.store = store
        self.levels_ms = levels_ms
        self.persist_interval_s = persist_interval_s
        self.offsets_table = DelayOffsetTable(config_dir / DELAY_OFFSET_FILE_NAME)
        self.timer_progress_path = config_dir / TIMER_PROGRESS_FILE_NAME
        self.timer = TimerIndex() if timer_pending_max_count is None else TimerIndex(timer_pending_max_count)
        self.offsets: dict[int, int] = {}
        """Next SCHEDULE_TOPIC_XXXX offset to deliver, per level (1-based)."""
        self.level_delays_ms: dict[int, int] = {}
        """The delay of each level with a queue; a level dropped from the table keeps being
        delivered, at the time it was stored with (if within the longest delay), else at once."""
        self.delivered_count = 0
        self.skipped_count = 0
        self._snapshots: collections.deque[Snapshot] = collections.deque(maxlen=limits.SCHEDULE_SNAPSHOTS_MAX_COUNT)
        self._first_level = 0
        self._wake = asyncio.Event()
        self._wake_at_ms = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._last_persist_s = 0.0
        self._put_failure_logged = False
        self._unsubscribe: Callable[[], None] = lambda: None

    # --- lifecycle ---
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Load progress (clamped into each queue's range), rebuild the timer index, start the task.
        Also after `stop()` (a slave promoted to master): everything is rebuilt from the files."""
        if self._task is not None:
            return
        self._loop = loop
        self.timer = TimerIndex(self.timer.pending_max_count)
        self._snapshots.clear()
        self.offsets.clear()
        self.level_delays_ms.clear()
        self._loop_thread = threading.get_ident()
        self.offsets_table.load()
        levels = set(range(1, len(self.levels_ms) + 1))
        levels.update(queue_id + 1 for queue_id in self.store.queue_ids(SCHEDULE_TOPIC))
        for level in sorted(levels):
            delay_ms = self.levels_ms[level - 1] if level <= len(self.levels_ms) else max(self.levels_ms)
            self.level_delays_ms[level] = delay_ms
            self.offsets[level] = self._clamped(level, self.offsets_table.query(level))
        progress = load_timer_progress(self.timer_progress_path)
        self.timer.restore(progress, self.store.min_offset_in_queue(TIMER_TOPIC, 0))
        while self._index_timers(limits.SCHEDULE_ROUND_INDEXED_MAX_COUNT):
            pass
        log.info(
            "schedule: %d levels, offsets %s; %d timer messages pending",
            len(self.levels_ms),
            {level: offset for level, offset in self.offsets.items() if offset},
            len(self.timer),
        )
        self._last_persist_s = loop.time()
        self._unsubscribe = self.store.subscribe(self._on_dispatch)
        self._stopping = False
        self._task = loop.create_task(self._run(), name="schedule")

    def _clamped(self, level: int, offset: int) -> int:
        queue_id = level - 1
        low = self.store.min_offset_in_queue(SCHEDULE_TOPIC, queue_id)
        high = self.store.max_offset_in_queue(SCHEDULE_TOPIC, queue_id)
        clamped = min(max(offset, low), high)
        if clamped != offset:
            log.warning("delay level %d: offset %d outside [%d, %d], using %d", level, offset, low, high, clamped)
        return clamped

    async def stop(self) -> None:
        """Finish the current round, flush the CommitLog and persist exact progress.

        The task is asked to end rather than cancelled, so it never stops halfway through writing
        the progress files (a second writer would race it for the same `.tmp`)."""
        task = self._task
        if task is None:
            return
        self._stopping = True
        self._wake.set()
        try:
            await task
        except Exception:
            log.exception("the schedule task had failed")
        self._task = None
        self._unsubscribe()
        try:
            await asyncio.to_thread(self.store.flush_to_end)
        except OSError:
            log.exception("flush before persisting delay progress failed; persisting what is durable")
            await self._persist_durable()
            return
        now_ms = self.store.clock.now_ms()
        await self._persist(Snapshot(self.store.max_offset, dict(self.offsets), self.timer.progress(now_ms)))

    @property
    def running(self) -> bool:
        return self._task is not None

    def wakeup(self) -> None:
        if self._loop is None:
            return
        if threading.get_ident() == self._loop_thread:
            self._wake.set()
        else:
            self._loop.call_soon_threadsafe(self._wake.set)

    def park(self, message: MessageToStore, timing: Timing) -> MessageToStore:
        return park(message, timing, len(self.levels_ms))

    def stats(self) -> dict[str, int]:
        return {
            "delivered": self.delivered_count,
            "skipped": self.skipped_count,
            "timer_pending": len(self.timer),
            "levels_behind": sum(self._behind(level) for level in self.offsets),
        }

    def _behind(self, level: int) -> int:
        return max(0, self.store.max_offset_in_queue(SCHEDULE_TOPIC, level - 1) - self.offsets[level])

    # --- the task ---
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            self._wake.clear()
            now_ms = self.store.clock.now_ms()
            failed = False
            try:
                delivered, busy, refused = self._round(now_ms)
            except Exception:
                log.exception("schedule round failed; retrying in %.0f s", limits.SCHEDULE_ERROR_RETRY_DELAY_S)
                delivered, busy, refused, failed = 0, False, False, True
            if delivered:
                self.store.dispatch_soon()
            if loop.time() - self._last_persist_s >= self.persist_interval_s:
                self._last_persist_s = loop.time()
                await self._persist_durable()
            if self._stopping:
                break
            if busy and not refused:
                await asyncio.sleep(0)
                continue
            wait_s = (
                limits.SCHEDULE_ERROR_RETRY_DELAY_S
                if failed
                else limits.SCHEDULE_PUT_RETRY_DELAY_S
                if refused
                else self._idle_wait_s(now_ms)
            )
            if wait_s > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait_s):
                        await self._wake.wait()

    def _round(self, now_ms: int) -> tuple[int, bool, bool]:
        """One round: (messages delivered, budget used up, a put was refused)."""
        indexed = self._index_timers(limits.SCHEDULE_ROUND_INDEXED_MAX_COUNT)
        budget = limits.SCHEDULE_ROUND_DELIVERIES_MAX_COUNT
        delivered = 0
        refused = False
        levels = list(self.offsets)
        self._first_level = (self._first_level + 1) % len(levels)  # no level starves the others under backlog
        for level in levels[self._first_level :] + levels[: self._first_level]:
            done, refused = self._deliver_level(level, now_ms, budget - delivered)
            delivered += done
            if refused or delivered >= budget:
                break
        if not refused and delivered < budget:
            done, refused = self._deliver_timers(now_ms, budget - delivered)
            delivered += done
        if delivered or indexed:
            self._snapshot(self.store.max_offset)
        busy = delivered >= budget or indexed >= limits.SCHEDULE_ROUND_INDEXED_MAX_COUNT
        return delivered, busy, refused

    def _deliver_level(self, level: int, now_ms: int, budget: int) -> tuple[int, bool]:
        """Deliver the due head of one level's queue: (units passed, a put was refused)."""
        store, queue_id = self.store, level - 1
        if budget <= 0:
            return 0, False
        offset = self.offsets[level]
        delay_ms = self.level_delays_ms[level]
        passed = 0
        try:
            while passed < budget and offset < (high := store.max_offset_in_queue(SCHEDULE_TOPIC, queue_id)):
                count_max = min(budget - passed, limits.SCHEDULE_READ_UNITS_MAX_COUNT)
                units = store.read_units(SCHEDULE_TOPIC, queue_id, offset, count_max)
                if not units:
                    clamped = min(max(offset, store.min_offset_in_queue(SCHEDULE_TOPIC, queue_id)), high)
                    if clamped == offset:
                        break
                    log.warning("delay level %d: offset %d no longer readable, moving to %d", level, offset, clamped)
                    offset = clamped
                    continue
                for physical, size, tags_code in units:
                    if size != BLANK_UNIT_SIZE_FIELD:
                        # A time beyond now + delay: the clock went back, or the level got shorter.
                        deliver_ms = tags_code if tags_code <= now_ms + delay_ms else now_ms
                        if deliver_ms > now_ms:
                            return passed, False
                        if self._deliver(physical, size) is Outcome.RETRY:
                            return passed, True
                    offset += 1
                    passed += 1
            return passed, False
        finally:
            self.offsets[level] = offset

    def _index_timers(self, count_max: int) -> int:
        """Add new units of the timer queue to the index: how many units were read."""
        store, timer = self.store, self.timer
        offset = max(timer.indexed_offset, store.min_offset_in_queue(TIMER_TOPIC, 0))
        end = store.max_offset_in_queue(TIMER_TOPIC, 0)
        read = 0
        while read < count_max and offset < end and timer.room > 0:
            count = min(count_max - read, limits.SCHEDULE_READ_UNITS_MAX_COUNT, timer.room)
            units = store.read_units(TIMER_TOPIC, 0, offset, count)
            if not units:
                break
            for _physical, size, deliver_ms in units:
                if size != BLANK_UNIT_SIZE_FIELD:
                    timer.index(offset, deliver_ms)
                offset += 1
            read += len(units)
        timer.indexed_offset = offset
        if timer.room <= 0 and offset < end and not timer.full_reported:
            timer.full_reported = True
            log.warning("timer index holds %d messages: later timer messages wait to be indexed", len(timer))
        elif timer.room > 0:
            timer.full_reported = False
        return read

    def _deliver_timers(self, now_ms: int, budget: int) -> tuple[int, bool]:
        delivered = 0
        while delivered < budget:
            next_ms = self.timer.next_deliver_ms()
            if next_ms is None or next_ms > now_ms:
                break
            deliver_ms, offset = self.timer.pop()
            unit = self.store.unit_at(TIMER_TOPIC, 0, offset)
            if unit is None:
                log.warning("timer message at queue offset %d was cleaned up before its delivery", offset)
                continue
            if self._deliver(unit.physical_offset, unit.size) is Outcome.RETRY:
                self.timer.push(deliver_ms, offset)
                return delivered, True
            delivered += 1
        return delivered, False

    def _deliver(self, physical: int, size: int) -> Outcome:
        """Copy one parked record to its real topic and queue."""
        found = self._read(physical, size)
        if found is None:
            self.skipped_count += 1
            return Outcome.SKIPPED
        message = unpark(*found)
        if message is None:
            self.skipped_count += 1
            return Outcome.SKIPPED
        result = self.store.append_message(message)
        if result.append is not None:
            self.delivered_count += 1
            self._put_failure_logged = False
            return Outcome.DELIVERED
        if result.status in (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED):
            log.error("delayed record at %d refused by the store (%s): dropped", physical, result.remark)
            self.skipped_count += 1
            return Outcome.SKIPPED
        if not self._put_failure_logged:
            self._put_failure_logged = True
            log.warning("delivering delayed messages paused: %s %s", result.status.value, result.remark)
        return Outcome.RETRY

    def _read(self, physical: int, size: int) -> tuple[RecordHeader, bytes, dict[str, str]] | None:
        view = self.store.read(physical, size)
        if view is None:
            log.warning("delayed record at %d was cleaned up before its delivery", physical)
            return None
        try:
            record = decode_header(view, 0)
            if record.magic not in _MAGIC_CODES or record.total_size != size:
                raise ValueError(f"magic {record.magic} / size {record.total_size} where {size} was expected")
            start = record.properties_position
            properties = decode_properties(view[start : start + record.properties_length])
            body = bytes(view[record.body_position : record.body_position + record.body_length])
        except (ValueError, struct.error, StoreError) as error:
            log.error("delayed record at %d is unreadable: %s", physical, error)
            return None
        finally:
            view.release()
        return record, body, properties

    def _idle_wait_s(self, now_ms: int) -> float:
        """Seconds until the earliest delivery; the dispatch listener wakes us for earlier ones."""
        due_ms = now_ms + int(limits.SCHEDULE_IDLE_WAIT_MAX_S * 1000)
        for level, offset in self.offsets.items():
            if offset >= self.store.max_offset_in_queue(SCHEDULE_TOPIC, level - 1):
                continue
            unit = self.store.unit_at(SCHEDULE_TOPIC, level - 1, offset)
            if unit is None or unit.size == BLANK_UNIT_SIZE_FIELD:
                return 0.0
            due_ms = min(due_ms, unit.tags_code if unit.tags_code <= now_ms + self.level_delays_ms[level] else now_ms)
        next_timer_ms = self.timer.next_deliver_ms()
        if next_timer_ms is not None:
            due_ms = min(due_ms, next_timer_ms)
        self._wake_at_ms = due_ms
        return max(0.0, (due_ms - now_ms) / 1000)

    def _on_dispatch(self, arrivals: Arrivals) -> None:
        """Dispatcher listener: a parked message due before our planned wake-up wakes us now."""
        for (topic, _queue_id), requests in arrivals.items():
            if topic in _PARKING_TOPICS:
                due_ms = min(request.tags_code for request in requests)
                if due_ms < self._wake_at_ms:
                    self._wake_at_ms = due_ms
                    self.wakeup()

    # --- progress ---
    def _snapshot(self, commitlog_end: int) -> None:
        now_ms = self.store.clock.now_ms()
        self._snapshots.append(Snapshot(commitlog_end, dict(self.offsets), self.timer.progress(now_ms)))

    async def _persist_durable(self) -> None:
        """Flush the CommitLog, then persist the newest round whose delivered records are durable.

        Without the flush, a quiet broker (ASYNC_FLUSH flushes less than 4 dirty pages only every
        10 s) would persist stale progress and a crash would repeat more deliveries than needed."""
        try:
            await asyncio.to_thread(self.store.flush_to_end)
        except OSError:
            log.exception("flushing before persisting delay progress failed")  # the flusher reports it too
        flushed = self.store.flushed_offset
        chosen = None
        while self._snapshots and self._snapshots[0].commitlog_end <= flushed:
            chosen = self._snapshots.popleft()
        if chosen is not None:
            await self._persist(chosen)

    async def _persist(self, snapshot: Snapshot) -> None:
        for level, offset in snapshot.level_offsets.items():
            self.offsets_table.update(level, offset)
        try:
            await asyncio.to_thread(self._write, snapshot.timer)
        except OSError:
            log.exception("persisting delay progress failed")

    def _write(self, timer: TimerProgress) -> None:
        self.offsets_table.persist()
        save_timer_progress(self.timer_progress_path, timer)
