"""The cluster page's table, shaped from what the NameServer and each broker answer (pure): one row
per broker with what `mqadmin clusterList` prints and what an operator on call looks at first."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shoal.protocol import ClusterInfo, ConsumeStatsList

MASTER_ID = 0


@dataclass(frozen=True, slots=True)
class BrokerRow:
    cluster: str
    broker_name: str
    broker_id: int
    address: str
    role: str
    version: str
    put_tps: float
    get_tps: float
    in_today: int
    out_today: int
    disk_ratio: float
    """The CommitLog disk's used share, 0..1 (-1: unknown)."""
    ha_lag_bytes: int
    """A master: its best slave's lag (-1: no slave); a slave: its own (-1: not known)."""
    error: str = ""
    """Why the broker did not answer (the row then holds only its address)."""

    @property
    def disk_percent(self) -> str:
        return "?" if self.disk_ratio < 0 else f"{self.disk_ratio * 100:.0f} %"


def first_rate(text: str) -> float:
    """The 10 s rate of a "<10 s> <60 s> <600 s>" TPS text; 0 when the broker has no window yet."""
    head = text.split(" ", 1)[0] if text else ""
    try:
        return float(head)
    except ValueError:
        return 0.0


def _int(table: Mapping[str, str], key: str, default: int = -1) -> int:
    try:
        return int(table.get(key, default))
    except ValueError:
        return default


def _float(table: Mapping[str, str], key: str, default: float = -1.0) -> float:
    try:
        return float(table.get(key, default))
    except ValueError:
        return default


def broker_row(cluster: str, broker_name: str, broker_id: int, address: str, table: Mapping[str, str]) -> BrokerRow:
    """One broker's row from its GET_BROKER_RUNTIME_INFO table."""
    role = table.get("brokerRole") or ("MASTER" if broker_id == MASTER_ID else "SLAVE")
    return BrokerRow(
        cluster=cluster,
        broker_name=broker_name,
        broker_id=broker_id,
        address=address,
        role=role,
        version=table.get("brokerVersionDesc", "?"),
        put_tps=first_rate(table.get("putTps", "")),
        get_tps=first_rate(table.get("getTransferedTps", "")),
        in_today=_int(table, "msgPutTotalTodayNow", 0) - _int(table, "msgPutTotalTodayMorning", 0),
        out_today=_int(table, "msgGetTotalTodayNow", 0) - _int(table, "msgGetTotalTodayMorning", 0),
        disk_ratio=_float(table, "commitLogDiskRatio"),
        ha_lag_bytes=_int(table, "haLagBytes"),
    )


def unreachable_row(cluster: str, broker_name: str, broker_id: int, address: str, error: str) -> BrokerRow:
    return BrokerRow(cluster, broker_name, broker_id, address, "?", "?", 0.0, 0.0, 0, 0, -1.0, -1, error)


def broker_addresses(info: ClusterInfo) -> list[tuple[str, str, int, str]]:
    """(cluster, broker name, broker id, address) of every broker the NameServer knows, in order."""
    cluster_of = {name: cluster for cluster, names in info.cluster_addr_table.items() for name in names}
    found = []
    for name in sorted(info.broker_addr_table):
        broker = info.broker_addr_table[name]
        for broker_id in sorted(broker.broker_addrs):
            found.append((cluster_of.get(name, broker.cluster), name, broker_id, broker.broker_addrs[broker_id]))
    return found


@dataclass(slots=True)
class GroupFigures:
    lag: int = 0
    consume_tps: float = 0.0


def group_figures(stats: ConsumeStatsList, into: dict[str, GroupFigures]) -> None:
    """Add one broker's GET_BROKER_CONSUME_STATS to each group's lag (messages not yet consumed,
    summed over its queues) and consume TPS."""
    for entry in stats.consume_stats_list:
        for group, per_topic in entry.items():
            figures = into.setdefault(group, GroupFigures())
            for topic_stats in per_topic:
                figures.consume_tps += topic_stats.consume_tps
                for wrapper in topic_stats.offset_table.values():
                    figures.lag += max(wrapper.broker_offset - wrapper.consumer_offset, 0)
