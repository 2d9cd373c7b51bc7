"""Tests of shoal.store.mapped_file: one fixed-size, memory-mapped segment on a real file."""

from __future__ import annotations

import mmap
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal.formats.store_layout import offset_to_file_name
from shoal.store import limits
from shoal.store.errors import StoreCorruptionError
from shoal.store.mapped_file import MappedFile, data_extents, written_end, written_end_in_file
from tests.store.conftest import process_write_bytes

PAGE = limits.OS_PAGE_SIZE_BYTES
FILE_SIZE = 16 * PAGE


@pytest.fixture
def segment(tmp_path: Path) -> Iterator[MappedFile]:
    """A fresh 64 KiB segment starting at offset 0, closed after the test."""
    mapped = MappedFile.create(tmp_path / offset_to_file_name(0), FILE_SIZE, warm=False)
    yield mapped
    mapped.close()


@pytest.fixture
def buffered(tmp_path: Path) -> Iterator[MappedFile]:
    """A segment with a transient-pool write buffer: writes go to memory until committed."""
    mapped = MappedFile.create(
        tmp_path / offset_to_file_name(FILE_SIZE), FILE_SIZE, warm=False, write_buffer=bytearray(FILE_SIZE)
    )
    yield mapped
    mapped.close()


def append(mapped: MappedFile, data: bytes) -> None:
    """Write as the CommitLog does: into `target` at the write position, then move it."""
    at = mapped.wrote_position
    mapped.target[at : at + len(data)] = data
    mapped.wrote_position = at + len(data)


def file_bytes(mapped: MappedFile) -> bytes:
    """The file's contents read with plain I/O, not through the mapping."""
    return mapped.path.read_bytes()


# --- creation and opening ---


@pytest.mark.parametrize("warm", [False, True])
def test_created_segment_is_exactly_file_size_and_zeroed(tmp_path: Path, warm: bool) -> None:
    """create() leaves a full-size, all-zero file under its real name and no temporary file."""
    path = tmp_path / offset_to_file_name(3 * FILE_SIZE)
    mapped = MappedFile.create(path, FILE_SIZE, warm=warm)
    try:
        assert path.stat().st_size == FILE_SIZE
        assert path.read_bytes() == bytes(FILE_SIZE)
        assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
        assert mapped.file_from_offset == 3 * FILE_SIZE
        assert (mapped.wrote_position, mapped.committed_position, mapped.flushed_position) == (0, 0, 0)
        assert not mapped.is_full
    finally:
        mapped.close()


def test_failed_allocation_leaves_no_file_behind(tmp_path: Path) -> None:
    """posix_fallocate of 0 bytes fails (EINVAL): the OSError propagates and no .tmp or segment remains."""
    path = tmp_path / offset_to_file_name(0)
    with pytest.raises(OSError):
        MappedFile.create(path, 0, warm=False)
    assert list(tmp_path.iterdir()) == []


def test_existing_segment_opens_with_its_contents(tmp_path: Path, segment: MappedFile) -> None:
    """Bytes written through one mapping are seen by a second MappedFile on the same path."""
    append(segment, b"record")
    reopened = MappedFile(segment.path, FILE_SIZE)
    try:
        assert bytes(reopened.view[:6]) == b"record"
        assert reopened.wrote_position == 0
    finally:
        reopened.close()


@pytest.mark.parametrize("size", [0, FILE_SIZE - 1, FILE_SIZE + 1, 2 * FILE_SIZE])
def test_segment_of_the_wrong_size_is_corruption_naming_the_file(tmp_path: Path, size: int) -> None:
    """A segment whose length differs from the configured size raises StoreCorruptionError with its path."""
    path = tmp_path / offset_to_file_name(0)
    path.write_bytes(bytes(size))
    with pytest.raises(StoreCorruptionError) as raised:
        MappedFile(path, FILE_SIZE)
    assert str(path) in str(raised.value)
    assert str(size) in str(raised.value)


# --- positions, commit and flush without a write buffer ---


def test_written_bytes_are_readable_at_once_without_a_write_buffer(segment: MappedFile) -> None:
    """Without a pool buffer the read position is the write position; slice returns the bytes."""
    append(segment, b"hello world")
    assert segment.read_position == 11
    assert bytes(segment.slice(6, 5)) == b"world"
    assert file_bytes(segment)[:11] == b"hello world"


def test_commit_without_a_write_buffer_just_moves_committed(segment: MappedFile) -> None:
    """commit() with no buffer sets committed = wrote whatever least_pages says."""
    append(segment, b"x" * 100)
    assert segment.commit(least_pages=4) == 100
    assert segment.committed_position == 100


def test_slice_beyond_the_readable_end_is_refused(segment: MappedFile) -> None:
    """Reading past the read position trips the entry assertion."""
    append(segment, b"abc")
    with pytest.raises(AssertionError):
        segment.slice(0, 4)


