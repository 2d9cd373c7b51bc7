"""Subscription groups of this broker (RocketMQ's SubscriptionGroupManager).

Wraps `shoal.store.metadata.SubscriptionGroupTable` (config/subscriptionGroup.json) with the
broker's policies: auto-creating groups (autoCreateSubscriptionGroup, and the `CID_RMQ_SYS_`
groups always), admin updates and deletes (each persisted at once, as RocketMQ does), and which
broker a consumer should pull from next. A slave's metadata sync
replaces `table` with the master's copy; whoever holds the manager sees the new table.
"""

from __future__ import annotations

from shoal.broker.config import BrokerConfig
from shoal.broker.persist_soon import PersistSoon
from shoal.formats.topics import validate_group_name
from shoal.store.metadata import SubscriptionGroupConfig, SubscriptionGroupTable

SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"  # created on first use even with autoCreateSubscriptionGroup off


class SubscriptionGroupManager:
    def __init__(self, table: SubscriptionGroupTable, config: BrokerConfig) -> None:
        self.table = table
        self.config = config
        # self.table when it runs: a slave's metadata sync swaps the table
        self.persist_soon = PersistSoon(lambda: self.table.persist(), "subscriptionGroup.json")  # noqa: PLW0108

    def find(self, name: str) -> SubscriptionGroupConfig | None:
        """The group's config as stored, never created."""
        return self.table.get(name)

    def find_or_create(self, name: str, *, persist_now: bool = True) -> SubscriptionGroupConfig | None:
        """The group's config, auto-created when allowed; None for a name no group may have (as
        RocketMQ 5's findSubscriptionGroupConfig): callers answer SUBSCRIPTION_GROUP_NOT_EXIST.
        A group created with `persist_now` False is written once the request is answered
        (shoal.broker.persist_soon: a heartbeat)."""
        group = self.table.get(name)
        if group is None and validate_group_name(name) is not None:
            return None
        if group is None and (self.config.auto_create_subscription_group or name.startswith(SYSTEM_GROUP_PREFIX)):
            group = SubscriptionGroupConfig(name)
            self.table.put(group)
            if persist_now:
                self.table.persist()
            else:
                self.persist_soon()
        return group

    def update(self, group: SubscriptionGroupConfig) -> SubscriptionGroupConfig | None:
        """Create or replace the group's settings (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP) and persist;
        returns the settings replaced, if any."""
        old = self.table.get(group.group_name)
        self.table.put(group)
        self.table.persist()
        return old

    def delete(self, name: str) -> SubscriptionGroupConfig | None:
        """Remove the group's settings (DELETE_SUBSCRIPTIONGROUP), persisting only when it existed."""
        removed = self.table.delete(name)
        if removed is not None:
            self.table.persist()
        return removed

    def suggest_broker_id(self, group: SubscriptionGroupConfig, from_slave: bool) -> int:
        """Which broker of the group the consumer should pull from next (slaveReadEnable)."""
        if not self.config.slave_read_enable:
            return 0
        return group.which_broker_when_consume_slowly if from_slave else group.broker_id
