"""Clients connected to the broker: consumer groups (subscriptions, ids) and producer groups.

Heartbeats refresh a client; one not heard from for `channelExpiredTimeout` (120 s), or whose
connection closed, is removed. Changes to a group's member set notify its consumers
(NOTIFY_CONSUMER_IDS_CHANGED) so they rebalance at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from shoal.broker import limits
from shoal.broker.filter import ConsumerFilterTable, SubscriptionEntry
from shoal.protocol.bodies import ConsumerData, SubscriptionData
from shoal.remoting.server import ServerConnection

log = logging.getLogger(__name__)


@dataclass
class ClientChannel:
    client_id: str
    connection: ServerConnection
    language: str
    version: int
    last_update_s: float


@dataclass
class ConsumerGroupInfo:
    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    channels: dict[str, ClientChannel] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return sorted(self.channels)


GroupChanged = Callable[[ConsumerGroupInfo], None]


def update_subscriptions(info: ConsumerGroupInfo, subscriptions: tuple[SubscriptionData, ...]) -> bool:
    """ConsumerGroupInfo.updateSubscription: a topic's subscription is replaced only by a newer
    subVersion (a late heartbeat cannot undo a change); topics missing from the heartbeat are
    dropped. True when topics were added or dropped."""
    changed = False
    for sub in subscriptions:
        old = info.subscriptions.get(sub.topic)
        if old is None:
            changed = True
        elif sub.sub_version <= old.sub_version:
            continue
        info.subscriptions[sub.topic] = sub
    wanted = {sub.topic for sub in subscriptions}
    for topic in [topic for topic in info.subscriptions if topic not in wanted]:
        log.info("group %s no longer subscribes to %s", info.group, topic)
        del info.subscriptions[topic]
        changed = True
    return changed


class ConsumerManager:
    """Consumer groups by name, and the SQL92 filters their heartbeats register (`filters`)."""

    def __init__(self, on_ids_changed: GroupChanged, expiry_s: float) -> None:
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self.filters = ConsumerFilterTable()
        self.on_ids_changed = on_ids_changed
        self.expiry_s = expiry_s

    def register(
        self, connection: ServerConnection, client_id: str, language: str, version: int, data: ConsumerData
    ) -> bool:
        """Record a heartbeat; True when the group's members or subscriptions changed."""
        info = self.groups.get(data.group_name)
        if info is None:
            if len(self.groups) >= limits.CONSUMER_GROUPS_MAX_COUNT:
                log.error("refusing consumer group %s: %d groups already", data.group_name, len(self.groups))
                return False
            info = self.groups[data.group_name] = ConsumerGroupInfo(data.group_name)
        info.consume_type = str(getattr(data.consume_type, "name", data.consume_type))
        info.message_model = str(getattr(data.message_model, "name", data.message_model))
        info.consume_from_where = str(getattr(data.consume_from_where, "name", data.consume_from_where))
        now = time.monotonic()
        existing = info.channels.get(client_id)
        members_changed = existing is None or existing.connection is not connection
        if members_changed and len(info.channels) >= limits.CLIENTS_PER_GROUP_MAX_COUNT:
            log.error("refusing client %s in group %s: group is full", client_id, data.group_name)
            return False
        info.channels[client_id] = ClientChannel(client_id, connection, language, version, now)
        subscriptions_changed = update_subscriptions(info, data.subscription_data_set)
        self.filters.register_group(
            data.group_name,
            (
                SubscriptionEntry(sub.topic, sub.sub_string, sub.expression_type, sub.sub_version)
                for sub in data.subscription_data_set
            ),
        )
        if members_changed:
            log.info("consumer %s joined group %s", client_id, data.group_name)
            self.on_ids_changed(info)
        return members_changed or subscriptions_changed

    def unregister(self, group: str, client_id: str) -> None:
        info = self.groups.get(group)
        if info is not None and info.channels.pop(client_id, None) is not None:
            log.info("consumer %s left group %s", client_id, group)
            self._after_removal(info)

    def _after_removal(self, info: ConsumerGroupInfo) -> None:
        if not info.channels:
            del self.groups[info.group]
            self.filters.unregister_group(info.group)
        else:
            self.on_ids_changed(info)

    def connection_closed(self, connection: ServerConnection) -> None:
        for info in list(self.groups.values()):
            gone = [cid for cid, channel in info.channels.items() if channel.connection is connection]
            for client_id in gone:
                del info.channels[client_id]
                log.info("consumer %s of group %s disconnected", client_id, info.group)
            if gone:
                self._after_removal(info)

    def scan_expired(self) -> None:
        deadline = time.monotonic() - self.expiry_s
        for info in list(self.groups.values()):
            gone = [cid for cid, channel in info.channels.items() if channel.last_update_s < deadline]
            for client_id in gone:
                info.channels[client_id].connection.close()
                del info.channels[client_id]
                log.warning("consumer %s of group %s expired (no heartbeat)", client_id, info.group)
            if gone:
                self._after_removal(info)

    def find(self, group: str) -> ConsumerGroupInfo | None:
        return self.groups.get(group)


