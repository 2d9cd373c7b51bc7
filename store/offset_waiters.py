"""Futures waiting on an asyncio loop until an offset is reached, each with a deadline.

Puts append in the loop thread in offset order, so waiters form a queue sorted by offset (and by
deadline, as every waiter gets the same timeout): reaching an offset releases a prefix of it,
and one timer answers the overdue prefix. Used by `flushing.AsyncFlushWaiter` (offsets reached by
flushes) and by the broker's SYNC_MASTER wait (offsets acknowledged by slaves).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

from shoal.store.errors import PutStatus

__all__ = ["OffsetWaiters"]


class OffsetWaiters:
    """A queue of (offset, deadline, future) with one timer; `timeout_status` answers the overdue.

    `before_expire` runs when the timer fires, before overdue waiters are answered (a flush waiter
    first releases what the disk already covers)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        timeout_s: float,
        timeout_status: PutStatus,
        before_expire: Callable[[], None] | None = None,
    ) -> None:
        self.loop = loop
        self.timeout_s = timeout_s
        self.timeout_status = timeout_status
        self.before_expire = before_expire
        self.expired_total = 0
        """Waiters answered `timeout_status` by the timer."""
        self._waiters: collections.deque[tuple[int, float, asyncio.Future[PutStatus]]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._waiters)

    def add(self, offset: int, future: asyncio.Future[PutStatus]) -> None:
        """`future` is answered PUT_OK once `release` reaches `offset`, `timeout_status` after `timeout_s`.
        Offsets must come in ascending order."""
        self._waiters.append((offset, self.loop.time() + self.timeout_s, future))
        if self._timer is None:
            self._timer = self.loop.call_later(self.timeout_s, self._expire)

    def release(self, offset: int) -> None:
        """Answer PUT_OK to every waiter at or below `offset`."""
        waiters = self._waiters
        while waiters and waiters[0][0] <= offset:
            _offset, _deadline, future = waiters.popleft()
            if not future.done():
                future.set_result(PutStatus.PUT_OK)

    def answer_all(self, status: PutStatus) -> None:
        """Answer every waiter `status` now (shutdown, role change): never leave a caller hanging."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiters = self._waiters
        while waiters:
            _offset, _deadline, future = waiters.popleft()
            if not future.done():
                future.set_result(status)

    def _expire(self) -> None:
        self._timer = None
        if self.before_expire is not None:
            self.before_expire()
        now = self.loop.time()
        waiters = self._waiters
        while waiters and waiters[0][1] <= now:
            _offset, _deadline, future = waiters.popleft()
            if not future.done():
                self.expired_total += 1
                future.set_result(self.timeout_status)
        if waiters:
            self._timer = self.loop.call_later(max(0.0, waiters[0][1] - now), self._expire)
