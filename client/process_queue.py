"""`ProcessQueue`: the messages of one assigned queue between pull and consumed (Java's ProcessQueue).

Messages are kept by queue offset. The offset a consumer may commit is the lowest offset still
cached (nothing below it is unconsumed), or one past the highest offset seen once everything is
consumed: `remove` returns it. Orderly consumption takes messages out in offset order
(`take`), then either `commit`s them or puts them back (`make_consume_again`).

A dropped queue (rebalanced away, or its offset moved) keeps its messages but nothing consumed
from it may commit an offset any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import time
from collections.abc import Iterable

from shoal.client.message import MessageExt
from shoal.protocol import MessageQueue


class ProcessQueue:
    """Cached messages of one queue, the offsets they allow to commit, and lock state."""

    def __init__(self, mq: MessageQueue) -> None:
        self.mq = mq
        self.dropped = False
        self.locked = False
        self.last_lock_monotonic = 0.0
        self.consume_lock = asyncio.Lock()  # orderly: one consumer of this queue at a time
        self.consuming = False  # orderly: a consume task is running or scheduled
        self.next_offset: int | None = None  # where the next pull starts (None: not computed yet)
        self.queue_offset_max = -1
        self._messages: dict[int, MessageExt] = {}
        self._offsets: list[int] = []  # heap of cached offsets, stale entries skipped lazily
        self._taken: dict[int, MessageExt] = {}  # orderly: being consumed
        self._size_bytes = 0
        self._space = asyncio.Event()  # set whenever messages leave the cache

    # --- sizes ---

    @property
    def cached_count(self) -> int:
        return len(self._messages) + len(self._taken)

    @property
    def cached_size_bytes(self) -> int:
        return self._size_bytes

    @property
    def max_span(self) -> int:
        """Offsets between the oldest and newest cached message (0 when empty)."""
        first = self._first_offset()
        return 0 if first is None else self.queue_offset_max - first

    def _first_offset(self) -> int | None:
        offsets = self._offsets
        while offsets and offsets[0] not in self._messages:
            heapq.heappop(offsets)
        return offsets[0] if offsets else None

    async def wait_for_space(self, timeout_s: float) -> None:
        """Wait until messages leave the cache, at most `timeout_s`."""
        self._space.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._space.wait(), timeout_s)

    # --- pull side ---

    def put(self, messages: Iterable[MessageExt]) -> bool:
        """Cache pulled messages; True when an orderly consume task should be started."""
        for message in messages:
            offset = message.queue_offset
            if offset in self._messages or offset in self._taken:
                continue
            self._messages[offset] = message
            heapq.heappush(self._offsets, offset)
            self._size_bytes += len(message.body)
            self.queue_offset_max = max(self.queue_offset_max, offset)
        if self._messages and not self.consuming:
            self.consuming = True
            return True
        return False

    def pulled_until(self, next_begin_offset: int) -> None:
        """Record that every offset below `next_begin_offset` was pulled (some filtered out by tag),
        so consuming the cached messages may commit up to it."""
        self.queue_offset_max = max(self.queue_offset_max, next_begin_offset - 1)

    # --- concurrent consumption ---

    def remove(self, messages: Iterable[MessageExt]) -> int:
        """Forget consumed messages; the offset now safe to commit, or -1 if nothing was cached."""
        if not self._messages:
            return -1
        for message in messages:
            removed = self._messages.pop(message.queue_offset, None)
            if removed is not None:
                self._size_bytes -= len(removed.body)
        self._space.set()
        first = self._first_offset()
        return self.queue_offset_max + 1 if first is None else first

    # --- orderly consumption ---

    def take(self, count: int) -> list[MessageExt]:
        """Up to `count` messages in offset order, moved aside until commit or consume-again."""
        taken: list[MessageExt] = []
        while len(taken) < count:
            first = self._first_offset()
            if first is None:
                break
            heapq.heappop(self._offsets)
            message = self._messages.pop(first)
            self._taken[first] = message
            taken.append(message)
        if not taken:
            self.consuming = False
        return taken

    def commit(self) -> int:
        """Forget the taken messages; the offset after the highest of them (-1 if none)."""
        if not self._taken:
            return -1
        offset = max(self._taken) + 1
        self._size_bytes -= sum(len(message.body) for message in self._taken.values())
        self._taken.clear()
        self._space.set()
        return offset

    def make_consume_again(self, messages: Iterable[MessageExt]) -> None:
        """Put taken messages back so they are consumed again, first."""
        for message in messages:
            offset = message.queue_offset
            if self._taken.pop(offset, None) is not None:
                self._messages[offset] = message
                heapq.heappush(self._offsets, offset)

    # --- locks (orderly, clustering) ---

    def mark_locked(self, locked: bool) -> None:
        self.locked = locked
        if locked:
            self.last_lock_monotonic = time.monotonic()

    def lock_expired(self, lock_max_live_s: float) -> bool:
        return time.monotonic() - self.last_lock_monotonic > lock_max_live_s

    def drop(self) -> None:
        self.dropped = True
        self._space.set()