def test_flush_waits_for_least_pages(segment: MappedFile) -> None:
    """3 dirty pages with least_pages=4 do not flush; a 4th page does."""
    append(segment, b"x" * (3 * PAGE))
    assert segment.flush(least_pages=4) == 0
    assert segment.flushed_position == 0
    append(segment, b"x" * PAGE)
    assert segment.flush(least_pages=4) == 4 * PAGE
    assert segment.flushed_position == 4 * PAGE


def test_least_pages_counts_page_boundaries_crossed(segment: MappedFile) -> None:
    """From 100 to PAGE+50 crosses one page boundary: least_pages=1 flushes, least_pages=2 does not."""
    append(segment, b"x" * 100)
    assert segment.flush(least_pages=0) == 100
    append(segment, b"y" * (PAGE - 50))
    assert segment.flush(least_pages=2) == 100
    assert segment.flush(least_pages=1) == PAGE + 50


def test_flush_with_zero_least_pages_flushes_any_dirty_byte(segment: MappedFile) -> None:
    """least_pages=0 (thorough flush) flushes one byte; nothing dirty leaves flushed unchanged."""
    append(segment, b"z")
    assert segment.flush(least_pages=0) == 1
    assert segment.flush(least_pages=0) == 1


def test_full_segment_flushes_regardless_of_least_pages(segment: MappedFile) -> None:
    """A full file is always flushable (isAbleToFlush returns true when full)."""
    append(segment, b"x" * 100)
    segment.wrote_position = FILE_SIZE
    assert segment.is_full
    assert segment.flush(least_pages=1_000) == FILE_SIZE


def test_set_positions_moves_all_three(segment: MappedFile) -> None:
    """Recovery sets wrote = committed = flushed; out-of-range positions trip the assertion."""
    segment.set_positions(500)
    assert (segment.wrote_position, segment.committed_position, segment.flushed_position) == (500, 500, 500)
    with pytest.raises(AssertionError):
        segment.set_positions(FILE_SIZE + 1)


# --- truncation ---


def test_truncate_to_zeroes_stale_bytes_and_moves_positions(segment: MappedFile) -> None:
    """Write 1000 bytes, truncate at 500: bytes 500.. are zero on disk, 0..499 untouched."""
    append(segment, bytes(range(256)) * 4)
    segment.flush(least_pages=0)
    zeroed = segment.truncate_to(500)
    assert zeroed >= 500
    on_disk = file_bytes(segment)
    assert on_disk[:500] == (bytes(range(256)) * 4)[:500]
    assert on_disk[500:] == bytes(FILE_SIZE - 500)
    assert (segment.wrote_position, segment.committed_position, segment.flushed_position) == (500, 500, 500)


def test_truncate_to_of_a_clean_tail_zeroes_nothing(segment: MappedFile) -> None:
    """Truncating where only zeros follow reports 0 bytes zeroed."""
    append(segment, b"abc")
    assert segment.truncate_to(3) == 0
    assert segment.wrote_position == 3


def test_truncated_bytes_stay_zero_after_reopening(tmp_path: Path, segment: MappedFile) -> None:
    """A second mapping opened after truncate_to sees no stale record bytes."""
    append(segment, b"\xff" * 2000)
    segment.truncate_to(10)
    reopened = MappedFile(segment.path, FILE_SIZE)
    try:
        assert bytes(reopened.view[:10]) == b"\xff" * 10
        assert bytes(reopened.view[10:2000]) == bytes(1990)
    finally:
        reopened.close()


# --- the transient-pool write buffer ---


def test_write_buffer_bytes_are_invisible_until_commit(buffered: MappedFile) -> None:
    """With a write buffer, appends land in memory: the file and read_position change only on commit."""
    append(buffered, b"buffered record")
    assert buffered.wrote_position == 15
    assert buffered.read_position == 0
    assert file_bytes(buffered)[:15] == bytes(15)
    assert buffered.commit(least_pages=0) == 15
    assert buffered.read_position == 15
    assert file_bytes(buffered)[:15] == b"buffered record"
    assert bytes(buffered.slice(0, 8)) == b"buffered"


def test_commit_waits_for_least_pages(buffered: MappedFile) -> None:
    """100 buffered bytes with commit least_pages=1 stay uncommitted; a full page commits."""
    append(buffered, b"a" * 100)
    assert buffered.commit(least_pages=1) == 0
    append(buffered, b"b" * PAGE)
    assert buffered.commit(least_pages=1) == PAGE + 100
    assert file_bytes(buffered)[: PAGE + 100] == b"a" * 100 + b"b" * PAGE


