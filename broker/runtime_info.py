"""GET_BROKER_RUNTIME_INFO (28): the KVTable RocketMQ 4.9.7 builds in
AdminBrokerProcessor.prepareRuntimeInfo (with DefaultMessageStore/StoreStatsService.getRuntimeInfo).

`runtime_info_table` is pure: figures in, `{key: text}` out, every value formatted as Java prints it.
`store_figures` reads them from the running store (statvfs for the disk keys). mqadmin's
clusterList reads putTps, getTransferedTps, the thread-pool keys, pageCacheLockTimeMills,
earliestMessageTimeStamp and commitLogDiskRatio; brokerStatus prints every key.

Keys Shoal does not fill, because it does not measure them: putMessageEntireTimeMax,
getMessageEntireTimeMax, putMessageDistributeTime, putLatency99, putLatency999 and
dispatchMaxBuffer (per-put latency buckets and dispatch buffer peaks). A made-up 0 there would
read as a measurement.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shoal.broker.broker_stats import BrokerStats, java_double_text, runtime_text
from shoal.formats.topics import SCHEDULE_TOPIC
from shoal.protocol.codes import CURRENT_VERSION
from shoal.store import disk_usage_ratio

if TYPE_CHECKING:
    from collections.abc import Mapping

    from shoal.store import MessageStore

JAVA_INT_MAX = 2**31 - 1
SHOAL_VERSION_KEY = "shoalVersion"
"""Where Shoal names itself; brokerVersionDesc/brokerVersion say what it speaks (V4_9_7, 407)."""


@dataclass(frozen=True, slots=True)
class StoreFigures:
    """What the runtime table needs from the store, read at request time."""

    commitlog_min_offset: int
    commitlog_max_offset: int
    commitlog_flushed_offset: int
    commitlog_committed_offset: int | None
    """Only with transientStorePoolEnable (remainHowManyDataToCommit)."""
    dispatch_behind_bytes: int
    earliest_message_time_ms: int
    """Store time of the first CommitLog message; -1 when the CommitLog is empty."""
    commitlog_dir: str
    commitlog_disk_ratio: float
    consume_queue_disk_ratio: float
    root_total_bytes: int | None
    root_usable_bytes: int | None
    transient_buffers_left: int
    """Free transient-pool buffers; Integer.MAX_VALUE without the pool, as RocketMQ."""
    schedule_offsets: tuple[tuple[int, int, int], ...]
    """(delay level, delivered offset, max offset of its SCHEDULE_TOPIC_XXXX queue)."""


def human_bytes(size_bytes: int) -> str:
    """MixAll.humanReadableByteCount(bytes, false): "512 B", "1.5 KiB", "2.0 GiB"."""
    if size_bytes < 1024:
        return f"{size_bytes} B"
    exponent = min(int(math.log(size_bytes) / math.log(1024)), 6)
    return f"{size_bytes / 1024**exponent:.1f} {'KMGTPE'[exponent - 1]}iB"


def disk_ratio_text(ratio: float) -> str:
    """UtilAll.getDiskPartitionSpaceUsedPercent: used share rounded up to whole percent, -1 unknown."""
    if ratio < 0:
        return "-1.0"
    return java_double_text(math.ceil(round(ratio * 100, 9)) / 100.0)


def runtime_info_table(
    stats: BrokerStats,
    store: StoreFigures,
    *,
    now_ms: int,
    shoal_version: str,
    extra: Mapping[str, str],
) -> dict[str, str]:
    """Every key RocketMQ 4.9.7's broker answers (but the unmeasured ones, see the module doc),
    then Shoal's own (`extra`: role and replication) and `shoalVersion`."""
    metrics = stats.metrics
    daily = stats.daily
    puts = max(metrics.messages_in_total, 1)  # RocketMQ reports at least 1 and divides by it
    table = {
        "bootTimestamp": str(stats.boot_timestamp_ms),
        "runtime": runtime_text(now_ms - stats.boot_timestamp_ms),
        "putMessageTimesTotal": str(puts),
        "putMessageFailedTimes": str(metrics.put_failures_total),
        "putMessageSizeTotal": str(metrics.bytes_in_total),
        "putMessageAverageSize": java_double_text(metrics.bytes_in_total / puts),
        "putTps": stats.tps(1),
        "getFoundTps": stats.tps(2),
        "getMissTps": stats.tps(3),
        "getTotalTps": stats.total_get_tps(),
        "getTransferedTps": stats.tps(4),
        f"commitLogDiskRatio_{store.commitlog_dir}": disk_ratio_text(store.commitlog_disk_ratio),
        "commitLogDiskRatio": disk_ratio_text(store.commitlog_disk_ratio),
        "consumeQueueDiskRatio": disk_ratio_text(store.consume_queue_disk_ratio),
        "commitLogMinOffset": str(store.commitlog_min_offset),
        "commitLogMaxOffset": str(store.commitlog_max_offset),
        "brokerVersionDesc": CURRENT_VERSION.name,
        "brokerVersion": str(int(CURRENT_VERSION)),
        "msgPutTotalYesterdayMorning": str(daily.put_yesterday_morning),
        "msgPutTotalTodayMorning": str(daily.put_today_morning),
        "msgPutTotalTodayNow": str(metrics.messages_in_total),
        "msgGetTotalYesterdayMorning": str(daily.get_yesterday_morning),
        "msgGetTotalTodayMorning": str(daily.get_today_morning),
        "msgGetTotalTodayNow": str(metrics.messages_out_total),
        # Shoal has no request thread pools: requests are handled on the event loop as they are
        # read, so no send/pull/query/end-transaction request ever waits in a queue (size 0, head
        # wait 0 ms, capacity 0). Connections are bounded by maxConnections instead.
        "sendThreadPoolQueueSize": "0",
        "sendThreadPoolQueueCapacity": "0",
        "pullThreadPoolQueueSize": "0",
        "pullThreadPoolQueueCapacity": "0",
        "queryThreadPoolQueueSize": "0",
        "queryThreadPoolQueueCapacity": "0",
        "EndTransactionQueueSize": "0",
        "EndTransactionThreadPoolQueueCapacity": "0",
        "sendThreadPoolQueueHeadWaitTimeMills": "0",
        "pullThreadPoolQueueHeadWaitTimeMills": "0",
        "queryThreadPoolQueueHeadWaitTimeMills": "0",
        "dispatchBehindBytes": str(store.dispatch_behind_bytes),
        # How long the put in progress has held the CommitLog lock: puts run to completion on the
        # same event loop that answers this request, so none is in progress now.
        "pageCacheLockTimeMills": "0",
        "earliestMessageTimeStamp": str(store.earliest_message_time_ms),
        "startAcceptSendRequestTimeStamp": "0",  # RocketMQ's default: accept at once
        "remainTransientStoreBufferNumbs": str(store.transient_buffers_left),
        "remainHowManyDataToFlush": human_bytes(store.commitlog_max_offset - store.commitlog_flushed_offset),
    }
    for level, offset, max_offset in store.schedule_offsets:
        table[f"scheduleMessageOffset_{level}"] = f"{offset},{max_offset}"
    if store.commitlog_committed_offset is not None:
        table["remainHowManyDataToCommit"] = human_bytes(store.commitlog_max_offset - store.commitlog_committed_offset)
    if store.root_total_bytes is not None and store.root_usable_bytes is not None:
        table["commitLogDirCapacity"] = (
            f"Total : {human_bytes(store.root_total_bytes)}, Free : {human_bytes(store.root_usable_bytes)}."
        )
    table.update(extra)
    table[SHOAL_VERSION_KEY] = shoal_version
    return table


