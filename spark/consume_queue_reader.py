"""Read ConsumeQueue files: their units as rows, or the CommitLog records the units point at.

A unit is (CommitLog offset, size, tagsCode), 20 bytes, declared in shoal.formats.consume_queue_unit.
Blank padding units are skipped; the first unit that was never written (offset < 0 or size <= 0,
zeros in practice) ends a file. A ConsumeQueue-driven read fetches the records of one queue file
with a few large preads (nearby records are read together), then decodes them in bulk; a unit
whose record is gone (retention) or does not match is left out and counted in a log line.
"""

from __future__ import annotations

import array
import bisect
import logging
import os
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from shoal.formats.consume_queue_unit import UNIT, is_blank_unit
from shoal.formats.record import FIXED_LENGTH_V4
from shoal.spark import limits
from shoal.spark.planning import QueueFilePlan, SegmentFile
from shoal.spark.record_columns import Damage, Framing, RowFilter, decode_records

log = logging.getLogger(__name__)

COALESCE_GAP_BYTES = 256 * 1024
"""Records of one queue closer than this are fetched in one pread (reading the gap is cheaper
than another system call); farther ones get their own."""


def read_units(path: str) -> list[tuple[int, int, int, int]]:
    """(queue offset, CommitLog offset, size, tagsCode) of every written unit of one file."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        log.warning("ConsumeQueue file %s was deleted before it was read; skipped", path)
        return []
    first = int(os.path.basename(path)) // UNIT.size
    units = []
    usable = len(data) - len(data) % UNIT.size
    for index, (offset, size, tags_code) in enumerate(UNIT.iter_unpack(memoryview(data)[:usable])):
        if not (offset >= 0 and size > 0):
            break
        if not is_blank_unit(offset, size):
            units.append((first + index, offset, size, tags_code))
    return units


def units_batch(plan: QueueFilePlan, arrow_schema: Any) -> Any:
    """One file's units as a batch of CONSUME_QUEUE_SCHEMA."""
    units = read_units(plan.path)
    columns = list(zip(*units, strict=True)) if units else [(), (), (), ()]
    arrays = [
        pa.array([plan.topic] * len(units), pa.string()),
        pa.array([plan.queue_id] * len(units), pa.int32()),
        pa.array(columns[0], pa.int64()),
        pa.array(columns[1], pa.int64()),
        pa.array(columns[2], pa.int32()),
        pa.array(columns[3], pa.int64()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)


def read_queue_records(
    plan: QueueFilePlan,
    segments: list[SegmentFile],
    columns: tuple[str, ...],
    arrow_schema: Any,
    row_filter: RowFilter,
    *,
    check_crc: bool,
) -> Iterator[Any]:
    """The CommitLog records the units of one ConsumeQueue file point at, in queue order."""
    bases = [segment.base_offset for segment in segments]
    skipped = 0
    units = read_units(plan.path)
    by_segment: dict[int, list[tuple[int, int]]] = {}
    for _logical, offset, size, _tags in units:
        index = bisect.bisect_right(bases, offset) - 1
        if index < 0 or offset + size > bases[index] + segments[index].size_bytes:
            skipped += 1  # below the first segment (deleted by retention) or past the last
            continue
        by_segment.setdefault(index, []).append((offset, size))
    for index in sorted(by_segment):
        segment = segments[index]
        try:
            fd = os.open(segment.path, os.O_RDONLY)
        except FileNotFoundError:
            skipped += len(by_segment[index])
            continue
        try:
            for framing, bad in _framings(fd, segment.base_offset, by_segment[index]):
                skipped += bad
                decoded = decode_records(
                    framing, columns, arrow_schema, row_filter, damage=Damage.DROP, check_crc=check_crc
                )
                skipped += decoded.dropped
                yield from decoded.batches
        finally:
            os.close(fd)
    if skipped:
        log.warning(
            "ConsumeQueue %s/%d file %s: %d unit(s) point at no valid record (deleted by retention or damaged)",
            plan.topic,
            plan.queue_id,
            os.path.basename(plan.path),
            skipped,
        )


def _framings(fd: int, base_offset: int, units: list[tuple[int, int]]) -> Iterator[tuple[Framing, int]]:
    """Batches of records read with coalesced preads; with each, how many units were unusable
    (overlapping an earlier unit's record or too small to be a record)."""
    buffer = bytearray()
    starts: array.array[int] = array.array("i")
    ends: array.array[int] = array.array("i")
    offsets: array.array[int] = array.array("q")
    bad = 0
    previous_end = -1
    run_start = run_end = -1
    pending: list[tuple[int, int]] = []

    def flush_run() -> int:
        """Read the pending run into the buffer; returns units it could not hold (a short read)."""
        nonlocal run_start
        if run_start < 0:
            return 0
        at = len(buffer)
        buffer.extend(os.pread(fd, run_end - run_start, run_start - base_offset))
        missing = 0
        for offset, size in pending:
            if offset + size - run_start <= len(buffer) - at:
                starts.append(at + offset - run_start)
                ends.append(at + offset - run_start + size)
                offsets.append(offset)
            else:
                missing += 1
        pending.clear()
        run_start = -1
        return missing

    for offset, size in units:
        if offset < previous_end or size < FIXED_LENGTH_V4:
            bad += 1
            continue
        previous_end = offset + size
        if run_start >= 0 and (
            offset - run_end > COALESCE_GAP_BYTES or offset + size - run_start > limits.READ_CHUNK_BYTES
        ):
            bad += flush_run()
        if run_start < 0:
            run_start = offset
        run_end = offset + size
        pending.append((offset, size))
        if len(buffer) + run_end - run_start > limits.READ_CHUNK_BYTES or len(starts) + len(pending) >= (
            limits.CONSUME_QUEUE_UNITS_PER_READ_MAX
        ):
            bad += flush_run()
            yield Framing(bytes(buffer), 0, starts, ends, offsets), bad
            buffer, starts, ends, offsets, bad = bytearray(), array.array("i"), array.array("i"), array.array("q"), 0
    bad += flush_run()
    if starts or bad:
        yield Framing(bytes(buffer), 0, starts, ends, offsets), bad
