"""PeriodicService: rounds on schedule and on wakeup, failures survived, stop is bounded."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from shoal.client.service import PeriodicService

Wait = Callable[[Callable[[], bool], float], Awaitable[None]]


def test_wakeup_runs_a_round_at_once(async_wait_until: Wait) -> None:
    """Goal: NOTIFY-style wakeups do not wait for the interval. Method: 1 h interval, wake twice."""
    calls: list[int] = []

    async def action() -> None:
        calls.append(1)

    async def run() -> None:
        service = PeriodicService("test", 3600.0, action)
        service.start()
        service.wakeup()
        await async_wait_until(lambda: len(calls) == 1, 5.0)
        service.wakeup()
        await async_wait_until(lambda: len(calls) == 2, 5.0)
        await service.stop()

    asyncio.run(run())


def test_a_failing_round_does_not_end_the_loop(async_wait_until: Wait) -> None:
    """Goal: one failed heartbeat must not stop the next. Method: fail the first round, count rounds."""
    calls: list[int] = []

    async def action() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first round fails")

    async def run() -> None:
        service = PeriodicService("test", 0.01, action, initial_delay_s=0.0)
        service.start()
        await async_wait_until(lambda: len(calls) >= 3, 5.0)
        await service.stop()
        assert service.rounds >= 3

    asyncio.run(run())


def test_stop_cancels_a_round_in_progress() -> None:
    """Goal: stop() is bounded even when a round hangs. Method: a round that never returns."""
    started = asyncio.Event()

    async def hang() -> None:
        started.set()
        await asyncio.Event().wait()

    async def run() -> None:
        service = PeriodicService("test", 1.0, hang, initial_delay_s=0.0)
        service.start()
        await asyncio.wait_for(started.wait(), 5.0)
        await asyncio.wait_for(service.stop(), 5.0)
        await service.stop()  # twice is fine

    asyncio.run(run())
