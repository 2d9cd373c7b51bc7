"""shoal.dashboard.cluster_view: the cluster table from runtime info."""

from __future__ import annotations

from shoal.dashboard.cluster_view import (
    GroupFigures,
    broker_addresses,
    broker_row,
    first_rate,
    group_figures,
    unreachable_row,
)
from shoal.protocol import BrokerData, ClusterInfo, ConsumeStats, ConsumeStatsList, MessageQueue, OffsetWrapper


def test_a_row_reads_what_clusterlist_prints() -> None:
    table = {
        "brokerVersionDesc": "V4_9_7",
        "putTps": "12.5 10.0 3.25",
        "getTransferedTps": "4.0 1.0 0.5",
        "msgPutTotalTodayMorning": "100",
        "msgPutTotalTodayNow": "160",
        "msgGetTotalTodayMorning": "10",
        "msgGetTotalTodayNow": "40",
        "commitLogDiskRatio": "0.42",
        "brokerRole": "SYNC_MASTER",
        "haLagBytes": "512",
    }
    row = broker_row("DefaultCluster", "broker-a", 0, "10.0.0.1:10911", table)
    assert (row.role, row.version, row.put_tps, row.get_tps) == ("SYNC_MASTER", "V4_9_7", 12.5, 4.0)
    assert (row.in_today, row.out_today, row.disk_percent, row.ha_lag_bytes) == (60, 30, "42 %", 512)


def test_apache_rocketmq_tables_lack_shoals_keys() -> None:
    """RocketMQ 4.9.7 names no brokerRole or HA lag there: the role follows the id, the lag is unknown."""
    row = broker_row("c", "broker-b", 1, "10.0.0.2:10911", {"putTps": "", "commitLogDiskRatio": "-1"})
    assert (row.role, row.put_tps, row.disk_percent, row.ha_lag_bytes) == ("SLAVE", 0.0, "?", -1)
    assert first_rate("") == 0.0 and first_rate("x") == 0.0


def test_brokers_in_name_then_id_order_with_their_cluster() -> None:
    info = ClusterInfo(
        broker_addr_table={
            "broker-b": BrokerData("c2", "broker-b", {0: "b0:1"}),
            "broker-a": BrokerData("c1", "broker-a", {1: "a1:1", 0: "a0:1"}),
        },
        cluster_addr_table={"c1": ("broker-a",), "c2": ("broker-b",)},
    )
    assert broker_addresses(info) == [
        ("c1", "broker-a", 0, "a0:1"),
        ("c1", "broker-a", 1, "a1:1"),
        ("c2", "broker-b", 0, "b0:1"),
    ]
    down = unreachable_row("c1", "broker-a", 0, "a0:1", "connection refused")
    assert down.error == "connection refused" and down.disk_percent == "?"


def test_group_figures_sum_lag_and_tps_over_topics_and_brokers() -> None:
    def stats(group: str, *offsets: tuple[int, int], tps: float) -> ConsumeStatsList:
        table = {
            MessageQueue("T", "b", n): OffsetWrapper(broker, consumer) for n, (broker, consumer) in enumerate(offsets)
        }
        return ConsumeStatsList(consume_stats_list=({group: (ConsumeStats(table, tps),)},))

    figures: dict[str, GroupFigures] = {}
    group_figures(stats("g", (10, 4), (7, 7), tps=2.5), figures)
    group_figures(stats("g", (5, 6), tps=1.0), figures)  # a consumer ahead of a stale max offset counts 0
    group_figures(stats("h", (3, 0), tps=0.0), figures)
    assert (figures["g"].lag, figures["g"].consume_tps, figures["h"].lag) == (6, 3.5, 3)
