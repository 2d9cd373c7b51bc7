"""SYNC_MASTER: await until a slave acknowledged an offset (RocketMQ's GroupTransferService).

Sends append in the loop thread in offset order, so waiters form a queue sorted by offset and
every ack releases a prefix of it; a timer answers overdue waiters FLUSH_SLAVE_TIMEOUT (the
message stays stored). The queue is `shoal.store.offset_waiters.OffsetWaiters`, as for
`shoal.store.flushing.AsyncFlushWaiter`, with acks from the HA connections (also on the loop) in
place of flushes: no thread is involved.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from shoal.broker.replication import limits
from shoal.store import OffsetWaiters, PutStatus


class ReplicaWaiter:
    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_s: float, slave_ok: Callable[[int], bool]) -> None:
        self.loop = loop
        self.timeout_s = timeout_s
        self.slave_ok = slave_ok
        """slave_ok(offset): whether some slave can be expected to reach `offset` (connected, not far behind)."""
        self.acked_offset = 0
        """The highest offset any slave acknowledged (RocketMQ's push2SlaveMaxOffset)."""
        self._waiters = OffsetWaiters(loop, timeout_s, PutStatus.FLUSH_SLAVE_TIMEOUT)
        self._refused_total = 0
        self._given_up_total = 0
        self.unavailable_total = 0

    @property
    def waiting_count(self) -> int:
        return len(self._waiters)

    @property
    def timeouts_total(self) -> int:
        """Sends answered FLUSH_SLAVE_TIMEOUT: overdue, refused while the waiters were full, or given
        up when the last slave was lost."""
        return self._waiters.expired_total + self._refused_total + self._given_up_total

    def wait(self, offset: int) -> asyncio.Future[PutStatus]:
        """A future answering PUT_OK once a slave has every byte before `offset`; at once
        SLAVE_NOT_AVAILABLE without a usable slave, FLUSH_SLAVE_TIMEOUT after `timeout_s`."""
        future: asyncio.Future[PutStatus] = self.loop.create_future()
        if self.acked_offset >= offset:
            future.set_result(PutStatus.PUT_OK)
            return future
        if not self.slave_ok(offset):
            self.unavailable_total += 1
            future.set_result(PutStatus.SLAVE_NOT_AVAILABLE)
            return future
        if len(self._waiters) >= limits.REPLICA_WAITERS_MAX_COUNT:
            self._refused_total += 1
            future.set_result(PutStatus.FLUSH_SLAVE_TIMEOUT)
            return future
        self._waiters.add(offset, future)
        return future

    def on_ack(self, offset: int) -> None:
        """A slave reported `offset`: release every waiter at or below the best ack so far."""
        if offset <= self.acked_offset:
            return
        self.acked_offset = offset
        self._waiters.release(offset)

    def give_up(self) -> None:
        """No slave is left to acknowledge: answer every waiter FLUSH_SLAVE_TIMEOUT now, what RocketMQ's
        GroupTransferService answers when a wait ends without the ack, rather than at its deadline."""
        self._given_up_total += len(self._waiters)
        self._waiters.answer_all(PutStatus.FLUSH_SLAVE_TIMEOUT)

    def fail_all(self, status: PutStatus) -> None:
        """Answer every waiter now (role change, shutdown): never leave a producer hanging."""
        self._waiters.answer_all(status)

    def reset(self) -> None:
        """A new term as master: acks of an earlier term say nothing about this one."""
        self.fail_all(PutStatus.SLAVE_NOT_AVAILABLE)
        self.acked_offset = 0
