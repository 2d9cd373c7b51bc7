"""Read-only walks over a store directory, for `shoal store inspect` / `verify` and for tools.

Nothing here takes the store lock or writes a byte: files are mapped read-only, so a live store
can be inspected. A segment that disappears mid-walk (retention) ends that segment's walk.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from shoal.formats.consume_queue_unit import UNIT, is_blank_unit
from shoal.formats.index_entry import ENTRY, HEADER
from shoal.formats.java_hash import index_key_hash
from shoal.formats.message_id import offset_msg_id
from shoal.formats.properties import KEYS, UNIQ_CLIENT_MESSAGE_ID_KEYIDX, decode_properties, message_keys
from shoal.formats.record import (
    RecordCheck,
    RecordKind,
    check_record,
)
from shoal.formats.store_layout import is_segment_name
from shoal.store import limits
from shoal.store.damage import (
    DAMAGED_DIRECTORY_NAME,
    DamagedRange,
    Resync,
    damaged_file_path,
    find_resync,
    known_damage,
)

ProgressCallback = Callable[[int], None]
"""Called with the number of bytes just processed (progress bars)."""


@dataclass(frozen=True)
class RecordAt:
    offset: int
    check: RecordCheck
    properties: dict[str, str]
    damaged_end: int = -1
    """For damage (an INVALID check) that intact records follow in the segment: where they resume."""
    lost_offsets: tuple[int, ...] = ()
    """For damage: offsets of records framed at their own position inside it (lost records)."""

    def damaged_range(self) -> DamagedRange | None:
        """The damage as a range, when intact records follow it in its segment."""
        if self.damaged_end < 0:
            return None
        damaged = DamagedRange(self.offset, self.damaged_end, self.check.reason or "zeros where a record should be")
        for offset in self.lost_offsets:
            damaged.add_record_offset(offset)
        return damaged


def segment_paths(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if is_segment_name(p.name))


@contextlib.contextmanager
def map_read_only(path: Path) -> Iterator[memoryview | None]:
    """A read-only view of a file, or None if it vanished or is empty."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        yield None
        return
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            yield None
            return
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                yield view
            finally:
                view.release()
    finally:
        os.close(fd)


class _Damage(NamedTuple):
    """Damage met by `iter_commitlog` whose end is not found yet (it may run into the next segment)."""

    offset: int
    check: RecordCheck
    lost_offsets: list[int]
    zeros: bool


def iter_commitlog(directory: Path, *, check_crc: bool, progress: ProgressCallback | None = None) -> Iterator[RecordAt]:
    """Every record, segment by segment, then damage as an INVALID RecordAt: when intact records
    follow it (store/damage.py, maybe in a later segment) the walk resumes there and the item says
    where (`damaged_end`); damage nothing intact follows is yielded at the end (a torn tail), and
    only zeros after the last record are no damage at all."""
    pending: _Damage | None = None
    for path in segment_paths(directory):
        base = int(path.name)
        with map_read_only(path) as view:
            if view is None:
                continue
            limit = len(view)
            position = 0
            if pending is not None:
                position = -1
                if not _all_zeros(view, 0, limit):
                    found = find_resync(view, 0, limit, limit, base, limit)
                    pending.lost_offsets.extend(base + p for p in found.lost_positions)
                    position = found.position
                if position >= 0:
                    yield _damage_item(pending, base + position)
                    pending = None
                else:
                    position = limit  # still damaged: the whole segment
            while position < limit:
                check = check_record(
                    view, position, limit, check_crc=check_crc, expected_physical_offset=base + position
                )
                if check.kind is RecordKind.END_OF_FILE:
                    break
                if check.kind is RecordKind.INVALID or check.header is None:
                    zeros = _all_zeros(view, position, limit)
                    found = Resync(-1, []) if zeros else find_resync(view, position + 1, limit, limit, base, limit)
                    lost = [base + p for p in found.lost_positions]
                    if check.header is not None and check.header.physical_offset == base + position:
                        lost.insert(0, base + position)
                    damage = _Damage(base + position, check, lost, zeros)
                    if found.position < 0:
                        pending = damage
                        break
                    yield _damage_item(damage, base + found.position)
                    position = found.position
                    continue
                header = check.header
                props_view = view[header.properties_position : header.properties_position + header.properties_length]
                properties = decode_properties(props_view)
                props_view.release()
                yield RecordAt(base + position, check, properties)
                position += check.size
            if progress is not None:
                progress(limit)
    if pending is not None and not pending.zeros:
        yield _damage_item(pending, -1)


