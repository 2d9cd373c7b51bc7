"""The `lock` and `abort` files (spec §4.2).

`lock` holds an exclusive `fcntl` lock on its first byte while a store is open, so a second
process fails at once with a clear error. `abort` exists while the store runs; finding it at
start means the last run did not shut down cleanly and recovery must be abnormal.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from pathlib import Path

from shoal.store import durability
from shoal.store.errors import StoreLockedError

_LOCKED_IN_THIS_PROCESS: set[str] = set()
_REGISTRY_LOCK = threading.Lock()


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
                os.close(fd)
                raise StoreLockedError(
                    f"{self.path}: the store is in use by another process (lock failed, store already started)"
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

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            durability.unlink(self.path)
