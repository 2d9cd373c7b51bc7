"""The `checkpoint` file: how far the CommitLog, ConsumeQueues and index are known durable (spec §4.1).

    offset  size  field
    0       8     physicMsgTimestamp   store time of the last message flushed to the CommitLog
    8       8     logicsMsgTimestamp   store time of the last message written to a ConsumeQueue
    16      8     indexMsgTimestamp    end time of the last full, flushed index file
    24      8     (5.x) masterFlushedOffset   left as found
    32      8     (5.x) confirmPhyOffset      left as found
    ...
    4088    4     shoal magic "SHCK"   ours, in the page RocketMQ leaves unused
    4092    4     shoal CRC32C of bytes 0..23

The file is one 4096-byte page. RocketMQ ignores bytes past 40, so the trailer keeps the file
readable by Java while letting us tell a torn or corrupted checkpoint from a valid one. A
checkpoint without our trailer (written by Java) is trusted as RocketMQ would.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from pathlib import Path

import crc32c

from shoal.store import durability, limits

log = logging.getLogger(__name__)

FILE_SIZE = limits.OS_PAGE_SIZE_BYTES
TIMESTAMPS = struct.Struct(">qqq")
TRAILER = struct.Struct(">4sI")
TRAILER_OFFSET = FILE_SIZE - TRAILER.size
TRAILER_MAGIC = b"SHCK"
MIN_TIMESTAMP_MARGIN_MS = 3000


class StoreCheckpoint:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.trusted = True
        """False when our CRC showed the file was damaged (recovery then scans more)."""
        self._page = bytearray(FILE_SIZE)
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

    @property
    def min_timestamp(self) -> int:
        """`getMinTimestamp`: where abnormal recovery may start (3 s of margin)."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - MIN_TIMESTAMP_MARGIN_MS)

    @property
    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp, self.index_msg_timestamp)

    def flush(self) -> None:
        """Write the page durably: a temporary file, fsync, rename."""
        TIMESTAMPS.pack_into(
            self._page, 0, self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp
        )
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
