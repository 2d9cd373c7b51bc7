"""The `lock` and `abort` files (spec §4.2).

`lock` holds an exclusive `fcntl` lock on its first byte while a store is open, so a second
process fails at once with a clear error naming the holder's pid. The pid comes from the kernel
(`F_GETLK`), not from the file: the file keeps RocketMQ's content ("lock"), and a Java broker
holding the store is named the same way. `abort` exists while the store runs; finding it at
start means the last run did not shut down cleanly and recovery must be abnormal.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import sys
import threading
from pathlib import Path

from shoal.store import durability
from shoal.store.errors import StoreLockedError

_LOCKED_IN_THIS_PROCESS: set[str] = set()
_REGISTRY_LOCK = threading.Lock()

_FLOCK = struct.Struct("hhqqi4x")
"""Linux `struct flock` (64-bit off_t): l_type, l_whence, l_start, l_len, l_pid, padding."""
assert _FLOCK.size == 32


def lock_holder_pid(fd: int) -> int | None:
    """The pid holding a lock on byte 0 of `fd`'s file, or None when unknown (not Linux, no holder,
    or a holder in another pid namespace, which the kernel reports as 0)."""
    if not sys.platform.startswith("linux"):
        return None
    query = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)
    try:
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
    except OSError:
        return None
    lock_type, _whence, _start, _length, pid = _FLOCK.unpack(answer)
    return pid if lock_type != fcntl.F_UNLCK and pid > 0 else None


class StoreLock:
    """`lockf` on byte 0 (what a Java broker takes, via FileChannel.tryLock) excludes other
    processes. POSIX record locks belong to the process, and closing any descriptor of the file
    drops them, so stores in this process are excluded by a registry checked before the file is
    even opened."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._key = os.path.realpath(path)
        self._fd: int | None = None

    def acquire(self) -> None:
        durability.make_directories(self.path.parent)
        self._key = os.path.realpath(self.path)
        with _REGISTRY_LOCK:
            if self._key in _LOCKED_IN_THIS_PROCESS:
                raise StoreLockedError(f"{self.path}: the store is already open in this process")
            fd = durability.create_file(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            except OSError:
                holder = lock_holder_pid(fd)
                os.close(fd)
                who = f"pid {holder}" if holder is not None else "pid unknown"
                raise StoreLockedError(
                    f"{self.path}: the store is in use by another process ({who}); "
                    f"stop that broker or use another storePathRootDir"
                ) from None
            _LOCKED_IN_THIS_PROCESS.add(self._key)
        os.pwrite(fd, b"lock", 0)
        durability.fsync(fd)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, 0)
        os.close(self._fd)
        self._fd = None
        with _REGISTRY_LOCK:
            _LOCKED_IN_THIS_PROCESS.discard(self._key)


class AbortMarker:
    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def last_exit_ok(self) -> bool:
        return not self.path.exists()

    def create(self) -> None:
        fd = durability.create_file(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            durability.fsync(fd)
        finally:
            os.close(fd)
        # The entry itself must survive a power cut, or the next start would take a crashed
        # store for a cleanly stopped one and skip abnormal recovery.
        durability.fsync_directory(self.path.parent)

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            durability.unlink(self.path)
