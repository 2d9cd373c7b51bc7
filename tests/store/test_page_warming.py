"""Tests of shoal.store.page_warming and of the CommitLog queue warming ahead of its appends."""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from shoal.store import (
    BatchEntry,
    CommitLogSettings,
    FlushDiskType,
    FlushSettings,
    MessageStore,
    MessageToStore,
    StoreSettings,
    limits,
    page_warming,
)
from shoal.store.mapped_file_queue import MappedFileQueue

PAGE = mmap.PAGESIZE
MiB = 1024 * 1024
READ_AHEAD_MARGIN = 16 * MiB
"""A fault reads ahead past the window (clean zero pages of the fallocated file): up to the
device's read_ahead_kb, 8 MiB on these machines."""


def resident_pages(path: Path, start: int, end: int) -> list[bool]:
    """Which pages of [start, end) of the file are in the page cache: mincore over a mapping of our
    own, which reports the file's cache whoever faulted the pages in (mapping faults in nothing)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    flags = (ctypes.c_ubyte * ((end - start) // PAGE))()
    fd = os.open(path, os.O_RDWR)
    try:
        with mmap.mmap(fd, end - start, flags=mmap.MAP_SHARED, offset=start) as view:
            anchor = ctypes.c_char.from_buffer(view)
            try:
                result = libc.mincore(ctypes.addressof(anchor), end - start, flags)
            finally:
                del anchor
            assert result == 0, os.strerror(ctypes.get_errno())
    finally:
        os.close(fd)
    return [bool(flag & 1) for flag in flags]


def fresh_file(path: Path, size: int) -> int:
    """A fallocated file nothing has cached (its pages read as zeros); returns an O_RDWR fd."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.posix_fallocate(fd, 0, size)
    os.fdatasync(fd)
    os.posix_fadvise(fd, 0, size, os.POSIX_FADV_DONTNEED)
    return fd


