"""Subscription groups: admin updates and deletes are persisted at once and survive a reload."""

from __future__ import annotations

from pathlib import Path

from shoal.broker.config import BrokerConfig
from shoal.broker.group_manager import SubscriptionGroupManager
from shoal.store.metadata import SubscriptionGroupConfig, SubscriptionGroupTable


def _manager(path: Path) -> SubscriptionGroupManager:
    table = SubscriptionGroupTable(path, lambda: 1_700_000_000_000)
    table.load()
    return SubscriptionGroupManager(table, BrokerConfig())


def test_update_replaces_the_whole_config_and_persists_it(tmp_path: Path) -> None:
    """Goal: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP stores the config as sent (no merge) and writes the file. Method:
    create, replace, reload from disk."""
    path = tmp_path / "subscriptionGroup.json"
    groups = _manager(path)
    version = groups.table.data_version.counter
    assert groups.update(SubscriptionGroupConfig("G", consume_enable=False, retry_max_times=3)) is None
    old = groups.update(SubscriptionGroupConfig("G", retry_queue_nums=2))
    assert old is not None and old.consume_enable is False
    assert groups.table.data_version.counter == version + 2
    reloaded = _manager(path).find("G")
    assert reloaded == SubscriptionGroupConfig("G", retry_queue_nums=2)  # consumeEnable back to its default


def test_delete_persists_only_when_the_group_existed(tmp_path: Path) -> None:
    """Goal: deleting removes the group from the file; deleting an unknown group changes nothing. Method: both."""
    path = tmp_path / "subscriptionGroup.json"
    groups = _manager(path)
    groups.update(SubscriptionGroupConfig("G"))
    assert groups.delete("G") == SubscriptionGroupConfig("G")
    version = groups.table.data_version.counter
    assert groups.delete("G") is None
    assert groups.table.data_version.counter == version
    assert _manager(path).find("G") is None
