"""Store settings: frozen dataclasses grouped by concern, built from RocketMQ's broker.conf names.

Every field documents its unit, its default (RocketMQ 4.9.7's unless stated) and why. The table
`BROKER_CONF_KEYS` maps each accepted broker.conf key to the field it sets, so a RocketMQ
`broker.conf` works unchanged (keys the store does not know are left for the broker).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal.store import limits


class FlushDiskType(enum.Enum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


@dataclass(frozen=True)
class CommitLogSettings:
    segment_size_bytes: int = limits.COMMITLOG_SEGMENT_SIZE_DEFAULT_BYTES
    """mappedFileSizeCommitLog: size of every CommitLog file (1 GiB)."""
    message_body_size_max_bytes: int = limits.MESSAGE_BODY_SIZE_MAX_BYTES
    """maxMessageSize: a record (header, body, topic, properties) above this is refused with
    MESSAGE_ILLEGAL (4 MiB), as RocketMQ's doAppend compares calMsgLength; clients check the body alone."""
    check_crc_on_recover: bool = True
    """checkCRCOnRecover: recovery recomputes every body CRC (catches torn bodies)."""
    warm_mapped_file_enable: bool | None = None
    """warmMapedFileEnable: fault the CommitLog's pages in off the event loop so appends never take
    a first-touch page fault (a page allocated and zeroed, an ext4 extent conversion, on a VM
    perhaps a host fault). Unset: on with ASYNC_FLUSH, off with SYNC_FLUSH. Warming keeps
    `limits.WARM_AHEAD_BYTES` ahead of the write position (`store.page_warming`, Linux 5.14+);
    a page-grained SYNC_FLUSH segment, or an older kernel, zero-fills each whole new segment
    instead. Measured here (bench/peer_shoal.py, 1 KB batched, one run, whole segments):
    ASYNC 72k msgs/s warm vs 40k cold; SYNC 61-67k cold vs 27k warm, because a segment's worth
    of zeros competes with the group commits for the disk."""
    warm_rate_bytes_per_s: int = 0
    """Shoal: pace of zero-filling a whole new segment in the background (see above), syncing every
    16 MiB; 0 = as fast as the disk goes. Measured (1 KB batched, peer benchmark): pacing at
    128 MiB/s cost SYNC_FLUSH p99 3.4 ms and ASYNC p99 2.5 ms against 1.3 ms / 0.25 ms unpaced,
    so it is off. Warming ahead in windows needs no pace."""
    access_message_in_memory_max_ratio_percent: int = 40
    """accessMessageInMemoryMaxRatio: data further behind the CommitLog head than this share of
    physical memory counts as "on disk" (smaller pull batches; a master suggests a slave)."""
    max_transfer_bytes_in_memory: int = limits.PULL_TRANSFER_IN_MEMORY_MAX_BYTES
    """maxTransferBytesOnMessageInMemory: one pull answers at most this many bytes of messages
    still in memory (the first message always goes, however big)."""
    max_transfer_count_in_memory: int = limits.PULL_TRANSFER_IN_MEMORY_MAX_COUNT
    """maxTransferCountOnMessageInMemory: ... and at most this many messages. RocketMQ's 32 keeps
    a pull's answer small; readers that drain a backlog (a Spark stream) go faster with more."""
    max_transfer_bytes_on_disk: int = limits.PULL_TRANSFER_ON_DISK_MAX_BYTES
    """maxTransferBytesOnMessageInDisk: the same for messages counted as on disk."""
    max_transfer_count_on_disk: int = limits.PULL_TRANSFER_ON_DISK_MAX_COUNT
    """maxTransferCountOnMessageInDisk."""
    preallocate_next_segment: bool = True
    """Create the next segment ahead of need, like AllocateMappedFileService."""


@dataclass(frozen=True)
class ConsumeQueueSettings:
    units_per_file: int = limits.CONSUME_QUEUE_UNITS_PER_FILE_DEFAULT
    """mappedFileSizeConsumeQueue / 20: units per ConsumeQueue file (300,000)."""

    @property
    def file_size_bytes(self) -> int:
        return self.units_per_file * limits.CONSUME_QUEUE_UNIT_SIZE_BYTES


