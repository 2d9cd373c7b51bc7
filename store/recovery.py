"""Crash recovery: find where valid CommitLog data ends, cut the torn tail, skip damage, repair indexes.

Follows RocketMQ (spec §4.3): normal recovery scans from the 3rd-last segment; abnormal recovery
(the `abort` marker was left behind) starts at the newest segment whose first message is older
than the checkpoint and re-dispatches from there.

Where RocketMQ truncates at the first byte that is not a valid record (torn write, bad CRC, bad
magic, wrong length, or a record whose PHYSICALOFFSET names another position), we tell two cases
apart (store/damage.py):

- damage in the middle: intact records follow. The scan resynchronises at the next record that
  is valid at its position, keeps every intact record, copies the damaged range to
  `<root>/damaged/`, and the report lists the range and the records known to be lost there;
  ConsumeQueue units pointing into it become blank units (logical offsets stay) and index files
  holding keys from it are rebuilt.
- a torn tail: nothing valid follows before the end of what was written. The CommitLog is cut
  there (the tail zeroed), and ConsumeQueue units and index keys at or past the cut are dropped.

Either way the report says what was lost.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from shoal.formats.record import (
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    PREFIX,
    RecordKind,
    frame_messages,
    store_timestamp_at,
)
from shoal.store import limits
from shoal.store.checkpoint import StoreCheckpoint
from shoal.store.commitlog import CommitLog
from shoal.store.consume_queue_table import ConsumeQueueTable
from shoal.store.damage import DamagedRange, damaged_file_path, find_resync, known_damage, save_damaged_bytes

log = logging.getLogger(__name__)


class LostMessage(NamedTuple):
    """A message a ConsumeQueue named whose record lay in a damaged range."""

    topic: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int


@dataclass(frozen=True)
class TruncationReport:
    """What `MessageStore.truncate_to` dropped."""

    offset: int
    previous_end_offset: int
    commitlog_bytes_dropped: int
    consume_queue_units_dropped: int
    index_files_deleted: int

    def summary(self) -> str:
        return (
            f"CommitLog cut from {self.previous_end_offset} to {self.offset} "
            f"({self.commitlog_bytes_dropped} bytes, {self.consume_queue_units_dropped} ConsumeQueue units, "
            f"{self.index_files_deleted} index files dropped)"
        )


@dataclass
class RecoveryReport:
    """What recovery found and what it dropped; `lossless` is what operators look at first."""

    last_exit_ok: bool = True
    scan_start_offset: int = 0
    recovered_end_offset: int = 0
    commitlog_bytes_dropped: int = 0
    damage: str = ""
    """Why the scan stopped before the last written byte ('' when it ended on clean zeros)."""
    damaged_ranges: list[DamagedRange] = field(default_factory=list)
    """New damage in the middle: skipped (intact records after it kept), copied aside, never cut."""
    known_damaged_ranges: list[DamagedRange] = field(default_factory=list)
    """Damage an earlier recovery reported and copied aside (still skipped; not a new loss)."""
    lost_messages: list[LostMessage] = field(default_factory=list)
    """Messages whose ConsumeQueue units pointed into a damaged range (at most
    DAMAGED_RECORD_OFFSETS_MAX_COUNT); the units became blank units."""
    consume_queue_units_dropped: int = 0
    consume_queue_units_blanked: int = 0
    index_files_deleted: int = 0
    messages_redispatched: int = 0
    messages_redispatch_decoded: int = 0
    """Of those, the messages decoded to write a missing ConsumeQueue unit or index keys; the
    others were already in both and were skipped from their fixed fields."""
    notes: list[str] = field(default_factory=list)
    phases_s: dict[str, float] = field(default_factory=dict)
    """Seconds spent in each step of opening the store (load, scan, re-dispatch...), in order."""
    segments_cut: list[str] = field(default_factory=list)
    """The newest CommitLog segment found shorter than its size and extended with zeros: a loss
    (what it held past the cut); its records up to the cut are kept."""

    @property
    def lossless(self) -> bool:
        return (
            not self.damage and self.commitlog_bytes_dropped == 0 and not self.damaged_ranges and not self.segments_cut
        )

    @property
    def damaged_bytes(self) -> int:
        return sum(damaged.size_bytes for damaged in self.damaged_ranges)

    def summary(self) -> str:
        mode = "normal" if self.last_exit_ok else "abnormal (abort marker found)"
        lines = [
            f"recovery: {mode}; scanned from offset {self.scan_start_offset}; "
            f"CommitLog ends at {self.recovered_end_offset}",
        ]
        if self.damage:
            lines.append(f"  damage: {self.damage}")
        if self.commitlog_bytes_dropped:
            lines.append(f"  dropped {self.commitlog_bytes_dropped} CommitLog bytes after the damage")
        if self.damaged_ranges:
            lines.append(
                f"  skipped {len(self.damaged_ranges)} damaged range(s), {self.damaged_bytes} bytes; "
                "every intact record after them was kept"
            )
            lines.extend(f"  {damaged.describe()}" for damaged in self.damaged_ranges)
        if self.lost_messages:
            shown = ", ".join(
                f"{lost.topic}/{lost.queue_id}@{lost.queue_offset} (offset {lost.commitlog_offset})"
                for lost in self.lost_messages[:20]
            )
            more = f" and {len(self.lost_messages) - 20} more" if len(self.lost_messages) > 20 else ""
            lines.append(f"  lost messages: {shown}{more}")
        if self.consume_queue_units_dropped:
            lines.append(f"  dropped {self.consume_queue_units_dropped} ConsumeQueue units past the end")
        if self.consume_queue_units_blanked:
            lines.append(f"  blanked {self.consume_queue_units_blanked} ConsumeQueue units pointing into damage")
        if self.index_files_deleted:
            lines.append(f"  deleted {self.index_files_deleted} index files (rebuilt from the CommitLog)")
        if self.messages_redispatched:
            lines.append(
                f"  re-dispatched {self.messages_redispatched} messages "
                f"({self.messages_redispatch_decoded} decoded for missing ConsumeQueue units or index keys)"
            )
        if self.known_damaged_ranges:
            lines.append(
                f"  skipped {len(self.known_damaged_ranges)} damaged range(s) reported before: "
                + ", ".join(f"[{d.start_offset}, {d.end_offset})" for d in self.known_damaged_ranges)
            )
        lines.extend(f"  note: {note}" for note in self.notes)  # a cut segment's note among them
        return "\n".join(lines)


class CommitLogScan(NamedTuple):
    end_offset: int
    """End of valid data: where the torn tail (if any) begins."""
    torn_reason: str
    """Why the bytes at `end_offset` are not a record ('' for clean zeros or the end of the files)."""
    damaged: list[DamagedRange]
    """Damage in the middle, in offset order."""


def choose_scan_start(commitlog: CommitLog, checkpoint: StoreCheckpoint, last_exit_ok: bool) -> int:
    """The segment to start scanning from (its start offset): after a clean exit the third-last,
    as RocketMQ does (its records are checked again, CRCs included)."""
    files = commitlog.queue.files
    if not files:
        return 0
    if last_exit_ok:
        return files[max(0, len(files) - limits.RECOVERY_FILES_FROM_END)].file_from_offset
    if checkpoint.trusted:
        limit_ms = checkpoint.min_timestamp
        for mapped in reversed(files):
            magic = PREFIX.unpack_from(mapped.view, 0)[1]
            if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
                continue
            stamp = store_timestamp_at(mapped.view, 0)
            if 0 < stamp <= limit_ms:
                return mapped.file_from_offset
    return files[0].file_from_offset


def scan_commitlog(
    commitlog: CommitLog,
    start_offset: int,
    check_crc: bool,
    written_end: Callable[[], int],
) -> CommitLogScan:
    """Walk records from `start_offset`, resynchronising after damage that intact records follow;
    `written_end()` is where the old process's bytes end (no resync search goes past it), asked
    only when a resync is needed."""
    offset = start_offset
    queue = commitlog.queue
    damaged: list[DamagedRange] = []
    messages_end = start_offset
    """End of the last intact message: damage that no message follows is the torn tail after all."""
    topics_valid: set[bytes] = set()
    while True:
        mapped = queue.find_by_offset(offset)
        if mapped is None:
            return _torn_tail(offset, "", damaged, messages_end)
        base = mapped.file_from_offset
        position, count = frame_messages(
            mapped.view, offset - base, mapped.read_position, base, check_crc=check_crc, topics_valid=topics_valid
        )
        if count:
            offset = messages_end = base + position
        check = commitlog.check_at(offset, check_crc=check_crc)
        if check.kind is RecordKind.MESSAGE:
            offset += check.size
            messages_end = offset
            continue
        if check.kind is RecordKind.END_OF_FILE:
            next_start = commitlog.rolled_offset(offset)
            if queue.find_by_offset(next_start) is None:
                return _torn_tail(offset, "", damaged, messages_end)
            offset = next_start
            continue
        position = offset - mapped.file_from_offset
        head = mapped.view[position : min(position + 8, mapped.file_size)]
        zeros = not any(head)
        head.release()
        resume, lost = _resync(commitlog, offset, written_end())
        if resume < 0:
            reason = "" if zeros else f"at CommitLog offset {offset}: {check.reason}"
            return _torn_tail(offset, reason, damaged, messages_end)
        found = DamagedRange(offset, resume, ZEROS_REASON if zeros else check.reason)
        if check.header is not None and check.header.physical_offset == offset:
            found.add_record_offset(offset)
        for lost_offset in lost:
            found.add_record_offset(lost_offset)
        damaged.append(found)
        offset = resume


ZEROS_REASON = "zeros where a record should be"


def _torn_tail(end_offset: int, reason: str, damaged: list[DamagedRange], messages_end: int) -> CommitLogScan:
    """The scan's result; damage followed by nothing but blank end-of-file records (a torn record
    just before a segment's end, the next segment never made durable) is the torn tail."""
    while damaged and damaged[-1].start_offset >= messages_end:
        last = damaged.pop()
        end_offset = last.start_offset
        reason = "" if last.reason == ZEROS_REASON else f"at CommitLog offset {last.start_offset}: {last.reason}"
    return CommitLogScan(end_offset, reason, damaged)


