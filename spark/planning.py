"""Partition planning on the driver: which files, which byte ranges (no record is read here,
except the first record of each segment when a time window prunes segments).

A CommitLog range owns the records that *start* in [start, stop) of one segment; its reader
finds the first of them by validation (commitlog_reader.align) and reads past `stop` to finish
the last one. Ranges of one segment therefore cover each record exactly once.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from shoal.formats.consume_queue_unit import UNIT_SIZE
from shoal.formats.record import (
    HEADERS,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    TAIL,
    store_timestamp_at,
)
from shoal.formats.store_layout import is_segment_name
from shoal.spark import limits
from shoal.spark.errors import ReadOptionError

log = logging.getLogger(__name__)

_FIRST_HEADER_BYTES = max(header.size for header in HEADERS.values())


@dataclass(frozen=True)
class SegmentFile:
    """A CommitLog segment, a ConsumeQueue file or any file named by its 20-digit start offset."""

    path: str
    base_offset: int
    size_bytes: int


@dataclass(frozen=True)
class RangePlan:
    """Records of one segment whose start lies in [start, stop) (positions in the file)."""

    path: str
    base_offset: int
    start: int
    stop: int


@dataclass(frozen=True)
class QueueFilePlan:
    """One ConsumeQueue file of one queue."""

    topic: str
    queue_id: int
    path: str
    first_queue_offset: int


def list_segments(directory: Path) -> list[SegmentFile]:
    """Files named by a 20-digit offset, in offset order; one removed while listing is left out."""
    if not directory.is_dir():
        return []
    found = []
    for name in sorted(os.listdir(directory)):
        if not is_segment_name(name):
            continue
        path = directory / name
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue
        found.append(SegmentFile(str(path), int(name), size))
    return found


def plan_ranges(segments: list[SegmentFile], partition_bytes: int) -> list[RangePlan]:
    """Byte ranges of at most `partition_bytes` (0: one range per segment)."""
    plans = []
    for segment in segments:
        step = partition_bytes if partition_bytes > 0 else segment.size_bytes
        for start in range(0, segment.size_bytes, step):
            plans.append(RangePlan(segment.path, segment.base_offset, start, min(start + step, segment.size_bytes)))
        if len(plans) > limits.PARTITIONS_MAX_COUNT:
            raise ReadOptionError(
                f"partition_bytes={partition_bytes} makes more than {limits.PARTITIONS_MAX_COUNT} partitions"
            )
    return plans


def first_store_timestamp(path: str) -> int | None:
    """STORETIMESTAMP of a segment's first record; None when it has none or vanished."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        head = os.pread(fd, _FIRST_HEADER_BYTES, 0)
    finally:
        os.close(fd)
    if len(head) < _FIRST_HEADER_BYTES:
        return None
    _total, magic = TAIL.unpack_from(head, 0)
    if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
        return None
    return store_timestamp_at(head, 0)


def prune_by_time(segments: list[SegmentFile], since_ms: int | None, until_ms: int | None) -> list[SegmentFile]:
    """Leave out segments that cannot hold a record stored in [since_ms, until_ms).

    A segment's records are stored no earlier than its first record and no later than the next
    segment's first record: the store clock is read under the put lock, so store times only grow
    (as RocketMQ's own lookups by time assume). Rows are still filtered one by one afterwards.
    """
    if since_ms is None and until_ms is None:
        return segments
    firsts = [first_store_timestamp(segment.path) for segment in segments]
    kept = []
    for index, segment in enumerate(segments):
        first = firsts[index]
        following = firsts[index + 1] if index + 1 < len(firsts) else None
        if until_ms is not None and first is not None and first >= until_ms:
            continue
        if since_ms is not None and following is not None and following < since_ms:
            continue
        kept.append(segment)
    log.info("time window [%s, %s): %d of %d segment(s) to read", since_ms, until_ms, len(kept), len(segments))
    return kept


def plan_queue_files(
    consume_queue_dir: Path, topics: frozenset[str] | None, queue_ids: frozenset[int] | None
) -> list[QueueFilePlan]:
    """Every ConsumeQueue file of the chosen topics and queues."""
    plans: list[QueueFilePlan] = []
    if not consume_queue_dir.is_dir():
        return plans
    for topic in sorted(os.listdir(consume_queue_dir)):
        if topics is not None and topic not in topics:
            continue
        topic_dir = consume_queue_dir / topic
        if not topic_dir.is_dir():
            continue
        for queue_name in sorted(os.listdir(topic_dir), key=lambda name: (len(name), name)):
            if not queue_name.isdigit() or (queue_ids is not None and int(queue_name) not in queue_ids):
                continue
            for segment in list_segments(topic_dir / queue_name):
                plans.append(QueueFilePlan(topic, int(queue_name), segment.path, segment.base_offset // UNIT_SIZE))
    return plans
