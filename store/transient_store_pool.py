"""Segment-sized write buffers for the transient-pool mode (spec §5.2).

Appends go to a buffer in memory, a commit service copies them into the file with `pwrite`, and
the flush service syncs the file. Readers see data once committed. When the pool is empty a new
segment is written directly through its mapping, as RocketMQ does with
`fastFailIfNoBufferInStorePool=false`.
"""

from __future__ import annotations

import threading


class TransientStorePool:
    def __init__(self, buffer_count: int, buffer_size_bytes: int) -> None:
        assert buffer_count >= 0 and buffer_size_bytes > 0
        self.buffer_size_bytes = buffer_size_bytes
        self._lock = threading.Lock()
        self._free: list[bytearray] = [bytearray(buffer_size_bytes) for _ in range(buffer_count)]
        self.capacity = buffer_count

    def borrow(self) -> bytearray | None:
        with self._lock:
            return self._free.pop() if self._free else None

    def give_back(self, buffer: bytearray) -> None:
        assert len(buffer) == self.buffer_size_bytes
        buffer[:] = bytes(self.buffer_size_bytes)  # a reused buffer must not show old records
        with self._lock:
            assert len(self._free) < self.capacity
            self._free.append(buffer)

    @property
    def available_count(self) -> int:
        with self._lock:
            return len(self._free)
