"""Read the records of one CommitLog byte range: find the first, walk, decode in bulk.

Safe on a live store: files are opened read-only and read with pread (never mapped, so a
segment that retention deletes or recovery truncates cannot fault the reader, and no buffer
export outlives a batch); no lock or abort file is touched. A segment deleted before it is
opened is skipped with a log line; the walk stops at the blank record, at zeros (the end of
what was written) and at the first damaged or half-written record (a torn tail).
"""

from __future__ import annotations

import array
import logging
import os
from collections.abc import Iterator
from typing import Any

from shoal.formats.record import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    TAIL,
    RecordKind,
    WalkStop,
    check_record,
    walk_records,
)
from shoal.spark import limits
from shoal.spark.planning import RangePlan
from shoal.spark.record_columns import Damage, Framing, RowFilter, decode_records

log = logging.getLogger(__name__)

_MAGICS = tuple(TAIL.pack(0, magic)[4:] for magic in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, BLANK_MAGIC_CODE))
_MAGIC_OFFSET = 4


def read_range(
    plan: RangePlan, columns: tuple[str, ...], arrow_schema: Any, row_filter: RowFilter, *, check_crc: bool
) -> Iterator[Any]:
    """Arrow batches of the records that start in the range (see planning.RangePlan)."""
    try:
        fd = os.open(plan.path, os.O_RDONLY)
    except FileNotFoundError:
        log.warning("CommitLog segment %s was deleted (retention) before it was read; skipped", plan.path)
        return
    try:
        yield from _read_open_range(fd, plan, columns, arrow_schema, row_filter, check_crc)
    finally:
        os.close(fd)


def _read_open_range(
    fd: int, plan: RangePlan, columns: tuple[str, ...], arrow_schema: Any, row_filter: RowFilter, check_crc: bool
) -> Iterator[Any]:
    file_size = os.fstat(fd).st_size
    stop = min(plan.stop, file_size)
    position: int | None = plan.start if plan.start == 0 else align(fd, plan, file_size)
    while position is not None and position < stop:
        chunk = os.pread(fd, min(limits.READ_CHUNK_BYTES, file_size - position), position)
        walk = walk_records(chunk, 0, len(chunk), stop - position, limits.BATCH_ROWS_MAX)
        if walk.positions:
            ends = array.array("i", walk.positions)
            del ends[0]
            ends.append(walk.end)
            framing = Framing(chunk, plan.base_offset + position, array.array("i", walk.positions), ends)
            decoded = decode_records(
                framing, columns, arrow_schema, row_filter, damage=Damage.STOP, check_crc=check_crc
            )
            yield from decoded.batches
            if decoded.damage_offset is not None:
                log.warning(
                    "CommitLog %s: damaged record at offset %d (%s); this segment is read up to there",
                    plan.path,
                    decoded.damage_offset,
                    decoded.damage_reason,
                )
                return
        if walk.stop in (WalkStop.END_OF_FILE, WalkStop.STOP_AT):
            return
        if walk.stop is WalkStop.INVALID or (walk.stop is WalkStop.LIMIT and not walk.positions):
            _log_end(plan, chunk, walk.end, position)
            return
        position += walk.end


def _log_end(plan: RangePlan, chunk: bytes, at: int, position: int) -> None:
    """Zeros are the normal end of written data; anything else is a torn or damaged tail."""
    tail = chunk[at : at + TAIL.size]
    if any(tail):
        log.warning(
            "CommitLog %s: torn or damaged record at offset %d; nothing after it is read",
            plan.path,
            plan.base_offset + position + at,
        )


def align(fd: int, plan: RangePlan, file_size: int) -> int | None:
    """Position of the first record that starts in [plan.start, plan.stop), or None.

    A candidate is any MAGICCODE found in the bytes; it is taken when `check_record` accepts it
    with its PHYSICALOFFSET equal to its own position and a correct body CRC, and what follows it
    starts like a record, a blank record or zeros. A record inside another record's body would
    have to copy all of that, at the right offset of this very log, to be mistaken for one.
    """
    buffer = os.pread(fd, min(limits.ALIGN_READ_BYTES, file_size - plan.start), plan.start)
    scan_end = min(plan.stop - plan.start, limits.ALIGN_SCAN_BYTES, len(buffer))
    at = 0
    while at < scan_end:
        found = [buffer.find(magic, at + _MAGIC_OFFSET) for magic in _MAGICS]
        hits = [index for index in found if index >= 0]
        if not hits:
            return None
        candidate = min(hits) - _MAGIC_OFFSET
        if candidate >= scan_end:
            return None
        offset = plan.base_offset + plan.start + candidate
        total, magic = TAIL.unpack_from(buffer, candidate)
        if magic == BLANK_MAGIC_CODE:
            if plan.start + candidate + total == file_size:
                return None  # the end-of-segment blank record: nothing starts after it
        elif _is_record_at(buffer, candidate, offset):
            return plan.start + candidate
        at = candidate + 1
    return None


def _is_record_at(buffer: bytes, position: int, offset: int) -> bool:
    check = check_record(buffer, position, len(buffer), check_crc=True, expected_physical_offset=offset)
    if check.kind is not RecordKind.MESSAGE:
        return False
    following = position + check.size
    if following + TAIL.size > len(buffer):
        return True
    total, magic = TAIL.unpack_from(buffer, following)
    return magic in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, BLANK_MAGIC_CODE) or (total, magic) == (0, 0)
