"""Tests of shoal.store.mapped_file_queue (and the transient store pool it borrows from)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shoal.formats.store_layout import offset_to_file_name
from shoal.store.errors import StoreCorruptionError
from shoal.store.mapped_file import MappedFile
from shoal.store.mapped_file_queue import MappedFileQueue
from shoal.store.transient_store_pool import TransientStorePool

FILE_SIZE = 64 * 1024


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "commitlog"


@pytest.fixture
def queue(directory: Path) -> Iterator[MappedFileQueue]:
    """An empty queue of 64 KiB segments, closed after the test."""
    opened = MappedFileQueue(directory, FILE_SIZE)
    yield opened
    opened.close()


def fill(mapped: MappedFile, data: bytes = b"", *, full: bool = True) -> None:
    """Write `data` at the write position; with `full`, mark the rest of the segment as written."""
    at = mapped.wrote_position
    mapped.target[at : at + len(data)] = data
    mapped.wrote_position = FILE_SIZE if full else at + len(data)


def roll(queue: MappedFileQueue, count: int) -> list[MappedFile]:
    """Create `count` full segments, each starting with its own index byte."""
    files = []
    for index in range(count):
        mapped = queue.last_file()
        fill(mapped, bytes([index + 1]) * 16)
        files.append(mapped)
    return files


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def make_segments(directory: Path, offsets: list[int], size: int = FILE_SIZE) -> None:
    """Segments written with plain I/O, as another process (or Java) left them."""
    directory.mkdir(parents=True, exist_ok=True)
    for offset in offsets:
        (directory / offset_to_file_name(offset)).write_bytes(bytes([offset // FILE_SIZE + 1]) + bytes(size - 1))


# --- rolling and lookups ---


def test_first_segment_is_created_at_offset_zero(queue: MappedFileQueue, directory: Path) -> None:
    """last_file() on an empty queue creates 00000000000000000000, full size."""
    mapped = queue.last_file()
    assert mapped.file_from_offset == 0
    assert names(directory) == [offset_to_file_name(0)]
    assert (directory / offset_to_file_name(0)).stat().st_size == FILE_SIZE


def test_first_segment_starts_at_the_segment_holding_the_start_offset(queue: MappedFileQueue) -> None:
    """A queue that starts at offset 100000 begins with the segment at 65536 (aligned down)."""
    assert queue.last_file(start_offset=100_000).file_from_offset == FILE_SIZE


def test_last_file_is_reused_until_full(queue: MappedFileQueue) -> None:
    """A segment with room is returned again; a full one rolls to the next."""
    first = queue.last_file()
    fill(first, b"abc", full=False)
    assert queue.last_file() is first
    fill(first)
    second = queue.last_file()
    assert second is not first
    assert second.file_from_offset == FILE_SIZE


def test_segments_roll_with_consecutive_names(queue: MappedFileQueue, directory: Path) -> None:
    """Three full segments are named 0, 65536, 131072 and the queue's offsets follow."""
    roll(queue, 3)
    assert names(directory) == [offset_to_file_name(i * FILE_SIZE) for i in range(3)]
    assert queue.min_offset == 0
    assert queue.max_offset == 3 * FILE_SIZE
    assert queue.max_wrote_offset == 3 * FILE_SIZE


def test_offsets_of_an_empty_queue_are_zero(queue: MappedFileQueue) -> None:
    """No segment: min, max and find_by_offset give 0, 0 and None."""
    assert (queue.min_offset, queue.max_offset, queue.max_wrote_offset) == (0, 0, 0)
    assert queue.first is None
    assert queue.last is None
    assert queue.find_by_offset(0) is None
    assert queue.find_by_offset(0, first_if_not_found=True) is None


