"""Fault a segment's pages in ahead of the appends, without writing to them.

The first write to each page of a fresh segment costs a page fault that allocates and zeroes a
page-cache page (and, on a VM whose memory the host has taken back, a host fault as well: 3.6 us per
KiB appended here against 0.3 once the page is in; docs/performance.md, "what made Shoal's runs
vary"). On the event loop that cost is every connection's. `populate_write` takes it on another thread with
`MADV_POPULATE_WRITE` (Linux 5.14): the pages are faulted in writable exactly as a write would
fault them, and what they hold is left as it is, so a window may overlap bytes an append is writing
at that moment. Zero-filling cannot do that safely, which is why warming used to cover a whole
segment before anything was written into it.

The call goes through ctypes so that the GIL is released while the kernel works (`mmap.madvise`
holds it); each call maps the window on its own, so a segment closed meanwhile is never touched.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import mmap
import os

MADV_POPULATE_WRITE = 23
"""Linux's value (include/uapi/asm-generic/mman-common.h); EINVAL from kernels that predate it."""


class _Libc:
    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.madvise = libc.madvise
        self.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        self.madvise.restype = ctypes.c_int


@functools.cache
def _libc() -> _Libc | None:
    try:
        return _Libc()
    except (OSError, AttributeError):  # no C library to load (not Linux)
        return None


def populate_write(fd: int, start: int, end: int) -> None:
    """Fault [start, end) of the file behind `fd` in writable; `start` is page-aligned and the file
    covers `end`. Leaves the bytes as they are. OSError when the kernel refuses (EINVAL: before
    Linux 5.14)."""
    assert start % mmap.ALLOCATIONGRANULARITY == 0 and end > start, (start, end)
    with mmap.mmap(fd, end - start, flags=mmap.MAP_SHARED, offset=start) as window:
        _populate(window)


@functools.cache
def supported() -> bool:
    """Whether this kernel populates mappings (probed once, on an anonymous page)."""
    try:
        with mmap.mmap(-1, mmap.PAGESIZE) as page:
            _populate(page)
    except OSError:
        return False
    return True


def _populate(mapping: mmap.mmap) -> None:
    """MADV_POPULATE_WRITE over a whole mapping, the GIL released (a ctypes call)."""
    libc = _libc()
    if libc is None:
        raise OSError(errno.ENOSYS, "madvise is not available here")
    anchor = ctypes.c_char.from_buffer(mapping)
    try:
        result = libc.madvise(ctypes.addressof(anchor), len(mapping), MADV_POPULATE_WRITE)
    finally:
        del anchor  # the mapping cannot close while ctypes holds its buffer
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"madvise(MADV_POPULATE_WRITE): {os.strerror(code)}")


def next_window(wrote: int, warmed_to: int, file_size: int, ahead_bytes: int) -> tuple[int, int]:
    """The window to fault in next, [start, end), so that `ahead_bytes` past `wrote` are warm
    (start == end when they already are); page-aligned, within the file."""
    page = mmap.ALLOCATIONGRANULARITY
    start = max(warmed_to, wrote - wrote % page)
    end = min(file_size, -(-(wrote + ahead_bytes) // page) * page)
    return start, max(start, end)


def warm_trigger(warmed_to: int, file_size: int, ahead_bytes: int, step_bytes: int) -> int:
    """The write position at which to warm again: once less than `ahead_bytes - step_bytes` is
    warm ahead of it (never, once the whole file is)."""
    if warmed_to >= file_size:
        return NOT_WARMING
    return max(0, warmed_to - ahead_bytes + step_bytes)


NOT_WARMING = 1 << 62
"""A write position no segment reaches: nothing left to warm."""