class ProducerManager:
    def __init__(self, expiry_s: float) -> None:
        self.groups: dict[str, dict[str, ClientChannel]] = {}
        self.expiry_s = expiry_s

    def register(self, connection: ServerConnection, group: str, client_id: str, language: str, version: int) -> None:
        channels = self.groups.setdefault(group, {})
        channels[client_id] = ClientChannel(client_id, connection, language, version, time.monotonic())

    def unregister(self, group: str, client_id: str) -> None:
        channels = self.groups.get(group)
        if channels is not None:
            channels.pop(client_id, None)
            if not channels:
                del self.groups[group]

    def connection_closed(self, connection: ServerConnection) -> None:
        for group, channels in list(self.groups.items()):
            for client_id in [cid for cid, ch in channels.items() if ch.connection is connection]:
                del channels[client_id]
            if not channels:
                del self.groups[group]

    def scan_expired(self) -> None:
        deadline = time.monotonic() - self.expiry_s
        for group, channels in list(self.groups.items()):
            for client_id in [cid for cid, ch in channels.items() if ch.last_update_s < deadline]:
                del channels[client_id]
            if not channels:
                del self.groups[group]

    def any_channel(self, group: str) -> ClientChannel | None:
        """A live producer of `group` (transaction check-back asks one of them)."""
        for channel in self.groups.get(group, {}).values():
            if channel.connection.is_open:
                return channel
        return None


@dataclass
class LockEntry:
    client_id: str
    last_update_s: float


class RebalanceLockManager:
    """Orderly-consumption queue locks (spec §13): a lock lives 60 s unless refreshed."""

    def __init__(self, max_live_s: float = limits.LOCK_MAX_LIVE_MS / 1000) -> None:
        self.max_live_s = max_live_s
        self.table: dict[str, dict[tuple[str, str, int], LockEntry]] = {}

    def try_lock(self, group: str, client_id: str, queues: list[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
        now = time.monotonic()
        locks = self.table.setdefault(group, {})
        granted = []
        for queue in queues:
            entry = locks.get(queue)
            if entry is None or entry.client_id == client_id or now - entry.last_update_s > self.max_live_s:
                if entry is not None and entry.client_id != client_id:
                    log.info(
                        "queue %s of group %s: expired lock of %s taken by %s", queue, group, entry.client_id, client_id
                    )
                locks[queue] = LockEntry(client_id, now)
                granted.append(queue)
        return granted

    def unlock(self, group: str, client_id: str, queues: list[tuple[str, str, int]]) -> None:
        locks = self.table.get(group)
        if not locks:
            return
        for queue in queues:
            entry = locks.get(queue)
            if entry is not None and entry.client_id == client_id:
                del locks[queue]
