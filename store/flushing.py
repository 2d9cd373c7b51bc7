"""Flushing the CommitLog and ConsumeQueues (spec §5.2, seed 000).

* `GroupCommitService` (SYNC_FLUSH): callers append, then wait until `flushed_offset` passes the
  end of their record. One `fdatasync` covers every record appended meanwhile (group commit), and
  the flush runs in this thread, where `os.fdatasync` releases the GIL.
* `FlushRealTimeService` (ASYNC_FLUSH): every `flushIntervalCommitLog`, flush if at least
  `flushCommitLogLeastPages` pages are dirty, and everything every `flushCommitLogThoroughInterval`.
* `CommitRealTimeService` (transient pool): copy the write buffer into the file, then wake the
  flusher.
* `FlushConsumeQueueService`: ConsumeQueues and, on thorough rounds, the checkpoint.
* `AsyncFlushWaiter`: lets asyncio code await a group commit without a thread per caller.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import logging
import threading
import time
from collections.abc import Callable, Iterable

from shoal.store import limits
from shoal.store.checkpoint import StoreCheckpoint
from shoal.store.clock import Clock
from shoal.store.consume_queue import ConsumeQueue
from shoal.store.errors import PutStatus
from shoal.store.mapped_file_queue import MappedFileQueue
from shoal.store.offset_waiters import OffsetWaiters
from shoal.store.service import ServiceThread
from shoal.store.settings import FlushSettings

log = logging.getLogger(__name__)

FlushListener = Callable[[int], None]

OUT_OF_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
"""Write errors the ConsumeQueue flusher outlives: rewriting the checkpoint's temporary file is
safe to retry once space returns, and the CommitLog stays the source of truth meanwhile. Any
other error (EIO from fsync above all) still ends the service: a failed fsync cannot be retried."""


class CommitLogFlusher(ServiceThread):
    """Shared part: flush the CommitLog queue, publish the flushed offset, record the checkpoint time."""

    def __init__(self, queue: MappedFileQueue, checkpoint: StoreCheckpoint, settings: FlushSettings) -> None:
        super().__init__()
        self.queue = queue
        self.checkpoint = checkpoint
        self.settings = settings
        self._condition = threading.Condition()
        self._listeners: list[FlushListener] = []
        self.flush_count = 0
        self.flush_seconds_total = 0.0
        self._flush_lock = threading.Lock()

    @property
    def flushed_offset(self) -> int:
        return self.queue.flushed_where

    def add_listener(self, listener: FlushListener) -> None:
        """`listener(flushed_offset)` runs in the flush thread after every flush that made progress."""
        self._listeners.append(listener)

    def flush_to_end(self, least_pages: int) -> bool:
        """Flush until nothing dirty is left (at most one segment boundary per call); True on progress.
        Safe from any thread: the event loop (inline group commit) and the flush service share it."""
        with self._flush_lock:
            return self._flush_to_end_locked(least_pages)

    def _flush_to_end_locked(self, least_pages: int) -> bool:
        before = self.queue.flushed_where
        started = time.monotonic()
        for _ in range(2):
            if self.queue.flush(least_pages):
                break
        after = self.queue.flushed_where
        if after == before:
            return False
        self.flush_count += 1
        self.flush_seconds_total += time.monotonic() - started
        # The flushed segment's time, not the newest segment's: after a backlog of several segments
        # one round flushes two, and the newest's time would run ahead of what is on disk.
        timestamp = self.queue.flushed_store_timestamp
        if timestamp:
            self.checkpoint.physic_msg_timestamp = timestamp
        with self._condition:
            self._condition.notify_all()
        for listener in self._listeners:
            try:
                listener(after)
            except Exception:  # a listener's bug must never stop durability for everyone else
                log.exception("flush listener %r failed", listener)
        return True

    def wait_flushed(self, offset: int, timeout_s: float) -> bool:
        """Block until `offset` is durable; False on timeout (FLUSH_DISK_TIMEOUT)."""
        if self.queue.flushed_where >= offset:
            return True
        self.wakeup()
        with self._condition:
            return (
                self._condition.wait_for(
                    lambda: self.queue.flushed_where >= offset or self.failure is not None, timeout_s
                )
                and self.queue.flushed_where >= offset
            )

    def on_stop(self) -> None:
        for _ in range(limits.FLUSH_RETRIES_ON_SHUTDOWN):
            if not self.flush_to_end(0):
                break

    def on_failure(self, exc: BaseException) -> None:
        with self._condition:
            self._condition.notify_all()


class GroupCommitService(CommitLogFlusher):
    """SYNC_FLUSH's flusher. With `sync_flush_inline` asyncio callers flush on their own loop, so
    this thread only serves blocking callers (who wake it) and, as a safety net, flushes on a
    slow timer; otherwise it would race the loop for the same fdatasync."""

    name = "shoal-group-commit"
    INLINE_SAFETY_INTERVAL_S = 1.0

    def run_once(self) -> None:
        interval_s = self.settings.group_commit_interval_ms / 1000
        if self.settings.sync_flush_inline:
            self.wait_for_running(self.INLINE_SAFETY_INTERVAL_S)
            self.flush_to_end(0)
            return
        if not self.flush_to_end(0):
            self.wait_for_running(interval_s)


class FlushRealTimeService(CommitLogFlusher):
    name = "shoal-flush-commitlog"

    def __init__(self, queue: MappedFileQueue, checkpoint: StoreCheckpoint, settings: FlushSettings, clock: Clock):
        super().__init__(queue, checkpoint, settings)
        self.clock = clock
        self._last_thorough_s = clock.monotonic_s()

    def run_once(self) -> None:
        self.wait_for_running(self.settings.flush_interval_ms / 1000)
        least_pages = self.settings.flush_least_pages
        now = self.clock.monotonic_s()
        if now - self._last_thorough_s >= self.settings.flush_thorough_interval_ms / 1000:
            self._last_thorough_s = now
            least_pages = 0
        self.flush_to_end(least_pages)


class CommitRealTimeService(ServiceThread):
    name = "shoal-commit-commitlog"

    def __init__(self, queue: MappedFileQueue, flusher: CommitLogFlusher, settings: FlushSettings, clock: Clock):
        super().__init__()
        self.queue = queue
        self.flusher = flusher
        self.settings = settings
        self.clock = clock
        self._last_thorough_s = clock.monotonic_s()
        self._commit_lock = threading.Lock()
        """One committer at a time: this thread, and `MessageStore.flush_to_end` callers (a commit
        hands its write buffer back to the pool, which another commit must not still be reading)."""

    def commit_to_end(self, least_pages: int) -> bool:
        with self._commit_lock:
            before = self.queue.committed_where
            for _ in range(2):
                if self.queue.commit(least_pages):
                    break
            return self.queue.committed_where != before

    def run_once(self) -> None:
        least_pages = self.settings.commit_least_pages
        now = self.clock.monotonic_s()
        if now - self._last_thorough_s >= self.settings.commit_thorough_interval_ms / 1000:
            self._last_thorough_s = now
            least_pages = 0
        if self.commit_to_end(least_pages):
            self.flusher.wakeup()
        self.wait_for_running(self.settings.commit_interval_ms / 1000)

    def on_stop(self) -> None:
        for _ in range(limits.FLUSH_RETRIES_ON_SHUTDOWN):
            if not self.commit_to_end(0):
                break


class FlushConsumeQueueService(ServiceThread):
    name = "shoal-flush-consumequeue"

    def __init__(
        self,
        queues: Callable[[], Iterable[ConsumeQueue]],
        checkpoint: StoreCheckpoint,
        settings: FlushSettings,
        clock: Clock,
        flush_index: Callable[[], None],
    ) -> None:
        super().__init__()
        self.queues = queues
        self.checkpoint = checkpoint
        self.settings = settings
        self.clock = clock
        self.flush_index = flush_index
        self._last_thorough_s = clock.monotonic_s()
        self.out_of_space = False
        """True from a flush that failed for lack of space until one succeeds (one log line each)."""

    def flush_all(self, least_pages: int) -> None:
        logics_timestamp = self.checkpoint.logics_msg_timestamp
        for queue in list(self.queues()):
            queue.flush(least_pages)
        if least_pages == 0:
            self.flush_index()
            if logics_timestamp > 0:
                self.checkpoint.logics_msg_timestamp = logics_timestamp
            self.checkpoint.flush()

    def run_once(self) -> None:
        self.wait_for_running(self.settings.flush_consume_queue_interval_ms / 1000)
        least_pages = self.settings.flush_consume_queue_least_pages
        now = self.clock.monotonic_s()
        thorough = now - self._last_thorough_s >= self.settings.flush_consume_queue_thorough_interval_ms / 1000
        try:
            self.flush_all(0 if thorough else least_pages)
        except OSError as error:
            if error.errno not in OUT_OF_SPACE_ERRNOS:
                raise
            if not self.out_of_space:
                self.out_of_space = True
                log.warning("ConsumeQueue/checkpoint flush cannot write (%s); retrying every round", error)
            return  # the thorough round stays due: the checkpoint is retried next time
        if thorough:
            self._last_thorough_s = now
        if self.out_of_space:
            log.warning("ConsumeQueue/checkpoint flush writes again")
            self.out_of_space = False  # after the line: whoever sees the flag cleared sees the line

    def on_stop(self) -> None:
        self.flush_all(0)


class InlineFlushWaiter:
    """Group commit on the event loop itself: the first waiter of a loop turn schedules one
    `fdatasync` for the end of the turn, covering everything appended in it.

    `os.fdatasync` releases the GIL, so store threads keep running while the loop waits for the
    disk. No thread hop on the way in or out: on this 2-vCPU class of machine that halves the
    latency of a synchronous send (performance.md §4: 573 µs inline vs ~950 µs with a thread).
    """

    def __init__(self, flusher: CommitLogFlusher, loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
        self.flusher = flusher
        self.loop = loop
        self.timeout_s = timeout_s
        self._waiters: collections.deque[tuple[int, float, asyncio.Future[PutStatus]]] = collections.deque()
        self._scheduled = False

    def wait(self, offset: int) -> asyncio.Future[PutStatus]:
        future: asyncio.Future[PutStatus] = self.loop.create_future()
        if self.flusher.flushed_offset >= offset:
            future.set_result(PutStatus.PUT_OK)
            return future
        self._waiters.append((offset, self.loop.time() + self.timeout_s, future))
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        self._scheduled = False
        try:
            self.flusher.flush_to_end(0)
        except OSError as error:
            log.error("CommitLog flush failed: %s", error)
            self.flusher.failure = error
        flushed = self.flusher.flushed_offset
        now = self.loop.time()
        waiters = self._waiters
        while waiters and waiters[0][0] <= flushed:
            _offset, deadline, future = waiters.popleft()
            if not future.done():
                # Durable now, but later than syncFlushTimeout promised: RocketMQ says so.
                future.set_result(PutStatus.PUT_OK if now <= deadline else PutStatus.FLUSH_DISK_TIMEOUT)
        while waiters:  # a failed flush: answer rather than leave callers hanging
            _offset, _deadline, future = waiters.popleft()
            if not future.done():
                future.set_result(PutStatus.FLUSH_DISK_TIMEOUT)

    def close(self) -> None:
        while self._waiters:
            _offset, _deadline, future = self._waiters.popleft()
            if not future.done():
                future.set_result(PutStatus.FLUSH_DISK_TIMEOUT)


class AsyncFlushWaiter:
    """Await group commits from an asyncio loop: one future per waiting put, one thread hop per flush.

    Appends happen in the loop thread in offset order, so waiters form a queue sorted by offset
    (`OffsetWaiters`); each flush releases a prefix of it. A timer completes overdue waiters with
    FLUSH_DISK_TIMEOUT.
    """

    def __init__(self, flusher: CommitLogFlusher, loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
        self.flusher = flusher
        self.loop = loop
        self.timeout_s = timeout_s
        self._waiters = OffsetWaiters(loop, timeout_s, PutStatus.FLUSH_DISK_TIMEOUT, before_expire=self._release)
        self._scheduled = False
        flusher.add_listener(self._on_flushed)

    def wait(self, offset: int) -> asyncio.Future[PutStatus]:
        future: asyncio.Future[PutStatus] = self.loop.create_future()
        if self.flusher.flushed_offset >= offset:
            future.set_result(PutStatus.PUT_OK)
            return future
        if len(self._waiters) >= limits.FLUSH_WAITERS_MAX_COUNT:
            future.set_result(PutStatus.OS_PAGECACHE_BUSY)
            return future
        self._waiters.add(offset, future)
        self.flusher.wakeup()
        return future

    def _on_flushed(self, flushed_offset: int) -> None:
        if self._scheduled or self.loop.is_closed():
            return
        self._scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._release)
        except RuntimeError:  # the loop closed between the check and the call
            self._scheduled = False

    def _release(self) -> None:
        self._scheduled = False
        self._waiters.release(self.flusher.flushed_offset)

    def close(self) -> None:
        self._waiters.answer_all(PutStatus.FLUSH_DISK_TIMEOUT)
