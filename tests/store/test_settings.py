"""Tests of shoal.store.settings: defaults, broker.conf names, rounding and validation."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from shoal.store.settings import (
    BROKER_CONF_KEYS,
    CommitLogSettings,
    ConsumeQueueSettings,
    FlushDiskType,
    FlushSettings,
    IndexSettings,
    RetentionSettings,
    StoreSettings,
)

MiB = 1024 * 1024


def from_conf(conf: dict[str, str], root: Path = Path("/data/store")) -> StoreSettings:
    return StoreSettings.from_broker_conf(conf, root_dir=root)


# --- defaults ---


def test_defaults_are_rocketmq_4_9_7_values(tmp_path: Path) -> None:
    """1 GiB CommitLog, 4 MiB bodies, 300,000-unit CQ files, 420,000,040-byte index files."""
    settings = StoreSettings(root_dir=tmp_path)
    assert settings.commitlog.segment_size_bytes == 1024 * MiB
    assert settings.commitlog.message_body_size_max_bytes == 4 * MiB
    assert settings.commitlog.check_crc_on_recover
    assert settings.consume_queue.units_per_file == 300_000
    assert settings.consume_queue.file_size_bytes == 6_000_000
    assert settings.index.enabled
    assert (settings.index.hash_slots, settings.index.entries) == (5_000_000, 20_000_000)
    assert settings.index.file_size_bytes == 420_000_040


def test_flush_and_retention_defaults_follow_the_spec(tmp_path: Path) -> None:
    """Spec §5.1 and §6 defaults: ASYNC_FLUSH, 500 ms, 4 pages, 10 s thorough, 72 h, '04', 75 %."""
    flush = StoreSettings(root_dir=tmp_path).flush
    assert flush.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert (flush.flush_interval_ms, flush.flush_least_pages, flush.flush_thorough_interval_ms) == (500, 4, 10_000)
    assert flush.sync_flush_timeout_ms == 5_000
    assert not flush.transient_store_pool_enable
    assert flush.transient_store_pool_size == 5
    assert (flush.commit_interval_ms, flush.commit_least_pages, flush.commit_thorough_interval_ms) == (200, 4, 200)
    assert (
        flush.flush_consume_queue_interval_ms,
        flush.flush_consume_queue_least_pages,
        flush.flush_consume_queue_thorough_interval_ms,
    ) == (1_000, 2, 60_000)
    retention = RetentionSettings()
    assert retention.file_reserved_time_hours == 72
    assert retention.delete_when == "04"
    assert retention.disk_max_used_space_ratio_percent == 75


def test_store_paths_follow_the_rocketmq_layout(tmp_path: Path) -> None:
    """commitlog/, consumequeue/, index/, config/, checkpoint, abort and lock under the root."""
    settings = StoreSettings(root_dir=tmp_path)
    assert settings.commitlog_dir == tmp_path / "commitlog"
    assert settings.consume_queue_dir == tmp_path / "consumequeue"
    assert settings.index_dir == tmp_path / "index"
    assert settings.config_dir == tmp_path / "config"
    assert settings.checkpoint_path == tmp_path / "checkpoint"
    assert settings.abort_path == tmp_path / "abort"
    assert settings.lock_path == tmp_path / "lock"


def test_settings_are_frozen(tmp_path: Path) -> None:
    """Assigning a field raises FrozenInstanceError; with_changes returns a modified copy."""
    settings = StoreSettings(root_dir=tmp_path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.root_dir = tmp_path / "other"  # type: ignore[misc]
    changed = settings.with_changes(flush=FlushSettings(flush_interval_ms=7))
    assert changed.flush.flush_interval_ms == 7
    assert settings.flush.flush_interval_ms == 500
    assert changed.commitlog is settings.commitlog


def test_conftest_small_settings_are_valid(small_settings: Callable[..., StoreSettings], tmp_path: Path) -> None:
    """The shared test settings pass validation: 64 KiB segments, 64 CQ units, 64 slots/256 entries."""
    settings = small_settings(tmp_path)
    assert settings.commitlog.segment_size_bytes == 64 * 1024
    assert settings.consume_queue.file_size_bytes == 64 * 20


# --- broker.conf ---


def test_from_broker_conf_reads_rocketmq_key_names() -> None:
    """Every group is set from its broker.conf name, with the right types."""
    settings = from_conf(
        {
            "storePathCommitLog": "/disks/fast/commitlog",
            "mappedFileSizeCommitLog": str(128 * MiB),
            "maxMessageSize": str(8 * MiB),
            "checkCRCOnRecover": "false",
            "warmMapedFileEnable": "false",
            "mappedFileSizeConsumeQueue": "600000",
            "messageIndexEnable": "false",
            "maxHashSlotNum": "1000",
            "maxIndexNum": "4000",
            "flushDiskType": "SYNC_FLUSH",
            "flushIntervalCommitLog": "1000",
            "flushCommitLogLeastPages": "8",
            "flushCommitLogThoroughInterval": "20000",
            "syncFlushTimeout": "3000",
            "syncFlushInline": "false",
            "transientStorePoolEnable": "true",
            "transientStorePoolSize": "3",
            "commitIntervalCommitLog": "100",
            "commitCommitLogLeastPages": "2",
            "commitCommitLogThoroughInterval": "300",
            "flushIntervalConsumeQueue": "2000",
            "flushConsumeQueueLeastPages": "3",
            "flushConsumeQueueThoroughInterval": "30000",
            "fileReservedTime": "48",
            "deleteWhen": "02;14",
            "diskMaxUsedSpaceRatio": "80",
            "cleanResourceInterval": "5000",
            "deleteCommitLogFilesInterval": "50",
            "cleanFileForciblyEnable": "false",
        }
    )
    assert settings.root_dir == Path("/data/store")
    assert settings.commitlog_dir == Path("/disks/fast/commitlog")
    assert settings.commitlog == CommitLogSettings(
        segment_size_bytes=128 * MiB,
        message_body_size_max_bytes=8 * MiB,
        check_crc_on_recover=False,
        warm_mapped_file_enable=False,
    )
    assert settings.consume_queue == ConsumeQueueSettings(units_per_file=30_000)
    assert settings.index == IndexSettings(enabled=False, hash_slots=1000, entries=4000)
    assert settings.flush == FlushSettings(
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        flush_interval_ms=1000,
        flush_least_pages=8,
        flush_thorough_interval_ms=20_000,
        sync_flush_timeout_ms=3000,
        sync_flush_inline=False,
        transient_store_pool_enable=True,
        transient_store_pool_size=3,
        commit_interval_ms=100,
        commit_least_pages=2,
        commit_thorough_interval_ms=300,
        flush_consume_queue_interval_ms=2000,
        flush_consume_queue_least_pages=3,
        flush_consume_queue_thorough_interval_ms=30_000,
    )
    assert settings.retention == RetentionSettings(
        file_reserved_time_hours=48.0,
        delete_when="02;14",
        disk_max_used_space_ratio_percent=80,
        clean_resource_interval_ms=5000,
        delete_files_interval_ms=50,
        clean_file_forcibly_enable=False,
    )


def test_every_broker_conf_key_names_an_existing_field() -> None:
    """Each entry of BROKER_CONF_KEYS targets a real field of its group (no silently dead keys)."""
    groups = {
        "": StoreSettings,
        "commitlog": CommitLogSettings,
        "consume_queue": ConsumeQueueSettings,
        "index": IndexSettings,
        "flush": FlushSettings,
        "retention": RetentionSettings,
    }
    for key, (group, name, _parse) in BROKER_CONF_KEYS.items():
        fields = {f.name for f in dataclasses.fields(groups[group])}
        assert name in fields or (group == "" and name == "root_dir"), key


def test_unknown_keys_are_left_for_the_broker() -> None:
    """brokerName, listenPort and the like do not concern the store: ignored, defaults kept."""
    settings = from_conf({"brokerName": "broker-a", "listenPort": "10911", "namesrvAddr": "x:9876"})
    assert settings.commitlog == CommitLogSettings()
    assert settings.flush == FlushSettings()


def test_values_are_stripped_and_booleans_case_insensitive() -> None:
    """'  TRUE ' and ' 600 ' parse as in a properties file with stray spaces."""
    settings = from_conf({"transientStorePoolEnable": "  TRUE ", "flushIntervalCommitLog": " 600 "})
    assert settings.flush.transient_store_pool_enable
    assert settings.flush.flush_interval_ms == 600


def test_store_path_root_dir_is_used_without_an_explicit_root() -> None:
    """storePathRootDir sets the root when no root_dir argument is given; the argument wins otherwise."""
    conf = {"storePathRootDir": "/var/rocketmq/store"}
    assert StoreSettings.from_broker_conf(conf).root_dir == Path("/var/rocketmq/store")
    assert StoreSettings.from_broker_conf(conf, root_dir=Path("/x")).root_dir == Path("/x")


def test_default_root_is_store_in_the_home_directory() -> None:
    """Like RocketMQ, ${user.home}/store."""
    assert StoreSettings.from_broker_conf({}).root_dir == Path.home() / "store"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("maxMessageSize", "4M"),
        ("mappedFileSizeCommitLog", "1g"),
        ("flushDiskType", "ASYNC"),
        ("checkCRCOnRecover", "maybe"),
        ("fileReservedTime", "three days"),
        ("flushIntervalCommitLog", ""),
        ("mappedFileSizeConsumeQueue", "6e6"),
    ],
)
def test_bad_values_raise_value_error_naming_the_key(key: str, value: str) -> None:
    """An unparsable value raises ValueError that names the broker.conf key and the value."""
    with pytest.raises(ValueError, match=key) as raised:
        from_conf({key: value})
    assert repr(value) in str(raised.value)


@pytest.mark.parametrize(
    ("size", "units"),
    [("6000000", 300_000), ("6000001", 300_001), ("20", 1), ("21", 2), ("1", 1), ("39", 2)],
)
def test_consume_queue_file_size_is_rounded_up_to_whole_units(size: str, units: int) -> None:
    """getMappedFileSizeConsumeQueue rounds up to a multiple of 20 bytes."""
    settings = from_conf({"mappedFileSizeConsumeQueue": size})
    assert settings.consume_queue.units_per_file == units
    assert settings.consume_queue.file_size_bytes == units * 20
    assert settings.consume_queue.file_size_bytes >= int(size)


# --- validation of limits ---


def test_commitlog_segment_below_64_kib_is_refused() -> None:
    """mappedFileSizeCommitLog under the minimum raises ValueError naming the key."""
    with pytest.raises(ValueError, match="mappedFileSizeCommitLog=65535"):
        from_conf({"mappedFileSizeCommitLog": "65535", "maxMessageSize": "1024"})
    assert from_conf({"mappedFileSizeCommitLog": "65536", "maxMessageSize": "1024"}).commitlog.segment_size_bytes


def test_max_message_size_must_fit_a_segment_with_headers() -> None:
    """maxMessageSize + 8 KiB must fit the CommitLog segment; the error names maxMessageSize."""
    with pytest.raises(ValueError, match="maxMessageSize"):
        from_conf({"mappedFileSizeCommitLog": str(64 * 1024), "maxMessageSize": str(64 * 1024)})
    from_conf({"mappedFileSizeCommitLog": str(64 * 1024), "maxMessageSize": str(56 * 1024)})


@pytest.mark.parametrize(
    "groups",
    [
        {"consume_queue": ConsumeQueueSettings(units_per_file=0)},
        {"index": IndexSettings(hash_slots=0)},
        {"index": IndexSettings(entries=1)},
    ],
)
def test_empty_queue_and_index_files_are_refused(tmp_path: Path, groups: dict[str, object]) -> None:
    """0 CQ units, 0 hash slots or a single index entry (no room for a key) raise ValueError."""
    with pytest.raises(ValueError, match="at least"):
        StoreSettings(root_dir=tmp_path, **groups)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("key", "value"), [("mappedFileSizeConsumeQueue", "0"), ("maxHashSlotNum", "0"), ("maxIndexNum", "1")]
)
def test_out_of_range_queue_and_index_sizes_name_the_key(key: str, value: str) -> None:
    """A broker.conf value that parses but is out of range still names its key."""
    with pytest.raises(ValueError, match=key):
        from_conf({key: value})


@pytest.mark.parametrize(
    "key", ["maxMessageSize", "transientStorePoolSize", "flushIntervalCommitLog", "syncFlushTimeout"]
)
def test_negative_sizes_and_intervals_name_the_key(key: str) -> None:
    """-1 for a size, count or interval is refused with a ValueError naming the key."""
    with pytest.raises(ValueError, match=key):
        from_conf({key: "-1"})


# --- derived values ---


@pytest.mark.parametrize(("percent", "ratio"), [(75, 0.75), (5, 0.10), (10, 0.10), (95, 0.95), (99, 0.95)])
def test_disk_max_used_ratio_is_clamped_to_10_95_percent(percent: int, ratio: float) -> None:
    """diskMaxUsedSpaceRatio is clamped into [10, 95] like getDiskMaxUsedSpaceRatio."""
    assert RetentionSettings(disk_max_used_space_ratio_percent=percent).disk_max_used_ratio == pytest.approx(ratio)


@pytest.mark.parametrize(
    ("when", "hours"),
    [("04", {4}), ("02;14", {2, 14}), (" 1 ; 23 ", {1, 23}), ("", set()), ("x;5", {5})],
)
def test_delete_when_lists_local_hours(when: str, hours: set[int]) -> None:
    """deleteWhen is ';'-separated hours; blanks and junk are skipped."""
    assert RetentionSettings(delete_when=when).delete_hours == frozenset(hours)


@pytest.mark.parametrize(
    ("enabled", "flush_type", "effective"),
    [
        (True, FlushDiskType.ASYNC_FLUSH, True),
        (True, FlushDiskType.SYNC_FLUSH, False),
        (False, FlushDiskType.ASYNC_FLUSH, False),
    ],
)
def test_transient_pool_is_effective_only_with_async_flush(
    enabled: bool, flush_type: FlushDiskType, effective: bool
) -> None:
    """transientStorePoolEnable only takes effect with ASYNC_FLUSH, as in RocketMQ."""
    flush = FlushSettings(transient_store_pool_enable=enabled, flush_disk_type=flush_type)
    assert flush.transient_pool_effective is effective


def test_segments_are_warmed_for_async_flush_only_unless_set(tmp_path: Path) -> None:
    """Goal: warmMapedFileEnable defaults by flush mode and an explicit value wins. Method: build settings."""
    assert StoreSettings.from_broker_conf({"flushDiskType": "ASYNC_FLUSH"}, root_dir=tmp_path).warm_segments
    assert not StoreSettings.from_broker_conf({"flushDiskType": "SYNC_FLUSH"}, root_dir=tmp_path).warm_segments
    explicit = StoreSettings.from_broker_conf(
        {"flushDiskType": "SYNC_FLUSH", "warmMapedFileEnable": "true"}, root_dir=tmp_path
    )
    assert explicit.warm_segments
