"""A ConsumeQueue: the per-(topic, queueId) index of CommitLog positions (spec §2).

Its 20-byte unit is declared in `shoal.formats.consume_queue_unit`. Files hold 300,000 units
(6,000,000 bytes) and are named by the 20-digit byte offset of their first unit within the queue;
logical offset n is at byte n*20. The first file of a queue that starts past 0 is padded with blank
units (0, 0x7FFFFFFF, 0) which readers skip.
"""

from __future__ import annotations

import bisect
import concurrent.futures
import logging
from collections.abc import Callable
from pathlib import Path

from shoal.formats.consume_queue_unit import BLANK_UNIT, BLANK_UNIT_SIZE_FIELD, UNIT, UNIT_SIZE, Unit, is_blank_unit
from shoal.formats.dispatch_run import dispatch_run
from shoal.formats.index_entry import UniqueKeyEntry
from shoal.store import durability, limits
from shoal.store.mapped_file import MappedFile, written_end
from shoal.store.mapped_file_queue import MappedFileQueue
from shoal.store.message import DispatchRequest

log = logging.getLogger(__name__)


class ConsumeQueue:
    def __init__(
        self,
        topic: str,
        queue_id: int,
        directory: Path,
        units_per_file: int,
        *,
        allocator: concurrent.futures.Executor | None = None,
    ) -> None:
        """`allocator`: the thread that creates files for `put(..., file_wait_s=...)`."""
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = units_per_file * UNIT_SIZE
        self.queue = MappedFileQueue(directory, self.file_size, allocator=allocator)
        self.max_physical_offset = -1
        """End (offset + size) of the last message indexed here; -1 when empty."""
        self.min_logic_offset = 0
        """Byte position of the first live unit."""

    # --- loading and recovery (spec §2.5) ---
    def load(self) -> list[str]:
        return self.queue.load()

    def recover(self) -> int:
        """Find the last valid unit, drop everything after it; returns units dropped.

        A unit is valid when `offset >= 0 and size > 0` (blank-fill units count, spec gotcha 22).
        """
        files = self.queue.files
        if not files:
            return 0
        start = max(0, len(files) - limits.RECOVERY_FILES_FROM_END)
        process_offset = files[start].file_from_offset
        max_physical = -1
        for mapped in files[start:]:
            position, last_end = _valid_prefix(mapped)
            if last_end >= 0:
                max_physical = last_end
            process_offset = mapped.file_from_offset + position
            if position < mapped.file_size:
                break
        dropped = _written_units_from(self.queue.files, process_offset)
        self.queue.truncate_dirty_files(process_offset)
        self._set_end(process_offset)
        if max_physical >= 0:
            self.max_physical_offset = max_physical
        return dropped

    def _set_end(self, byte_offset: int) -> None:
        self.queue.flushed_where = byte_offset
        self.queue.committed_where = byte_offset
        last = self.queue.last
        if last is not None:
            last.set_positions(byte_offset - last.file_from_offset)

    def truncate_dirty(self, physical_offset: int) -> int:
        """Drop units for CommitLog bytes at or after `physical_offset` (`truncateDirtyLogicFiles`).
        Returns the number of units dropped."""
        dropped = 0
        while True:
            last = self.queue.last
            if last is None:
                self.max_physical_offset = -1
                return dropped
            if last.wrote_position == 0:
                self._delete_last()
                continue
            first_offset, _size, _tags = UNIT.unpack_from(last.view, 0)
            if first_offset >= physical_offset and not is_blank_unit(first_offset, _size):
                dropped += last.wrote_position // UNIT_SIZE
                self._delete_last()
                continue
            keep = 0
            max_end = -1
            # One copy of the written units, unpacked by one iterator: after a crash this walks
            # every unit of every queue's last file (a million in a 1 GiB CommitLog).
            written = last.view[: last.wrote_position + (-last.wrote_position % UNIT_SIZE)].tobytes()
            for offset, size, _tags in UNIT.iter_unpack(written):
                blank = size == BLANK_UNIT_SIZE_FIELD and offset == 0
                if not (offset >= 0 and size > 0) or (offset >= physical_offset and not blank):
                    break
                if not blank:
                    max_end = offset + size
                keep += UNIT_SIZE
            dropped += (last.wrote_position - keep) // UNIT_SIZE
            last.truncate_to(keep)
            self.queue.flushed_where = min(self.queue.flushed_where, last.file_from_offset + keep)
            self.max_physical_offset = max_end if max_end >= 0 else self._scan_max_physical()
            return dropped

    def _delete_last(self) -> None:
        self.queue.delete_last_file()

    def _scan_max_physical(self) -> int:
        for mapped in reversed(self.queue.files):
            for position in range(mapped.wrote_position - UNIT_SIZE, -1, -UNIT_SIZE):
                offset, size, _tags = UNIT.unpack_from(mapped.view, position)
                if not is_blank_unit(offset, size):
                    return int(offset + size)
        return -1

    # --- writing (spec §2.3) ---
    def put(
        self, physical_offset: int, size: int, tags_code: int, queue_offset: int, file_wait_s: float | None = None
    ) -> bool:
        """Write the unit for `queue_offset`; False when it was already there (a duplicate).
        `file_wait_s`: a new file is created off this thread and waited for at most this long
        (SegmentNotReadyError, nothing written), else it is created here."""
        if physical_offset + size <= self.max_physical_offset:
            return False
        expected = queue_offset * UNIT_SIZE
        mapped = self._file_for(expected, file_wait_s)
        end = mapped.file_from_offset + mapped.wrote_position
        if expected < end:
            return False
        if expected > end:
            log.error(
                "ConsumeQueue %s-%d: unit for logic offset %d leaves a gap after byte %d; written at the end",
                self.topic,
                self.queue_id,
                queue_offset,
                end,
            )
        position = mapped.wrote_position
        UNIT.pack_into(mapped.view, position, physical_offset, size, tags_code)
        mapped.wrote_position = position + UNIT_SIZE
        mapped.committed_position = mapped.wrote_position
        self.max_physical_offset = physical_offset + size
        return True

    def open_run(self) -> UnitRun | None:
        """A run of units appended to the current file, for dispatch's common case (every message
        the next of its queue); None when there is no file with room yet (`put` creates one)."""
        last = self.queue.last
        if last is None or last.is_full:
            return None
        return UnitRun(self, last)

    def fill_blanks_to(self, queue_offset: int, file_wait_s: float | None = None) -> int:
        """Write blank units up to logical offset `queue_offset` (exclusive): the messages between
        were lost in CommitLog damage, and later units must keep their logical offsets. Returns
        how many blank units were written."""
        if self.queue.last is None:
            return 0  # a new queue: put() pads it with blank units itself
        written = 0
        while self.max_offset < queue_offset:
            mapped = self._file_for(self.max_offset * UNIT_SIZE, file_wait_s)
            position = mapped.wrote_position
            mapped.view[position : position + UNIT_SIZE] = BLANK_UNIT
            mapped.wrote_position = mapped.committed_position = position + UNIT_SIZE
            written += 1
        return written

    def blank_units_in(self, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Replace every unit whose record starts in one of the CommitLog ranges [start, end) with
        a blank unit, in place and synced (logical offsets stay). Returns (queue offset, CommitLog
        offset) of each unit replaced."""
        if not ranges:
            return []
        low = min(start for start, _end in ranges)
        high = max(end for _start, end in ranges)
        replaced: list[tuple[int, int]] = []
        for mapped in self.queue.files:
            written = mapped.wrote_position
            if written < UNIT_SIZE or UNIT.unpack_from(mapped.view, written - UNIT_SIZE)[0] < low:
                continue
            changed = False
            for position in range(0, written, UNIT_SIZE):
                offset, size, _tags = UNIT.unpack_from(mapped.view, position)
                if is_blank_unit(offset, size) or offset < low:
                    continue
                if offset >= high:
                    break
                if any(start <= offset < end for start, end in ranges):
                    mapped.view[position : position + UNIT_SIZE] = BLANK_UNIT
                    replaced.append(((mapped.file_from_offset + position) // UNIT_SIZE, offset))
                    changed = True
            if changed:
                durability.fdatasync(mapped.fd)
        return replaced

    def _file_for(self, expected: int, wait_s: float | None) -> MappedFile:
        last = self.queue.last
        if last is not None and not last.is_full:
            return last
        first_ever = last is None
        mapped = self.queue.last_file(expected, wait_s=wait_s)
        if first_ever and expected > mapped.file_from_offset and mapped.wrote_position == 0:
            # A queue that starts past 0 (its head was cleaned, or this is a replica): pad with blanks.
            pad_to = expected - mapped.file_from_offset
            for position in range(0, pad_to, UNIT_SIZE):
                mapped.view[position : position + UNIT_SIZE] = BLANK_UNIT
            mapped.wrote_position = mapped.committed_position = pad_to
            self.min_logic_offset = expected
        return mapped

    # --- reading ---
    @property
    def min_offset(self) -> int:
        """First logical offset still readable (GET_MIN_OFFSET)."""
        return self.min_logic_offset // UNIT_SIZE

    @property
    def max_offset(self) -> int:
        """Next logical offset to be written (GET_MAX_OFFSET)."""
        return self.queue.max_wrote_offset // UNIT_SIZE

    def units_from(self, queue_offset: int) -> tuple[memoryview, int] | None:
        """Units from `queue_offset` to the end of its file (a pull never crosses CQ files),
        with the logical offset of the first unit returned."""
        byte_offset = queue_offset * UNIT_SIZE
        if byte_offset < self.min_logic_offset:
            return None
        mapped = self.queue.find_by_offset(byte_offset)
        if mapped is None:
            return None
        position = byte_offset - mapped.file_from_offset
        end = mapped.wrote_position
        if position >= end:
            return None
        return mapped.view[position:end], queue_offset

    def unit_at(self, queue_offset: int) -> Unit | None:
        found = self.units_from(queue_offset)
        if found is None:
            return None
        view, _ = found
        unit = Unit(*UNIT.unpack_from(view, 0))
        view.release()
        return unit

    def last_unit(self) -> Unit | None:
        max_offset = self.max_offset
        return self.unit_at(max_offset - 1) if max_offset > self.min_offset else None

    def offset_by_time(self, timestamp_ms: int, store_time_of: Callable[[int], int | None]) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first unit stored at or after `timestamp_ms`, else the
        closest; `store_time_of(physical_offset)` reads the CommitLog (None when cleaned away).
        Binary search over the whole queue, whose store times only grow."""
        low, high = self.min_offset, self.max_offset - 1
        if high < low:
            return 0

        def time_at(index: int) -> int:
            unit = self.unit_at(index)
            if unit is None or is_blank_unit(unit.physical_offset, unit.size):
                return -1
            found = store_time_of(unit.physical_offset)
            return -1 if found is None else found

        indexes = range(low, high + 1)
        position = bisect.bisect_left(indexes, timestamp_ms, key=time_at)
        if position >= len(indexes):
            return high
        if position == 0 or time_at(indexes[position]) == timestamp_ms:
            return indexes[position]
        before, after = indexes[position - 1], indexes[position]
        return before if timestamp_ms - time_at(before) <= time_at(after) - timestamp_ms else after

    # --- retention ---
    def delete_expired(self, commitlog_min_offset: int) -> int:
        """Delete files whose last unit points below the CommitLog's first byte; returns files deleted."""

        def expired(mapped: MappedFile) -> bool:
            if mapped.wrote_position < UNIT_SIZE:
                return False
            offset, _size, _tags = UNIT.unpack_from(mapped.view, mapped.wrote_position - UNIT_SIZE)
            return bool(offset < commitlog_min_offset)

        deleted = self.queue.delete_first_files(expired, limits.DELETE_FILES_PER_RUN_MAX_COUNT)
        self.correct_min_offset(commitlog_min_offset)
        return len(deleted)

    def correct_min_offset(self, commitlog_min_offset: int) -> None:
        """Move the min offset to the first unit whose message is still in the CommitLog."""
        first = self.queue.first
        if first is None:
            return
        position = max(0, self.min_logic_offset - first.file_from_offset)
        while position < first.wrote_position:
            offset, size, _tags = UNIT.unpack_from(first.view, position)
            if not is_blank_unit(offset, size) and offset >= commitlog_min_offset:
                break
            position += UNIT_SIZE
        self.min_logic_offset = first.file_from_offset + position

    def flush(self, least_pages: int) -> bool:
        return self.queue.flush(least_pages)

    def destroy(self) -> None:
        self.queue.destroy()
        self.max_physical_offset = -1
        self.min_logic_offset = 0

    def close(self) -> None:
        self.queue.close()


def _written_units_from(files: list[MappedFile], byte_offset: int) -> int:
    """Units at or after `byte_offset` that hold anything but zeros (what truncation drops)."""
    count = 0
    for mapped in files:
        start = max(0, byte_offset - mapped.file_from_offset)
        if start >= mapped.file_size:
            continue
        start -= start % UNIT_SIZE
        end = written_end(mapped.view, start, mapped.file_size)  # a file's zero tail is no unit
        end += -(end - start) % UNIT_SIZE
        for unit in UNIT.iter_unpack(mapped.view[start:end]):
            if unit != (0, 0, 0):
                count += 1
    return count


def _valid_prefix(mapped: MappedFile) -> tuple[int, int]:
    """(bytes of valid units at the start of the file, end of the last real message or -1)."""
    position = 0
    last_end = -1
    for offset, size, _tags in UNIT.iter_unpack(mapped.view):
        if not (offset >= 0 and size > 0):
            break
        if size != BLANK_UNIT_SIZE_FIELD or offset != 0:
            last_end = offset + size
        position += UNIT_SIZE
    return position, last_end


class UnitRun:
    """Units appended to a ConsumeQueue's current file, the queue's bookkeeping (its write
    position, `max_physical_offset`) published once by `close` instead of after each unit.

    Readers see the units when the run closes; until then only the run's owner (the Dispatcher,
    under its lock) may write to the queue."""

    __slots__ = ("_mapped", "end", "max_physical_offset", "next_offset", "position", "queue", "view")

    def __init__(self, queue: ConsumeQueue, mapped: MappedFile) -> None:
        self.queue = queue
        self._mapped = mapped
        self.view = mapped.view
        self.position = mapped.wrote_position
        self.end = queue.file_size
        self.next_offset = (mapped.file_from_offset + mapped.wrote_position) // UNIT_SIZE
        self.max_physical_offset = queue.max_physical_offset

    def extend(
        self,
        view: memoryview,
        position: int,
        limit: int,
        expected_offset: int,
        count_max: int,
        raw_topic: bytes,
        keys_out: list[UniqueKeyEntry] | None,
        arrivals_out: list[DispatchRequest] | None,
    ) -> tuple[int, int, int]:
        """Append the units of the CommitLog records at `view[position:limit]` (the first at
        `expected_offset`) while each is this queue's next plain message (`dispatch_run`);
        returns (bytes consumed, records, last store timestamp)."""
        queue = self.queue
        consumed, count, self.next_offset, self.max_physical_offset, self.position, last_timestamp = dispatch_run(
            view,
            position,
            limit,
            expected_offset,
            count_max,
            raw_topic,
            queue.queue_id,
            self.next_offset,
            self.max_physical_offset,
            self.view,
            self.position,
            self.end,
            queue.topic,
            DispatchRequest,
            keys_out,
            arrivals_out,
        )
        return consumed, count, last_timestamp

    def close(self) -> None:
        """Publish the units appended (the queue's readers and flusher see them from now on)."""
        mapped = self._mapped
        if self.position > mapped.wrote_position:
            mapped.wrote_position = mapped.committed_position = self.position
            self.queue.max_physical_offset = self.max_physical_offset
