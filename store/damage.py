"""Damage in the middle of the CommitLog: where intact records resume, what was lost, a copy aside.

Every record names its own position (PHYSICALOFFSET) and carries a body CRC, so after bytes that
are not a record, intact data resumes at the first position p holding either

    a message: MAGICCODE V1/V2, RECORD_SIZE_MIN <= TOTALSIZE <= RECORD_SIZE_MAX, PHYSICALOFFSET == p,
               the fields decode and add up to TOTALSIZE, and the body CRC holds; or
    the blank record ending a segment: BLANK_MAGIC_CODE and a length that reaches exactly the
               segment's end.

Copies of records at other positions (stale bytes, garbage made of old records) fail the
PHYSICALOFFSET test. Recovery, the Dispatcher and `shoal store verify` all resynchronise with
`find_resync`, which visits each byte of the damaged range once: a C-level regular expression
finds the next magic code and only those positions are checked, so large garbage costs one pass.
A position framed as a record of its own position (magic and PHYSICALOFFSET right) whose later
checks fail is reported as a lost record.

Damaged bytes are never removed from the CommitLog (offsets never move, replicas stay
byte-identical); recovery copies them to `<root>/damaged/<start offset, 20 digits>-<bytes>.bin`.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from shoal.formats.record import (
    BLANK_MAGIC_CODE,
    FIXED_LENGTH_V4,
    MAGIC_OFFSET,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    PREFIX,
    TAIL,
    RecordKind,
    body_crc,
    check_record,
)
from shoal.store import durability, limits

log = logging.getLogger(__name__)

_MAGICS = (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, BLANK_MAGIC_CODE)
MAGIC_PATTERN = re.compile(b"|".join(re.escape(magic.to_bytes(4, "big", signed=True)) for magic in _MAGICS))
"""Any of the three magic codes, as they lie on disk (big-endian)."""
MAGIC_SIZE_BYTES = 4
assert TAIL.size == MAGIC_OFFSET + MAGIC_SIZE_BYTES
DAMAGED_DIRECTORY_NAME = "damaged"
_DAMAGED_NAME = re.compile(r"(\d{20})-(\d+)\.bin")


@dataclass
class DamagedRange:
    """CommitLog bytes [start_offset, end_offset) that hold no intact record, with intact data after."""

    start_offset: int
    end_offset: int
    reason: str
    """Why the first byte is not a record (the check that failed)."""
    record_offsets: list[int] = field(default_factory=list)
    """Offsets of records known to be lost here (framed at their own position, then broken, or
    named by a ConsumeQueue unit); at most DAMAGED_RECORD_OFFSETS_MAX_COUNT."""
    saved_as: str = ""
    """Where the bytes were copied (a path), or '' when they were not."""

    @property
    def size_bytes(self) -> int:
        return self.end_offset - self.start_offset

    def add_record_offset(self, offset: int) -> None:
        if offset not in self.record_offsets and len(self.record_offsets) < limits.DAMAGED_RECORD_OFFSETS_MAX_COUNT:
            self.record_offsets.append(offset)
            self.record_offsets.sort()

    def describe(self) -> str:
        known = (
            f"lost records at offsets {self.record_offsets}"
            if self.record_offsets
            else "no record offset known to be lost there"
        )
        saved = f"; copied to {self.saved_as}" if self.saved_as else ""
        return (
            f"CommitLog offset {self.start_offset}: {self.reason}; damaged range "
            f"[{self.start_offset}, {self.end_offset}) ({self.size_bytes} bytes), intact records after it; "
            f"{known}{saved}"
        )


class Resync(NamedTuple):
    position: int
    """Buffer position where intact data resumes; -1 when none starts before the search end."""
    lost_positions: list[int]
    """Positions framed as records of their own position that failed a later check."""


def find_resync(buffer: memoryview, start: int, end: int, limit: int, base_offset: int, segment_end: int) -> Resync:
    """The first position p in [start, end) where intact data resumes (module docstring).

    `buffer` is readable up to `limit` (a record must fit before it); position 0 is CommitLog
    offset `base_offset`; the segment ends at buffer position `segment_end` (maybe past `limit`).
    A record framed at its own position whose body CRC fails is stepped over whole, so no byte
    is CRC-checked twice and the search stays linear even in garbage built of nested records.
    """
    lost: list[int] = []
    search_from = start + MAGIC_OFFSET
    search_end = min(end + MAGIC_OFFSET + MAGIC_SIZE_BYTES - 1, limit)
    while search_from < search_end:
        match = MAGIC_PATTERN.search(buffer, search_from, search_end)
        if match is None:
            break
        position = match.start() - MAGIC_OFFSET
        search_from = match.start() + 1
        verdict, framed_size = _candidate(buffer, position, limit, base_offset, segment_end)
        if verdict is RecordKind.MESSAGE or verdict is RecordKind.END_OF_FILE:
            return Resync(position, lost)
        if verdict is RecordKind.INVALID:
            if len(lost) < limits.DAMAGED_RECORD_OFFSETS_MAX_COUNT:
                lost.append(position)
            search_from = max(search_from, position + framed_size + MAGIC_OFFSET)
    return Resync(-1, lost)


def _candidate(
    buffer: memoryview, position: int, limit: int, base_offset: int, segment_end: int
) -> tuple[RecordKind | None, int]:
    """(MESSAGE or END_OF_FILE when intact data starts at `position`; INVALID when a record of
    this position starts here but is broken; None when nothing of this position starts here,
    the size to step over when only the body CRC failed, else 0)."""
    total, magic = TAIL.unpack_from(buffer, position)
    if magic == BLANK_MAGIC_CODE:
        return (RecordKind.END_OF_FILE if total == segment_end - position >= TAIL.size else None), 0
    if limit - position < PREFIX.size:
        return None, 0
    if PREFIX.unpack_from(buffer, position)[6] != base_offset + position:
        return None, 0
    if not FIXED_LENGTH_V4 <= total <= min(limits.RECORD_SIZE_MAX_BYTES, limit - position):
        return RecordKind.INVALID, 0
    check = check_record(buffer, position, limit, check_crc=False, expected_physical_offset=base_offset + position)
    header = check.header
    if check.kind is not RecordKind.MESSAGE or header is None:
        return RecordKind.INVALID, 0
    body = buffer[header.body_position : header.body_position + header.body_length]
    crc_ok = header.body_length == 0 or body_crc(body) == header.body_crc
    body.release()
    return (RecordKind.MESSAGE, 0) if crc_ok else (RecordKind.INVALID, total)


def damaged_file_path(directory: Path, start_offset: int, size_bytes: int) -> Path:
    return directory / f"{start_offset:020d}-{size_bytes}.bin"


def save_damaged_bytes(directory: Path, start_offset: int, pieces: list[memoryview]) -> Path:
    """Copy the damaged bytes (the pieces, in order) to `damaged/<start>-<size>.bin`, durably:
    written under a temporary name, synced, renamed. A copy already there is kept."""
    size = sum(len(piece) for piece in pieces)
    path = damaged_file_path(directory, start_offset, size)
    if path.exists() and path.stat().st_size == size:
        return path
    durability.make_directories(directory)
    temp = path.with_name(path.name + ".tmp")
    fd = durability.create_file(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for piece in pieces:
            at = 0
            while at < len(piece):
                chunk = piece[at : at + limits.DAMAGED_COPY_CHUNK_BYTES]
                at += os.write(fd, chunk)
                chunk.release()
        durability.fsync(fd)
    finally:
        os.close(fd)
    durability.replace(temp, path)
    durability.fsync_directory(directory)
    return path


def known_damage(directory: Path) -> dict[int, int]:
    """Damaged ranges copied aside earlier: {start offset: size in bytes} from the file names."""
    if not directory.is_dir():
        return {}
    found: dict[int, int] = {}
    for path in directory.iterdir():
        match = _DAMAGED_NAME.fullmatch(path.name)
        if match is not None:
            found[int(match[1])] = int(match[2])
    return found
