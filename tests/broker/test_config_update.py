"""shoal.broker.config_update: GET_BROKER_CONFIG's properties and UPDATE_BROKER_CONFIG's checks,
in-place application and rewrite of broker.conf."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.broker.config import load_broker_settings
from shoal.broker.config_update import (
    HOT_KEYS,
    DataVersion,
    apply_in_place,
    apply_store_in_place,
    checked_update,
    config_properties,
    persist_changes,
    properties_text,
    refusal_of,
    rewritten_properties,
)
from shoal.remoting.settings import ConfigError, parse_properties
from shoal.store.settings import BROKER_CONF_KEYS as STORE_KEYS


def settings(tmp_path: Path, **conf: str):  # type: ignore[no-untyped-def]
    return load_broker_settings({"storePathRootDir": str(tmp_path / "store"), **conf})


def test_properties_name_every_setting_as_broker_conf_does(tmp_path: Path) -> None:
    """Goal: RocketMQ's key names and Java's value texts, readable back. Method: a loaded config."""
    loaded = settings(tmp_path, mappedFileSizeConsumeQueue="6000000", fileReservedTime="48")
    properties = config_properties(loaded.broker, loaded.store)
    assert properties["brokerName"] == "broker-a" and properties["brokerRole"] == "ASYNC_MASTER"
    assert properties["autoCreateTopicEnable"] == "true" and properties["listenPort"] == "10911"
    assert properties["maxMessageSize"] == str(4 * 1024 * 1024) and properties["fileReservedTime"] == "48"
    assert properties["mappedFileSizeConsumeQueue"] == "6000000"
    assert properties["storePathCommitLog"] == str(tmp_path / "store" / "commitlog")
    assert set(STORE_KEYS) <= set(properties)
    assert parse_properties(properties_text(properties)) == properties
    assert DataVersion(5, 0).next(9) == DataVersion(9, 1)
    assert DataVersion(9, 1).to_json() == '{"counter":1,"timestamp":9}'


def test_only_hot_keys_pass_and_each_refusal_names_its_key() -> None:
    """Goal: start-only and unknown keys are refused by name. Method: a mixed update."""
    assert refusal_of({key: "x" for key in HOT_KEYS}) is None
    refusal = refusal_of({"listenPort": "1", "maxMessageSize": "1024", "sendMessageThreadPoolNums": "4"})
    assert refusal is not None
    assert "listenPort cannot change while the broker runs" in refusal
    assert "sendMessageThreadPoolNums is not a setting of this broker" in refusal
    assert "maxMessageSize" not in refusal


def test_checked_update_checks_values_and_relations_as_at_load(tmp_path: Path) -> None:
    """Goal: a bad value or relation is a ConfigError naming it. Method: three updates."""
    loaded = settings(tmp_path, mappedFileSizeCommitLog=str(2 * 1024 * 1024), maxMessageSize=str(1024 * 1024))
    broker, store_settings = checked_update(
        loaded.broker, loaded.store, {"maxMessageSize": "1024", "deleteWhen": "01;13"}
    )
    assert store_settings.commitlog.message_body_size_max_bytes == 1024
    assert store_settings.retention.delete_hours == {1, 13}
    assert broker == loaded.broker
    with pytest.raises(ConfigError, match="maxMessageSize=-5 is not allowed"):
        checked_update(loaded.broker, loaded.store, {"maxMessageSize": "-5"})
    with pytest.raises(ConfigError, match="does not fit"):
        checked_update(loaded.broker, loaded.store, {"maxMessageSize": str(4 * 1024 * 1024)})
    with pytest.raises(ConfigError, match="autoCreateTopicEnable=maybe is not allowed"):
        checked_update(loaded.broker, loaded.store, {"autoCreateTopicEnable": "maybe"})
    with pytest.raises(ConfigError, match="brokerName cannot change"):
        checked_update(loaded.broker, loaded.store, {"brokerName": "b"})


def test_apply_in_place_reaches_every_holder_of_the_shared_instances(tmp_path: Path) -> None:
    """Goal: components holding the live config see the change. Method: references taken before."""
    loaded = settings(tmp_path)
    held_broker, held_retention = loaded.broker, loaded.store.retention
    broker, store = checked_update(
        loaded.broker, loaded.store, {"autoCreateTopicEnable": "false", "fileReservedTime": "12"}
    )
    assert apply_in_place(loaded.broker, broker) == ["auto_create_topic_enable"]
    assert apply_store_in_place(loaded.store, store) == ["file_reserved_time_hours"]
    assert held_broker.auto_create_topic_enable is False and held_retention.file_reserved_time_hours == 12.0
    assert apply_in_place(loaded.broker, broker) == []


def test_broker_conf_rewrite_changes_only_the_keys_given(tmp_path: Path) -> None:
    """Goal: comments, order and other keys kept; the last of a repeated key changed; new keys
    appended; the old file kept as .bak. Method: rewrite a small broker.conf."""
    text = "# mine\nbrokerName=broker-a\nmaxMessageSize = 10\nfileReservedTime: 48\nmaxMessageSize=20\n"
    assert rewritten_properties(text, {"maxMessageSize": "1024", "deleteWhen": "04"}) == (
        "# mine\nbrokerName=broker-a\nmaxMessageSize = 10\nfileReservedTime: 48\nmaxMessageSize=1024\ndeleteWhen=04\n"
    )
    path = tmp_path / "broker.conf"
    path.write_text(text)
    persist_changes(path, {"fileReservedTime": "12"})
    assert parse_properties(path.read_text())["fileReservedTime"] == "12"
    assert (tmp_path / "broker.conf.bak").read_text() == text
