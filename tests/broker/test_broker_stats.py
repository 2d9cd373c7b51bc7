"""shoal.broker.broker_stats: RocketMQ's stats windows, TPS strings and daily totals from counters."""

from __future__ import annotations

import time
from collections import deque

from shoal.broker.broker_stats import (
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    BrokerStats,
    CallSnapshot,
    StatsSnapshot,
    java_double_text,
    runtime_text,
    tps_text,
    window_of,
)
from shoal.broker.metrics import BrokerMetrics
from shoal.store import PutResult, PutStatus
from shoal.store.message import AppendResult

T0 = 1_700_000_000_000


def stored(count: int, size: int) -> PutResult:
    append = AppendResult(PutStatus.PUT_OK, 0, size, T0, 0, count, b"\x7f\x00\x00\x01\x00\x00\x27\x10")
    return PutResult(PutStatus.PUT_OK, append)


def test_window_is_last_minus_first_per_second_and_per_call() -> None:
    """Goal: StatsItem.computeStatsData's sum, tps and avgpt. Method: two and zero snapshots."""
    window = window_of([CallSnapshot(T0, 0, 0), CallSnapshot(T0 + 5_000, 4, 100), CallSnapshot(T0 + 20_000, 10, 300)])
    assert window == StatsSnapshot(sum=300, tps=15.0, avgpt=30.0)
    assert window_of([]) == StatsSnapshot(0, 0.0, 0.0)
    assert window_of([CallSnapshot(T0, 3, 9)]) == StatsSnapshot(0, 0.0, 0.0)  # no interval: tps 0, not NaN


def test_java_double_text_matches_double_to_string() -> None:
    """Goal: rates print as Java's Double.toString. Method: values on both sides of 10^-3 and 10^7."""
    cases = {0.0: "0.0", 2.0: "2.0", 0.1: "0.1", 1 / 3: "0.3333333333333333", 0.001: "0.001"}
    cases |= {1e-4: "1.0E-4", 2.5e-5: "2.5E-5", 1e7: "1.0E7", 12345678.9: "1.23456789E7"}
    for value, text in cases.items():
        assert java_double_text(value) == text, value
    assert java_double_text(float("nan")) == "NaN"


def test_tps_text_is_empty_until_the_window_has_samples() -> None:
    """Goal: StoreStatsService's "" for a window longer than the samples. Method: 10 then 11 samples."""
    samples: deque[tuple[int, ...]] = deque((T0 + i * 1000, i * 5) for i in range(10))
    assert tps_text(samples, 1, 10) == ""
    samples.append((T0 + 10_000, 50))
    assert tps_text(samples, 1, 10) == "5.0"


def test_tick_turns_counters_into_rates_and_windows() -> None:
    """Goal: putTps, getTransferedTps and the statsAll items from the send/pull counters. Method: 20
    puts and a found and a missed pull between ticks 1 s apart, then the 10 s item sampling."""
    metrics = BrokerMetrics()
    stats = BrokerStats(metrics, "DefaultCluster", now_ms=T0)
    for second in range(11):
        if second == 5:
            for _ in range(10):
                metrics.sends("T", stored(2, 300))
            metrics.pulls("T", "G", 8, 2400)
            metrics.pulls("T", "G", 0, 0)
        stats.tick(T0 + second * 1000)
    assert stats.tps(1) == "2.0  "  # 20 messages in the 10 s window; 60 s and 600 s windows not there yet
    assert stats.tps(2) == "0.1  " and stats.tps(3) == "0.1  " and stats.tps(4) == "0.8  "
    assert stats.total_get_tps() == "0.2 0.0 0.0"
    item = stats.item(TOPIC_PUT_NUMS, "T")  # items are sampled every 10 s: at T0 and T0 + 10 s
    assert item is not None
    minute, hour, day = item.windows()
    assert (minute.sum, minute.tps, minute.avgpt) == (20, 2.0, 2.0)  # from the zero snapshot 10 s before
    assert hour.sum == 0 and day.sum == 0  # not sampled yet, as a RocketMQ item right after creation
    assert stats.item(TOPIC_PUT_SIZE, "T").windows()[0].sum == 3000  # type: ignore[union-attr]
    assert stats.item(GROUP_GET_NUMS, "T@G").windows()[0].sum == 8  # type: ignore[union-attr]
    assert stats.item(GROUP_GET_SIZE, "T@G").windows()[0].sum == 2400  # type: ignore[union-attr]
    assert stats.item(BROKER_PUT_NUMS, "DefaultCluster").windows()[0].sum == 20  # type: ignore[union-attr]


def test_item_windows_slide_and_hour_and_day_sample_on_their_intervals() -> None:
    """Goal: 7 minute snapshots kept; the hour window sampled every 10 min. Method: 70 minutes of ticks."""
    metrics = BrokerMetrics()
    stats = BrokerStats(metrics, "C", now_ms=T0)
    for step in range(7 * 60 + 1):  # every 10 s for 70 min, one put each
        metrics.sends("T", stored(1, 100))
        stats.tick(T0 + step * 10_000)
    item = stats.item(TOPIC_PUT_NUMS, "T")
    assert item is not None
    assert len(item.minute) == 7
    minute, hour, day = item.windows()
    assert minute.sum == 6 and minute.tps == 0.1  # one message per 10 s over the last minute
    assert len(item.hour) == 7 and hour.sum == 360  # 10-minute samples spanning the last hour
    assert len(item.day) == 2 and day.sum == 361  # the zero snapshot and the one-hour sample


def test_daily_totals_move_at_the_local_date_change() -> None:
    """Goal: msgPutTotalTodayMorning becomes the total at midnight. Method: ticks across a midnight."""
    metrics = BrokerMetrics()
    midnight_ms = int(time.mktime((2026, 11, 26, 0, 0, 0, 0, 0, -1)) * 1000)
    stats = BrokerStats(metrics, "C", now_ms=midnight_ms - 5_000)
    metrics.sends("T", stored(7, 100))
    metrics.pulls("T", "G", 3, 30)
    stats.tick(midnight_ms - 1_000)
    assert (stats.daily.put_today_morning, stats.daily.get_today_morning) == (0, 0)
    stats.tick(midnight_ms + 1_000)
    assert (stats.daily.put_today_morning, stats.daily.get_today_morning) == (7, 3)
    assert stats.daily.put_yesterday_morning == 0


def test_runtime_text_is_store_stats_format() -> None:
    """Goal: getFormatRuntime's text. Method: 1 day 2 h 3 min 4 s."""
    assert runtime_text(((26 * 60 + 3) * 60 + 4) * 1000) == "[ 1 days, 2 hours, 3 minutes, 4 seconds ]"
