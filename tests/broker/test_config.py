"""broker.conf parsing: RocketMQ key names, embedded defaults, store keys, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.broker.config import BrokerRole, load_broker_settings, parse_properties
from shoal.store import FlushDiskType


def test_properties_format_with_comments_and_separators() -> None:
    """Goal: Java properties as broker.conf files use them. Method: parse a sample."""
    text = "# comment\n! also a comment\nbrokerName = broker-b\nlistenPort:10999\n\nflushDiskType=SYNC_FLUSH\n"
    assert parse_properties(text) == {"brokerName": "broker-b", "listenPort": "10999", "flushDiskType": "SYNC_FLUSH"}
    with pytest.raises(ValueError, match="line 1"):
        parse_properties("no separator here")


def test_broker_and_store_keys_land_in_their_settings(tmp_path: Path) -> None:
    """Goal: one broker.conf configures both. Method: load broker and store keys together."""
    settings = load_broker_settings(
        {
            "brokerName": "b1",
            "brokerRole": "SYNC_MASTER",
            "flushDiskType": "SYNC_FLUSH",
            "storePathRootDir": str(tmp_path),
        }
    )
    assert settings.broker.broker_name == "b1"
    assert settings.broker.broker_role is BrokerRole.SYNC_MASTER
    assert settings.store.flush.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert settings.store.root_dir == tmp_path
    assert settings.broker.listen_port == 10911  # the embedded default


def test_unknown_keys_are_reported_not_dropped() -> None:
    """Goal: a typo is visible. Method: an unknown key shows up in unknown_keys."""
    settings = load_broker_settings({"brokerNmae": "oops"})
    assert settings.unknown_keys == ("brokerNmae",)


def test_bad_values_name_the_key() -> None:
    """Goal: a bad value gives an error naming its key. Method: non-numeric port, bad role."""
    with pytest.raises(ValueError, match="listenPort"):
        load_broker_settings({"listenPort": "ten"})
    with pytest.raises(ValueError, match="brokerRole"):
        load_broker_settings({"brokerRole": "BOSS"})
