"""Broker statistics as RocketMQ 4.9.7 reports them to mqadmin (clusterList, brokerStatus, statsAll).

Every figure is derived from the plain counters in `BrokerMetrics`, which the send and pull paths
bump (integers in dicts, no per-message objects). A once-a-second `tick` samples them into three
views, each bounded:

- Store TPS (RocketMQ's StoreStatsService): one sample of the broker-wide totals per second, the
  last 601 kept; `putTps`, `getFoundTps`, ... are "<10 s> <60 s> <600 s>" rates, each Java's
  `Double.toString`, and empty while fewer samples than the window exist (as RocketMQ).
- Stats items (BrokerStatsManager / StatsItem, VIEW_BROKER_STATS_DATA): per (statsName, statsKey)
  snapshots of (times, value): every 10 s (7 kept: a minute), every 10 min (7: an hour), every
  hour (25: a day). A window's sum is last minus first, tps the sum per second between them,
  avgpt the sum per call. An item starts with a zero snapshot one interval back, so its first
  messages count, and its hour and day windows stay empty until their first sample, exactly as
  a RocketMQ item created just before its first value.
- Daily totals (BrokerStats): put/get totals at this morning's and yesterday's midnight, taken
  when the local date changes (zero before the first midnight, as RocketMQ's).
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from shoal.broker import limits

if TYPE_CHECKING:
    from collections.abc import Iterable

    from shoal.broker.metrics import BrokerMetrics

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
STATS_NAMES = (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, BROKER_PUT_NUMS, BROKER_GET_NUMS)
"""The BrokerStatsManager items Shoal keeps (keys: topic, `topic@group`, the cluster name)."""

TPS_SAMPLE_INTERVAL_MS = 1_000  # StoreStatsService.FREQUENCY_OF_SAMPLING
TPS_WINDOWS_S = (10, 60, 600)  # the three rates of putTps & co.
TPS_SAMPLES_MAX_COUNT = TPS_WINDOWS_S[-1] + 1  # MAX_RECORDS_OF_SAMPLING + 1
assert TPS_SAMPLE_INTERVAL_MS == 1_000, "tps_text counts a window's seconds in samples"
MINUTE_SAMPLE_INTERVAL_MS = 10_000  # StatsItem.samplingInSeconds
HOUR_SAMPLE_INTERVAL_MS = 600_000  # samplingInMinutes
DAY_SAMPLE_INTERVAL_MS = 3_600_000  # samplingInHour
MINUTE_SNAPSHOTS_MAX_COUNT = 7
HOUR_SNAPSHOTS_MAX_COUNT = 7
DAY_SNAPSHOTS_MAX_COUNT = 25


@dataclass(frozen=True, slots=True)
class CallSnapshot:
    timestamp_ms: int
    times: int
    """Calls (puts, or pulls that found messages) so far."""
    value: int
    """Messages or bytes so far."""


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    """One window of an item: BrokerStatsItem's `sum`, `tps` and `avgpt`."""

    sum: int
    tps: float
    avgpt: float


def window_of(snapshots: Iterable[CallSnapshot]) -> StatsSnapshot:
    """StatsItem.computeStatsData: the change between the first and last snapshot of a window.

    Where RocketMQ divides by a zero interval (NaN/Infinity in the JSON), tps is 0."""
    ordered = list(snapshots)
    if not ordered:
        return StatsSnapshot(0, 0.0, 0.0)
    first, last = ordered[0], ordered[-1]
    total = last.value - first.value
    elapsed_ms = last.timestamp_ms - first.timestamp_ms
    tps = total * 1000.0 / elapsed_ms if elapsed_ms > 0 else 0.0
    times = last.times - first.times
    return StatsSnapshot(total, tps, total / times if times > 0 else 0.0)


def java_double_text(value: float) -> str:
    """Java's `Double.toString`: plain decimals within 10^-3 .. 10^7, else `d.dddE±n`; shortest
    digits that read back to the same double (Python's repr gives them)."""
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    scientific_exponent = len(text) - 1 + exponent
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{scientific_exponent}"


def tps_text(samples: deque[tuple[int, ...]], column: int, window_s: int) -> str:
    """The rate of one column over the last `window_s` samples; "" when there are not enough."""
    if len(samples) <= window_s:
        return ""
    last, before = samples[-1], samples[-1 - window_s]
    elapsed_ms = last[0] - before[0]
    rate = (last[column] - before[column]) * 1000.0 / elapsed_ms if elapsed_ms > 0 else 0.0
    return java_double_text(rate)


class StatsItem:
    """The three snapshot windows of one (statsName, statsKey)."""

    __slots__ = ("day", "hour", "minute", "next_day_ms", "next_hour_ms")

    def __init__(self, now_ms: int) -> None:
        self.minute: deque[CallSnapshot] = deque(
            [CallSnapshot(now_ms - MINUTE_SAMPLE_INTERVAL_MS, 0, 0)], maxlen=MINUTE_SNAPSHOTS_MAX_COUNT
        )
        self.hour: deque[CallSnapshot] = deque(
            [CallSnapshot(now_ms - HOUR_SAMPLE_INTERVAL_MS, 0, 0)], maxlen=HOUR_SNAPSHOTS_MAX_COUNT
        )
        self.day: deque[CallSnapshot] = deque(
            [CallSnapshot(now_ms - DAY_SAMPLE_INTERVAL_MS, 0, 0)], maxlen=DAY_SNAPSHOTS_MAX_COUNT
        )
        self.next_hour_ms = now_ms + HOUR_SAMPLE_INTERVAL_MS
        self.next_day_ms = now_ms + DAY_SAMPLE_INTERVAL_MS

    def sample(self, now_ms: int, times: int, value: int) -> None:
        """A 10 s tick: always the minute window, the others when their interval has passed."""
        snapshot = CallSnapshot(now_ms, times, value)
        self.minute.append(snapshot)
        if now_ms >= self.next_hour_ms:
            self.hour.append(snapshot)
            self.next_hour_ms = now_ms + HOUR_SAMPLE_INTERVAL_MS
        if now_ms >= self.next_day_ms:
            self.day.append(snapshot)
            self.next_day_ms = now_ms + DAY_SAMPLE_INTERVAL_MS

    def windows(self) -> tuple[StatsSnapshot, StatsSnapshot, StatsSnapshot]:
        """(minute, hour, day): BrokerStatsData's statsMinute, statsHour, statsDay."""
        return window_of(self.minute), window_of(self.hour), window_of(self.day)


