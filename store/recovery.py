"""Crash recovery: find where valid CommitLog data ends, cut everything after it, repair indexes.

Follows RocketMQ (spec §4.3): normal recovery scans from the 3rd-last segment; abnormal recovery
(the `abort` marker was left behind) starts at the newest segment whose first message is older
than the checkpoint and re-dispatches from there. Either way the CommitLog is truncated at the
first byte that is not a valid record (torn write, bad CRC, bad magic, wrong length, or a record
whose PHYSICALOFFSET field names another position), ConsumeQueue units and index keys pointing
at or past that byte are dropped, and a report lists what was lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shoal.store import limits
from shoal.store.checkpoint import StoreCheckpoint
from shoal.store.commitlog import CommitLog
from shoal.store.record import (
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    PREFIX,
    RecordKind,
    store_timestamp_at,
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
    consume_queue_units_dropped: int = 0
    index_files_deleted: int = 0
    messages_redispatched: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def lossless(self) -> bool:
        return not self.damage and self.commitlog_bytes_dropped == 0

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
        if self.consume_queue_units_dropped:
            lines.append(f"  dropped {self.consume_queue_units_dropped} ConsumeQueue units past the end")
        if self.index_files_deleted:
            lines.append(f"  deleted {self.index_files_deleted} index files (rebuilt from the CommitLog)")
        if self.messages_redispatched:
            lines.append(f"  re-dispatched {self.messages_redispatched} messages")
        lines.extend(f"  note: {note}" for note in self.notes)
        return "\n".join(lines)


def choose_scan_start(commitlog: CommitLog, checkpoint: StoreCheckpoint, last_exit_ok: bool) -> int:
    """The segment to start scanning from (its start offset)."""
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


def scan_commitlog(commitlog: CommitLog, start_offset: int, check_crc: bool) -> tuple[int, str]:
    """Walk records from `start_offset`; returns (end of valid data, why it stopped or '')."""
    offset = start_offset
    queue = commitlog.queue
    while True:
        mapped = queue.find_by_offset(offset)
        if mapped is None:
            return offset, ""
        check = commitlog.check_at(offset, check_crc=check_crc)
        if check.kind is RecordKind.MESSAGE:
            offset += check.size
            continue
        if check.kind is RecordKind.END_OF_FILE:
            next_start = commitlog.rolled_offset(offset)
            if queue.find_by_offset(next_start) is None:
                return offset, ""
            offset = next_start
            continue
        position = offset - mapped.file_from_offset
        tail = mapped.view[position : min(position + 8, mapped.file_size)]
        clean_end = not any(tail)
        tail.release()
        return offset, "" if clean_end else f"at CommitLog offset {offset}: {check.reason}"


def recover_commitlog(commitlog: CommitLog, checkpoint: StoreCheckpoint, last_exit_ok: bool) -> RecoveryReport:
    """Scan, truncate the CommitLog at the end of valid data, and report."""
    report = RecoveryReport(last_exit_ok=last_exit_ok)
    queue = commitlog.queue
    if not queue.files:
        return report
    start = choose_scan_start(commitlog, checkpoint, last_exit_ok)
    end, damage = scan_commitlog(commitlog, start, commitlog.check_crc_on_recover)
    written_end = _written_end(commitlog)
    report.scan_start_offset = start
    report.recovered_end_offset = end
    report.damage = damage
    report.commitlog_bytes_dropped = max(0, written_end - end) if damage else 0
    queue.truncate_dirty_files(end)
    queue.flushed_where = queue.committed_where = end
    commitlog.forget_current_segment()
    return report


def _written_end(commitlog: CommitLog) -> int:
    """Where non-zero bytes end in the last non-empty segment (how far the old process wrote)."""
    for mapped in reversed(commitlog.queue.files):
        view = mapped.view
        end = mapped.file_size
        chunk = limits.RECOVERY_ZERO_CHUNK_BYTES
        while end > 0:
            start = max(0, end - chunk)
            piece = view[start:end]
            stripped = bytes(piece).rstrip(b"\x00")
            piece.release()
            if stripped:
                return mapped.file_from_offset + start + len(stripped)
            end = start
    return 0
