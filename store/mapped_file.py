"""One fixed-size, memory-mapped segment file (RocketMQ's MappedFile).

A segment is named by the 20-digit global offset of its first byte and is always exactly
`file_size` bytes. It is created under a temporary name, allocated (`posix_fallocate`, or
zero-filled when warming whole segments), synced and only then renamed, so a crash never leaves a
short segment under a real name; warming in windows (`page_warming`) faults pages in afterwards.
Blocks are allocated up front because writing through a mapping into a hole of a full disk kills
the process with SIGBUS instead of raising an error.

Three positions, in bytes from the file start, only ever move forward except on truncation:

    flushed <= committed <= wrote <= file_size

`wrote` is where the next record goes; `committed` is what readers may see (equal to `wrote`
unless a transient-pool write buffer is in use, spec §5.2); `flushed` is what `fdatasync` made
durable. Flushing uses `os.fdatasync` (releases the GIL), never `mmap.flush` (holds it; see
performance.md §1.5). Every sync, create, rename and delete goes through `durability`.

A page-grained segment (the CommitLog under SYNC_FLUSH) keeps its unwritten part in 4 KiB page-cache
folios: Linux 6.x ext4 caches a file in large folios (up to 2 MiB when the mapping is read ahead)
and writes a dirty folio back whole, so every group commit after a 1 KiB append wrote
2 MiB (p50 0.2 ms fresh, 3 ms 50 MiB into the segment; performance.md, "SYNC_FLUSH after a load").
Faults under MADV_RANDOM allocate single pages, and a full segment returns to normal read-ahead.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import mmap
import os
import time
from pathlib import Path

from shoal.store import durability, limits, page_warming
from shoal.store.errors import StoreCorruptionError

log = logging.getLogger(__name__)
_ZERO_CHUNK = bytes(limits.RECOVERY_ZERO_CHUNK_BYTES)
_ZERO_VIEW = memoryview(_ZERO_CHUNK)
TEMP_SUFFIX = ".tmp"


class MappedFile:
    """A segment file mapped read/write, with wrote/committed/flushed positions."""

    def __init__(
        self, path: Path, file_size: int, *, write_buffer: bytearray | None = None, page_grained: bool = False
    ) -> None:
        """Open an existing, full-size segment (see `create` for new ones). The mapping is lazy:
        only the pages someone touches are read, so opening a store of hundreds of GiB reads just
        what recovery scans (MAP_POPULATE read every segment at open, issue 25; appends into lazy
        pages measured no slower in bench/store_append.py). `page_grained`: map it under
        MADV_RANDOM, for a new segment whose pages nothing has cached yet."""
        self.path = path
        self.file_size = file_size
        self.file_from_offset = int(path.name)
        actual = path.stat().st_size
        if actual != file_size:
            raise StoreCorruptionError(
                f"{path}: file is {actual} bytes but segments here are {file_size} bytes. If the segment "
                "size setting changed (mappedFileSizeCommitLog, mappedFileSizeConsumeQueue), set it back; "
                "else this segment is damaged and only the newest one can be repaired at start: restore it "
                "from a copy, or move it and every later segment out of the directory to keep the messages "
                "before it (`shoal store verify` then lists what is missing)"
            )
        self.fd = os.open(path, os.O_RDWR)
        try:
            self.mm = _map(self.fd, file_size, page_grained_from=0 if page_grained else None)
        except BaseException:
            os.close(self.fd)
            raise
        self.view = memoryview(self.mm)
        self.write_buffer = write_buffer
        self.target: bytearray | memoryview = write_buffer if write_buffer is not None else self.view
        self.wrote_position = 0
        self.committed_position = 0
        self.flushed_position = 0
        self.last_store_timestamp = 0
        self.available = True
        self.warmed_to = 0
        """Pages before this were faulted in ahead of the appends (or asked to be)."""
        self.warm_at = page_warming.NOT_WARMING
        """When `wrote_position` reaches this, the queue warms the next window (`warm_ahead`)."""

    @classmethod
    def create(
        cls,
        path: Path,
        file_size: int,
        *,
        warm: bool,
        write_buffer: bytearray | None = None,
        warm_rate_bytes_per_s: int = 0,
        page_grained: bool = False,
        warm_window_bytes: int = 0,
    ) -> MappedFile:
        """Allocate a new segment under a temporary name, sync it, then rename it into place.

        `warm` with a `warm_window_bytes`: fault in only the first window of pages (the queue
        warms the rest ahead of the appends, `page_warming`); without one, zero-fill the whole
        segment before it is renamed into place."""
        temp = path.with_name(path.name + TEMP_SUFFIX)
        fd = durability.create_file(temp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        windowed = warm and warm_window_bytes > 0
        try:
            os.posix_fallocate(fd, 0, file_size)  # ENOSPC now, not half-way through any zeros
            if warm and not windowed:
                if page_grained:  # zeros written through a MADV_RANDOM mapping are cached page by page
                    with _map(fd, file_size, page_grained_from=0) as warming, memoryview(warming) as view:
                        _zero_fill(fd, 0, file_size, warm_rate_bytes_per_s, view)
                else:
                    _zero_fill(fd, 0, file_size, warm_rate_bytes_per_s)
            durability.fdatasync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                durability.unlink(temp)
            raise
        os.close(fd)
        durability.replace(temp, path)
        durability.fsync_directory(path.parent)
        created = cls(path, file_size, write_buffer=write_buffer, page_grained=page_grained)
        if windowed:
            window_end = min(file_size, warm_window_bytes)
            try:
                page_warming.populate_write(created.fd, 0, window_end)
            except OSError as error:
                log.warning("%s: could not fault in its first pages ahead of the appends: %s", path, error)
            created.warmed_to = window_end
        return created

    # --- positions ---
    @property
    def read_position(self) -> int:
        """How far readers may read: committed when a write buffer is in use, else wrote."""
        return self.committed_position if self.write_buffer is not None else self.wrote_position

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    @property
    def last_modified_ms(self) -> int:
        try:
            return self.path.stat().st_mtime_ns // 1_000_000
        except FileNotFoundError:
            return 0

    def set_positions(self, position: int) -> None:
        """Recovery and loading: everything before `position` is data, already durable."""
        assert 0 <= position <= self.file_size, (position, self.file_size)
        self.wrote_position = position
        self.committed_position = position
        self.flushed_position = position

    # --- commit and flush ---
    def commit(self, least_pages: int) -> int:
        """Copy the write buffer's new bytes into the file (transient-pool mode); returns committed."""
        if self.write_buffer is None:
            self.committed_position = self.wrote_position
            return self.committed_position
        wrote = self.wrote_position
        committed = self.committed_position
        if wrote <= committed or not self._enough_pages(committed, wrote, least_pages):
            return committed
        with memoryview(self.write_buffer) as buffer:
            written = committed
            while written < wrote:
                written += os.pwrite(self.fd, buffer[written:wrote], written)
        self.committed_position = wrote
        return wrote

    def flush(self, least_pages: int) -> int:
        """fdatasync if at least `least_pages` pages are dirty (or the file is full); returns flushed."""
        target = self.read_position
        flushed = self.flushed_position
        if target <= flushed or not self._enough_pages(flushed, target, least_pages):
            return flushed
        durability.fdatasync(self.fd)
        self.flushed_position = target
        return target

    def _enough_pages(self, start: int, end: int, least_pages: int) -> bool:
        if self.is_full or least_pages <= 0:
            return True
        page = limits.OS_PAGE_SIZE_BYTES
        return end // page - start // page >= least_pages

    def release_write_buffer(self) -> bytearray | None:
        """Hand the write buffer back once everything is committed; reads then go to the file."""
        buffer = self.write_buffer
        if buffer is None or self.committed_position < self.wrote_position:
            return None
        self.write_buffer = None
        self.target = self.view
        return buffer

    # --- page cache grain ---
    def regrain_tail(self) -> None:
        """Make the unwritten rest of a loaded segment page-grained before appends resume: unmap it,
        drop the (clean, after recovery) cached folios past the write position, and map it again with
        MADV_RANDOM there. Only before readers hold views (start-up); a held view leaves it as it is."""
        start = self.wrote_position - self.wrote_position % limits.OS_PAGE_SIZE_BYTES
        self.view.release()
        try:
            self.mm.close()
        except BufferError:
            log.warning("%s: a reader holds the mapping; its tail keeps large page-cache folios", self.path)
        else:
            os.posix_fadvise(self.fd, start, 0, os.POSIX_FADV_DONTNEED)
            self.mm = _map(self.fd, self.file_size, page_grained_from=start)
        self.view = memoryview(self.mm)
        if self.write_buffer is None:
            self.target = self.view

    def advise_reads(self) -> None:
        """A page-grained segment that is full: read-ahead again for readers that fall behind."""
        if self.available:
            self.mm.madvise(mmap.MADV_NORMAL)

    # --- reads ---
    def slice(self, position: int, size: int) -> memoryview:
        """A zero-copy view of committed bytes (keeps the mapping alive while referenced)."""
        end = position + size
        assert 0 <= position <= end <= self.read_position, (position, size, self.read_position)
        return self.view[position:end]

    # --- truncation and deletion ---
    def truncate_to(self, position: int, *, tail_is_zeros: bool = False) -> int:
        """Drop everything from `position` on: move the positions back and zero the stale bytes
        (RocketMQ leaves them, spec gotcha 7; zeroing keeps a later crash from reviving them).
        Returns how many bytes were zeroed. `tail_is_zeros`: the caller knows there are none
        (after a clean exit), so the tail is not read."""
        assert 0 <= position <= self.file_size
        zeroed = 0
        at = position
        chunk_size = len(_ZERO_CHUNK)
        # zeros past `stop` stay untouched (no dirty pages)
        stop = position if tail_is_zeros else self.written_end(position)
        while at < stop:
            end = min(at + chunk_size, stop)
            if not is_zeros(self.view, at, end):
                self.view[at:end] = _ZERO_VIEW[: end - at]
                zeroed += end - at
            at = end
        if zeroed:
            durability.fdatasync(self.fd)
        self.set_positions(position)
        if self.write_buffer is not None:
            self.write_buffer[position:] = bytes(len(self.write_buffer) - position)
        return zeroed

    def written_end(self, start: int = 0) -> int:
        """Where the non-zero bytes from `start` on end (`start` when none): how far a process wrote."""
        return written_end_in_file(self.fd, start, self.file_size)

    def close(self) -> None:
        """Unmap and close; a view still held by a reader keeps the mapping until it is dropped."""
        if not self.available:
            return
        self.available = False
        self.view.release()
        with contextlib.suppress(BufferError):
            self.mm.close()
        os.close(self.fd)

    def destroy(self) -> None:
        """Close and delete the file (readers holding views keep reading the unlinked pages)."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            durability.unlink(self.path)

    def __repr__(self) -> str:
        return (
            f"MappedFile({self.path.name}, wrote={self.wrote_position}, "
            f"committed={self.committed_position}, flushed={self.flushed_position})"
        )


def _map(fd: int, file_size: int, *, page_grained_from: int | None) -> mmap.mmap:
    """Map a segment read/write, lazily (pages faulted in as they are touched, with the kernel's
    read-ahead and large folios), or page-grained from a page-aligned position on (MADV_RANDOM:
    single-page faults)."""
    if page_grained_from is None:
        return mmap.mmap(fd, file_size, flags=mmap.MAP_SHARED)
    mapped = mmap.mmap(fd, file_size, flags=mmap.MAP_SHARED)
    if page_grained_from < file_size:
        mapped.madvise(mmap.MADV_RANDOM, page_grained_from, file_size - page_grained_from)
    return mapped


def _zero_fill(fd: int, start: int, end: int, rate_bytes_per_s: int = 0, through: memoryview | None = None) -> None:
    """Write zeros over [start, end), with `pwrite` or `through` a mapping of the file. With a rate,
    pace the writes and sync as they go, so that warming the next segment in the background never
    floods the disk the group commits use."""
    at = start
    chunk = len(_ZERO_CHUNK)
    began = time.monotonic()
    synced = start
    while at < end:
        size = min(chunk, end - at)
        if through is None:
            at += os.pwrite(fd, _ZERO_VIEW[:size], at)  # a view: no 1 MiB copy under the GIL
        else:
            through[at : at + size] = _ZERO_VIEW[:size]
            at += size
        if rate_bytes_per_s > 0:
            if at - synced >= limits.WARM_SYNC_STEP_BYTES:
                durability.fdatasync(fd)
                synced = at
            ahead_s = (at - start) / rate_bytes_per_s - (time.monotonic() - began)
            if ahead_s > 0:
                time.sleep(ahead_s)


def is_zeros(view: memoryview, start: int, end: int) -> bool:
    """Whether view[start:end] is all zero bytes. Compared a chunk at a time as `bytes` (a copy and a
    memcmp, ~0.2 ms per MiB): comparing the memoryview itself goes byte by byte (~6 ms per MiB)."""
    chunk = len(_ZERO_CHUNK)
    at = start
    while at < end:
        stop = min(at + chunk, end)
        if view[at:stop].tobytes() != _zeros(stop - at):
            return False
        at = stop
    return True


def written_end_in_file(fd: int, start: int, end: int) -> int:
    """`written_end` of the file's bytes [start, end), read with pread rather than through the
    mapping, each piece's page cache dropped once read: scanning the zero tail of a 1 GiB segment
    must not leave 1 GiB of it resident in the broker (its memory limit counts mapped file pages).
    Holes the file system reports (`data_extents`) read as zeros and are not read at all."""
    chunk = len(_ZERO_CHUNK)
    for data_start, data_end in reversed(data_extents(fd, start, end)):
        stop = data_end
        while stop > data_start:
            begin = max(data_start, stop - chunk)
            piece = os.pread(fd, stop - begin, begin)
            if len(piece) < stop - begin:  # past the file's end: the rest reads as zeros
                piece += bytes(stop - begin - len(piece))
            if piece != _zeros(stop - begin):
                return begin + len(piece.rstrip(b"\x00"))
            os.posix_fadvise(fd, begin, stop - begin, os.POSIX_FADV_DONTNEED)
            stop = begin
    return start


def data_extents(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """The ranges of [start, end) that may hold data, in order: everything but the holes the file
    system reports through SEEK_DATA / SEEK_HOLE. A fallocated segment's never-written extents
    (with no page in the page cache) are holes on ext4 and XFS, so a crashed broker's recovery
    skips the untouched part of its last segment instead of reading up to a GiB of zeros. Where
    the file system cannot tell, the whole range (it then reads as now, only slower)."""
    extents: list[tuple[int, int]] = []
    at = start
    while at < end:
        try:
            data = os.lseek(fd, at, os.SEEK_DATA)
        except OSError as error:
            if error.errno == errno.ENXIO:  # no data from `at` to the end of the file
                break
            return [(start, end)] if start < end else []
        if data >= end:
            break
        hole = os.lseek(fd, data, os.SEEK_HOLE)
        extents.append((data, min(hole, end)))
        at = hole
    return extents


def written_end(view: memoryview, start: int, end: int) -> int:
    """Where the non-zero bytes of view[start:end] end (`start` when all are zero), found from the end."""
    chunk = len(_ZERO_CHUNK)
    stop = end
    while stop > start:
        begin = max(start, stop - chunk)
        piece = view[begin:stop].tobytes()
        if piece != _zeros(stop - begin):
            return begin + len(piece.rstrip(b"\x00"))
        stop = begin
    return start


def _zeros(size: int) -> bytes:
    """`size` zero bytes as `bytes` (a memoryview on either side would make `==` slow)."""
    return _ZERO_CHUNK if size == len(_ZERO_CHUNK) else bytes(size)
