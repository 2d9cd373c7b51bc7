"""OffsetWaiters: the offset-ordered queue of futures behind flush and replica waits."""

from __future__ import annotations

import asyncio

from shoal.store import PutStatus
from shoal.store.offset_waiters import OffsetWaiters


def test_release_answers_the_prefix_up_to_the_offset() -> None:
    """Goal: reaching an offset releases exactly the waiters at or below it. Method: 3 waiters, release 2."""

    async def run() -> None:
        loop = asyncio.get_running_loop()
        waiters = OffsetWaiters(loop, 10.0, PutStatus.FLUSH_DISK_TIMEOUT)
        futures = [loop.create_future() for _ in range(3)]
        for offset, future in zip((100, 200, 300), futures, strict=True):
            waiters.add(offset, future)
        waiters.release(200)
        assert [f.result() for f in futures[:2]] == [PutStatus.PUT_OK, PutStatus.PUT_OK]
        assert not futures[2].done() and len(waiters) == 1
        waiters.answer_all(PutStatus.SLAVE_NOT_AVAILABLE)
        assert futures[2].result() == PutStatus.SLAVE_NOT_AVAILABLE and len(waiters) == 0

    asyncio.run(run())


def test_overdue_waiters_get_the_timeout_status_after_before_expire_ran() -> None:
    """Goal: the timer answers overdue waiters, and before_expire may release first.
    Method: 10 ms timeout; before_expire releases offset 1; awaited futures say PUT_OK then timeout."""

    async def run() -> None:
        loop = asyncio.get_running_loop()
        waiters: OffsetWaiters = OffsetWaiters(loop, 0.01, PutStatus.FLUSH_SLAVE_TIMEOUT)
        waiters.before_expire = lambda: waiters.release(1)
        first, second = loop.create_future(), loop.create_future()
        waiters.add(1, first)
        waiters.add(2, second)
        assert await asyncio.wait_for(first, 5.0) == PutStatus.PUT_OK
        assert await asyncio.wait_for(second, 5.0) == PutStatus.FLUSH_SLAVE_TIMEOUT
        assert waiters.expired_total == 1

    asyncio.run(run())