def _damage_item(damage: _Damage, resume_offset: int) -> RecordAt:
    check = damage.check
    if damage.zeros:
        check = RecordCheck(RecordKind.INVALID, -1, reason="zeros where a record should be")
    return RecordAt(damage.offset, check, {}, resume_offset, tuple(damage.lost_offsets))


def _all_zeros(view: memoryview, start: int, end: int) -> bool:
    """True when view[start:end] holds only zeros (compared a chunk at a time, at memcmp speed)."""
    chunk = len(_ZEROS)
    for at in range(start, end, chunk):
        piece = view[at : min(at + chunk, end)]
        zero = piece == _ZEROS[: len(piece)]
        piece.release()
        if not zero:
            return False
    return True


_ZEROS = bytes(limits.RECOVERY_ZERO_CHUNK_BYTES)


def iter_consume_queue(queue_dir: Path) -> Iterator[tuple[int, int, int, int]]:
    """(logical offset, commitlog offset, size, tagsCode) of every written unit; blanks skipped."""
    for path in segment_paths(queue_dir):
        first = int(path.name) // UNIT.size
        with map_read_only(path) as view:
            if view is None:
                continue
            for index, (offset, size, tags) in enumerate(UNIT.iter_unpack(view)):
                if not (offset >= 0 and size > 0):
                    break
                if not is_blank_unit(offset, size):
                    yield first + index, offset, size, tags


def consume_queue_dirs(root: Path) -> Iterator[tuple[str, int, Path]]:
    base = root / "consumequeue"
    if not base.is_dir():
        return
    for topic_dir in sorted(base.iterdir()):
        if not topic_dir.is_dir():
            continue
        for queue_dir in sorted(topic_dir.iterdir()):
            if queue_dir.is_dir() and queue_dir.name.isdigit():
                yield topic_dir.name, int(queue_dir.name), queue_dir


def iter_index_entries(index_path: Path, hash_slots: int) -> Iterator[tuple[int, int, int, int]]:
    """(keyHash, phyOffset, timeDiff, prevIndex) of every entry of one index file."""
    with map_read_only(index_path) as view:
        if view is None:
            return
        index_count = HEADER.unpack_from(view, 0)[5]
        entries_at = limits.INDEX_HEADER_SIZE_BYTES + hash_slots * 4
        for number in range(1, max(index_count, 1)):
            position = entries_at + number * ENTRY.size
            if position + ENTRY.size > len(view):
                break
            yield ENTRY.unpack_from(view, position)


@dataclass
class VerifyReport:
    records: int = 0
    bytes_checked: int = 0
    consume_queue_units: int = 0
    index_entries: int = 0
    problems: list[str] = field(default_factory=list)
    damaged_ranges: list[DamagedRange] = field(default_factory=list)
    """Damage that intact records follow (what was lost there). Ranges recovery already handled
    (copied to damaged/, `saved_as` set) are listed here only; any other is also a problem."""

    @property
    def ok(self) -> bool:
        return not self.problems


PROBLEMS_MAX_COUNT = 1000  # a badly damaged store must not produce an unbounded report


def segment_size_problems(paths: list[Path]) -> list[str]:
    """A line for each segment whose size is not the spacing of the names (the segment size), with
    what to do about it: the broker extends a short newest segment at start (a torn tail, its loss
    reported) but will not open a log with a wrong-size segment before it."""
    if len(paths) < 2:
        return []
    segment_bytes = int(paths[1].name) - int(paths[0].name)
    problems = []
    for path in paths:
        size = path.stat().st_size
        if size == segment_bytes:
            continue
        if path == paths[-1] and size < segment_bytes:
            advice = (
                "the newest segment: a broker start extends it with zeros and reports the records past the cut lost"
            )
        else:
            advice = (
                "the broker will not start on it: restore the file from a copy, or move it and every later "
                "segment out of commitlog/ to keep the messages before it"
            )
        problems.append(f"CommitLog segment {path.name} is {size} bytes where segments are {segment_bytes}: {advice}")
    return problems


