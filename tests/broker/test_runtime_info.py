"""shoal.broker.runtime_info: GET_BROKER_RUNTIME_INFO's table as RocketMQ 4.9.7's broker fills it."""

from __future__ import annotations

from shoal.broker.broker_stats import BrokerStats
from shoal.broker.metrics import BrokerMetrics
from shoal.broker.runtime_info import SHOAL_VERSION_KEY, StoreFigures, disk_ratio_text, human_bytes, runtime_info_table

T0 = 1_700_000_000_000
CLUSTER_LIST_KEYS = (
    "putTps",
    "getTransferedTps",
    "sendThreadPoolQueueSize",
    "pullThreadPoolQueueSize",
    "sendThreadPoolQueueHeadWaitTimeMills",
    "pullThreadPoolQueueHeadWaitTimeMills",
    "pageCacheLockTimeMills",
    "earliestMessageTimeStamp",
    "commitLogDiskRatio",
    "brokerVersionDesc",
    "msgPutTotalYesterdayMorning",
    "msgPutTotalTodayMorning",
    "msgPutTotalTodayNow",
    "msgGetTotalYesterdayMorning",
    "msgGetTotalTodayMorning",
    "msgGetTotalTodayNow",
)
"""What mqadmin clusterList (and -m) reads; a missing one is its NullPointerException."""


def figures(**changes: object) -> StoreFigures:
    values: dict[str, object] = {
        "commitlog_min_offset": 0,
        "commitlog_max_offset": 3 * 1024 * 1024,
        "commitlog_flushed_offset": 1024 * 1024,
        "commitlog_committed_offset": None,
        "dispatch_behind_bytes": 0,
        "earliest_message_time_ms": T0 - 60_000,
        "commitlog_dir": "/data/store/commitlog",
        "commitlog_disk_ratio": 0.4512,
        "consume_queue_disk_ratio": 0.4512,
        "root_total_bytes": 100 * 1024**3,
        "root_usable_bytes": 1536 * 1024**2,
        "transient_buffers_left": 2**31 - 1,
        "schedule_offsets": ((1, 4, 6), (2, 0, 0)),
    }
    values.update(changes)
    return StoreFigures(**values)  # type: ignore[arg-type]


def test_table_has_what_cluster_list_reads_formatted_as_java() -> None:
    """Goal: every key clusterList parses, Java-formatted; Shoal's identity apart. Method: a table."""
    metrics = BrokerMetrics()
    stats = BrokerStats(metrics, "DefaultCluster", now_ms=T0)
    table = runtime_info_table(
        stats, figures(), now_ms=T0 + 65_000, shoal_version="Shoal 0.1.0", extra={"brokerRole": "ASYNC_MASTER"}
    )
    assert all(key in table for key in CLUSTER_LIST_KEYS), set(CLUSTER_LIST_KEYS) - set(table)
    assert (table["brokerVersionDesc"], table["brokerVersion"]) == ("V4_9_7", "407")
    assert table[SHOAL_VERSION_KEY] == "Shoal 0.1.0" and table["brokerRole"] == "ASYNC_MASTER"
    assert table["putTps"] == "  "  # no samples yet: RocketMQ's empty windows, which clusterList reads as 0
    assert table["runtime"] == "[ 0 days, 0 hours, 1 minutes, 5 seconds ]"
    assert table["putMessageTimesTotal"] == "1"  # RocketMQ reports at least 1
    assert table["commitLogDiskRatio"] == "0.46" and table["commitLogDiskRatio_/data/store/commitlog"] == "0.46"
    assert table["commitLogDirCapacity"] == "Total : 100.0 GiB, Free : 1.5 GiB."
    assert table["remainHowManyDataToFlush"] == "2.0 MiB" and "remainHowManyDataToCommit" not in table
    assert table["scheduleMessageOffset_1"] == "4,6" and table["earliestMessageTimeStamp"] == str(T0 - 60_000)
    assert table["sendThreadPoolQueueSize"] == "0" and table["pageCacheLockTimeMills"] == "0"
    with_pool = runtime_info_table(
        stats, figures(commitlog_committed_offset=2 * 1024 * 1024), now_ms=T0, shoal_version="Shoal", extra={}
    )
    assert with_pool["remainHowManyDataToCommit"] == "1.0 MiB"


def test_byte_counts_and_disk_ratios_print_as_rocketmq() -> None:
    """Goal: MixAll.humanReadableByteCount and getDiskPartitionSpaceUsedPercent. Method: edges."""
    assert [human_bytes(n) for n in (0, 1023, 1024, 1536, 5 * 1024**3)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "1.5 KiB",
        "5.0 GiB",
    ]
    assert [disk_ratio_text(r) for r in (-1.0, 0.0, 0.45, 0.451, 1.0)] == ["-1.0", "0.0", "0.45", "0.46", "1.0"]