def _resync(commitlog: CommitLog, damage_offset: int, written_end: int) -> tuple[int, list[int]]:
    """(Offset where intact data resumes after `damage_offset`, or -1; lost record offsets)."""
    lost: list[int] = []
    offset = damage_offset + 1
    while offset < written_end:
        mapped = commitlog.queue.find_by_offset(offset)
        if mapped is None:
            break
        base = mapped.file_from_offset
        size = mapped.file_size
        found = find_resync(mapped.view, offset - base, min(written_end - base, size), size, base, size)
        lost.extend(base + position for position in found.lost_positions)
        if found.position >= 0:
            return base + found.position, lost
        offset = base + size
    return -1, lost


def recover_commitlog(
    commitlog: CommitLog,
    checkpoint: StoreCheckpoint,
    last_exit_ok: bool,
    damaged_directory: Path | None = None,
    dispatched_end: int = -1,
) -> RecoveryReport:
    """Scan, find damage in the middle (skipped, never cut), truncate the torn tail, and report.

    Where the old process's bytes end bounds the search for intact records after damage. Found
    from the end of the last segment, it reads every zero after the data (a warmed segment: up to
    a GiB at each start). After a clean exit everything was dispatched, so `dispatched_end`
    (where the ConsumeQueues end) is that end, and nothing past it is read.

    Damage already copied to `damaged_directory` by an earlier recovery (same start, same size)
    is listed in `known_damaged_ranges` and is not a new loss."""
    report = RecoveryReport(last_exit_ok=last_exit_ok)
    queue = commitlog.queue
    if not queue.files:
        return report
    start = choose_scan_start(commitlog, checkpoint, last_exit_ok)
    clean = last_exit_ok and dispatched_end >= 0
    old_bytes_end = functools.cache(lambda: dispatched_end if clean else _written_end(commitlog))
    scan = scan_commitlog(commitlog, start, commitlog.check_crc_on_recover, old_bytes_end)
    end = scan.end_offset
    report.scan_start_offset = start
    report.recovered_end_offset = end
    report.damage = scan.torn_reason
    # A torn tail is rare: then the bytes it drops are counted exactly, zeros read or not.
    report.commitlog_bytes_dropped = max(0, _written_end(commitlog) - end) if scan.torn_reason else 0
    known = known_damage(damaged_directory) if damaged_directory is not None else {}
    for damaged in scan.damaged:
        if known.get(damaged.start_offset) == damaged.size_bytes:
            assert damaged_directory is not None
            damaged.saved_as = str(damaged_file_path(damaged_directory, damaged.start_offset, damaged.size_bytes))
            report.known_damaged_ranges.append(damaged)
        else:
            report.damaged_ranges.append(damaged)
    # After a clean exit only zeros follow the data (truncations zero what they drop): looking for
    # stale bytes would read the rest of a warmed segment, up to a GiB, for nothing.
    queue.truncate_dirty_files(end, tail_is_zeros=last_exit_ok and not scan.torn_reason)
    queue.flushed_where = queue.committed_where = end
    commitlog.forget_current_segment()
    return report


