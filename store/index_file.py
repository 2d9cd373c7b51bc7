"""An IndexFile: a hash index from message keys to CommitLog offsets (spec §3).

Its header, hash slots and 20-byte entries, and the file naming, are declared in
`shoal.formats.index_entry`; this module owns the file (create, put, query, load).
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
from pathlib import Path

from shoal.formats.index_entry import (
    ENTRY,
    HEADER,
    SLOT,
    UniqueKeyEntry,
    index_put,
    index_put_unique_keys,
    index_relink,
    time_diff_of,
)
from shoal.formats.java_hash import index_key_hash
from shoal.store import durability, limits
from shoal.store.errors import StoreCorruptionError
from shoal.store.mapped_file import TEMP_SUFFIX

UniqueKey = UniqueKeyEntry
"""(topic, key, CommitLog offset, store timestamp) of a message whose only key is its unique one."""
_CHAIN_STEPS_MAX = 1_000_000  # a damaged chain must not loop forever


def _create_allocated(path: Path, file_size: int) -> int:
    """A new zero-filled file of `file_size` bytes at `path`, open read/write. As for segments:
    allocated and synced under a temporary name, then renamed, so a power cut never leaves a
    short index file (which would stop the next start) under a real name. An existing `path` is
    refused, as O_EXCL would (the service serialises creations under its lock)."""
    if path.exists():
        raise FileExistsError(errno.EEXIST, "index file exists", str(path))
    temp = path.with_name(path.name + TEMP_SUFFIX)
    fd = durability.create_file(temp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.posix_fallocate(fd, 0, file_size)
        durability.fdatasync(fd)
        durability.replace(temp, path)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            durability.unlink(temp)
        raise
    durability.fsync_directory(path.parent)
    return fd


class IndexFile:
    def __init__(self, path: Path, hash_slots: int, entries: int, *, create: bool) -> None:
        self.path = path
        self.hash_slots = hash_slots
        self.entries = entries
        self.file_size = limits.INDEX_HEADER_SIZE_BYTES + hash_slots * SLOT.size + entries * ENTRY.size
        if create:
            fd = _create_allocated(path, self.file_size)
        else:
            fd = os.open(path, os.O_RDWR)
            actual = os.fstat(fd).st_size
            if actual != self.file_size:
                os.close(fd)
                raise StoreCorruptionError(
                    f"{path}: index file is {actual} bytes, expected {self.file_size} "
                    f"(maxHashSlotNum={hash_slots}, maxIndexNum={entries})"
                )
        self.fd = fd
        self.mm = mmap.mmap(fd, self.file_size)
        self.view = memoryview(self.mm)
        header = HEADER.unpack_from(self.view, 0)
        self.begin_timestamp: int = header[0]
        self.end_timestamp: int = header[1]
        self.begin_physical_offset: int = header[2]
        self.end_physical_offset: int = header[3]
        self.hash_slot_count: int = header[4]
        index_count: int = header[5]
        self.index_count = index_count if index_count > 0 else 1
        self._entries_at = limits.INDEX_HEADER_SIZE_BYTES + hash_slots * SLOT.size

    def _write_header(self) -> None:
        HEADER.pack_into(
            self.view,
            0,
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_physical_offset,
            self.end_physical_offset,
            self.hash_slot_count,
            self.index_count,
        )

    @property
    def is_full(self) -> bool:
        return self.index_count >= self.entries

    def put_key(self, key: str, physical_offset: int, store_timestamp: int) -> bool:
        """Insert one key (`putKey`); False when the file is full."""
        if self.is_full:
            return False
        time_diff = time_diff_of(store_timestamp, self.begin_timestamp)
        slot_value = index_put(self.view, self.hash_slots, self.index_count, key, physical_offset, time_diff)
        if self.index_count <= 1:
            self.begin_physical_offset = physical_offset
            self.begin_timestamp = store_timestamp
        if slot_value == 0:
            self.hash_slot_count += 1
        self.index_count += 1
        self.end_physical_offset = physical_offset
        self.end_timestamp = store_timestamp
        self._write_header()
        return True

    def put_unique_keys(self, entries: list[UniqueKey], start: int) -> int:
        """Insert `entries[start:]` in order, each a message's only key, until the file is full;
        returns the position of the first entry not inserted. As `put_key` one by one, with the
        header written once: the flush's durable mark is `index_count`, set after the entries."""
        position, index_count, new_slots, begin_offset, begin_timestamp = index_put_unique_keys(
            self.view,
            self.hash_slots,
            self.entries,
            self.index_count,
            self.begin_physical_offset,
            self.begin_timestamp,
            entries,
            start,
        )
        if position > start:
            _topic, _key, self.end_physical_offset, self.end_timestamp = entries[position - 1]
            self.begin_physical_offset, self.begin_timestamp = begin_offset, begin_timestamp
            self.hash_slot_count += new_slots
            self.index_count = index_count
            self._write_header()
        return position

    @property
    def number(self) -> int:
        """The file's name as a number (its creation time, yyyyMMddHHmmssSSS): how the checkpoint names it."""
        return int(self.path.name)

    def keep_first(self, index_count: int) -> int:
        """Keep the entries before position `index_count` (durable at a checkpoint) and forget the
        rest; returns the index count kept.

        Entries are written in order and each links only to an earlier one, so the kept entries
        are whole chains; what a crash may have left inconsistent is the slots (a later put may
        have reached the disk, or only part of it) and the header. Both are recomputed from the
        kept entries. Entries are kept up to the first whose CommitLog offset goes backwards
        (damage). Later entries stay on disk unreachable until puts overwrite them."""
        index_count = max(1, min(index_count, self.entries))
        kept, used_slots, last_offset, last_time_diff = index_relink(
            self.view, self.hash_slots, index_count, self.begin_physical_offset
        )
        self.index_count = kept
        self.hash_slot_count = used_slots
        if kept > 1:
            self.end_physical_offset = last_offset
            # timeDiff is in whole seconds: the end of that second bounds the newest key's store time
            self.end_timestamp = self.begin_timestamp + last_time_diff * 1000 + 999
        else:  # nothing kept (the service deletes such a file): back to how it was created
            self.end_timestamp, self.end_physical_offset = self.begin_timestamp, self.begin_physical_offset
        self._write_header()
        return kept

    def matches_time(self, begin_ms: int, end_ms: int) -> bool:
        """RocketMQ's `isTimeMatched` for a lookup window."""
        file_begin, file_end = self.begin_timestamp, self.end_timestamp
        return (
            (begin_ms < file_begin and end_ms > file_end)
            or file_begin <= begin_ms <= file_end
            or file_begin <= end_ms <= file_end
        )

    def lookup(self, key: str, count_max: int, begin_ms: int, end_ms: int) -> list[int]:
        """CommitLog offsets of entries whose hash matches `key` within the window, newest first.
        Hash collisions are returned too: callers compare the record's keys."""
        found: list[int] = []
        if self.index_count <= 1:
            return found
        key_hash = index_key_hash(key)
        slot_position = limits.INDEX_HEADER_SIZE_BYTES + (key_hash % self.hash_slots) * SLOT.size
        current = SLOT.unpack_from(self.view, slot_position)[0]
        steps = 0
        while 0 < current < self.index_count and len(found) < count_max and steps < _CHAIN_STEPS_MAX:
            steps += 1
            entry_hash, physical_offset, time_diff, previous = ENTRY.unpack_from(
                self.view, self._entries_at + current * ENTRY.size
            )
            entry_time = self.begin_timestamp + time_diff * 1000
            if entry_time < begin_ms:
                break
            if entry_hash == key_hash and entry_time <= end_ms:
                found.append(physical_offset)
            if previous <= 0 or previous >= self.index_count or previous == current:
                break
            current = previous
        return found

    def entries_iter(self) -> list[tuple[int, int, int, int]]:
        """Every entry (keyHash, phyOffset, timeDiff, prevIndex) in insertion order."""
        return [
            ENTRY.unpack_from(self.view, self._entries_at + number * ENTRY.size)
            for number in range(1, self.index_count)
        ]

    def flush(self) -> None:
        durability.fdatasync(self.fd)

    def close(self) -> None:
        self.view.release()
        with contextlib.suppress(BufferError):
            self.mm.close()
        os.close(self.fd)

    def destroy(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            durability.unlink(self.path)