def test_commits_append_only_the_new_bytes(buffered: MappedFile) -> None:
    """Two commits write two ranges; nothing before the committed position is rewritten."""
    append(buffered, b"first")
    buffered.commit(least_pages=0)
    assert buffered.write_buffer is not None
    buffered.write_buffer[0:5] = b"XXXXX"  # a committed range changed in memory must not be re-copied
    append(buffered, b"second")
    buffered.commit(least_pages=0)
    assert file_bytes(buffered)[:11] == b"firstsecond"


def test_flush_with_a_write_buffer_stops_at_committed(buffered: MappedFile) -> None:
    """flush() makes durable only what was committed, never buffered-only bytes."""
    append(buffered, b"x" * 100)
    assert buffered.flush(least_pages=0) == 0
    buffered.commit(least_pages=0)
    append(buffered, b"y" * 100)
    assert buffered.flush(least_pages=0) == 100


def test_write_buffer_is_released_only_when_fully_committed(buffered: MappedFile) -> None:
    """release_write_buffer refuses while bytes are uncommitted, then hands the buffer back."""
    append(buffered, b"data")
    assert buffered.release_write_buffer() is None
    buffered.commit(least_pages=0)
    buffer = buffered.release_write_buffer()
    assert isinstance(buffer, bytearray)
    assert buffered.write_buffer is None
    assert buffered.read_position == buffered.wrote_position == 4
    append(buffered, b"more")
    assert file_bytes(buffered)[:8] == b"datamore"


def test_truncate_to_clears_the_write_buffer_tail(buffered: MappedFile) -> None:
    """Truncation zeroes the buffer past the position too, so a later commit cannot revive old bytes."""
    append(buffered, b"y" * 300)
    buffered.commit(least_pages=0)
    buffered.truncate_to(100)
    assert buffered.write_buffer is not None
    assert bytes(buffered.write_buffer[100:300]) == bytes(200)
    assert file_bytes(buffered)[100:300] == bytes(200)
    append(buffered, b"z")
    buffered.commit(least_pages=0)
    assert file_bytes(buffered)[:102] == b"y" * 100 + b"z" + b"\x00"


# --- closing and deleting ---


def test_close_is_idempotent(segment: MappedFile) -> None:
    """Closing twice is harmless; the file stays on disk."""
    segment.close()
    segment.close()
    assert not segment.available
    assert segment.path.exists()


def test_destroy_deletes_the_file(segment: MappedFile) -> None:
    """destroy() closes and unlinks; last_modified_ms then reads 0."""
    assert segment.last_modified_ms > 0
    segment.destroy()
    assert not segment.path.exists()
    assert segment.last_modified_ms == 0


def test_a_reader_view_survives_destroy(segment: MappedFile) -> None:
    """A slice taken before destroy() still reads the bytes (the mapping lives while referenced)."""
    append(segment, b"still here")
    view = segment.slice(0, 10)
    segment.destroy()
    assert bytes(view) == b"still here"
    view.release()


# --- page-cache grain (SYNC_FLUSH) ---

GRAIN_FILE_SIZE = 64 * 1024 * 1024
GRAIN_LEAD_BYTES = 16 * 1024 * 1024  # past where a populated mapping's read-ahead reaches 2 MiB folios
GRAIN_APPENDS = 32
GRAIN_WRITTEN_PER_SYNC_MAX = 2 * PAGE  # an append may straddle two pages


def _bytes_per_sync_after_small_appends(mapped: MappedFile) -> float:
    """Fill GRAIN_LEAD_BYTES in 64 KiB group commits, then the bytes written back per sync of a 1 KiB append."""
    chunk = b"\x01" * (64 * 1024)
    while mapped.wrote_position < GRAIN_LEAD_BYTES:
        append(mapped, chunk)
        mapped.flush(0)
    before = process_write_bytes()
    for _ in range(GRAIN_APPENDS):
        append(mapped, b"\x02" * 1024)
        mapped.flush(0)
    return (process_write_bytes() - before) / GRAIN_APPENDS


@pytest.mark.parametrize("warm", [False, True])
def test_a_page_grained_segment_syncs_only_the_pages_an_append_dirtied(tmp_path: Path, warm: bool) -> None:
    """SYNC_FLUSH's segments: 16 MiB in, a group commit after a 1 KiB append writes a page or two.
    A populated mapping on Linux 6.x ext4 caches the file in 2 MiB folios and wrote 2 MiB per sync."""
    path = tmp_path / offset_to_file_name(0)
    mapped = MappedFile.create(path, GRAIN_FILE_SIZE, warm=warm, page_grained=True)
    try:
        assert _bytes_per_sync_after_small_appends(mapped) <= GRAIN_WRITTEN_PER_SYNC_MAX
        assert file_bytes(mapped)[GRAIN_LEAD_BYTES : GRAIN_LEAD_BYTES + 1024] == b"\x02" * 1024
    finally:
        mapped.close()


