"""An ordered run of same-sized segment files covering one growing log (RocketMQ's MappedFileQueue).

Used for the CommitLog (1 GiB segments) and every ConsumeQueue (6,000,000-byte segments).
Segment k starts at `first_start + k*file_size`; a gap or a wrong size is corruption.

The list of files is copy-on-write: writers and the cleaner replace it under a lock, readers
take the current list without locking. The next CommitLog segment is allocated ahead of need by
one background thread (AllocateMappedFileService), so appends never wait for a 1 GiB allocation.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from shoal.formats.store_layout import is_segment_name, offset_to_file_name
from shoal.store import durability, limits, page_warming
from shoal.store.errors import SegmentNotReadyError, StoreCorruptionError
from shoal.store.mapped_file import TEMP_SUFFIX, MappedFile
from shoal.store.thread_name import name_this_thread
from shoal.store.transient_store_pool import TransientStorePool

log = logging.getLogger(__name__)


class MappedFileQueue:
    def __init__(
        self,
        directory: Path,
        file_size: int,
        *,
        warm: bool = False,
        preallocate_next: bool = False,
        pool: TransientStorePool | None = None,
        warm_rate_bytes_per_s: int = 0,
        page_grained: bool = False,
        allocator: concurrent.futures.Executor | None = None,
    ) -> None:
        """`allocator`: a thread shared with other queues for `last_file(wait_s=...)` creations
        (the ConsumeQueues'); without it the queue starts its own when it first needs one."""
        self.directory = directory
        self.file_size = file_size
        self.warm = warm
        self.preallocate_next = preallocate_next
        self.pool = pool
        self.warm_rate_bytes_per_s = warm_rate_bytes_per_s
        """Pace of warming a segment in the background (0: as fast as the disk goes); the first
        segment of an empty log is warmed at full speed since nothing else uses the disk yet."""
        self.page_grained = page_grained
        """Appends are synced one group commit at a time: cache the segment being written in
        single pages (see mapped_file), so a sync writes back what changed, not a 2 MiB folio."""
        self.warm_windows = warm and not page_grained and page_warming.supported()
        """Warm in windows ahead of the appends (`warm_ahead`), not whole segments up front: the
        cost follows what is written, off the event loop, and no segment's worth of zeros is
        written back. A page-grained queue (and a kernel without MADV_POPULATE_WRITE) zero-fills
        whole segments as before."""
        self.files: list[MappedFile] = []
        self.cut_segments: list[str] = []
        """What `load` found cut short and extended (the newest segment only; see _extend_if_cut)."""
        self.flushed_where = 0
        self.flushed_store_timestamp = 0
        """Store timestamp of the newest record a flush is known to have covered (the checkpoint's
        physicMsgTimestamp): taken from the segment flushed, never from a newer one."""
        self.committed_where = 0
        self._lock = threading.Lock()
        self._shared_allocator = allocator
        self._allocator: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending: dict[int, concurrent.futures.Future[MappedFile]] = {}

    # --- loading ---
    def load(self) -> list[str]:
        """Open every segment in name order; returns notes on what was repaired.

        Leftover temporary files of an interrupted allocation are removed. Every segment must
        have the configured size and follow its predecessor without a gap.
        """
        notes: list[str] = []
        if not self.directory.exists():
            return notes
        for leftover in sorted(self.directory.glob("*" + TEMP_SUFFIX)):
            durability.unlink(leftover)
            notes.append(f"removed {leftover.name}, an allocation interrupted by a crash")
        names = sorted(p.name for p in self.directory.iterdir() if is_segment_name(p.name))
        files: list[MappedFile] = []
        try:
            for name in names:
                path = self.directory / name
                if files and int(name) != files[-1].file_from_offset + self.file_size:
                    raise StoreCorruptionError(
                        f"{path}: segment starts at {int(name)} but the previous one ends at "
                        f"{files[-1].file_from_offset + self.file_size}; a segment is missing"
                    )
                if name == names[-1]:
                    note = self._extend_if_cut(path)
                    if note:
                        notes.append(note)
                        self.cut_segments.append(note)
                mapped = MappedFile(path, self.file_size)
                mapped.set_positions(self.file_size)
                files.append(mapped)
        except BaseException:
            for mapped in files:
                mapped.close()
            raise
        self.files = files
        return notes

    def _extend_if_cut(self, path: Path) -> str:
        """The newest segment shorter than the segment size (a copy that ran out of space, a
        truncation by hand) is a torn tail: extend it with zeros so that recovery finds where its
        records end and reports what was lost, as RocketMQ carries on. Returns a note, or ''."""
        size = path.stat().st_size
        if size >= self.file_size:
            return ""
        fd = os.open(path, os.O_RDWR)
        try:
            os.posix_fallocate(fd, 0, self.file_size)  # the missing part reads as zeros: the log ends there
            durability.fsync(fd)
        finally:
            os.close(fd)
        log.error(
            "%s: the newest segment was %d of %d bytes; extended with zeros (records past the cut are lost)",
            path,
            size,
            self.file_size,
        )
        return (
            f"segment {path.name} was cut to {size} of {self.file_size} bytes: "
            "extended with zeros, records past the cut lost"
        )

    # --- lookups ---
    @property
    def first(self) -> MappedFile | None:
        files = self.files
        return files[0] if files else None

    @property
    def last(self) -> MappedFile | None:
        files = self.files
        return files[-1] if files else None

    @property
    def min_offset(self) -> int:
        first = self.first
        return first.file_from_offset if first is not None else 0

    @property
    def max_offset(self) -> int:
        """End of readable data (committed)."""
        last = self.last
        return last.file_from_offset + last.read_position if last is not None else 0

    @property
    def max_wrote_offset(self) -> int:
        last = self.last
        return last.file_from_offset + last.wrote_position if last is not None else 0

    def find_by_offset(self, offset: int, *, first_if_not_found: bool = False) -> MappedFile | None:
        files = self.files
        if not files:
            return None
        index = (offset - files[0].file_from_offset) // self.file_size
        if 0 <= index < len(files):
            return files[index]
        return files[0] if first_if_not_found else None

    def last_file(self, start_offset: int = 0, *, wait_s: float | None = None) -> MappedFile:
        """The segment to append to, creating the next one if the last is full (or none exists).

        With `wait_s` the creation runs on the allocation thread and the caller waits at most
        that long, once per segment; then (and on every later call until it is done) it raises
        SegmentNotReadyError, so an event loop never waits for a slow disk."""
        last = self.last
        if last is not None and not last.is_full:
            return last
        if last is None:
            create_from = start_offset - start_offset % self.file_size
        else:
            create_from = last.file_from_offset + self.file_size
        if wait_s is not None:
            self._wait_allocated(create_from, wait_s)
        mapped = self._take_or_create(create_from)
        with self._lock:
            self.files = [*self.files, mapped]
        if last is not None and self.page_grained:
            last.advise_reads()
        if self.preallocate_next:
            self._schedule(create_from + self.file_size)
        return mapped

    def prepare_tail(self) -> None:
        """After recovery, before appends: a page-grained queue regrains its last, unfilled segment
        (recovery read it through read-ahead's large folios); a queue warming ahead warms from
        where it ends on its next append."""
        last = self.last
        if self.page_grained and last is not None and not last.is_full:
            last.regrain_tail()
        if self.warm_windows and last is not None and not last.is_full:
            last.warm_at = last.wrote_position

    def warm_ahead(self, mapped: MappedFile) -> None:
        """An append reached `mapped.warm_at`: fault in the next window on the allocation thread,
        so that `limits.WARM_AHEAD_BYTES` past the write position are warm (called on the
        appending thread, under the put lock; returns at once)."""
        start, end = page_warming.next_window(
            mapped.wrote_position, mapped.warmed_to, mapped.file_size, limits.WARM_AHEAD_BYTES
        )
        mapped.warmed_to = max(mapped.warmed_to, end)
        mapped.warm_at = page_warming.warm_trigger(
            mapped.warmed_to, mapped.file_size, limits.WARM_AHEAD_BYTES, limits.WARM_STEP_BYTES
        )
        if end <= start or not self.warm_windows:
            return
        fd = os.dup(mapped.fd)  # the window's own: the segment may be closed before it runs
        try:
            future = self._executor().submit(self._populate, fd, start, end)
        except RuntimeError:  # shut down meanwhile
            os.close(fd)
            return
        future.add_done_callback(lambda done: os.close(fd) if done.cancelled() else None)

    def _populate(self, fd: int, start: int, end: int) -> None:
        try:
            page_warming.populate_write(fd, start, end)
        except OSError as error:
            if self.warm_windows:
                log.warning("%s: stopped faulting pages in ahead of the appends: %s", self.directory, error)
            self.warm_windows = False
        finally:
            os.close(fd)

    def prepare_next(self, start_offset: int = 0) -> None:
        """Start allocating the segment the next append will need (at start-up); `start_offset`
        is where an empty log will begin (0, or a replica's first offset)."""
        if not self.preallocate_next:
            return
        last = self.last
        if last is None:
            self._schedule(start_offset - start_offset % self.file_size)
        elif last.is_full:
            self._schedule(last.file_from_offset + self.file_size)

    def wait_prepared(self) -> None:
        """Block until preallocations in flight are done (before serving, so no request waits)."""
        for future in list(self._pending.values()):
            with contextlib.suppress(Exception):
                future.result()

    def _wait_allocated(self, offset: int, wait_s: float) -> None:
        """Return once segment `offset` is allocated (or failed: _take_or_create raises that);
        wait for it only when this call schedules it, else SegmentNotReadyError at once."""
        scheduling = offset not in self._pending
        future = self._schedule(offset)  # the one pending, when there is one
        try:
            future.exception(wait_s if scheduling else 0)
        except concurrent.futures.TimeoutError:
            raise SegmentNotReadyError(f"{self.directory}: segment {offset} is still being allocated") from None

    def _take_or_create(self, offset: int) -> MappedFile:
        future = self._pending.pop(offset, None)
        if future is not None:
            return future.result()
        return self._create(offset)

    def _create(self, offset: int) -> MappedFile:
        durability.make_directories(self.directory)
        buffer = self.pool.borrow() if self.pool is not None else None
        try:
            created = MappedFile.create(
                self.directory / offset_to_file_name(offset),
                self.file_size,
                warm=self.warm,
                write_buffer=buffer,
                warm_rate_bytes_per_s=self.warm_rate_bytes_per_s if self.files else 0,
                page_grained=self.page_grained,
                warm_window_bytes=limits.WARM_AHEAD_BYTES if self.warm_windows else 0,
            )
        except BaseException:
            if buffer is not None and self.pool is not None:
                self.pool.give_back(buffer)
            raise
        if self.warm_windows:
            created.warm_at = page_warming.warm_trigger(
                created.warmed_to, created.file_size, limits.WARM_AHEAD_BYTES, limits.WARM_STEP_BYTES
            )
        return created

    def _schedule(self, offset: int) -> concurrent.futures.Future[MappedFile]:
        pending = self._pending.get(offset)
        if pending is not None:
            return pending
        future = self._pending[offset] = self._executor().submit(self._create, offset)
        return future

    def _executor(self) -> concurrent.futures.Executor:
        """The allocation thread: the shared one, else this queue's own (started on first use)."""
        if self._shared_allocator is not None:
            return self._shared_allocator
        if self._allocator is None:
            self._allocator = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix="shoal-allocate", initializer=name_this_thread, initargs=("shoal-allocate",)
            )
        return self._allocator

    # --- commit and flush ---
    def commit(self, least_pages: int) -> bool:
        """Commit the segment holding `committed_where`; True when nothing was left to commit."""
        mapped = self.find_by_offset(self.committed_where, first_if_not_found=self.committed_where == 0)
        if mapped is None:
            return True
        where = mapped.file_from_offset + mapped.commit(least_pages)
        done = where == self.committed_where
        self.committed_where = where
        if mapped.committed_position >= self.file_size and self.pool is not None:
            buffer = mapped.release_write_buffer()
            if buffer is not None:
                self.pool.give_back(buffer)
        return done

    def flush(self, least_pages: int) -> bool:
        """Flush the segment holding `flushed_where`; True when nothing was left to flush."""
        mapped = self.find_by_offset(self.flushed_where, first_if_not_found=self.flushed_where == 0)
        if mapped is None:
            return True
        timestamp = mapped.last_store_timestamp  # before the flush: every record it stamps is covered
        where = mapped.file_from_offset + mapped.flush(least_pages)
        done = where == self.flushed_where
        if where != self.flushed_where and timestamp:
            self.flushed_store_timestamp = timestamp
        self.flushed_where = where
        return done

    # --- truncation and deletion ---
    def truncate_dirty_files(self, offset: int, *, tail_is_zeros: bool = False) -> int:
        """Keep data before `offset`, zero the rest of its segment, delete later segments.
        Returns the number of bytes dropped (zeroed or deleted). `tail_is_zeros`: the caller knows
        nothing was written past `offset` in its segment, which is then not read."""
        dropped = 0
        keep: list[MappedFile] = []
        for mapped in self.files:
            end = mapped.file_from_offset + self.file_size
            if end <= offset:
                keep.append(mapped)
            elif mapped.file_from_offset <= offset:
                dropped += mapped.truncate_to(offset - mapped.file_from_offset, tail_is_zeros=tail_is_zeros)
                keep.append(mapped)
            else:
                dropped += mapped.wrote_position
                mapped.destroy()
        with self._lock:
            self.files = keep
        self.flushed_where = min(self.flushed_where, offset)
        self.committed_where = min(self.committed_where, offset)
        return dropped

    def delete_last_file(self) -> None:
        """Delete the newest segment (ConsumeQueue truncation; RocketMQ's deleteLastMappedFile)."""
        with self._lock:
            files = self.files
            if not files:
                return
            last = files[-1]
            self.files = files[:-1]
        last.destroy()
        self.flushed_where = min(self.flushed_where, last.file_from_offset)
        self.committed_where = min(self.committed_where, last.file_from_offset)

    def delete_first_files(self, should_delete: Callable[[MappedFile], bool], count_max: int) -> list[MappedFile]:
        """Delete leading segments while `should_delete` holds, never the last, at most `count_max`."""
        deleted: list[MappedFile] = []
        files = self.files
        for mapped in files[:-1]:
            if len(deleted) >= count_max or not should_delete(mapped):
                break
            deleted.append(mapped)
        if not deleted:
            return deleted
        with self._lock:
            self.files = self.files[len(deleted) :]
        for mapped in deleted:
            mapped.destroy()
        return deleted

    def destroy(self) -> None:
        """Delete every segment and the directory (a ConsumeQueue of a removed topic)."""
        self.shutdown()
        files = self.files
        with self._lock:
            self.files = []
        for mapped in files:
            mapped.destroy()
        self.flushed_where = self.committed_where = 0
        with contextlib.suppress(OSError):
            durability.rmdir(self.directory)

    def shutdown(self) -> None:
        """Stop the allocator and delete preallocated segments nobody used (they hold nothing, and
        one that does not follow the last segment would look like a gap at the next load)."""
        if self._allocator is not None:
            self._allocator.shutdown(wait=True)
            self._allocator = None
        for future in self._pending.values():
            with contextlib.suppress(Exception):
                future.result().destroy()
        self._pending.clear()

    def close(self) -> None:
        self.shutdown()
        for mapped in self.files:
            mapped.close()
