"""The `checkpoint` file: how far the CommitLog, ConsumeQueues and index are known durable (spec §4.1).

    offset  size  field
    0       8     physicMsgTimestamp   store time of the last message flushed to the CommitLog
    8       8     logicsMsgTimestamp   store time of the last message written to a ConsumeQueue
    16      8     indexMsgTimestamp    end time of the last full, flushed index file
    24      8     (5.x) masterFlushedOffset   left as found
    32      8     (5.x) confirmPhyOffset      left as found
    ...
    4064    4     shoal magic "SHIX"   ours: the index mark, valid with its own CRC (zeros: none)
    4068    8     indexDurableFile     the newest index file's name as a number (0: none)
    4076    8     indexDurableCount    its index count when it was last flushed
    4084    4     shoal CRC32C of bytes 4068..4083
    4088    4     shoal magic "SHCK"   ours, in the page RocketMQ leaves unused
    4092    4     shoal CRC32C of bytes 0..23

The file is one 4096-byte page. RocketMQ ignores bytes past 40, so the trailer keeps the file
readable by Java while letting us tell a torn or corrupted checkpoint from a valid one. A
checkpoint without our trailer (written by Java) is trusted as RocketMQ would.

The index mark lets recovery after a crash keep the flushed part of the index file that never
filled (RocketMQ deletes all of it); a mark that is missing or fails its CRC keeps nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import threading
from pathlib import Path

import crc32c

from shoal.store import durability, limits

log = logging.getLogger(__name__)

FILE_SIZE = limits.OS_PAGE_SIZE_BYTES
TIMESTAMPS = struct.Struct(">qqq")
TRAILER = struct.Struct(">4sI")
TRAILER_OFFSET = FILE_SIZE - TRAILER.size
TRAILER_MAGIC = b"SHCK"
INDEX_MARK = struct.Struct(">4sqqI")
INDEX_MARK_FIELDS = struct.Struct(">qq")
"""The part of the mark its CRC covers: file number, index count."""
INDEX_MARK_OFFSET = TRAILER_OFFSET - INDEX_MARK.size
INDEX_MARK_MAGIC = b"SHIX"
MIN_TIMESTAMP_MARGIN_MS = 3000


class StoreCheckpoint:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.index_durable: tuple[int, int] = (0, 0)
        """(file number, index count) of the newest index file at its last flush; (0, 0): none."""
        self.trusted = True
        """False when our CRC showed the file was damaged (recovery then scans more)."""
        self._page = bytearray(FILE_SIZE)
        self._flush_lock = threading.Lock()
        with contextlib.suppress(FileNotFoundError):  # a flush cut short by a crash
            durability.unlink(path.with_name(path.name + ".tmp"))
        if path.exists():
            self._load()

    def _load(self) -> None:
        data = self.path.read_bytes()
        if len(data) != FILE_SIZE:
            log.warning("%s is %d bytes, expected %d: ignoring it", self.path, len(data), FILE_SIZE)
            self.trusted = False
            return
        self._page[:] = data
        magic, stored_crc = TRAILER.unpack_from(data, TRAILER_OFFSET)
        if magic == TRAILER_MAGIC and crc32c.crc32c(data[: TIMESTAMPS.size]) != stored_crc:
            log.warning("%s fails its CRC: treating every timestamp as unknown", self.path)
            self.trusted = False
            return
        self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = TIMESTAMPS.unpack_from(data, 0)
        mark_magic, number, count, mark_crc = INDEX_MARK.unpack_from(data, INDEX_MARK_OFFSET)
        if mark_magic == INDEX_MARK_MAGIC and crc32c.crc32c(INDEX_MARK_FIELDS.pack(number, count)) == mark_crc:
            self.index_durable = (number, count)

    @property
    def min_timestamp(self) -> int:
        """`getMinTimestamp`: where abnormal recovery may start (3 s of margin)."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - MIN_TIMESTAMP_MARGIN_MS)

    @property
    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp, self.index_msg_timestamp)

    def flush(self) -> None:
        """Write the page durably: a temporary file, fsync, rename. Serialised: the ConsumeQueue
        flusher and the dispatch (a full index file) both flush, and two writers of one temporary
        file could rename it while the other had just truncated it."""
        with self._flush_lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        TIMESTAMPS.pack_into(
            self._page, 0, self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp
        )
        number, count = self.index_durable
        if number:
            mark_crc = crc32c.crc32c(INDEX_MARK_FIELDS.pack(number, count))
            INDEX_MARK.pack_into(self._page, INDEX_MARK_OFFSET, INDEX_MARK_MAGIC, number, count, mark_crc)
        else:  # no mark: zeros, as a file without one has
            self._page[INDEX_MARK_OFFSET:TRAILER_OFFSET] = bytes(INDEX_MARK.size)
        TRAILER.pack_into(self._page, TRAILER_OFFSET, TRAILER_MAGIC, crc32c.crc32c(self._page[: TIMESTAMPS.size]))
        temp = self.path.with_name(self.path.name + ".tmp")
        fd = durability.create_file(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, self._page)
            durability.fsync(fd)
        finally:
            os.close(fd)
        durability.replace(temp, self.path)
        durability.fsync_directory(self.path.parent)