@dataclass(frozen=True)
class IndexSettings:
    enabled: bool = True
    """messageIndexEnable: build IndexFiles for keys and UNIQ_KEY."""
    hash_slots: int = limits.INDEX_HASH_SLOTS_DEFAULT
    """maxHashSlotNum: slots per IndexFile."""
    entries: int = limits.INDEX_ENTRIES_DEFAULT
    """maxIndexNum: entries per IndexFile (the file holds entries-1)."""

    @property
    def file_size_bytes(self) -> int:
        return (
            limits.INDEX_HEADER_SIZE_BYTES
            + self.hash_slots * limits.INDEX_HASH_SLOT_SIZE_BYTES
            + self.entries * limits.INDEX_ENTRY_SIZE_BYTES
        )


@dataclass(frozen=True)
class FlushSettings:
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    """flushDiskType: SYNC_FLUSH acknowledges after fdatasync (group commit)."""
    flush_interval_ms: int = 500
    """flushIntervalCommitLog: async flush period."""
    flush_least_pages: int = 4
    """flushCommitLogLeastPages: async flush only when this many 4 KiB pages are dirty."""
    flush_thorough_interval_ms: int = 10_000
    """flushCommitLogThoroughInterval: flush whatever is dirty at least this often."""
    sync_flush_timeout_ms: int = 5_000
    """syncFlushTimeout: a SYNC_FLUSH put waiting longer answers FLUSH_DISK_TIMEOUT."""
    group_commit_interval_ms: int = 10
    """GroupCommitService wake-up period when nobody signals it."""
    sync_flush_inline: bool = False
    """Shoal: asyncio callers group-commit on their own loop (one fdatasync per loop turn) instead
    of handing off to the GroupCommitService thread; lower latency on few cores."""
    transient_store_pool_enable: bool = False
    """transientStorePoolEnable: write to a memory buffer, commit to the file, then flush.
    Effective only with ASYNC_FLUSH, as in RocketMQ."""
    transient_store_pool_size: int = 5
    """transientStorePoolSize: number of segment-sized write buffers."""
    commit_interval_ms: int = 200
    """commitIntervalCommitLog: transient-pool commit period."""
    commit_least_pages: int = 4
    """commitCommitLogLeastPages."""
    commit_thorough_interval_ms: int = 200
    """commitCommitLogThoroughInterval."""
    flush_consume_queue_interval_ms: int = 1_000
    """flushIntervalConsumeQueue."""
    flush_consume_queue_least_pages: int = 2
    """flushConsumeQueueLeastPages."""
    flush_consume_queue_thorough_interval_ms: int = 60_000
    """flushConsumeQueueThoroughInterval: also writes the checkpoint."""

    @property
    def transient_pool_effective(self) -> bool:
        return self.transient_store_pool_enable and self.flush_disk_type is FlushDiskType.ASYNC_FLUSH


@dataclass(frozen=True)
class RetentionSettings:
    file_reserved_time_hours: float = 72
    """fileReservedTime: CommitLog files older than this may be deleted."""
    delete_when: str = "04"
    """deleteWhen: local hours (';'-separated) when expired files are deleted."""
    disk_max_used_space_ratio_percent: int = 75
    """diskMaxUsedSpaceRatio: above it, files are deleted whatever their age (clamped 10..95)."""
    disk_space_warning_level_ratio: float = 0.90
    """rocketmq.broker.diskSpaceWarningLevelRatio: above it the store refuses writes."""
    disk_space_clean_forcibly_ratio: float = 0.85
    """rocketmq.broker.diskSpaceCleanForciblyRatio: above it, clean immediately."""
    clean_resource_interval_ms: int = 10_000
    """cleanResourceInterval."""
    delete_files_interval_ms: int = 100
    """deleteCommitLogFilesInterval: pause between two deleted files."""
    clean_file_forcibly_enable: bool = True
    """cleanFileForciblyEnable."""

    @property
    def disk_max_used_ratio(self) -> float:
        percent = min(
            max(self.disk_max_used_space_ratio_percent, limits.DISK_USAGE_RATIO_MIN_PERCENT),
            limits.DISK_USAGE_RATIO_MAX_PERCENT,
        )
        return percent / 100.0

    @property
    def delete_hours(self) -> frozenset[int]:
        hours = set()
        for part in self.delete_when.split(";"):
            hour = part.strip()
            if hour.isdigit():
                hours.add(int(hour))
        return frozenset(hours)


