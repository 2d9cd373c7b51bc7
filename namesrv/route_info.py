"""The NameServer's tables (RocketMQ's RouteInfoManager, spec §8.10), kept pure: no sockets here.

    cluster -> broker names;  broker name -> BrokerData {brokerId: address}
    topic -> broker name -> QueueData;  broker address -> liveness (last registration, version)

A broker is live while it re-registers within `broker_expired_timeout_ms`; otherwise, or when
its connection closes, it is removed along with the queues it alone served.

Unlike RocketMQ 4.9.7, a live registration is not taken over by anyone who asks: a REGISTER_BROKER
for a (brokerName, brokerId) that is live at another address, or for a live address from another
host, is refused until the live one expires or its connection closes. A live member of the same
broker group may take over another id (a slave promoted past a hung master). Otherwise any client could
redirect a broker's route, and closing its connection dropped the real broker for up to a
registration period. A broker closing one of its connections stays while another of its
connections registered it.

A registration whose topic data version is older than the one applied from that broker address
(`is_older`: a round that reached us after a later one, say over a connection that was replaced)
refreshes the broker's liveness but not its topics: it would route topics deleted since. RocketMQ
re-reads the topics whenever the version differs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from shoal.namesrv import limits
from shoal.protocol.route_bodies import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)

log = logging.getLogger(__name__)

MASTER_ID = 0


@dataclass
class BrokerLiveInfo:
    last_update_ms: int
    data_version: DataVersion
    ha_server_addr: str
    peer_host: str = ""
    """The host the registration came from ("" when unknown: then it is not compared)."""
    connection_keys: set[object] = field(default_factory=set)
    """The open connections that registered it; it goes when the last one closes."""


@dataclass
class RegisterResult:
    master_addr: str | None = None
    ha_server_addr: str | None = None
    refused: str | None = None
    """Why the registration was refused (a live broker holds the name and id, or the address)."""


@dataclass
class RouteInfoManager:
    topic_queue_table: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)
    broker_live_table: dict[str, BrokerLiveInfo] = field(default_factory=dict)

    def register_broker(
        self,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topics: TopicConfigSerializeWrapper,
        now_ms: int,
        connection_key: object | None = None,
        *,
        peer_host: str = "",
        expired_after_ms: int = limits.BROKER_EXPIRED_TIMEOUT_MS,
    ) -> RegisterResult:
        refused = self.takeover_refusal(broker_name, broker_id, broker_addr, peer_host, now_ms, expired_after_ms)
        if refused is not None:
            log.warning("REGISTER_BROKER refused: %s", refused)
            return RegisterResult(refused=refused)
        self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)
        broker = self.broker_addr_table.get(broker_name)
        first = broker is None
        if broker is None:
            broker = BrokerData(cluster=cluster, broker_name=broker_name, broker_addrs={})
        addrs = {
            bid: addr for bid, addr in broker.broker_addrs.items() if not (addr == broker_addr and bid != broker_id)
        }
        first = first or broker_addrs_changed(addrs, broker_id, broker_addr)
        addrs[broker_id] = broker_addr
        self.broker_addr_table[broker_name] = BrokerData(cluster=cluster, broker_name=broker_name, broker_addrs=addrs)
        previous = self.broker_live_table.get(broker_addr)
        version_changed = previous is None or previous.data_version != topics.data_version
        applied = topics.data_version
        # an earlier round of this broker overtaken by a later one (on another connection); not when
        # the address changed its id or name (`first`: a promoted slave brings the synced version)
        stale = not first and previous is not None and is_older(applied, previous.data_version)
        if stale:
            assert previous is not None
            log.info(
                "REGISTER_BROKER from %s carries topic data version %s, older than the %s applied: topics kept",
                broker_addr,
                applied,
                previous.data_version,
            )
            applied = previous.data_version
        if broker_id == MASTER_ID and (version_changed or first) and not stale:
            for name, config in topics.topic_config_table.items():
                self.topic_queue_table.setdefault(name, {})[broker_name] = QueueData(
                    broker_name=broker_name,
                    read_queue_nums=config.read_queue_nums,
                    write_queue_nums=config.write_queue_nums,
                    perm=config.perm,
                    topic_sys_flag=config.topic_sys_flag,
                )
            self._drop_topics_no_longer_served(broker_name, set(topics.topic_config_table))
        if previous is None:
            log.info("new broker registered: %s %s[%d] at %s", cluster, broker_name, broker_id, broker_addr)
        keys = previous.connection_keys if previous is not None else set()
        if connection_key is not None:
            keys.add(connection_key)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            now_ms, applied, ha_server_addr, peer_host or (previous.peer_host if previous else ""), keys
        )
        result = RegisterResult()
        if broker_id != MASTER_ID:
            master = addrs.get(MASTER_ID)
            if master is not None and master in self.broker_live_table:
                result.master_addr = master
                result.ha_server_addr = self.broker_live_table[master].ha_server_addr
        return result

    def takeover_refusal(
        self, broker_name: str, broker_id: int, broker_addr: str, peer_host: str, now_ms: int, expired_after_ms: int
    ) -> str | None:
        """Why a registration (or unregistration) would take over a live broker it is not; None if it would not."""
        broker = self.broker_addr_table.get(broker_name)
        holder_addr = broker.broker_addrs.get(broker_id) if broker is not None else None
        if (
            holder_addr is not None
            and holder_addr != broker_addr
            and not self._is_member(broker, broker_addr, peer_host)
        ):
            holder = self.broker_live_table.get(holder_addr)
            if holder is not None and now_ms - holder.last_update_ms <= expired_after_ms:
                return (
                    f"{broker_name}[{broker_id}] is live at {holder_addr}; a registration claiming {broker_addr}"
                    f" from {peer_host or 'an unknown host'} waits until it expires or its connection closes"
                )
        live = self.broker_live_table.get(broker_addr)
        if (
            live is not None
            and live.peer_host
            and peer_host
            and live.peer_host != peer_host
            and now_ms - live.last_update_ms <= expired_after_ms
        ):
            return (
                f"{broker_addr} is live, registered from {live.peer_host}; a request for {broker_name}[{broker_id}]"
                f" from {peer_host} waits until it expires or its connection closes"
            )
        return None

    def _is_member(self, broker: BrokerData | None, broker_addr: str, peer_host: str) -> bool:
        """Whether `broker_addr` is live in the same broker group, registered from `peer_host`: a promoted
        slave taking over brokerId 0 from a hung master (the operator's failover) is one."""
        if broker is None or broker_addr not in broker.broker_addrs.values():
            return False
        live = self.broker_live_table.get(broker_addr)
        return live is not None and (not live.peer_host or not peer_host or live.peer_host == peer_host)

    def _drop_topics_no_longer_served(self, broker_name: str, served: set[str]) -> None:
        for topic in list(self.topic_queue_table):
            queues = self.topic_queue_table[topic]
            if broker_name in queues and topic not in served:
                del queues[broker_name]
                if not queues:
                    del self.topic_queue_table[topic]

    def unregister_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        self.broker_live_table.pop(broker_addr, None)
        broker = self.broker_addr_table.get(broker_name)
        if broker is not None:
            addrs = {bid: addr for bid, addr in broker.broker_addrs.items() if addr != broker_addr}
            if addrs:
                self.broker_addr_table[broker_name] = BrokerData(
                    cluster=broker.cluster, broker_name=broker_name, broker_addrs=addrs
                )
            else:
                del self.broker_addr_table[broker_name]
                names = self.cluster_addr_table.get(cluster)
                if names is not None:
                    names.discard(broker_name)
                    if not names:
                        del self.cluster_addr_table[cluster]
                self._remove_queues_of(broker_name)
        log.info("broker unregistered: %s %s[%d] at %s", cluster, broker_name, broker_id, broker_addr)

    def _remove_queues_of(self, broker_name: str) -> None:
        for topic in list(self.topic_queue_table):
            queues = self.topic_queue_table[topic]
            queues.pop(broker_name, None)
            if not queues:
                del self.topic_queue_table[topic]

    def remove_broker_at(self, broker_addr: str, reason: str) -> None:
        """Forget the broker registered from `broker_addr` (expired, or its connection closed)."""
        for broker in list(self.broker_addr_table.values()):
            for broker_id, addr in broker.broker_addrs.items():
                if addr == broker_addr:
                    log.warning("removing broker %s[%d] at %s: %s", broker.broker_name, broker_id, addr, reason)
                    self.unregister_broker(broker.cluster, addr, broker.broker_name, broker_id)
                    return
        self.broker_live_table.pop(broker_addr, None)

    def scan_not_active(self, now_ms: int, timeout_ms: int) -> list[str]:
        expired = [addr for addr, live in self.broker_live_table.items() if now_ms - live.last_update_ms > timeout_ms]
        for addr in expired:
            self.remove_broker_at(addr, f"no registration for {timeout_ms // 1000} s")
        return expired

    def connection_closed(self, connection_key: object) -> None:
        for addr, live in list(self.broker_live_table.items()):
            if connection_key in live.connection_keys:
                live.connection_keys.discard(connection_key)
                if not live.connection_keys:
                    self.remove_broker_at(addr, "its connection closed")

    def route(self, topic: str) -> TopicRouteData | None:
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        brokers = tuple(self.broker_addr_table[name] for name in sorted(queues) if name in self.broker_addr_table)
        if not brokers:
            return None
        return TopicRouteData(queue_datas=tuple(queues[name] for name in sorted(queues)), broker_datas=brokers)

    def cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            broker_addr_table=dict(self.broker_addr_table),
            cluster_addr_table={cluster: tuple(sorted(names)) for cluster, names in self.cluster_addr_table.items()},
        )

    def topic_list(self) -> TopicList:
        return TopicList(topic_list=tuple(sorted(self.topic_queue_table)))

    def topics_of_cluster(self, cluster: str) -> TopicList:
        names = self.cluster_addr_table.get(cluster, set())
        return TopicList(
            topic_list=tuple(sorted(t for t, queues in self.topic_queue_table.items() if names & queues.keys()))
        )

    def delete_topic(self, topic: str) -> bool:
        return self.topic_queue_table.pop(topic, None) is not None

    def set_write_permission(self, broker_name: str, writable: bool) -> int:
        """WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER: returns topics changed."""
        changed = 0
        for queues in self.topic_queue_table.values():
            queue = queues.get(broker_name)
            if queue is None:
                continue
            perm = queue.perm | 2 if writable else queue.perm & ~2
            if perm != queue.perm:
                queues[broker_name] = QueueData(
                    broker_name=broker_name,
                    read_queue_nums=queue.read_queue_nums,
                    write_queue_nums=queue.write_queue_nums,
                    perm=perm,
                    topic_sys_flag=queue.topic_sys_flag,
                )
                changed += 1
        return changed


def broker_addrs_changed(addrs: dict[int, str], broker_id: int, broker_addr: str) -> bool:
    return addrs.get(broker_id) != broker_addr


def is_older(candidate: DataVersion, applied: DataVersion) -> bool:
    """Whether a broker's topic data version precedes the one applied from it: a lower counter and no
    later timestamp (DataVersion.nextVersion raises the counter and sets the time). A broker that
    restarts from an empty store counts from 0 again, but at a later time: not older."""
    return candidate.counter < applied.counter and candidate.timestamp_ms <= applied.timestamp_ms