def test_populate_write_faults_in_the_window_and_changes_no_byte(tmp_path: Path) -> None:
    """Goal: a window can be warmed while an append writes into it: populating faults its pages in
    and leaves every byte as it was. Method: write data into a fallocated file, populate a window
    that covers it and more, compare the bytes and ask mincore what is cached. On a kernel without
    MADV_POPULATE_WRITE the call must say so (EINVAL) instead."""
    path = tmp_path / "segment"
    size = 32 * MiB
    fd = fresh_file(path, size)
    try:
        data = os.urandom(3 * PAGE + 100)
        os.pwrite(fd, data, PAGE)
        if not page_warming.supported():
            with pytest.raises(OSError) as refused:
                page_warming.populate_write(fd, 0, size)
            assert refused.value.errno in (errno.EINVAL, errno.ENOSYS)
            return
        page_warming.populate_write(fd, 0, 2 * MiB)
        assert os.pread(fd, len(data), PAGE) == data
        assert os.pread(fd, PAGE, 0) == bytes(PAGE)
        assert os.fstat(fd).st_size == size
        cached = resident_pages(path, 0, size)
        assert all(cached[: 2 * MiB // PAGE]), "the window is in the page cache"
        assert not any(cached[(2 * MiB + READ_AHEAD_MARGIN) // PAGE :]), "nothing past the window and read-ahead"
    finally:
        os.close(fd)


def test_next_window_keeps_the_distance_ahead_page_aligned_and_inside_the_file() -> None:
    """Goal: the window policy. Method: pure calls at the start, in the middle, near the end."""
    ahead, step, size = 64 * MiB, 16 * MiB, 1024 * MiB
    assert page_warming.next_window(0, 0, size, ahead) == (0, ahead)
    assert page_warming.next_window(16 * MiB + 10, ahead, size, ahead) == (ahead, 80 * MiB + PAGE)
    assert page_warming.next_window(size - 2 * MiB, size - 3 * MiB, size, ahead) == (size - 2 * MiB, size), (
        "not behind the writer"
    )
    assert page_warming.next_window(5 * MiB, 100 * MiB, size, ahead) == (100 * MiB, 100 * MiB), "already warm"
    assert page_warming.warm_trigger(ahead, size, ahead, step) == step
    assert page_warming.warm_trigger(size, size, ahead, step) == page_warming.NOT_WARMING
    assert page_warming.warm_trigger(MiB, size, ahead, step) == 0, "never a negative position"


def test_a_warm_queue_faults_in_a_window_ahead_of_the_appends_not_the_whole_segment(
    tmp_path: Path, wait_until: Callable[..., None]
) -> None:
    """Goal: a warming CommitLog queue keeps WARM_AHEAD_BYTES warm past its write position and
    leaves the rest of a segment alone (no segment's worth of zeros written up front). Method: a
    256 MiB segment; check the cache after creation, then advance the write position as appends
    do and check again. A kernel without MADV_POPULATE_WRITE zero-fills the whole segment instead."""
    size = 256 * MiB
    queue = MappedFileQueue(tmp_path / "commitlog", size, warm=True)
    try:
        if not page_warming.supported():
            assert not queue.warm_windows
            assert queue.last_file().warm_at == page_warming.NOT_WARMING
            return
        assert queue.warm_windows
        mapped = queue.last_file()
        assert mapped.warmed_to == limits.WARM_AHEAD_BYTES
        assert mapped.warm_at == limits.WARM_STEP_BYTES
        cached = resident_pages(mapped.path, 0, size)
        assert all(cached[: limits.WARM_AHEAD_BYTES // PAGE])
        assert not any(cached[(limits.WARM_AHEAD_BYTES + READ_AHEAD_MARGIN) // PAGE :]), "only the first window"
        record = os.urandom(1000)
        while mapped.wrote_position < 3 * limits.WARM_STEP_BYTES:
            at = mapped.wrote_position
            mapped.target[at : at + len(record)] = record
            mapped.wrote_position = at + len(record)
            if mapped.wrote_position >= mapped.warm_at:
                queue.warm_ahead(mapped)
        assert mapped.warmed_to >= mapped.wrote_position + limits.WARM_AHEAD_BYTES - limits.WARM_STEP_BYTES
        end = mapped.warmed_to
        wait_until(lambda: all(resident_pages(mapped.path, 0, end)), what="the windows faulted in")
        assert not any(resident_pages(mapped.path, end + READ_AHEAD_MARGIN, size)), "nothing past the last window"
        assert mapped.view[mapped.wrote_position - len(record) : mapped.wrote_position] == record
    finally:
        queue.close()


def test_a_reopened_segment_warms_from_its_end_on_the_next_append(tmp_path: Path) -> None:
    """Goal: after a restart the unfilled segment is warmed ahead too. Method: write, close, load,
    prepare the tail as the store does before appends; its trigger is its write position."""
    size = 32 * MiB
    directory = tmp_path / "commitlog"
    first = MappedFileQueue(directory, size, warm=True)
    mapped = first.last_file()
    mapped.target[0:5] = b"hello"
    mapped.wrote_position = 5
    first.close()
    again = MappedFileQueue(directory, size, warm=True)
    try:
        again.load()
        tail = again.files[-1]
        tail.set_positions(5)
        again.prepare_tail()
        assert tail.warm_at == (5 if again.warm_windows else page_warming.NOT_WARMING)
    finally:
        again.close()


def test_appends_through_the_store_warm_the_commitlog_ahead(tmp_path: Path) -> None:
    """Goal: every append path of the CommitLog reaches the warming (single puts and batches).
    Method: an ASYNC_FLUSH store (warming on by default) with 128 MiB segments; put past two
    steps, then the current segment is warm further than its first window."""
    settings = StoreSettings(
        root_dir=tmp_path,
        commitlog=CommitLogSettings(segment_size_bytes=128 * MiB),
        flush=FlushSettings(flush_disk_type=FlushDiskType.ASYNC_FLUSH),
    )
    store = MessageStore(settings)
    store.open()
    store.start()
    try:
        body = os.urandom(1024)
        template = MessageToStore("WarmTopic", 0, b"", b"")
        while store.max_offset < 2 * limits.WARM_STEP_BYTES:
            assert store.append_batch(template, [BatchEntry(0, body, b"")] * 64).ok
        assert store.append_message(MessageToStore("WarmTopic", 1, body, b"")).ok
        segment = store._commitlog.queue.last_file()
        if page_warming.supported():
            assert segment.warmed_to >= store.max_offset + limits.WARM_AHEAD_BYTES - limits.WARM_STEP_BYTES
        else:
            assert segment.warm_at == page_warming.NOT_WARMING
    finally:
        store.shutdown()