def test_regrain_tail_makes_a_loaded_segment_page_grained_past_its_write_position(tmp_path: Path) -> None:
    """A segment loaded at start-up is mapped populated; regrain_tail (after recovery) remaps it so that
    appends from its write position on sync page by page, and the data before it reads back unchanged."""
    path = tmp_path / offset_to_file_name(0)
    MappedFile.create(path, GRAIN_FILE_SIZE, warm=False).close()
    loaded = MappedFile(path, GRAIN_FILE_SIZE)
    try:
        append(loaded, b"\x03" * 5000)
        loaded.flush(0)
        loaded.regrain_tail()
        assert bytes(loaded.slice(0, 5000)) == b"\x03" * 5000
        assert _bytes_per_sync_after_small_appends(loaded) <= GRAIN_WRITTEN_PER_SYNC_MAX
        loaded.advise_reads()  # full or not, normal read-ahead again is allowed
        assert bytes(loaded.slice(4096, 904)) == b"\x03" * 904
    finally:
        loaded.close()


def _resident_file_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1])
    raise AssertionError("no RssFile in /proc/self/status")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc/self/status")
def test_finding_the_written_end_of_a_big_segment_maps_none_of_its_zero_tail(tmp_path: Path) -> None:
    """Goal: recovery after a crash (truncate_to past the valid end, with the tail unknown) does not
    fault the segment's zero tail into the broker: a broker with 1 GiB segments held 1.1 GB of file
    pages after an abnormal restart, and its memory limit counts them. Method: a 256 MiB segment
    with 4 KiB written; truncate_to(100) must find the end without mapping the rest."""
    size = 256 * 1024 * 1024
    mapped = MappedFile.create(tmp_path / offset_to_file_name(0), size, warm=False)
    try:
        append(mapped, b"\x01" * 4096)
        mapped.flush(least_pages=0)
        before = _resident_file_kib()
        assert mapped.truncate_to(100) == 4096 - 100
        grown_mib = (_resident_file_kib() - before) / 1024
        assert grown_mib < 64, f"{grown_mib:.0f} MiB of the segment became resident"
        assert mapped.written_end() == 100
    finally:
        mapped.close()


@pytest.mark.parametrize("directory", ["tmp_path", "/dev/shm"])
@pytest.mark.parametrize("seed", range(12))
def test_the_written_end_skips_holes_and_finds_what_the_mapping_shows(
    directory: str, seed: int, tmp_path: Path
) -> None:
    """Goal: finding where a crashed process's bytes end reads only what may hold data, and still
    finds the last non-zero byte wherever it is: after a hole, inside a fallocated but unwritten
    range, in written zeros, or nowhere. Method: files of holes, fallocated ranges, written zeros
    and written bytes at random places (on ext4 here and on tmpfs), held to a scan of the mapping."""
    rng = random.Random(seed)
    root = tmp_path if directory == "tmp_path" else Path(directory)
    assert root.is_dir(), f"{root}: the tmpfs every Linux machine mounts is missing"
    path = root / f"shoal-written-end-{os.getpid()}-{seed}"
    size = 64 * 1024 * 1024
    try:
        with path.open("wb") as file:
            file.truncate(size)
        fd = os.open(path, os.O_RDWR)
        try:
            if rng.random() < 0.5:
                os.posix_fallocate(fd, 0, size)
            for _ in range(rng.randrange(0, 5)):
                at = rng.randrange(0, size - 4096)
                data = bytes(rng.randrange(1, 4096)) if rng.random() < 0.3 else rng.randbytes(rng.randrange(1, 4096))
                os.pwrite(fd, data, at)
            start = rng.choice([0, rng.randrange(0, size)])
            with mmap.mmap(fd, size) as mapping:
                view = memoryview(mapping)
                expected = written_end(view, start, size)
                view.release()
            assert written_end_in_file(fd, start, size) == expected
            extents = data_extents(fd, start, size)
            assert all(start <= begin < stop <= size for begin, stop in extents)
            assert extents == sorted(extents)
        finally:
            os.close(fd)
    finally:
        path.unlink(missing_ok=True)


def test_a_fallocated_segment_with_one_page_written_has_one_data_extent(tmp_path: Path) -> None:
    """Goal: the holes are really reported here (ext4 under ./build and tmp): a 64 MiB fallocated
    file with one page written is one small data extent, so recovery reads KiBs, not 64 MiB."""
    path = tmp_path / "segment"
    size = 64 * 1024 * 1024
    with path.open("wb") as file:
        file.truncate(size)
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, size)
        os.pwrite(fd, b"\x01" * 4096, 8192)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, size, os.POSIX_FADV_DONTNEED)
        extents = data_extents(fd, 0, size)
        assert sum(stop - begin for begin, stop in extents) <= 1024 * 1024, extents
        assert written_end_in_file(fd, 0, size) == 8192 + 4096
    finally:
        os.close(fd)
