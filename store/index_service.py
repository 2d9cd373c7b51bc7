"""The IndexFiles of a store: building keys from dispatched messages, lookups, retention.

Only the newest file is written; a full one is flushed and its end time becomes the checkpoint's
`indexMsgTimestamp` (spec §3.3 step 7, §4.1).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from shoal.formats.index_entry import index_file_name
from shoal.formats.properties import message_keys
from shoal.store import durability, limits
from shoal.store.clock import Clock
from shoal.store.index_file import IndexFile, UniqueKey
from shoal.store.mapped_file import TEMP_SUFFIX
from shoal.store.settings import IndexSettings

log = logging.getLogger(__name__)


class IndexService:
    def __init__(self, directory: Path, settings: IndexSettings, clock: Clock) -> None:
        self.directory = directory
        self.settings = settings
        self.clock = clock
        self.files: list[IndexFile] = []
        self._lock = threading.Lock()
        self.on_file_full: Callable[[int], None] | None = None
        """Called with the full file's end timestamp once it is flushed (checkpoint update)."""

    def load(self, last_exit_ok: bool, index_checkpoint_ms: int, durable: tuple[int, int] = (0, 0)) -> list[str]:
        """Open every index file; after a crash delete those newer than the checkpoint (spec §4.3),
        except the part of the newest one that `durable` (file number, index count: `flush`'s mark,
        kept in the checkpoint) says was flushed: its keys stay and only later ones are rebuilt."""
        notes: list[str] = []
        if not self.directory.exists():
            return notes
        for leftover in sorted(self.directory.glob("*" + TEMP_SUFFIX)):
            durability.unlink(leftover)
            notes.append(f"removed index {leftover.name}, a creation interrupted by a crash")
        paths = sorted(path for path in self.directory.iterdir() if path.name.isdigit())
        for path in paths:
            try:
                index_file = IndexFile(path, self.settings.hash_slots, self.settings.entries, create=False)
            except BaseException:
                self.close()  # do not leak the files opened so far
                raise
            # The newest file, unless full (a full file is flushed before the checkpoint names its
            # end), was written after its last flush: its end time may equal the checkpoint's (keys
            # of one millisecond across two files), or come from a header page newer than the entries.
            unflushed = path == paths[-1] and not index_file.is_full
            if not last_exit_ok and (index_file.end_timestamp > index_checkpoint_ms or unflushed):
                durable_number, durable_count = durable
                if index_file.number == durable_number and (kept := index_file.keep_first(durable_count)) > 1:
                    self.files.append(index_file)
                    notes.append(f"kept {kept - 1} keys of index file {path.name} (flushed by the last checkpoint)")
                    continue
                index_file.destroy()
                notes.append(f"deleted index file {path.name}: it may hold keys of unflushed messages")
                continue
            self.files.append(index_file)
        return notes

    @property
    def end_physical_offset(self) -> int:
        files = self.files
        return files[-1].end_physical_offset if files else 0

    @property
    def last_indexed_offset(self) -> int:
        """CommitLog offset of the newest message already indexed; -1 when none is."""
        files = self.files
        if not files:
            return -1
        newest = files[-1]
        if newest.index_count > 1 or len(files) > 1 or newest.end_physical_offset > 0:
            return newest.end_physical_offset
        return -1

    def build(
        self, topic: str, physical_offset: int, store_timestamp: int, uniq_key: str | None, keys: str | None
    ) -> None:
        """Index one dispatched message (skipped when an earlier file already covers it).

        The message at the newest file's end offset may have only some of its keys there (its
        first keys filled a file whose successor recovery deleted): its missing keys are added,
        where RocketMQ (`offset < endPhyOffset`) would add them all again."""
        self._writable_file()
        indexed = self.last_indexed_offset
        if physical_offset < indexed:
            return  # re-dispatch after recovery: this message is indexed already
        if physical_offset > indexed and uniq_key and not keys:  # most messages: one key, nothing to compare
            self._put(f"{topic}#{uniq_key}", physical_offset, store_timestamp)
            return
        full_keys = [f"{topic}#{key}" for key in ([uniq_key] if uniq_key else []) + message_keys(keys)]
        if physical_offset == indexed:
            full_keys = [key for key in full_keys if physical_offset not in self._offsets_of(key, physical_offset)]
        for key in full_keys:
            self._put(key, physical_offset, store_timestamp)

    def build_unique_keys(self, entries: list[UniqueKey]) -> None:
        """Index messages, in CommitLog order, whose only key is their unique one: as `build` for
        each, a run of them at a time (dispatch's common case)."""
        indexed = self.last_indexed_offset
        position = 0
        end = len(entries)
        while position < end and entries[position][2] <= indexed:
            topic, key, physical_offset, store_timestamp = entries[position]  # dispatched again
            self.build(topic, physical_offset, store_timestamp, key, None)
            position += 1
        while position < end:
            index_file = self._writable_file()
            reached = index_file.put_unique_keys(entries, position)
            if reached == position:  # a new file already full: as `_put` reports it
                log.error("index key %r not stored: a new index file is already full", entries[position][1])
                reached += 1
            position = reached

    def _offsets_of(self, full_key: str, physical_offset: int) -> list[int]:
        """CommitLog offsets (hash matches) for `full_key` in the files that reach `physical_offset`
        (the newest, and the full one before it when the newest took over its end offset)."""
        found: list[int] = []
        for index_file in reversed(self.files):
            if index_file.end_physical_offset < physical_offset:
                break
            found.extend(index_file.lookup(full_key, limits.QUERY_MESSAGES_MAX_COUNT, 0, 2**62))
        return found

    def _put(self, key: str, physical_offset: int, store_timestamp: int) -> None:
        index_file = self._writable_file()
        if not index_file.put_key(key, physical_offset, store_timestamp):
            index_file = self._writable_file()
            if not index_file.put_key(key, physical_offset, store_timestamp):
                log.error("index key %r not stored: a new index file is already full", key)

    def _writable_file(self) -> IndexFile:
        files = self.files
        if files and not files[-1].is_full:
            return files[-1]
        with self._lock:
            previous = self.files[-1] if self.files else None
            durability.make_directories(self.directory)
            now = self.clock.now_ms()
            path = self.directory / index_file_name(now)
            while path.exists():
                now += 1
                path = self.directory / index_file_name(now)
            created = IndexFile(path, self.settings.hash_slots, self.settings.entries, create=True)
            if previous is not None:
                created.begin_timestamp = created.end_timestamp = max(previous.end_timestamp, 0)
                created.begin_physical_offset = created.end_physical_offset = max(previous.end_physical_offset, 0)
            self.files = [*self.files, created]
        if previous is not None:
            previous.flush()
            if self.on_file_full is not None:
                self.on_file_full(previous.end_timestamp)
        return created

    def query(self, topic: str, key: str, count_max: int, begin_ms: int, end_ms: int) -> list[int]:
        """CommitLog offsets for `topic#key` in the window, newest files first, ascending result."""
        count_max = min(count_max, limits.QUERY_MESSAGES_MAX_COUNT)
        full_key = f"{topic}#{key}"
        found: list[int] = []
        for index_file in reversed(self.files):
            if len(found) >= count_max:
                break
            if index_file.matches_time(begin_ms, end_ms):
                found.extend(index_file.lookup(full_key, count_max - len(found), begin_ms, end_ms))
            if index_file.begin_timestamp < begin_ms:
                break
        return sorted(found)

    @property
    def last_update(self) -> tuple[int, int]:
        """(indexLastUpdateTimestamp, indexLastUpdatePhyoffset) of the newest file."""
        files = self.files
        if not files:
            return 0, 0
        return files[-1].end_timestamp, files[-1].end_physical_offset

    def truncate_from(self, physical_offset: int) -> int:
        """Delete files holding keys at or after `physical_offset` (never leaves stale keys)."""
        removed = 0
        with self._lock:
            keep = []
            for index_file in self.files:
                if index_file.end_physical_offset >= physical_offset:
                    index_file.destroy()
                    removed += 1
                else:
                    keep.append(index_file)
            self.files = keep
        return removed

    def delete_expired(self, commitlog_min_offset: int) -> int:
        """Delete files (never the newest) whose last key points below the CommitLog's start."""
        with self._lock:
            doomed = [f for f in self.files[:-1] if f.end_physical_offset < commitlog_min_offset]
            self.files = [f for f in self.files if f not in doomed]
        for index_file in doomed:
            index_file.destroy()
        return len(doomed)

    def flush(self) -> tuple[int, int]:
        """Flush the newest file; returns its durable mark (file number, index count), (0, 0) with
        no file. The count is read before the flush: every entry below it is on disk after it."""
        files = self.files
        if not files:
            return 0, 0
        newest = files[-1]
        index_count = newest.index_count
        newest.flush()
        return newest.number, index_count

    def close(self) -> None:
        for index_file in self.files:
            index_file.close()
        self.files = []
