"""Every call that makes bytes or directory entries durable, in one place.

The store writes segments through `mmap`, so what reaches the disk is decided by a few calls:
syncing a file, syncing a directory, and creating, renaming or deleting a directory entry. All of
them go through this module, and nowhere else in `shoal.store` calls the `os` functions directly:

    fdatasync(fd)                    segment data (CommitLog, ConsumeQueue, IndexFile)
    fsync(fd)                        data and metadata (checkpoint, metadata JSON, lock, abort)
    fsync_directory(path)            make the entries of a directory durable
    create_file(path, flags, mode)   os.open with O_CREAT: a new directory entry (until synced)
    replace(source, target)          rename within one directory (atomic, durable once synced)
    unlink(path)                     remove a directory entry
    mkdir(path) / rmdir(path)        one directory entry in the parent
    make_directories(path)           mkdir -p, syncing each parent that got a new entry

Production cost is nil: the primitives are the `os` functions themselves, looked up as module
attributes at each call exactly like `os.fdatasync` would be. Callers must write
`durability.fdatasync(fd)` (not `from ... import fdatasync`) so that a test can replace the
module attributes with recording versions: `tests/store/power_loss.py` does, to build the file
states a power cut could leave (docs/reliability.md).
"""

from __future__ import annotations

import os
from pathlib import Path

fdatasync = os.fdatasync
fsync = os.fsync
create_file = os.open
"""`create_file(path, flags, mode)`: `os.open` whose flags include `O_CREAT`."""
replace = os.replace
unlink = os.unlink
mkdir = os.mkdir
rmdir = os.rmdir


def fsync_directory(directory: Path) -> None:
    """fsync a directory, so that the creates, renames and deletes in it survive a power cut."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_directories(path: Path) -> None:
    """`mkdir -p` whose new entries survive a power cut: each parent that got one is synced.
    (`Path.mkdir(parents=True)` leaves the new entries to the file system's whim.)"""
    missing: list[Path] = []
    at = path
    while not at.is_dir():
        missing.append(at)
        if at.parent == at:
            break
        at = at.parent
    for directory in reversed(missing):
        try:
            mkdir(directory)
        except FileExistsError:  # another thread made it: sync the parent all the same
            if not directory.is_dir():
                raise
        fsync_directory(directory.parent)
