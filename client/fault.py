"""Which brokers a producer should avoid for a while: RocketMQ 4.9.7's `MQFaultStrategy` with
`LatencyFaultToleranceImpl`, behind `ProducerSettings.send_latency_fault_enable` (off by default,
as in Java).

Every send attempt reports its broker and latency; a failed attempt counts as
`SEND_FAILURE_LATENCY_MS` ("isolation"). A latency at or above `SEND_LATENCY_MAX_MS[i]` keeps the
broker unavailable for `SEND_NOT_AVAILABLE_DURATION_MS[i]` (a failure: 10 minutes; a 550 ms
answer: 30 s), and the queue choice skips unavailable brokers while another one is available.
Pure: time comes in as an argument (monotonic seconds).
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.client import limits


@dataclass(slots=True)
class FaultItem:
    """One broker's last latency and when it becomes usable again (monotonic seconds)."""

    latency_ms: int
    available_at_s: float


def not_available_duration_ms(latency_ms: int) -> int:
    """`computeNotAvailableDuration`: the duration of the largest latency step reached."""
    for step_ms, duration_ms in zip(
        reversed(limits.SEND_LATENCY_MAX_MS), reversed(limits.SEND_NOT_AVAILABLE_DURATION_MS), strict=True
    ):
        if latency_ms >= step_ms:
            return duration_ms
    return 0


class LatencyFaultTolerance:
    """Brokers to avoid, by broker name; bounded by `FAULT_BROKERS_MAX_COUNT`."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.items: dict[str, FaultItem] = {}

    def update(self, broker_name: str, latency_ms: int, *, isolation: bool, now_s: float) -> None:
        """`updateFaultItem`: record one attempt (isolation: it failed)."""
        if not self.enabled:
            return
        if isolation:
            latency_ms = limits.SEND_FAILURE_LATENCY_MS
        available_at_s = now_s + not_available_duration_ms(latency_ms) / 1000
        if broker_name not in self.items and len(self.items) >= limits.FAULT_BROKERS_MAX_COUNT:
            del self.items[min(self.items, key=lambda name: self.items[name].available_at_s)]
        self.items[broker_name] = FaultItem(latency_ms, available_at_s)

    def is_available(self, broker_name: str, now_s: float) -> bool:
        item = self.items.get(broker_name)
        return item is None or now_s >= item.available_at_s

    def least_bad(self) -> str | None:
        """`pickOneAtLeast`, simplified: the tracked broker usable again soonest."""
        if not self.items:
            return None
        return min(self.items, key=lambda name: (self.items[name].available_at_s, self.items[name].latency_ms))
