"""Client-side rebalance (spec §13): which queues this consumer owns, and orderly queue locks.

Allocation strategies are pure: `(group, current_cid, sorted mqs, sorted cids) -> mqs`.
`Rebalancer` owns the table of assigned queues (`ProcessQueue` by `MessageQueue`): each round it
recomputes the assignment of every subscribed topic, tells the consumer which queues it gained
(`on_added`) and lost (`on_removed`); for orderly clustering consumers it also locks queues at
their master broker (LOCK_BATCH_MQ) and unlocks them when they go.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence

from shoal.client.client_instance import ClientInstance
from shoal.client.errors import MQBrokerError, NoRouteError, RemotingError
from shoal.client.process_queue import ProcessQueue
from shoal.protocol import LockBatchRequestBody, MessageModel, MessageQueue, UnlockBatchRequestBody

log = logging.getLogger(__name__)

AllocateStrategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]
"""(consumer group, this client's id, every queue sorted, every client id sorted) -> our queues."""


def allocate_averagely(
    _group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """`AllocateMessageQueueAveragely`: contiguous runs; the first `n % c` consumers get one more."""
    if current_cid not in cid_all or not mq_all:
        return []
    n, c, index = len(mq_all), len(cid_all), cid_all.index(current_cid)
    mod = n % c
    if n <= c:
        average = 1
    elif mod > 0 and index < mod:
        average = n // c + 1
    else:
        average = n // c
    start = index * average if mod > 0 and index < mod else index * average + mod
    count = min(average, n - start)
    return [mq_all[(start + k) % n] for k in range(max(count, 0))]


def allocate_averagely_by_circle(
    _group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """`AllocateMessageQueueAveragelyByCircle`: every c-th queue starting at our index."""
    if current_cid not in cid_all:
        return []
    index, c = cid_all.index(current_cid), len(cid_all)
    return [mq for position, mq in enumerate(mq_all) if position % c == index]


def group_by_broker(mqs: Iterable[MessageQueue]) -> dict[str, list[MessageQueue]]:
    """Queues by broker name (one LOCK/UNLOCK_BATCH_MQ per broker)."""
    result: dict[str, list[MessageQueue]] = {}
    for mq in sorted(mqs):
        result.setdefault(mq.broker_name, []).append(mq)
    return result


class Rebalancer:
    """The assigned queues of one consumer group and the rounds that change them."""

    def __init__(
        self,
        group: str,
        instance: ClientInstance,
        *,
        message_model: MessageModel,
        allocate: AllocateStrategy,
        orderly: bool,
        on_added: Callable[[ProcessQueue], None],
        on_removed: Callable[[ProcessQueue], Awaitable[None]],
    ) -> None:
        self.group = group
        self._instance = instance
        self.message_model = message_model
        self._allocate = allocate
        self.orderly = orderly
        self._on_added = on_added
        self._on_removed = on_removed
        self.table: dict[MessageQueue, ProcessQueue] = {}

    @property
    def needs_locks(self) -> bool:
        """Orderly clustering consumers consume a queue only while they hold its broker lock."""
        return self.orderly and self.message_model == MessageModel.CLUSTERING

    async def rebalance(self, topics: Iterable[str]) -> bool:
        """One round over every subscribed topic; queues of other topics are dropped.
        Returns True when some topic could not be decided yet (no route, no consumer list)."""
        subscribed = set(topics)
        undecided = False
        for topic in sorted(subscribed):
            try:
                assigned = await self._assignment(topic)
            except NoRouteError as error:  # e.g. a retry topic the broker has not registered yet
                log.info("rebalance of %s for group %s waits for a route: %s", topic, self.group, error)
                undecided = True
                continue
            except (RemotingError, MQBrokerError) as error:
                log.warning("rebalance of %s for group %s skipped: %s", topic, self.group, error)
                undecided = True
                continue
            if assigned is None:
                undecided = True
            else:
                await self._apply(topic, assigned)
        for mq in [mq for mq in self.table if mq.topic not in subscribed]:
            await self._remove(mq)
        return undecided

    async def _assignment(self, topic: str) -> set[MessageQueue] | None:
        """This consumer's queues of `topic`; None when the round cannot decide (keep as is)."""
        mq_all = list(await self._instance.routes.subscribe_queues(topic))
        if self.message_model == MessageModel.BROADCASTING:
            return set(mq_all)
        address = self._instance.routes.any_broker_address(topic)
        if address is None:
            log.warning("no broker for topic %s; rebalance of group %s waits", topic, self.group)
            return None
        cid_all = await self._consumer_ids(address)
        if not cid_all:
            log.warning("no consumer of group %s registered at %s yet", self.group, address)
            return None
        if self._instance.client_id not in cid_all:
            log.info("%s is not in the consumer list of group %s yet", self._instance.client_id, self.group)
        return set(self._allocate(self.group, self._instance.client_id, sorted(mq_all), sorted(cid_all)))

    async def _consumer_ids(self, address: str) -> list[str]:
        """The group's consumer ids at `address`. A broker that does not list us yet (its route
        appeared after our last heartbeat) gets a heartbeat first, as Java's client does on a
        route change, so a consumer started right after its topic was created is not idle 30 s."""
        try:
            cid_all = list(await self._instance.api.consumer_ids(address, self.group))
        except MQBrokerError:
            cid_all = []
        if self._instance.client_id in cid_all:
            return cid_all
        await self._instance.send_heartbeats()
        return list(await self._instance.api.consumer_ids(address, self.group))

    async def _apply(self, topic: str, assigned: set[MessageQueue]) -> None:
        for mq in [mq for mq in self.table if mq.topic == topic and mq not in assigned]:
            await self._remove(mq)
        for mq in sorted(assigned - set(self.table)):
            process_queue = ProcessQueue(mq)
            self.table[mq] = process_queue
            log.info("group %s now consumes %s", self.group, mq)
            self._on_added(process_queue)

    async def _remove(self, mq: MessageQueue) -> None:
        process_queue = self.table.pop(mq)
        process_queue.drop()
        log.info("group %s no longer consumes %s", self.group, mq)
        await self._on_removed(process_queue)

    def replace(self, process_queue: ProcessQueue) -> ProcessQueue:
        """A fresh ProcessQueue for the same queue (after OFFSET_ILLEGAL); the old one is dropped."""
        process_queue.drop()
        fresh = ProcessQueue(process_queue.mq)
        self.table[process_queue.mq] = fresh
        return fresh

    # --- orderly locks ---

    def _lock_body(self, mqs: Iterable[MessageQueue]) -> LockBatchRequestBody:
        return LockBatchRequestBody(self.group, self._instance.client_id, tuple(mqs))

    async def lock(self, mq: MessageQueue) -> bool:
        """LOCK_BATCH_MQ for one queue; True when we hold it (the ProcessQueue is marked)."""
        address = self._instance.routes.master_address(mq.broker_name)
        if address is None:
            return False
        try:
            locked = await self._instance.api.lock_batch(address, self._lock_body([mq]))
        except (RemotingError, MQBrokerError) as error:
            log.warning("locking %s failed: %s", mq, error)
            return False
        process_queue = self.table.get(mq)
        if process_queue is not None:
            process_queue.mark_locked(mq in locked)
        return mq in locked

    async def lock_all(self) -> None:
        """Renew the locks of every assigned queue, one request per broker (`lockAll`)."""
        for broker_name, mqs in group_by_broker(self.table).items():
            address = self._instance.routes.master_address(broker_name)
            if address is None:
                continue
            try:
                locked = await self._instance.api.lock_batch(address, self._lock_body(mqs))
            except (RemotingError, MQBrokerError) as error:
                log.warning("renewing locks at %s failed: %s", broker_name, error)
                continue
            for mq in mqs:
                process_queue = self.table.get(mq)
                if process_queue is not None:
                    process_queue.mark_locked(mq in locked)

    async def unlock(self, mqs: Iterable[MessageQueue]) -> None:
        """UNLOCK_BATCH_MQ per broker; failures are logged (locks expire after 60 s anyway)."""
        for broker_name, batch in group_by_broker(mqs).items():
            address = self._instance.routes.master_address(broker_name)
            if address is None:
                continue
            body = UnlockBatchRequestBody(self.group, self._instance.client_id, tuple(batch))
            try:
                await self._instance.api.unlock_batch(address, body)
            except (RemotingError, MQBrokerError) as error:
                log.warning("unlocking queues at %s failed: %s", broker_name, error)

    async def wait_unlocked_consumption(self, process_queue: ProcessQueue, timeout_s: float) -> bool:
        """Wait (bounded) until no orderly consumption of the queue runs; True when none does."""
        try:
            await asyncio.wait_for(process_queue.consume_lock.acquire(), timeout_s)
        except TimeoutError:
            return False
        process_queue.consume_lock.release()
        return True