@dataclass(frozen=True)
class StoreSettings:
    root_dir: Path
    """storePathRootDir."""
    commitlog: CommitLogSettings = field(default_factory=CommitLogSettings)
    consume_queue: ConsumeQueueSettings = field(default_factory=ConsumeQueueSettings)
    index: IndexSettings = field(default_factory=IndexSettings)
    flush: FlushSettings = field(default_factory=FlushSettings)
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    commitlog_dir_override: Path | None = None
    """storePathCommitLog: defaults to <root>/commitlog."""

    def __post_init__(self) -> None:
        size = self.commitlog.segment_size_bytes
        if size < limits.COMMITLOG_SEGMENT_SIZE_MIN_BYTES:
            raise ValueError(
                f"mappedFileSizeCommitLog={size} is below the minimum {limits.COMMITLOG_SEGMENT_SIZE_MIN_BYTES} bytes"
            )
        if self.commitlog.message_body_size_max_bytes + 8 * 1024 > size:
            raise ValueError(
                f"maxMessageSize={self.commitlog.message_body_size_max_bytes} does not fit in a "
                f"{size}-byte CommitLog segment (mappedFileSizeCommitLog) with its headers"
            )
        for group in (self.commitlog, self.consume_queue, self.index, self.flush, self.retention):
            for spec in dataclasses.fields(group):
                value = getattr(group, spec.name)
                minimum = _MINIMUM_OF.get(spec.name)
                if minimum is not None and not isinstance(value, bool) and value < minimum:
                    key = _KEY_OF_FIELD.get(spec.name, spec.name)
                    raise ValueError(f"{key}={value} is out of range: it must be at least {minimum}")

    @property
    def warm_segments(self) -> bool:
        """Whether new CommitLog segments are zero-filled (see `warm_mapped_file_enable`)."""
        explicit = self.commitlog.warm_mapped_file_enable
        if explicit is not None:
            return explicit
        return self.flush.flush_disk_type is FlushDiskType.ASYNC_FLUSH

    @property
    def commitlog_dir(self) -> Path:
        return self.commitlog_dir_override or self.root_dir / "commitlog"

    @property
    def consume_queue_dir(self) -> Path:
        return self.root_dir / "consumequeue"

    @property
    def index_dir(self) -> Path:
        return self.root_dir / "index"

    @property
    def config_dir(self) -> Path:
        return self.root_dir / "config"

    @property
    def checkpoint_path(self) -> Path:
        return self.root_dir / "checkpoint"

    @property
    def abort_path(self) -> Path:
        return self.root_dir / "abort"

    @property
    def lock_path(self) -> Path:
        return self.root_dir / "lock"

    @classmethod
    def from_broker_conf(cls, conf: Mapping[str, str], root_dir: Path | None = None) -> StoreSettings:
        """Build settings from broker.conf keys; unknown keys are ignored (they belong to the broker)."""
        groups: dict[str, dict[str, Any]] = {
            "commitlog": {},
            "consume_queue": {},
            "index": {},
            "flush": {},
            "retention": {},
        }
        top: dict[str, Any] = {}
        for key, raw in conf.items():
            target = BROKER_CONF_KEYS.get(key)
            if target is None:
                continue
            group, name, parse = target
            try:
                value = parse(str(raw).strip())
            except ValueError as exc:
                raise ValueError(f"broker.conf: {key}={raw!r}: {exc}") from None
            (top if group == "" else groups[group])[name] = value
        if root_dir is not None:
            top["root_dir"] = root_dir
        if "root_dir" not in top:
            top["root_dir"] = Path.home() / "store"
        return cls(
            root_dir=top["root_dir"],
            commitlog_dir_override=top.get("commitlog_dir_override"),
            commitlog=CommitLogSettings(**groups["commitlog"]),
            consume_queue=ConsumeQueueSettings(**groups["consume_queue"]),
            index=IndexSettings(**groups["index"]),
            flush=FlushSettings(**groups["flush"]),
            retention=RetentionSettings(**groups["retention"]),
        )

    def with_changes(self, **groups: Any) -> StoreSettings:
        """A copy with some groups replaced (`settings.with_changes(flush=FlushSettings(...))`)."""
        return dataclasses.replace(self, **groups)


def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValueError("expected true or false")


def _cq_units(text: str) -> int:
    size = int(text)
    unit = limits.CONSUME_QUEUE_UNIT_SIZE_BYTES
    return (size + unit - 1) // unit  # RocketMQ rounds the file size up to whole units


