"""The store facade: wires the parts, owns their lifecycle, and offers the operations the broker uses.

    store = MessageStore(settings)
    report = store.open()      # lock, load, recover (RecoveryReport)
    store.start()              # background services; `abort` marker created
    result = store.put_message(MessageToStore(...))
    found = store.get_messages("TopicTest", 0, offset, 32)
    store.shutdown()           # flush, checkpoint, remove `abort`, unlock

Threading: puts run in the caller's thread under the CommitLog's put lock. Flushing,
dispatching, ConsumeQueue flushing and cleaning run in their own threads (see docs/locking.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence

from shoal.formats.batch import decode_batch_body
from shoal.formats.batch_records import batch_record_sizes
from shoal.formats.consume_queue_unit import BLANK_UNIT_SIZE_FIELD, UNIT, Unit
from shoal.formats.properties import (
    KEYS,
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    decode_properties,
    join_properties,
    message_keys,
)
from shoal.formats.record import RecordHeader, RecordKind, decode_header
from shoal.formats.sysflag import TRANSACTION_TYPE_MASK, TransactionType
from shoal.store import durability, limits
from shoal.store.checkpoint import StoreCheckpoint
from shoal.store.cleaning import CleaningService, DiskUsage, disk_usage_ratio
from shoal.store.clock import SYSTEM_CLOCK, Clock
from shoal.store.commitlog import DEFAULT_STORE_HOST, CommitLog
from shoal.store.consume_queue_table import ConsumeQueueTable
from shoal.store.damage import DAMAGED_DIRECTORY_NAME
from shoal.store.dispatching import Dispatcher, DispatchService, LoopDispatchDriver
from shoal.store.errors import (
    MessageIllegalError,
    PutStatus,
    StoreError,
    StoreUnavailableError,
    status_of_error,
)
from shoal.store.flushing import (
    AsyncFlushWaiter,
    CommitLogFlusher,
    CommitRealTimeService,
    FlushConsumeQueueService,
    FlushRealTimeService,
    GroupCommitService,
    InlineFlushWaiter,
)
from shoal.store.index_service import IndexService
from shoal.store.mapped_file_queue import MappedFileQueue
from shoal.store.message import (
    AppendResult,
    BatchEntry,
    DispatchListener,
    GetMessageStatus,
    GetResult,
    IndexAnswer,
    MessageToStore,
    PutResult,
    TagsCodeRule,
    validate_message,
)
from shoal.store.recovery import (
    RecoveryReport,
    TruncationReport,
    blank_units_in_damage,
    recover_commitlog,
    save_damage_aside,
)
from shoal.store.segment_outage import SegmentOutage
from shoal.store.settings import CommitLogSettings, FlushDiskType, StoreSettings
from shoal.store.space_check import log_space
from shoal.store.store_lock import AbortMarker, StoreLock
from shoal.store.transient_store_pool import TransientStorePool

log = logging.getLogger(__name__)

TagFilter = Callable[[int], bool]


def _physical_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return limits.PHYSICAL_MEMORY_FALLBACK_BYTES


class MessageStore:
    def __init__(
        self,
        settings: StoreSettings,
        *,
        clock: Clock = SYSTEM_CLOCK,
        store_host: bytes = DEFAULT_STORE_HOST,
        disk_usage: DiskUsage = disk_usage_ratio,
        tags_code: TagsCodeRule | None = None,
    ) -> None:
        """`tags_code` computes the ConsumeQueue tagsCode of some topics (the delay and timer
        topics hold a delivery time there); given here, so recovery's re-dispatch uses it too."""
        self.settings = settings
        self.clock = clock
        flush = settings.flush
        self._pool = (
            TransientStorePool(flush.transient_store_pool_size, settings.commitlog.segment_size_bytes)
            if flush.transient_pool_effective
            else None
        )
        self._commitlog = CommitLog(
            MappedFileQueue(
                settings.commitlog_dir,
                settings.commitlog.segment_size_bytes,
                warm=settings.warm_segments,
                warm_rate_bytes_per_s=settings.commitlog.warm_rate_bytes_per_s,
                preallocate_next=settings.commitlog.preallocate_next_segment,
                pool=self._pool,
                page_grained=flush.flush_disk_type is FlushDiskType.SYNC_FLUSH and self._pool is None,
            ),
            clock,
            store_host=store_host,
            check_crc_on_recover=settings.commitlog.check_crc_on_recover,
        )
        self._consume_queues = ConsumeQueueTable(settings.consume_queue_dir, settings.consume_queue.units_per_file)
        self._index = IndexService(settings.index_dir, settings.index, clock) if settings.index.enabled else None
        self._checkpoint = StoreCheckpoint(settings.checkpoint_path)
        self._dispatcher = Dispatcher(self._commitlog, self._consume_queues, self._index, self._checkpoint)
        if tags_code is not None:
            self._dispatcher.tags_code_hook, self._dispatcher.tags_code_hook_topics = tags_code
        self._dispatch_service = DispatchService(self._dispatcher)
        self._loop_dispatch: LoopDispatchDriver | None = None
        queue = self._commitlog.queue
        self._flusher: CommitLogFlusher = (
            GroupCommitService(queue, self._checkpoint, flush)
            if flush.flush_disk_type is FlushDiskType.SYNC_FLUSH
            else FlushRealTimeService(queue, self._checkpoint, flush, clock)
        )
        self._committer = CommitRealTimeService(queue, self._flusher, flush, clock) if self._pool else None
        self._cq_flusher = FlushConsumeQueueService(
            lambda: self._consume_queues, self._checkpoint, flush, clock, self._flush_index
        )
        self._cleaner = CleaningService(
            self._commitlog, self._consume_queues, self._index, settings.retention, clock, disk_usage=disk_usage
        )
        if self._index is not None:
            self._index.on_file_full = self._on_index_file_full
        self._lock = StoreLock(settings.lock_path)
        self._abort = AbortMarker(settings.abort_path)
        self.running = False
        self.shutting_down = False
        self.recovery_report: RecoveryReport | None = None
        self._memory_bytes = _physical_memory_bytes()
        self.in_memory_budget_bytes = (
            self._memory_bytes * settings.commitlog.access_message_in_memory_max_ratio_percent / 100
        )
        """How far behind the CommitLog head data still counts as in memory."""
        self._async_waiters: dict[int, AsyncFlushWaiter | InlineFlushWaiter] = {}
        self._segment_outage = SegmentOutage(clock, settings.commitlog.segment_size_bytes)

    # --- lifecycle ---
    def open(self) -> RecoveryReport:
        """Lock the directory, load every file, recover; the store is then readable and writable."""
        durability.make_directories(self.settings.root_dir)
        self._lock.acquire()
        try:
            return self._load_and_recover()
        except BaseException:
            self._close_files()
            self._lock.release()
            raise

    def _load_and_recover(self) -> RecoveryReport:
        phases: dict[str, float] = {}
        timed = _phase_timer(phases)
        last_exit_ok = self._abort.last_exit_ok
        with timed("load CommitLog"):
            notes = self._commitlog.queue.load()
        with timed("load ConsumeQueues"):
            notes += self._consume_queues.load()
        if self._index is not None:
            with timed("load index"):
                notes += self._index.load(
                    last_exit_ok, self._checkpoint.index_msg_timestamp, self._checkpoint.index_durable
                )
        if not self._checkpoint.trusted:
            notes.append("checkpoint failed its CRC; recovery scanned from the first segment")
        with timed("recover ConsumeQueues"):
            for queue in self._consume_queues:
                queue.recover()
        damaged_directory = self.settings.root_dir / DAMAGED_DIRECTORY_NAME
        with timed("scan CommitLog"):
            report = recover_commitlog(
                self._commitlog,
                self._checkpoint,
                last_exit_ok,
                damaged_directory,
                dispatched_end=self._consume_queues.max_physical_offset,
            )
        report.phases_s = phases
        report.notes = notes + report.notes
        report.segments_cut = list(self._commitlog.queue.cut_segments)
        end = report.recovered_end_offset
        if not self._commitlog.queue.files:
            self._consume_queues.destroy_all()
        elif self._consume_queues.max_physical_offset >= end:
            for queue in self._consume_queues:
                report.consume_queue_units_dropped += queue.truncate_dirty(end)
        blank_units_in_damage(self._consume_queues, report)
        self._dispatcher.note_damage(report.known_damaged_ranges + report.damaged_ranges)
        reput_from = max(self._commitlog.min_offset, self._consume_queues.max_physical_offset)
        if self._index is not None:
            # Keys pointing into damage live in the files covering it: rebuild those too.
            with timed("truncate index"):
                deleted = self._index.truncate_from(min([end] + [d.start_offset for d in report.damaged_ranges]))
            report.index_files_deleted += deleted
            if deleted or not last_exit_ok or self._index.files == []:
                reput_from = min(reput_from, max(self._index.end_physical_offset, self._commitlog.min_offset))
        save_damage_aside(self._commitlog, report, damaged_directory)
        if not last_exit_ok:
            reput_from = min(reput_from, report.scan_start_offset)
        self._dispatcher.reput_from_offset = max(reput_from, self._commitlog.min_offset)
        self._dispatcher.covered_end_offset = self._consume_queues.max_physical_offset
        self._dispatcher.rewind_on_gap = True
        decoded_before = self._dispatcher.records_decoded
        try:
            with timed("re-dispatch"):
                report.messages_redispatched = self._dispatcher.dispatch_available()
        finally:
            self._dispatcher.rewind_on_gap = False
        report.messages_redispatch_decoded = self._dispatcher.records_decoded - decoded_before
        self.rebuild_queue_offsets()
        for queue in self._consume_queues:
            queue.correct_min_offset(self._commitlog.min_offset)
        self.recovery_report = report
        if not report.lossless or report.consume_queue_units_dropped:
            log.warning("%s", report.summary())
        else:
            log.info("%s", report.summary())
        return report

    def start(
        self, *, background_dispatch: bool = True, dispatch_loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        """Start the background services and mark the store as running (`abort`).

        Dispatch runs on a thread of its own, or with `dispatch_loop` on that asyncio loop (a
        broker's: no GIL hand-offs between a busy dispatch thread and the network; stop it with
        `shutdown_from_loop`), or with `background_dispatch=False` only when `dispatch_now` is called."""
        assert self.recovery_report is not None, "open() first"
        log_space(self.settings)
        self._cleaner.check_disk()
        self._commitlog.queue.prepare_tail()
        self._commitlog.queue.prepare_next(self._commitlog.queue.max_wrote_offset)
        self._flusher.start()
        if self._committer is not None:
            self._committer.start()
        if dispatch_loop is not None:
            self._loop_dispatch = LoopDispatchDriver(self._dispatcher, dispatch_loop)
            self._loop_dispatch.start()
        elif background_dispatch:
            self._dispatch_service.start()
        self._cq_flusher.start()
        self._cleaner.start()
        self._abort.create()
        self.running = True

    def shutdown(self) -> None:
        """Stop services, flush everything, write the checkpoint, remove `abort`, unlock."""
        if self.shutting_down:
            return
        self.shutting_down = True
        was_running = self.running
        self.running = False
        if self._loop_dispatch is not None:
            self._loop_dispatch.halt()  # its loop may still run a tick: it must not dispatch now
        self._cleaner.stop()
        for waiter in self._async_waiters.values():
            waiter.close()
        if was_running:
            if self._committer is not None:
                self._committer.stop()
            self._flusher.stop()
            if self._dispatch_service.started:
                self._dispatch_service.stop()
        self._dispatcher.dispatch_available()
        if self._committer is not None:
            self._committer.commit_to_end(0)
        self._flusher.flush_to_end(0)
        self._cq_flusher.stop()
        self._cq_flusher.flush_all(0)
        clean = self._dispatcher.behind_bytes == 0 and self._flusher.failure is None
        self._close_files()
        if clean:
            self._abort.remove()
        else:
            log.error("shutdown left the abort marker: dispatch was behind or a flush failed")
        self._lock.release()

    async def shutdown_from_loop(self) -> None:
        """`shutdown` for a store started with `dispatch_loop`, called on that loop: dispatch stops
        there, what is left is dispatched there (listeners keep running on the loop only), then the
        rest of the shutdown runs in a thread."""
        if self._loop_dispatch is not None:
            self._loop_dispatch.stop()
            self._dispatcher.dispatch_available()
        await asyncio.to_thread(self.shutdown)

    def _close_files(self) -> None:
        self._commitlog.queue.close()
        self._consume_queues.close()
        if self._index is not None:
            self._index.close()

    def __enter__(self) -> MessageStore:
        self.open()
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # --- writes ---
    def _refusal(self) -> PutResult | None:
        if self.shutting_down:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="message store is shutting down")
        if self._cleaner.disk_full:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="message store is not writeable: disk full")
        if self._segment_outage.error is not None:
            outage = self._segment_outage.refusal()
            if outage is not None:
                return outage
        failure = self._dispatcher.write_failure
        if failure is not None:
            return PutResult(
                PutStatus.SERVICE_NOT_AVAILABLE,
                remark=f"message store is not writeable: dispatch cannot write ConsumeQueue/index files: {failure}",
            )
        if self._flusher.failure is not None:
            return PutResult(
                PutStatus.SERVICE_NOT_AVAILABLE, remark=f"message store flush failed: {self._flusher.failure}"
            )
        if self._commitlog.is_os_page_cache_busy(limits.OS_PAGE_CACHE_BUSY_TIMEOUT_S):
            return PutResult(PutStatus.OS_PAGECACHE_BUSY, remark="[PC_SYNCHRONIZED]broker busy")
        return None

    def append_message(self, message: MessageToStore) -> PutResult:
        """Validate and append without waiting for a flush (see put_message / put_message_async)."""
        refusal = self._refusal()
        if refusal is not None:
            return refusal
        return self._append_checked((message,))[0]

    def append_messages(self, messages: Sequence[MessageToStore]) -> list[PutResult]:
        """`append_message` of each, in order (pipelined sends read together): the store's state
        is checked once for all; a refusal answers every one of them."""
        refusal = self._refusal()
        if refusal is not None:
            return [PutResult(refusal.status, remark=refusal.remark) for _ in messages]
        return self._append_checked(messages)

    def _append_checked(self, messages: Sequence[MessageToStore]) -> list[PutResult]:
        """`CommitLog.append_messages` (the store's state already checked), each outcome answered:
        a failed segment creation is the outage's to count and answer, a success after one ends it."""
        outcomes = self._commitlog.append_messages(messages, self.settings.commitlog.message_body_size_max_bytes)
        return [self._put_result(outcome) for outcome in outcomes]

    def _put_result(
        self, outcome: AppendResult | StoreError | OSError, record_sizes: list[int] | None = None
    ) -> PutResult:
        """An append's outcome answered as a put: a refusal by its status, a failed new segment
        (ENOSPC: nothing written; a failed flush is fatal instead) as the outage's to count and
        answer, a success after one ends the outage."""
        if isinstance(outcome, StoreError):
            return PutResult(status_of_error(outcome), remark=str(outcome))
        if isinstance(outcome, OSError):
            return self._segment_outage.failed(outcome)
        if self._segment_outage.error is not None:
            self._segment_outage.succeeded()
        return PutResult(PutStatus.PUT_OK, outcome, record_sizes=record_sizes)

    def append_batch(self, template: MessageToStore, entries: Sequence[BatchEntry]) -> PutResult:
        """Append a batch (SEND_BATCH_MESSAGE): one topic/queue, consecutive offsets, one segment."""
        refusal = self._refusal()
        if refusal is not None:
            return refusal
        if template.sysflag & TRANSACTION_TYPE_MASK != TransactionType.NOT_TYPE:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, remark="batch messages cannot be transactional")
        if not entries or len(entries) > limits.BATCH_MESSAGES_MAX_COUNT:
            return PutResult(
                PutStatus.MESSAGE_ILLEGAL,
                remark=f"a batch holds 1..{limits.BATCH_MESSAGES_MAX_COUNT} messages",
            )
        topic = self._commitlog.topic_bytes(template.topic)
        body_max = self.settings.commitlog.message_body_size_max_bytes

        def write() -> tuple[AppendResult, list[int]]:
            total_body = 0
            hosts_bytes = len(template.born_host) + len(self._commitlog.store_host)
            for entry in entries:
                validate_message(topic, len(entry.body), len(entry.properties), body_max, hosts_bytes)
                total_body += len(entry.body)
            if total_body > body_max:
                raise MessageIllegalError(f"batch bodies total {total_body} bytes, more than maxMessageSize={body_max}")
            return self._commitlog.append_batch(template, list(entries), topic=topic)

        return self._batch_written(write)

    def append_batch_body(
        self, template: MessageToStore, body: bytes | memoryview, shared_properties: bytes
    ) -> PutResult:
        """`append_batch` of a SEND_BATCH_MESSAGE body as the client sent it (shoal.formats.batch):
        the records are written from the blocks in one call, with no object per message. A body
        that is not a run of blocks is MESSAGE_ILLEGAL; one past a limit goes through `append_batch`,
        which names the limit as it would."""
        refusal = self._refusal()
        if refusal is not None:
            return refusal
        if template.sysflag & TRANSACTION_TYPE_MASK != TransactionType.NOT_TYPE:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, remark="batch messages cannot be transactional")
        topic = self._commitlog.topic_bytes(template.topic)
        hosts_len = len(template.born_host) + len(self._commitlog.store_host)
        try:
            sizes, bodies_total, properties_max = batch_record_sizes(
                body, shared_properties, len(topic), hosts_len, limits.BATCH_MESSAGES_MAX_COUNT
            )
        except ValueError as error:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, remark=str(error))
        settings = self.settings.commitlog
        if (
            not 1 <= len(topic) <= limits.TOPIC_LENGTH_MAX_BYTES
            or properties_max > limits.PROPERTIES_LENGTH_MAX_BYTES
            or max(sizes) > settings.message_body_size_max_bytes
            or bodies_total > settings.message_body_size_max_bytes
        ):
            entries = [
                BatchEntry(item.flag, item.body, join_properties(item.properties, shared_properties))
                for item in decode_batch_body(body, count_max=limits.BATCH_MESSAGES_MAX_COUNT)
            ]
            return self.append_batch(template, entries)  # refuses it, naming the limit
        return self._batch_written(
            lambda: (self._commitlog.append_batch_body(template, body, shared_properties, sizes, topic=topic), sizes)
        )

    def _batch_written(self, write: Callable[[], tuple[AppendResult, list[int]]]) -> PutResult:
        """A batch's write (the append and its record sizes) answered as a put (`_put_result`)."""
        try:
            append, sizes = write()
        except (StoreError, OSError) as error:
            return self._put_result(error)
        return self._put_result(append, sizes)

    def put_message(self, message: MessageToStore) -> PutResult:
        """Append, then (SYNC_FLUSH) block until durable; a slow disk answers FLUSH_DISK_TIMEOUT."""
        result = self.append_message(message)
        return self._await_flush_blocking(result, message.wait_store_msg_ok)

    def put_batch(self, template: MessageToStore, entries: Sequence[BatchEntry]) -> PutResult:
        result = self.append_batch(template, entries)
        return self._await_flush_blocking(result, template.wait_store_msg_ok)

    def _await_flush_blocking(self, result: PutResult, wait: bool) -> PutResult:
        if result.append is None or not self.sync_flush:
            return result
        if not wait:
            self._flusher.wakeup()
            return result
        if not self._flusher.wait_flushed(result.append.next_offset, self._sync_timeout_s):
            result.status = PutStatus.FLUSH_DISK_TIMEOUT
        return result

    async def put_message_async(self, message: MessageToStore) -> PutResult:
        """put_message for asyncio callers: the loop keeps running while the group commit happens."""
        result = self.append_message(message)
        return await self.await_durable(result, message.wait_store_msg_ok)

    async def await_durable(self, result: PutResult, wait: bool = True) -> PutResult:
        durable = self.durable_soon(result, wait)
        if durable is not None:
            status = await durable
            if status is not PutStatus.PUT_OK:
                result.status = status
        return result

    def durable_soon(self, result: PutResult, wait: bool = True) -> asyncio.Future[PutStatus] | None:
        """Start the group commit that makes `result` durable, now, and answer the future that says
        when it is (None when nothing needs waiting for: ASYNC_FLUSH, a refused put, or `wait`
        false). Called as soon as a send is appended, before the work a send also schedules
        (dispatch), so that the flush is the first thing to happen after it."""
        if result.append is None or not self.sync_flush:
            return None
        if not wait:
            self._flusher.wakeup()
            return None
        loop = asyncio.get_running_loop()
        waiter = self._async_waiters.get(id(loop))
        if waiter is None or waiter.loop is not loop:
            waiter = (
                InlineFlushWaiter(self._flusher, loop, self._sync_timeout_s)
                if self.settings.flush.sync_flush_inline
                else AsyncFlushWaiter(self._flusher, loop, self._sync_timeout_s)
            )
            self._async_waiters[id(loop)] = waiter
        return waiter.wait(result.append.next_offset)

    @property
    def sync_flush(self) -> bool:
        """Whether puts are durable only once flushed (flushDiskType=SYNC_FLUSH): callers that
        answer a put wait for `wait_for_flush` when this is true."""
        return self.settings.flush.flush_disk_type is FlushDiskType.SYNC_FLUSH

    @property
    def _sync_timeout_s(self) -> float:
        return self.settings.flush.sync_flush_timeout_ms / 1000

    def dispatch_now(self, count_max: int = limits.COUNT_UNBOUNDED) -> int:
        """Dispatch what is readable now, up to `count_max` records (the background service does
        this every millisecond)."""
        return self._dispatcher.dispatch_available(count_max)

    def dispatch_soon(self) -> None:
        """After an append on the dispatch loop: dispatch before the loop reads its next requests
        (a client that sends, then pulls, sees its message). A no-op for thread dispatch."""
        if self._loop_dispatch is not None:
            self._loop_dispatch.schedule()

    def subscribe(self, listener: DispatchListener) -> Callable[[], None]:
        """Tell `listener` what each dispatch pass made readable from now on (on the dispatching
        thread or loop, once per pass); returns the call that unsubscribes it."""
        self._dispatcher.listeners.append(listener)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._dispatcher.listeners.remove(listener)

        return unsubscribe

    def flush_to_end(self) -> None:
        """Block until everything appended so far is on disk (commit, then flush)."""
        if self._committer is not None:
            self._committer.commit_to_end(0)
        self._flusher.flush_to_end(0)

    def flush_consume_queues(self) -> None:
        """ConsumeQueues, the index and the checkpoint to disk now (what the ConsumeQueue flusher
        does every flushIntervalConsumeQueue): a crash after this re-dispatches nothing before it."""
        self._cq_flusher.flush_all(0)

    def wait_prepared(self) -> None:
        """Block until the segment appends go to next is mapped (serving starts after this)."""
        self._commitlog.queue.wait_prepared()

    # --- replication ---
    def append_replicated(self, data: bytes | memoryview, physical_offset: int) -> int:
        """Append whole records a master sent at exactly `physical_offset` (ValueError when it is
        not our end); dispatch picks them up like any other. Returns the new end."""
        return self._commitlog.append_raw(data, physical_offset)

    def start_empty_at(self, physical_offset: int) -> None:
        """An empty CommitLog starts at a master's segment boundary instead of 0."""
        if physical_offset % self._commitlog.segment_size:
            raise ValueError(f"{physical_offset} is not a segment start")
        self._commitlog.queue.last_file(physical_offset)
        self._dispatcher.reput_from_offset = physical_offset

    def truncate_to(self, offset: int) -> TruncationReport:
        """Drop every CommitLog byte at or after `offset` (a record boundary) and what points at
        it: what a fenced master does before following the new one.

        Recovery's steps on a running store: everything is flushed first, so the segments
        truncation deletes hold nothing a concurrent flush could still write. Run it where
        appends and dispatching run (the broker's loop), so neither interleaves with it."""
        commitlog = self._commitlog
        queue = commitlog.queue
        previous_end = queue.max_wrote_offset
        if not (0 <= offset <= previous_end and (offset >= commitlog.min_offset or offset == 0)):
            raise ValueError(f"cannot truncate to {offset}: the CommitLog holds {commitlog.min_offset}..{previous_end}")
        self._dispatcher.dispatch_available()
        self.flush_to_end()
        self.flush_consume_queues()
        with commitlog.put_lock:
            dropped = queue.truncate_dirty_files(offset)
            queue.flushed_where = min(queue.flushed_where, offset)
            queue.committed_where = min(queue.committed_where, offset)
            commitlog.forget_current_segment()
        units = sum(consume_queue.truncate_dirty(offset) for consume_queue in self._consume_queues)
        dispatcher = self._dispatcher
        reput_from = min(dispatcher.reput_from_offset, offset)
        index_deleted = 0
        if self._index is not None:
            index_deleted = self._index.truncate_from(offset)
            if index_deleted:
                reput_from = min(reput_from, max(self._index.end_physical_offset, commitlog.min_offset))
        dispatcher.reput_from_offset = max(reput_from, commitlog.min_offset)
        dispatcher.dispatch_available()
        self.rebuild_queue_offsets()
        report = TruncationReport(offset, previous_end, dropped, units, index_deleted)
        log.warning("truncated the store: %s", report.summary())
        return report

    def rebuild_queue_offsets(self) -> None:
        """Take the next queue offsets from the ConsumeQueues (after recovery, truncation, or a
        slave's life: appends of replicated bytes never touch the table)."""
        self._commitlog.topic_queue_table = {
            (queue.topic, queue.queue_id): queue.max_offset for queue in self._consume_queues
        }

    # --- where things are ---
    @property
    def min_offset(self) -> int:
        """The CommitLog's first byte (retention moves it)."""
        return self._commitlog.min_offset

    @property
    def max_offset(self) -> int:
        """The end of what readers may read."""
        return self._commitlog.max_offset

    @property
    def wrote_offset(self) -> int:
        """The end of what was appended (past `max_offset` while a transient-pool commit is due)."""
        return self._commitlog.queue.max_wrote_offset

    @property
    def flushed_offset(self) -> int:
        return self._commitlog.queue.flushed_where

    @property
    def committed_offset(self) -> int | None:
        """The end committed from the transient pool to the file; None without a pool."""
        return self._commitlog.queue.committed_where if self._pool is not None else None

    @property
    def segment_size(self) -> int:
        return self._commitlog.segment_size

    @property
    def segment_count(self) -> int:
        return len(self._commitlog.queue.files)

    @property
    def store_host(self) -> bytes:
        """The STOREHOST this store writes into records (IPv4 or IPv6 address and port)."""
        return self._commitlog.store_host

    @property
    def dispatch_behind_bytes(self) -> int:
        return self._dispatcher.behind_bytes

    @property
    def flush_failure(self) -> BaseException | None:
        """Why the CommitLog flush stopped for good (writes are refused), or None."""
        return self._flusher.failure

    @property
    def disk_full(self) -> bool:
        return self._cleaner.disk_full

    @property
    def transient_buffers_left(self) -> int | None:
        return self._pool.available_count if self._pool is not None else None

    def rolled_offset(self, offset: int) -> int:
        """The start of the next segment when `offset` is the end of a segment's last record."""
        return self._commitlog.rolled_offset(offset)

    def in_memory(self, physical_offset: int) -> bool:
        """Whether data at `physical_offset` is near enough the head to count as in memory (spec §8.8)."""
        return self._commitlog.max_offset - physical_offset <= self.in_memory_budget_bytes

    # --- reads ---
    def read(self, physical_offset: int, size: int) -> memoryview | None:
        """`size` bytes of the CommitLog at `physical_offset` (a mapped view; None once deleted)."""
        return self._commitlog.read(physical_offset, size)

    def data_from(self, physical_offset: int) -> tuple[memoryview, int] | None:
        """The readable bytes from `physical_offset` to the end of its segment, and the segment's
        start offset (what replication sends)."""
        return self._commitlog.data_from(physical_offset)

    def queue_ids(self, topic: str) -> list[int]:
        """The ids of the topic's ConsumeQueues that exist, ascending."""
        return sorted(queue.queue_id for queue in self._consume_queues if queue.topic == topic)

    def unit_at(self, topic: str, queue_id: int, queue_offset: int) -> Unit | None:
        """The ConsumeQueue unit at a queue offset; None outside the queue."""
        queue = self._consume_queues.find(topic, queue_id)
        return queue.unit_at(queue_offset) if queue is not None else None

    def last_unit(self, topic: str, queue_id: int) -> Unit | None:
        queue = self._consume_queues.find(topic, queue_id)
        return queue.last_unit() if queue is not None else None

    def read_units(self, topic: str, queue_id: int, queue_offset: int, count_max: int) -> list[tuple[int, int, int]]:
        """Up to `count_max` units (physical offset, size, tagsCode) from `queue_offset`, within
        one ConsumeQueue file; empty outside the queue. The mapped view is released before
        returning, so retention can unmap the file at any time."""
        queue = self._consume_queues.find(topic, queue_id)
        found = queue.units_from(queue_offset) if queue is not None and count_max > 0 else None
        if found is None:
            return []
        view, _ = found
        try:
            with view[: min(len(view), count_max * UNIT.size)] as part:
                return list(UNIT.iter_unpack(part))
        finally:
            view.release()

    def queue_head_on_disk(self, topic: str, queue_id: int) -> bool:
        """True when the queue's first message is older than what stays in memory (spec §8.8)."""
        queue = self._consume_queues.find(topic, queue_id)
        unit = queue.unit_at(queue.min_offset) if queue is not None else None
        return unit is not None and not self.in_memory(unit.physical_offset)

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        queue = self._consume_queues.find(topic, queue_id)
        return queue.max_offset if queue is not None else 0

    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        queue = self._consume_queues.find(topic, queue_id)
        return queue.min_offset if queue is not None else 0

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        tag_filter: TagFilter | None = None,
        *,
        coalesce: bool = False,
    ) -> GetResult:
        """Up to `max_count` records from a queue, as RocketMQ's `getMessage` answers (statuses,
        next offset, slave suggestion); bounded by the in-memory / on-disk transfer limits.
        `coalesce`: the records as `parts` (adjacent ones as one view: what a pull sends) instead
        of one view each with their offsets."""
        queue = self._consume_queues.find(topic, queue_id)
        if queue is None:
            return GetResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_offset, max_offset = queue.min_offset, queue.max_offset
        if max_offset == 0:
            return GetResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
        if offset < min_offset:
            return GetResult(GetMessageStatus.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset)
        if offset == max_offset:
            return GetResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset)
        if offset > max_offset:
            # 4.9.7 answers the queue's end (older versions the start when it was 0): a consumer
            # whose saved offset is past the end, after a store restore say, resumes at the end
            # instead of reading the whole queue again.
            return GetResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, max_offset, min_offset, max_offset)
        found = queue.units_from(offset)
        if found is None:
            return GetResult(GetMessageStatus.OFFSET_FOUND_NULL, max(offset + 1, min_offset), min_offset, max_offset)
        units, _ = found
        try:
            return self._collect(
                units,
                offset,
                min(max_count, limits.PULL_MESSAGES_MAX_COUNT),
                tag_filter,
                min_offset,
                max_offset,
                coalesce,
            )
        finally:
            units.release()

    def _collect(
        self,
        units: memoryview,
        offset: int,
        max_count: int,
        tag_filter: TagFilter | None,
        min_offset: int,
        max_offset: int,
        coalesce: bool,
    ) -> GetResult:
        result = GetResult(GetMessageStatus.NO_MATCHED_MESSAGE, offset, min_offset, max_offset)
        commitlog = self._commitlog
        commitlog_min = commitlog.min_offset
        commitlog_max = commitlog.max_offset
        segment_size = commitlog.segment_size
        memory_budget = self.in_memory_budget_bytes
        settings = self.settings.commitlog
        count = 0
        total_bytes = 0
        scanned = 0
        last_physical = 0
        unit_count = len(units) // UNIT.size
        # Units scanned per call are bounded too, so a filter that matches nothing cannot stall a pull.
        scan_max = max(max_count, limits.GET_MESSAGES_SCAN_MIN_COUNT)
        removed = False
        run_start = run_end = run_limit = run_count = 0
        """Coalescing: the CommitLog range of the records not yet in `parts`, the end of its
        segment (a view never crosses one), and how many records it holds."""
        for index in range(min(unit_count, scan_max)):
            physical, size, tags = UNIT.unpack_from(units, index * UNIT.size)
            scanned = index + 1
            if size == BLANK_UNIT_SIZE_FIELD or physical < commitlog_min:
                continue
            last_physical = physical
            in_memory = commitlog_max - physical <= memory_budget
            if _batch_full(count, total_bytes, size, max_count, in_memory, settings):
                scanned = index
                break
            if tag_filter is not None and not tag_filter(tags):
                continue
            if coalesce:
                if run_count and physical == run_end and physical + size <= run_limit:
                    run_end += size
                    run_count += 1
                else:
                    if run_count and not self._add_part(result, run_start, run_end):
                        removed = True
                        count -= run_count
                        total_bytes -= run_end - run_start
                    run_start, run_end, run_count = physical, physical + size, 1
                    run_limit = (physical // segment_size + 1) * segment_size
                count += 1
                total_bytes += size
                continue
            view = commitlog.read(physical, size)
            if view is None:
                removed = True
                continue
            result.messages.append(view)
            result.queue_offsets.append(offset + index)
            result.commitlog_offsets.append(physical)
            count += 1
            total_bytes += size
        if run_count and not self._add_part(result, run_start, run_end):
            removed = True
            count -= run_count
        result.count = count
        result.next_begin_offset = offset + scanned
        if count:
            result.status = GetMessageStatus.FOUND
        elif removed:
            result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
        if last_physical:
            result.suggest_pulling_from_slave = commitlog_max - last_physical > memory_budget
        return result

    def _add_part(self, result: GetResult, start: int, end: int) -> bool:
        """Add the CommitLog bytes [start, end) to `result.parts`; False when no longer readable."""
        view = self._commitlog.read(start, end - start)
        if view is None:
            return False
        result.parts.append(view)
        return True

    def message_at(self, commitlog_offset: int) -> tuple[RecordHeader, memoryview] | None:
        """The record at a CommitLog offset (VIEW_MESSAGE_BY_ID), validated, CRC included; the
        header's positions are relative to the returned view."""
        check = self._commitlog.check_at(commitlog_offset, check_crc=True)
        if check.kind is not RecordKind.MESSAGE:
            return None
        view = self._commitlog.read(commitlog_offset, check.size)
        if view is None:
            return None
        return decode_header(view, 0), view

    def store_time_at(self, commitlog_offset: int) -> int | None:
        header = self._commitlog.header_at(commitlog_offset)
        return header.store_timestamp if header is not None else None

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        queue = self._consume_queues.find(topic, queue_id)
        return queue.offset_by_time(timestamp_ms, self.store_time_at) if queue is not None else 0

    def earliest_message_time(self, topic: str, queue_id: int) -> int:
        """GET_EARLIEST_MSG_STORETIME; -1 when the queue is empty."""
        queue = self._consume_queues.find(topic, queue_id)
        if queue is None:
            return -1
        unit = queue.unit_at(queue.min_offset)
        if unit is None:
            return -1
        found = self.store_time_at(unit.physical_offset)
        return found if found is not None else -1

    @property
    def index_enabled(self) -> bool:
        return self._index is not None

    def index_query(self, topic: str, key: str, count_max: int, begin_ms: int, end_ms: int) -> IndexAnswer:
        """QUERY_MESSAGE's lookup: CommitLog offsets whose key hashes match (callers compare keys),
        and the index's last update (store timestamp, physical offset)."""
        if self._index is None:
            raise StoreUnavailableError("messageIndexEnable=false: no index to query")
        offsets = self._index.query(topic, key, count_max, begin_ms, end_ms)
        stamp, physical = self._index.last_update
        return IndexAnswer(offsets, stamp, physical)

    def query_by_key(
        self, topic: str, key: str, count_max: int, begin_ms: int = 0, end_ms: int = limits.TIMESTAMP_UNBOUNDED_MS
    ) -> list[tuple[RecordHeader, memoryview]]:
        """Messages whose KEYS or UNIQ_KEY equal `key` (index lookup, then key comparison)."""
        if self._index is None:
            raise StoreUnavailableError("messageIndexEnable=false: no index to query")
        found: list[tuple[RecordHeader, memoryview]] = []
        for offset in self._index.query(topic, key, count_max, begin_ms, end_ms):
            record = self.message_at(offset)
            if record is None:
                continue
            header, view = record
            start = header.properties_position
            properties = decode_properties(view[start : start + header.properties_length])
            if header.topic == topic and (
                properties.get(UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == key or key in message_keys(properties.get(KEYS))
            ):
                found.append(record)
        return found

    # --- retention on request ---
    def request_expired_file_deletion(self) -> None:
        """DELETE_EXPIRED_COMMITLOG (DefaultMessageStore.executeDeleteFilesManually): the next
        cleaning rounds delete CommitLog segments past `fileReservedTime` whatever the hour of
        `deleteWhen`. Returns at once; the cleaner does the work."""
        self._cleaner.request_manual_delete()

    def delete_topic(self, topic: str) -> int:
        """DELETE_TOPIC_IN_BROKER (DefaultMessageStore.cleanUnusedTopic): destroy the topic's
        ConsumeQueues and forget their next queue offsets, so a topic created again under the name
        starts at queue offset 0 in fresh ConsumeQueues. Its records stay in the CommitLog until
        retention. Returns how many queues were removed.

        Same lock order as `clean_expired_consume_queues`. Dispatch first catches up and is then held
        still, so no unit of the topic appended before the delete lands in a queue created afterwards
        (the broker appends on the loop that runs this, so nothing is appended meanwhile)."""
        with self._cleaner.round_lock, self._dispatcher.paused(caught_up=True):
            removed = self._consume_queues.remove_topic(topic)
            with self._commitlog.put_lock:
                for key in [key for key in self._commitlog.topic_queue_table if key[0] == topic]:
                    del self._commitlog.topic_queue_table[key]
        log.info("topic %s deleted: %d ConsumeQueues destroyed", topic, removed)
        return removed

    def clean_expired_consume_queues(self, keep_topics: frozenset[str]) -> list[tuple[str, int]]:
        """CLEAN_EXPIRED_CONSUMEQUEUE (DefaultMessageStore.cleanExpiredConsumerQueue): destroy every
        ConsumeQueue whose last message ends below the CommitLog's first byte (retention deleted
        all of it), but those of `keep_topics`; an empty queue is kept (it may be new). A topic
        left without queues loses its directory, and a removed queue's next message starts at
        queue offset 0 again, as in RocketMQ. Returns the (topic, queueId) removed.

        Lock order (docs/locking.md): the cleaner's round lock, then dispatch held still, then the
        table's lock; the queue offsets are dropped afterwards under `CommitLog.put_lock` alone."""
        with self._cleaner.round_lock, self._dispatcher.paused():
            min_offset = self._commitlog.min_offset
            removed = self._consume_queues.remove_if(
                lambda queue: queue.topic not in keep_topics and 0 <= queue.max_physical_offset < min_offset
            )
            for queue in removed:
                queue.destroy()
            remaining = self._consume_queues.topics()
            for topic in {queue.topic for queue in removed} - remaining:
                with contextlib.suppress(OSError):
                    durability.rmdir(self._consume_queues.directory / topic)
        with self._commitlog.put_lock:
            for queue in removed:
                self._commitlog.topic_queue_table.pop((queue.topic, queue.queue_id), None)
        for queue in removed:
            log.info(
                "cleanExpiredConsumerQueue: %s/%d destroyed (below CommitLog offset %d)",
                queue.topic,
                queue.queue_id,
                min_offset,
            )
        return [(queue.topic, queue.queue_id) for queue in removed]

    # --- metrics ---
    def stats(self) -> dict[str, float]:
        queue = self._commitlog.queue
        return {
            "commitlog_min_offset": queue.min_offset,
            "commitlog_max_offset": queue.max_offset,
            "commitlog_flushed_offset": queue.flushed_where,
            "commitlog_segments": len(queue.files),
            "dispatch_behind_bytes": self._dispatcher.behind_bytes,
            "consume_queues": len(self._consume_queues),
            "flush_count": self._flusher.flush_count,
            "flush_seconds_total": self._flusher.flush_seconds_total,
            "disk_full": float(self._cleaner.disk_full),
            "segment_create_failing": float(self._segment_outage.error is not None),
            "dispatch_failing": float(self._dispatcher.failing),
            "dispatch_write_failures": self._dispatcher.write_failures_total,
            "commitlog_damaged_ranges": self._dispatcher.damaged_ranges_total,
            "commitlog_damaged_bytes": self._dispatcher.damaged_bytes_total,
        }

    def _flush_index(self) -> None:
        """Flush the newest index file and mark in the checkpoint (written right after) how much of
        it is durable: after a crash only keys past the mark are rebuilt."""
        if self._index is not None:
            self._checkpoint.index_durable = self._index.flush()

    def _on_index_file_full(self, end_timestamp: int) -> None:
        self._checkpoint.index_msg_timestamp = end_timestamp
        self._checkpoint.flush()


def _phase_timer(phases: dict[str, float]) -> Callable[[str], contextlib.AbstractContextManager[None]]:
    """`with timed("name"):` adds the block's seconds to `phases["name"]`."""

    @contextlib.contextmanager
    def timed(name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            phases[name] = phases.get(name, 0.0) + time.perf_counter() - started

    return timed


def _batch_full(
    count: int, total_bytes: int, next_size: int, max_count: int, in_memory: bool, settings: CommitLogSettings
) -> bool:
    """RocketMQ's `isTheBatchFull`: count and byte limits depend on whether data is in memory."""
    if count == 0:
        return False
    if count >= max_count:
        return True
    if in_memory:
        return (
            total_bytes + next_size > settings.max_transfer_bytes_in_memory
            or count > settings.max_transfer_count_in_memory - 1
        )
    return (
        total_bytes + next_size > settings.max_transfer_bytes_on_disk or count > settings.max_transfer_count_on_disk - 1
    )
