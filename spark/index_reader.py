"""Read IndexFile entries (layout declared in shoal.formats.index_entry) as Arrow batches."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from shoal.formats import limits as formats_limits
from shoal.formats.index_entry import ENTRY, HEADER, SLOT
from shoal.spark import limits

log = logging.getLogger(__name__)


def index_files(index_dir: Path) -> list[str]:
    """IndexFiles are named by their creation time (17 digits)."""
    if not index_dir.is_dir():
        return []
    return sorted(str(index_dir / name) for name in os.listdir(index_dir) if name.isdigit())


def read_index_file(path: str, hash_slots: int, arrow_schema: Any) -> Iterator[Any]:
    """Batches of INDEX_SCHEMA: entries 1 .. indexCount-1 of one file."""
    try:
        with open(path, "rb") as file:
            header = file.read(HEADER.size)
            if len(header) < HEADER.size:
                return
            begin_timestamp, _end_ts, _begin_offset, _end_offset, _slots_used, index_count = HEADER.unpack(header)
            entries_at = formats_limits.INDEX_HEADER_SIZE_BYTES + hash_slots * SLOT.size
            name = os.path.basename(path)
            for first in range(1, max(index_count, 1), limits.INDEX_ENTRIES_PER_BATCH_MAX):
                count = min(limits.INDEX_ENTRIES_PER_BATCH_MAX, index_count - first)
                file.seek(entries_at + first * ENTRY.size)
                data = file.read(count * ENTRY.size)
                entries = list(ENTRY.iter_unpack(data[: len(data) - len(data) % ENTRY.size]))
                if not entries:
                    return
                hashes, offsets, diffs, previous = zip(*entries, strict=True)
                arrays = [
                    pa.array([name] * len(entries), pa.string()),
                    pa.array(range(first, first + len(entries)), pa.int32()),
                    pa.array(hashes, pa.int32()),
                    pa.array(offsets, pa.int64()),
                    pa.array(diffs, pa.int32()),
                    pa.array(previous, pa.int32()),
                    pa.array([begin_timestamp] * len(entries), pa.int64()),
                ]
                yield pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)
    except FileNotFoundError:
        log.warning("IndexFile %s was deleted before it was read; skipped", path)