def save_damage_aside(commitlog: CommitLog, report: RecoveryReport, directory: Path) -> None:
    """Copy every new damaged range to `directory` (after the ConsumeQueues and the index were
    repaired: a copy there marks the range as handled for later recoveries).

    The bytes also stay in the CommitLog, so a failure here (a full disk) loses nothing: it is
    reported and recovery goes on, rather than keeping the broker down for a forensic copy."""
    for damaged in report.damaged_ranges:
        pieces = []
        offset = damaged.start_offset
        while offset < damaged.end_offset:
            mapped = commitlog.queue.find_by_offset(offset)
            assert mapped is not None, offset
            position = offset - mapped.file_from_offset
            stop = min(mapped.file_size, damaged.end_offset - mapped.file_from_offset)
            pieces.append(mapped.view[position:stop])
            offset = mapped.file_from_offset + stop
        try:
            damaged.saved_as = str(save_damaged_bytes(directory, damaged.start_offset, pieces))
        except OSError as exc:
            log.error("cannot copy damaged CommitLog bytes at %d aside: %s", damaged.start_offset, exc)
            report.notes.append(
                f"damaged bytes at {damaged.start_offset} not copied aside ({exc}); they stay in the CommitLog"
            )
        finally:
            for piece in pieces:
                piece.release()


