"""The timer index: which messages parked in `rmq_sys_wheel_timer` are due when (RocketMQ 5's timer).

A message with a delivery time (TIMER_DELIVER_MS, ...) is stored once, in the system topic
`rmq_sys_wheel_timer` (queue 0), with its delivery time as the ConsumeQueue tagsCode. The store is
the only durable copy; this module keeps an in-memory index over that ConsumeQueue and the few
numbers needed to rebuild it after a restart:

    scanFromOffset    no undelivered message lies below this ConsumeQueue offset
    indexedOffset     units below this were in the index when the progress was written
    deliveredUpToMs   every indexed message due at or before this time had been delivered

A restart scans the ConsumeQueue from `scanFromOffset` and indexes each unit except those below
`indexedOffset` that were due by `deliveredUpToMs` (delivered). Messages delivered after the
progress was written are delivered again: at-least-once, duplicates limited to the last interval.

The index is a binary heap of `deliver_ms << 40 | offset` ints (one small int per pending message,
about 44 bytes, instead of a tuple), plus a count of pending messages per 4096-unit bucket of
the ConsumeQueue, which yields `scanFromOffset` without scanning the heap. A hashed wheel would
make insertion O(1) instead of O(log n), but heapq is C code and at a million pending messages a
push costs about a microsecond, well below the record copy every delivery needs anyway.
"""

from __future__ import annotations

import heapq
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shoal.broker import limits
from shoal.store.json_files import read_json_file_tolerantly, write_json_file_safely

log = logging.getLogger(__name__)

TIMER_PROGRESS_FILE_NAME = "timerOffset.json"
OFFSET_BITS = 40
"""A heap entry packs the ConsumeQueue offset in its low 40 bits (10^12 messages in one queue)."""
_OFFSET_MASK = (1 << OFFSET_BITS) - 1
BUCKET_UNITS = 4096
"""ConsumeQueue offsets per pending-count bucket; scanFromOffset is a multiple of this."""

assert limits.TIMER_PENDING_MAX_COUNT < _OFFSET_MASK


@dataclass(frozen=True, slots=True)
class TimerProgress:
    """What `timerOffset.json` holds (see the module docstring)."""

    scan_from_offset: int = 0
    indexed_offset: int = 0
    delivered_up_to_ms: int = 0

    def to_json(self) -> dict[str, int]:
        return {
            "deliveredUpToMs": self.delivered_up_to_ms,
            "indexedOffset": self.indexed_offset,
            "scanFromOffset": self.scan_from_offset,
        }

    @classmethod
    def from_json(cls, document: Any) -> TimerProgress:
        """The progress of a parsed document; ValueError when its shape is wrong."""
        if not isinstance(document, dict):
            raise ValueError("timerOffset.json: not an object")
        values = [document.get(name, 0) for name in ("scanFromOffset", "indexedOffset", "deliveredUpToMs")]
        if not all(isinstance(value, int) and value >= 0 for value in values):
            raise ValueError(f"timerOffset.json: offsets must be non-negative integers, not {values}")
        return cls(*values)


def load_timer_progress(path: Path) -> TimerProgress:
    """The persisted progress (or its `.bak`); a fresh start when neither is usable."""
    document = read_json_file_tolerantly(path)
    if document is None:
        return TimerProgress()
    try:
        return TimerProgress.from_json(document)
    except ValueError as error:
        log.error("%s; scanning the whole timer queue", error)
        return TimerProgress()


def save_timer_progress(path: Path, progress: TimerProgress) -> None:
    """Safe write (tmp, fsync, bak, rename); an OSError propagates."""
    write_json_file_safely(path, json.dumps(progress.to_json(), indent="\t", sort_keys=True))


class TimerIndex:
    """Pending timer messages by delivery time; used only on the broker's event loop."""

    def __init__(self, pending_max_count: int = limits.TIMER_PENDING_MAX_COUNT) -> None:
        assert pending_max_count > 0
        self.pending_max_count = pending_max_count
        self._heap: list[int] = []
        self._buckets: dict[int, int] = {}
        self._min_bucket: int | None = None
        self.indexed_offset = 0
        """Next ConsumeQueue offset to index."""
        self.skip_below_offset = 0
        self.skip_up_to_ms = -1
        """Restart filter: a unit below `skip_below_offset` due by `skip_up_to_ms` was delivered."""
        self.full_reported = False

    def __len__(self) -> int:
        return len(self._heap)

    @property
    def room(self) -> int:
        return self.pending_max_count - len(self._heap)

    def restore(self, progress: TimerProgress, queue_min_offset: int) -> None:
        """Start indexing from the persisted progress (the index must be empty)."""
        assert not self._heap
        self.indexed_offset = max(progress.scan_from_offset, queue_min_offset)
        self.skip_below_offset = progress.indexed_offset
        self.skip_up_to_ms = progress.delivered_up_to_ms

    def index(self, offset: int, deliver_ms: int) -> bool:
        """Add the unit at `offset` unless the restart filter says it was delivered; True if added."""
        if offset < self.skip_below_offset and deliver_ms <= self.skip_up_to_ms:
            return False
        self.push(max(deliver_ms, 0), offset)
        return True

    def push(self, deliver_ms: int, offset: int) -> None:
        assert 0 <= offset <= _OFFSET_MASK and deliver_ms >= 0, (offset, deliver_ms)
        heapq.heappush(self._heap, deliver_ms << OFFSET_BITS | offset)
        bucket = offset // BUCKET_UNITS
        self._buckets[bucket] = self._buckets.get(bucket, 0) + 1
        if self._min_bucket is None or bucket < self._min_bucket:
            self._min_bucket = bucket

    def next_deliver_ms(self) -> int | None:
        return self._heap[0] >> OFFSET_BITS if self._heap else None

    def pop(self) -> tuple[int, int]:
        """(deliver_ms, offset) of the earliest pending message, removed from the index."""
        entry = heapq.heappop(self._heap)
        offset = entry & _OFFSET_MASK
        bucket = offset // BUCKET_UNITS
        left = self._buckets[bucket] - 1
        if left:
            self._buckets[bucket] = left
        else:
            del self._buckets[bucket]
            if bucket == self._min_bucket:
                self._min_bucket = min(self._buckets) if self._buckets else None
        return entry >> OFFSET_BITS, offset

    def progress(self, now_ms: int) -> TimerProgress:
        """The progress to persist now: everything indexed and due before the earliest pending
        message (and not in the future) has been delivered."""
        scan_from = self.indexed_offset if self._min_bucket is None else self._min_bucket * BUCKET_UNITS
        delivered_up_to_ms = now_ms
        if self._heap:
            delivered_up_to_ms = min(delivered_up_to_ms, (self._heap[0] >> OFFSET_BITS) - 1)
        return TimerProgress(min(scan_from, self.indexed_offset), self.indexed_offset, max(delivered_up_to_ms, 0))