def store_figures(store: MessageStore, schedule_offsets: Mapping[int, int]) -> StoreFigures:
    """Read the figures from the running store (the thin I/O side of `runtime_info_table`)."""
    settings = store.settings
    min_offset = store.min_offset
    left = store.transient_buffers_left
    earliest = store.store_time_at(min_offset) if store.max_offset > min_offset else None
    total: int | None = None
    usable: int | None = None
    try:
        stat = os.statvfs(settings.root_dir)
        total, usable = stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize
    except OSError:
        pass
    return StoreFigures(
        commitlog_min_offset=min_offset,
        commitlog_max_offset=store.max_offset,
        commitlog_flushed_offset=store.flushed_offset,
        commitlog_committed_offset=store.committed_offset,
        dispatch_behind_bytes=store.dispatch_behind_bytes,
        earliest_message_time_ms=-1 if earliest is None else earliest,
        commitlog_dir=str(settings.commitlog_dir),
        commitlog_disk_ratio=disk_usage_ratio(settings.commitlog_dir),
        consume_queue_disk_ratio=disk_usage_ratio(settings.consume_queue_dir),
        root_total_bytes=total,
        root_usable_bytes=usable,
        transient_buffers_left=JAVA_INT_MAX if left is None else left,
        schedule_offsets=tuple(
            (level, offset, store.max_offset_in_queue(SCHEDULE_TOPIC, level - 1))
            for level, offset in sorted(schedule_offsets.items())
        ),
    )