def blank_units_in_damage(consume_queues: ConsumeQueueTable, report: RecoveryReport) -> None:
    """Turn ConsumeQueue units pointing into a damaged range into blank units, recording the
    messages they named (logical offsets stay, so consumers skip exactly what was lost)."""
    if not report.damaged_ranges:
        return
    bounds = [(damaged.start_offset, damaged.end_offset) for damaged in report.damaged_ranges]
    for queue in consume_queues:
        for queue_offset, commitlog_offset in queue.blank_units_in(bounds):
            report.consume_queue_units_blanked += 1
            if len(report.lost_messages) < limits.DAMAGED_RECORD_OFFSETS_MAX_COUNT:
                report.lost_messages.append(LostMessage(queue.topic, queue.queue_id, queue_offset, commitlog_offset))
            for damaged in report.damaged_ranges:
                if damaged.start_offset <= commitlog_offset < damaged.end_offset:
                    damaged.add_record_offset(commitlog_offset)
    report.lost_messages.sort(key=lambda lost: lost.commitlog_offset)


def _written_end(commitlog: CommitLog) -> int:
    """Where non-zero bytes end in the last non-empty segment (how far the old process wrote)."""
    for mapped in reversed(commitlog.queue.files):
        end = mapped.written_end()
        if end:
            return mapped.file_from_offset + end
    return 0