def verify_store(
    root: Path, *, hash_slots: int = limits.INDEX_HASH_SLOTS_DEFAULT, progress: ProgressCallback | None = None
) -> VerifyReport:
    """CRC of every record; every ConsumeQueue unit and index entry agrees with the CommitLog."""
    report = VerifyReport()
    records: dict[int, tuple[str, int, int, int, frozenset[int]]] = {}

    def problem(text: str) -> None:
        if len(report.problems) < PROBLEMS_MAX_COUNT:
            report.problems.append(text)

    for text in segment_size_problems(segment_paths(root / "commitlog")):
        problem(text)
    known = known_damage(root / DAMAGED_DIRECTORY_NAME)
    for item in iter_commitlog(root / "commitlog", check_crc=True, progress=progress):
        if item.check.kind is not RecordKind.MESSAGE or item.check.header is None:
            damaged = item.damaged_range()
            if damaged is None:
                problem(f"CommitLog offset {item.offset}: {item.check.reason}")
                continue
            report.damaged_ranges.append(damaged)
            if known.get(damaged.start_offset) == damaged.size_bytes:
                # Recovery reported it, copied it aside and repaired the ConsumeQueues and the
                # index around it: a documented loss, no inconsistency (the checks below still
                # catch any unit or key left pointing into it).
                saved = damaged_file_path(root / DAMAGED_DIRECTORY_NAME, damaged.start_offset, damaged.size_bytes)
                damaged.saved_as = str(saved)
                continue
            problem(damaged.describe())
            continue
        header = item.check.header
        report.records += 1
        report.bytes_checked += item.check.size
        keys = {index_key_hash(f"{header.topic}#{key}") for key in message_keys(item.properties.get(KEYS))}
        uniq = item.properties.get(UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if uniq:
            keys.add(index_key_hash(f"{header.topic}#{uniq}"))
        records[item.offset] = (
            header.topic,
            header.queue_id,
            header.queue_offset,
            item.check.size,
            frozenset(keys),
        )
    _verify_consume_queues(root, records, report, problem)
    _verify_index(root, records, hash_slots, report, problem)
    return report


def _verify_consume_queues(
    root: Path,
    records: dict[int, tuple[str, int, int, int, frozenset[int]]],
    report: VerifyReport,
    problem: Callable[[str], None],
) -> None:
    commitlog_min = min(records, default=0)
    for topic, queue_id, queue_dir in consume_queue_dirs(root):
        for logical, offset, size, _tags in iter_consume_queue(queue_dir):
            report.consume_queue_units += 1
            record = records.get(offset)
            if record is None:
                if offset >= commitlog_min:
                    problem(f"{topic}/{queue_id} unit {logical}: no valid record at CommitLog offset {offset}")
                continue
            if (record[0], record[1], record[2], record[3]) != (topic, queue_id, logical, size):
                problem(
                    f"{topic}/{queue_id} unit {logical}: points at a record of {record[0]}/{record[1]} "
                    f"queue offset {record[2]}, size {record[3]} (unit says size {size})"
                )


def _verify_index(
    root: Path,
    records: dict[int, tuple[str, int, int, int, frozenset[int]]],
    hash_slots: int,
    report: VerifyReport,
    problem: Callable[[str], None],
) -> None:
    index_dir = root / "index"
    if not index_dir.is_dir():
        return
    commitlog_min = min(records, default=0)
    for path in sorted(p for p in index_dir.iterdir() if p.name.isdigit()):
        for key_hash, offset, _diff, _prev in iter_index_entries(path, hash_slots):
            report.index_entries += 1
            record = records.get(offset)
            if record is None:
                if offset >= commitlog_min:
                    problem(f"index {path.name}: entry for CommitLog offset {offset} has no valid record")
                continue
            if key_hash not in record[4]:
                problem(f"index {path.name}: entry hash {key_hash} matches no key of the record at {offset}")


def describe_record(item: RecordAt) -> dict[str, object]:
    """A printable dict of every field of a walked record (what `shoal store inspect` prints)."""
    header = item.check.header
    if item.check.kind is not RecordKind.MESSAGE or header is None:
        described: dict[str, object] = {"offset": item.offset, "damage": item.check.reason}
        if item.damaged_end >= 0:
            described["intactFrom"] = item.damaged_end
            described["lostRecordOffsets"] = list(item.lost_offsets)
        return described
    return {
        "offset": item.offset,
        "msgId": offset_msg_id(header.store_host, header.physical_offset),
        "size": header.total_size,
        "topic": header.topic,
        "queueId": header.queue_id,
        "queueOffset": header.queue_offset,
        "sysFlag": header.sysflag,
        "bornTimestamp": header.born_timestamp,
        "storeTimestamp": header.store_timestamp,
        "bodyLength": header.body_length,
        "bodyCRC": header.body_crc,
        "reconsumeTimes": header.reconsume_times,
        "properties": item.properties,
    }
