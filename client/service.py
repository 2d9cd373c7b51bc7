"""`PeriodicService`: a background loop with start(), stop(), wakeup() and bounded waits.

Heartbeats, route refreshes, rebalances, offset persistence and lock renewal are each one of
these. A failing round is logged and the loop goes on; stop() waits for the round in progress.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class PeriodicService:
    """Runs `action` every `interval_s` (first after `initial_delay_s`) and whenever woken up."""

    def __init__(
        self,
        name: str,
        interval_s: float,
        action: Callable[[], Awaitable[None]],
        *,
        initial_delay_s: float | None = None,
    ) -> None:
        assert interval_s > 0
        self.name = name
        self.interval_s = interval_s
        self._action = action
        self._initial_delay_s = interval_s if initial_delay_s is None else initial_delay_s
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.rounds = 0

    def start(self) -> None:
        assert self._task is None, f"{self.name} started twice"
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    def wakeup(self) -> None:
        """Run the next round now (or right after the one in progress)."""
        self._wakeup.set()

    async def stop(self) -> None:
        """End the loop; a round in progress is cancelled."""
        self._stopping = True
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        delay_s = self._initial_delay_s
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), delay_s)
            self._wakeup.clear()
            if self._stopping:
                return
            try:
                await self._action()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s failed; next round in %.1f s", self.name, self.interval_s)
            self.rounds += 1
            delay_s = self.interval_s