@dataclass
class DailyTotals:
    """BrokerStats: put/get totals at the last two midnights (local time)."""

    put_yesterday_morning: int = 0
    put_today_morning: int = 0
    get_yesterday_morning: int = 0
    get_today_morning: int = 0

    def record(self, put_total: int, get_total: int) -> None:
        """Midnight: today becomes yesterday, the totals now become this morning's."""
        self.put_yesterday_morning, self.put_today_morning = self.put_today_morning, put_total
        self.get_yesterday_morning, self.get_today_morning = self.get_today_morning, get_total


class BrokerStats:
    """The sampled views of `BrokerMetrics`; `tick()` once a second from the broker's loop."""

    def __init__(self, metrics: BrokerMetrics, cluster_name: str, now_ms: int | None = None) -> None:
        start_ms = _now_ms() if now_ms is None else now_ms
        self.metrics = metrics
        self.cluster_name = cluster_name
        self.boot_timestamp_ms = start_ms
        self.tps_samples: deque[tuple[int, ...]] = deque(maxlen=TPS_SAMPLES_MAX_COUNT)
        """(timestamp ms, put messages, found pulls, missed pulls, messages pulled) each second."""
        self.items: dict[tuple[str, str], StatsItem] = {}
        self.daily = DailyTotals()
        self._day = _local_date(start_ms)
        self._next_minute_sample_ms = start_ms
        self.items_dropped = 0
        """Keys not tracked because `STATS_ITEMS_MAX_COUNT` items exist."""

    # --- sampling ---
    def tick(self, now_ms: int | None = None) -> None:
        now = _now_ms() if now_ms is None else now_ms
        metrics = self.metrics
        self.tps_samples.append(
            (
                now,
                metrics.messages_in_total,
                metrics.pulls_found_total,
                metrics.pulls_missed_total,
                metrics.messages_out_total,
            )
        )
        day = _local_date(now)
        if day != self._day:
            self._day = day
            self.daily.record(metrics.messages_in_total, metrics.messages_out_total)
        if now >= self._next_minute_sample_ms:
            self._next_minute_sample_ms = now + MINUTE_SAMPLE_INTERVAL_MS
            self._sample_items(now)

    def _sample_items(self, now_ms: int) -> None:
        metrics = self.metrics
        for topic, value in list(metrics.messages_in.items()):
            calls = metrics.put_calls.get(topic, 0)
            self._sample(TOPIC_PUT_NUMS, topic, now_ms, calls, value)
            self._sample(TOPIC_PUT_SIZE, topic, now_ms, calls, metrics.bytes_in.get(topic, 0))
        for (topic, group), value in list(metrics.messages_out.items()):
            key = f"{topic}@{group}"
            calls = metrics.pulls_found.get((topic, group), 0)
            self._sample(GROUP_GET_NUMS, key, now_ms, calls, value)
            self._sample(GROUP_GET_SIZE, key, now_ms, calls, metrics.bytes_out.get((topic, group), 0))
        # RocketMQ adds only values to the broker-wide items, never times (their avgpt stays 0)
        self._sample(BROKER_PUT_NUMS, self.cluster_name, now_ms, 0, metrics.messages_in_total)
        self._sample(BROKER_GET_NUMS, self.cluster_name, now_ms, 0, metrics.messages_out_total)

    def _sample(self, name: str, key: str, now_ms: int, times: int, value: int) -> None:
        item = self.items.get((name, key))
        if item is None:
            if len(self.items) >= limits.STATS_ITEMS_MAX_COUNT:
                self.items_dropped += 1
                return
            item = self.items[(name, key)] = StatsItem(now_ms)
        item.sample(now_ms, times, value)

    # --- reading ---
    def item(self, name: str, key: str) -> StatsItem | None:
        return self.items.get((name, key))

    def tps(self, column: int) -> str:
        """The rates "<10 s> <60 s> <600 s>" of one column of `tps_samples` (1 put, 2 found, 3 missed, 4 pulled)."""
        return " ".join(tps_text(self.tps_samples, column, window) for window in TPS_WINDOWS_S)

    def total_get_tps(self) -> str:
        """getTotalTps: found + missed per window, 0.0 where a window lacks samples."""
        parts = []
        for window in TPS_WINDOWS_S:
            found, missed = tps_text(self.tps_samples, 2, window), tps_text(self.tps_samples, 3, window)
            parts.append(java_double_text((float(found) if found else 0.0) + (float(missed) if missed else 0.0)))
        return " ".join(parts)


def runtime_text(elapsed_ms: int) -> str:
    """StoreStatsService.getFormatRuntime: "[ d days, h hours, m minutes, s seconds ]"."""
    seconds_total = max(0, elapsed_ms) // 1000
    days, rest = divmod(seconds_total, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, seconds = divmod(rest, 60)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _local_date(now_ms: int) -> tuple[int, int, int]:
    local = time.localtime(now_ms / 1000)
    return local.tm_year, local.tm_mon, local.tm_mday
