"""Time as the store sees it, injectable so retention and flushing are testable without sleeps."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock epoch milliseconds (store timestamps, file ages)."""
        ...

    def monotonic_s(self) -> float:
        """Monotonic seconds (intervals and deadlines)."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_s(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK = SystemClock()