BROKER_CONF_KEYS: dict[str, tuple[str, str, Callable[[str], Any]]] = {
    "storePathRootDir": ("", "root_dir", Path),
    "storePathCommitLog": ("", "commitlog_dir_override", Path),
    "mappedFileSizeCommitLog": ("commitlog", "segment_size_bytes", int),
    "maxMessageSize": ("commitlog", "message_body_size_max_bytes", int),
    "checkCRCOnRecover": ("commitlog", "check_crc_on_recover", _bool),
    "warmMapedFileEnable": ("commitlog", "warm_mapped_file_enable", _bool),
    "accessMessageInMemoryMaxRatio": ("commitlog", "access_message_in_memory_max_ratio_percent", int),
    "maxTransferBytesOnMessageInMemory": ("commitlog", "max_transfer_bytes_in_memory", int),
    "maxTransferCountOnMessageInMemory": ("commitlog", "max_transfer_count_in_memory", int),
    "maxTransferBytesOnMessageInDisk": ("commitlog", "max_transfer_bytes_on_disk", int),
    "maxTransferCountOnMessageInDisk": ("commitlog", "max_transfer_count_on_disk", int),
    "warmRateBytesPerSecond": ("commitlog", "warm_rate_bytes_per_s", int),
    "mappedFileSizeConsumeQueue": ("consume_queue", "units_per_file", _cq_units),
    "messageIndexEnable": ("index", "enabled", _bool),
    "maxHashSlotNum": ("index", "hash_slots", int),
    "maxIndexNum": ("index", "entries", int),
    "flushDiskType": ("flush", "flush_disk_type", FlushDiskType),
    "flushIntervalCommitLog": ("flush", "flush_interval_ms", int),
    "flushCommitLogLeastPages": ("flush", "flush_least_pages", int),
    "flushCommitLogThoroughInterval": ("flush", "flush_thorough_interval_ms", int),
    "syncFlushTimeout": ("flush", "sync_flush_timeout_ms", int),
    "syncFlushInline": ("flush", "sync_flush_inline", _bool),
    "transientStorePoolEnable": ("flush", "transient_store_pool_enable", _bool),
    "transientStorePoolSize": ("flush", "transient_store_pool_size", int),
    "commitIntervalCommitLog": ("flush", "commit_interval_ms", int),
    "commitCommitLogLeastPages": ("flush", "commit_least_pages", int),
    "commitCommitLogThoroughInterval": ("flush", "commit_thorough_interval_ms", int),
    "flushIntervalConsumeQueue": ("flush", "flush_consume_queue_interval_ms", int),
    "flushConsumeQueueLeastPages": ("flush", "flush_consume_queue_least_pages", int),
    "flushConsumeQueueThoroughInterval": ("flush", "flush_consume_queue_thorough_interval_ms", int),
    "fileReservedTime": ("retention", "file_reserved_time_hours", float),
    "deleteWhen": ("retention", "delete_when", str),
    "diskMaxUsedSpaceRatio": ("retention", "disk_max_used_space_ratio_percent", int),
    "cleanResourceInterval": ("retention", "clean_resource_interval_ms", int),
    "deleteCommitLogFilesInterval": ("retention", "delete_files_interval_ms", int),
    "cleanFileForciblyEnable": ("retention", "clean_file_forcibly_enable", _bool),
}


_KEY_OF_FIELD = {name: key for key, (_group, name, _parse) in BROKER_CONF_KEYS.items()}
_MINIMUM_OF: dict[str, float] = {
    "access_message_in_memory_max_ratio_percent": 0,
    "max_transfer_bytes_in_memory": 1,
    "max_transfer_count_in_memory": 1,
    "max_transfer_bytes_on_disk": 1,
    "max_transfer_count_on_disk": 1,
    "message_body_size_max_bytes": 0,
    "units_per_file": 1,
    "hash_slots": 1,
    "entries": 2,
    "flush_interval_ms": 1,
    "flush_least_pages": 0,
    "flush_thorough_interval_ms": 0,
    "sync_flush_timeout_ms": 1,
    "group_commit_interval_ms": 1,
    "transient_store_pool_size": 0,
    "commit_interval_ms": 1,
    "commit_least_pages": 0,
    "commit_thorough_interval_ms": 0,
    "flush_consume_queue_interval_ms": 1,
    "flush_consume_queue_least_pages": 0,
    "flush_consume_queue_thorough_interval_ms": 0,
    "file_reserved_time_hours": 0,
    "disk_max_used_space_ratio_percent": 0,
    "clean_resource_interval_ms": 1,
    "delete_files_interval_ms": 0,
}