def test_find_by_offset_returns_the_owning_segment(queue: MappedFileQueue) -> None:
    """Every offset maps to the segment P - P % size; outside the range gives None."""
    files = roll(queue, 3)
    for offset in (0, 1, FILE_SIZE - 1, FILE_SIZE, 2 * FILE_SIZE + 7, 3 * FILE_SIZE - 1):
        assert queue.find_by_offset(offset) is files[offset // FILE_SIZE]
    assert queue.find_by_offset(3 * FILE_SIZE) is None
    assert queue.find_by_offset(-1) is None
    assert queue.find_by_offset(10 * FILE_SIZE, first_if_not_found=True) is files[0]


def test_find_by_offset_counts_from_the_first_remaining_segment(queue: MappedFileQueue) -> None:
    """After the head segment is deleted, offsets in it are not found and later ones still are."""
    files = roll(queue, 3)
    queue.delete_first_files(lambda mapped: True, count_max=1)
    assert queue.find_by_offset(10) is None
    assert queue.find_by_offset(FILE_SIZE + 10) is files[1]
    assert queue.min_offset == FILE_SIZE


# --- loading ---


def test_load_opens_segments_in_order_as_full(directory: Path) -> None:
    """Existing segments load in name order with every position at the file size."""
    make_segments(directory, [2 * FILE_SIZE, 0, FILE_SIZE])
    loaded = MappedFileQueue(directory, FILE_SIZE)
    try:
        assert loaded.load() == []
        assert [m.file_from_offset for m in loaded.files] == [0, FILE_SIZE, 2 * FILE_SIZE]
        assert all(m.wrote_position == m.committed_position == m.flushed_position == FILE_SIZE for m in loaded.files)
        assert loaded.max_offset == 3 * FILE_SIZE
        assert bytes(loaded.files[1].view[:1]) == b"\x02"
    finally:
        loaded.close()


def test_load_of_a_missing_directory_is_empty(tmp_path: Path) -> None:
    """A store without a commitlog directory loads nothing and creates nothing."""
    loaded = MappedFileQueue(tmp_path / "absent", FILE_SIZE)
    assert loaded.load() == []
    assert loaded.files == []
    assert not (tmp_path / "absent").exists()


def test_load_ignores_files_that_are_not_segments(directory: Path) -> None:
    """Only 20-digit names are segments; other files are left alone."""
    make_segments(directory, [0])
    (directory / "README").write_text("not a segment")
    loaded = MappedFileQueue(directory, FILE_SIZE)
    try:
        loaded.load()
        assert len(loaded.files) == 1
        assert (directory / "README").exists()
    finally:
        loaded.close()


def test_load_with_a_missing_segment_is_corruption(directory: Path) -> None:
    """Segments 0 and 131072 without 65536 between them raise StoreCorruptionError naming the later one."""
    make_segments(directory, [0, 2 * FILE_SIZE])
    loaded = MappedFileQueue(directory, FILE_SIZE)
    with pytest.raises(StoreCorruptionError, match="missing") as raised:
        loaded.load()
    assert offset_to_file_name(2 * FILE_SIZE) in str(raised.value)
    assert loaded.files == []


def test_load_with_a_short_segment_before_the_newest_is_corruption(directory: Path) -> None:
    """A segment one byte short, with a later one after it, raises StoreCorruptionError naming it."""
    make_segments(directory, [0])
    make_segments(directory, [FILE_SIZE], size=FILE_SIZE - 1)
    make_segments(directory, [2 * FILE_SIZE])
    with pytest.raises(StoreCorruptionError) as raised:
        MappedFileQueue(directory, FILE_SIZE).load()
    assert offset_to_file_name(FILE_SIZE) in str(raised.value)


def test_load_extends_a_short_newest_segment_and_notes_it(directory: Path) -> None:
    """The newest segment one byte short is extended to full size, its bytes kept, and noted as cut."""
    make_segments(directory, [0])
    make_segments(directory, [FILE_SIZE], size=FILE_SIZE - 1)
    newest = directory / offset_to_file_name(FILE_SIZE)
    before = newest.read_bytes()
    loaded = MappedFileQueue(directory, FILE_SIZE)
    try:
        notes = loaded.load()
        assert newest.stat().st_size == FILE_SIZE
        assert newest.read_bytes()[: FILE_SIZE - 1] == before
        assert loaded.cut_segments == [note for note in notes if "was cut to" in note]
        assert len(loaded.cut_segments) == 1 and newest.name in loaded.cut_segments[0]
    finally:
        loaded.close()


def test_load_removes_leftover_temporary_files(directory: Path) -> None:
    """A .tmp left by an interrupted allocation is deleted and reported in the notes."""
    make_segments(directory, [0])
    leftover = directory / (offset_to_file_name(FILE_SIZE) + ".tmp")
    leftover.write_bytes(bytes(100))
    loaded = MappedFileQueue(directory, FILE_SIZE)
    try:
        notes = loaded.load()
        assert not leftover.exists()
        assert len(notes) == 1
        assert leftover.name in notes[0]
        assert [m.file_from_offset for m in loaded.files] == [0]
    finally:
        loaded.close()


# --- truncation and deletion ---


def test_truncate_dirty_files_cuts_inside_a_segment_and_deletes_later_ones(
    queue: MappedFileQueue, directory: Path
) -> None:
    """Truncate at 65536+100: segment 1 keeps 100 bytes (rest zeroed), segment 2 is deleted."""
    files = roll(queue, 3)
    fill(files[1], b"", full=True)
    files[1].view[:FILE_SIZE] = b"\x07" * FILE_SIZE
    queue.flushed_where = queue.committed_where = 3 * FILE_SIZE
    dropped = queue.truncate_dirty_files(FILE_SIZE + 100)
    assert dropped >= FILE_SIZE
    assert names(directory) == [offset_to_file_name(0), offset_to_file_name(FILE_SIZE)]
    assert [m.file_from_offset for m in queue.files] == [0, FILE_SIZE]
    assert files[1].wrote_position == 100
    on_disk = (directory / offset_to_file_name(FILE_SIZE)).read_bytes()
    assert on_disk == b"\x07" * 100 + bytes(FILE_SIZE - 100)
    assert queue.max_offset == FILE_SIZE + 100
    assert queue.flushed_where == queue.committed_where == FILE_SIZE + 100


def test_truncate_dirty_files_at_a_segment_start_keeps_that_segment_empty(queue: MappedFileQueue) -> None:
    """Like Java: truncating exactly at segment 1's start keeps it with position 0, deletes segment 2."""
    files = roll(queue, 3)
    queue.truncate_dirty_files(FILE_SIZE)
    assert queue.files == files[:2]
    assert files[0].wrote_position == FILE_SIZE
    assert files[1].wrote_position == 0
    assert bytes(files[1].view[:16]) == bytes(16)


def test_truncate_dirty_files_at_zero_empties_the_first_segment(queue: MappedFileQueue, directory: Path) -> None:
    """Truncating at 0 leaves only segment 0, empty and zeroed."""
    roll(queue, 2)
    queue.truncate_dirty_files(0)
    assert names(directory) == [offset_to_file_name(0)]
    assert queue.max_offset == 0


def test_delete_last_file_removes_the_newest_segment(queue: MappedFileQueue, directory: Path) -> None:
    """deleteLastMappedFile: the newest segment leaves the list and the disk; offsets are clamped."""
    files = roll(queue, 3)
    queue.flushed_where = queue.committed_where = 3 * FILE_SIZE
    queue.delete_last_file()
    assert queue.files == files[:2]
    assert names(directory) == [offset_to_file_name(0), offset_to_file_name(FILE_SIZE)]
    assert queue.flushed_where == queue.committed_where == 2 * FILE_SIZE
    queue.delete_last_file()
    queue.delete_last_file()
    assert queue.files == []
    queue.delete_last_file()  # nothing left: a no-op
    assert names(directory) == []


def test_delete_first_files_never_deletes_the_last(queue: MappedFileQueue, directory: Path) -> None:
    """Even when every segment qualifies, the newest stays."""
    files = roll(queue, 3)
    deleted = queue.delete_first_files(lambda mapped: True, count_max=10)
    assert deleted == files[:2]
    assert queue.files == [files[2]]
    assert names(directory) == [offset_to_file_name(2 * FILE_SIZE)]


def test_delete_first_files_honours_count_max(queue: MappedFileQueue) -> None:
    """count_max=1 deletes just the oldest segment."""
    files = roll(queue, 3)
    assert queue.delete_first_files(lambda mapped: True, count_max=1) == files[:1]
    assert queue.files == files[1:]


def test_delete_first_files_stops_at_the_first_segment_to_keep(queue: MappedFileQueue) -> None:
    """Deletion is from the head only: a kept segment stops it even if later ones qualify."""
    files = roll(queue, 4)
    deleted = queue.delete_first_files(lambda mapped: mapped.file_from_offset != FILE_SIZE, count_max=10)
    assert deleted == files[:1]
    assert queue.files == files[1:]


def test_destroy_deletes_every_segment_and_the_directory(queue: MappedFileQueue, directory: Path) -> None:
    """destroy() (a removed topic's queue) leaves nothing behind."""
    roll(queue, 2)
    queue.destroy()
    assert not directory.exists()
    assert queue.files == []


# --- commit and flush over segments ---


def test_flush_advances_flushed_where_and_reports_progress(queue: MappedFileQueue) -> None:
    """flush(0) moves flushed_where to the written end (False: work was done), then returns True."""
    fill(queue.last_file(), b"x" * 100, full=False)
    assert queue.flush(0) is False
    assert queue.flushed_where == 100
    assert queue.flush(0) is True


def test_flush_walks_segment_by_segment(queue: MappedFileQueue) -> None:
    """Two full segments then a partial one: three flushes reach the end."""
    roll(queue, 2)
    fill(queue.last_file(), b"y" * 10, full=False)
    queue.flush(0)
    assert queue.flushed_where == FILE_SIZE
    queue.flush(0)
    assert queue.flushed_where == 2 * FILE_SIZE
    queue.flush(0)
    assert queue.flushed_where == 2 * FILE_SIZE + 10


def test_flush_and_commit_at_the_end_of_a_full_last_segment_stay_put(queue: MappedFileQueue) -> None:
    """Two full segments, everything flushed: more flush/commit calls keep the offsets at the end."""
    roll(queue, 2)
    for _ in range(3):
        queue.flush(0)
        queue.commit(0)
    assert queue.flushed_where == queue.committed_where == 2 * FILE_SIZE
    assert queue.flush(0) is True
    assert queue.commit(0) is True
    assert queue.flushed_where == queue.committed_where == 2 * FILE_SIZE


def test_commit_with_a_pool_makes_bytes_visible_and_returns_the_buffer(directory: Path) -> None:
    """With a transient pool, bytes are readable after commit; a full, committed segment returns its buffer."""
    pool = TransientStorePool(2, FILE_SIZE)
    pooled = MappedFileQueue(directory, FILE_SIZE, pool=pool)
    try:
        first = pooled.last_file()
        assert pool.available_count == 1
        fill(first, b"hello", full=False)
        assert pooled.max_offset == 0
        assert pooled.max_wrote_offset == 5
        pooled.commit(0)
        assert pooled.max_offset == 5
        assert (directory / offset_to_file_name(0)).read_bytes()[:5] == b"hello"
        fill(first, b"", full=True)
        pooled.commit(0)
        assert pooled.committed_where == FILE_SIZE
        assert first.write_buffer is None
        assert pool.available_count == 2
    finally:
        pooled.close()


# --- preallocation of the next segment ---


def wait_for_segment(path: Path, wait_until: Callable[..., None]) -> None:
    wait_until(lambda: path.exists() and path.stat().st_size == FILE_SIZE, timeout_s=10.0)


def test_next_segment_is_preallocated_in_the_background(directory: Path, wait_until: Callable[..., None]) -> None:
    """With preallocate_next, creating segment 0 also creates segment 1 (full size, no .tmp left);
    an unused preallocated segment is deleted at shutdown."""
    queue = MappedFileQueue(directory, FILE_SIZE, preallocate_next=True)
    try:
        first = queue.last_file()
        next_path = directory / offset_to_file_name(FILE_SIZE)
        wait_for_segment(next_path, wait_until)
        assert names(directory) == [offset_to_file_name(0), offset_to_file_name(FILE_SIZE)]
        queue.shutdown()  # waits for the allocator, then drops the unused segment
        assert names(directory) == [offset_to_file_name(0)]
        assert queue.files == [first]
        assert queue.max_offset == 0
    finally:
        queue.close()


def test_preallocated_segment_is_used_when_the_last_fills(directory: Path, wait_until: Callable[..., None]) -> None:
    """Filling segment 0 rolls to the preallocated segment 1 and schedules segment 2."""
    queue = MappedFileQueue(directory, FILE_SIZE, preallocate_next=True)
    try:
        first = queue.last_file()
        next_path = directory / offset_to_file_name(FILE_SIZE)
        wait_for_segment(next_path, wait_until)
        inode = next_path.stat().st_ino
        fill(first)
        second = queue.last_file()
        assert second.file_from_offset == FILE_SIZE
        assert second.path.stat().st_ino == inode
        wait_for_segment(directory / offset_to_file_name(2 * FILE_SIZE), wait_until)
    finally:
        queue.close()


def test_prepare_next_allocates_the_segment_after_a_full_last_one(
    directory: Path, wait_until: Callable[..., None]
) -> None:
    """After loading a full last segment, prepare_next() allocates the following one."""
    make_segments(directory, [0])
    queue = MappedFileQueue(directory, FILE_SIZE, preallocate_next=True)
    try:
        queue.load()
        queue.prepare_next()
        wait_for_segment(directory / offset_to_file_name(FILE_SIZE), wait_until)
        assert queue.last_file().file_from_offset == FILE_SIZE
    finally:
        queue.close()


def test_prepare_next_does_nothing_without_preallocation(queue: MappedFileQueue, directory: Path) -> None:
    """A queue built without preallocate_next never allocates ahead."""
    queue.prepare_next()
    queue.shutdown()  # would wait for an allocation in flight
    assert not directory.exists()


def test_prepare_next_on_an_empty_queue_leaves_no_stray_segment(
    directory: Path, wait_until: Callable[..., None]
) -> None:
    """prepare_next(), then the first segment at 3*size: the directory must reload cleanly."""
    queue = MappedFileQueue(directory, FILE_SIZE, preallocate_next=True)
    queue.prepare_next()
    queue.last_file(start_offset=3 * FILE_SIZE)
    queue.close()
    reloaded = MappedFileQueue(directory, FILE_SIZE)
    try:
        reloaded.load()
        assert [m.file_from_offset for m in reloaded.files] == [3 * FILE_SIZE]
    finally:
        reloaded.close()


# --- the transient store pool ---


def test_pool_lends_each_buffer_once_and_zeroes_returned_ones() -> None:
    """Borrow both buffers, the third borrow gets None; a returned buffer comes back zeroed."""
    pool = TransientStorePool(2, 1024)
    first, second = pool.borrow(), pool.borrow()
    assert first is not None
    assert second is not None
    assert pool.borrow() is None
    assert pool.available_count == 0
    first[:4] = b"junk"
    pool.give_back(first)
    assert pool.available_count == 1
    again = pool.borrow()
    assert again is first
    assert bytes(again) == bytes(1024)


def test_pool_refuses_foreign_or_extra_buffers() -> None:
    """A buffer of another size, or one more than the capacity, trips an assertion."""
    pool = TransientStorePool(1, 1024)
    with pytest.raises(AssertionError):
        pool.give_back(bytearray(10))
    with pytest.raises(AssertionError):
        pool.give_back(bytearray(1024))
