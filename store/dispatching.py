"""The Dispatcher (RocketMQ's ReputMessageService): follow the CommitLog, build ConsumeQueues and the index.

It reads only what the CommitLog made readable, one record at a time, from `reput_from_offset`,
so it works the same on records we appended, records a master replicated to us, and records
found during recovery. Units already present are skipped (the ConsumeQueue's
`max_physical_offset` and the index's end offset), so dispatching twice is harmless.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import NamedTuple

from shoal.store.checkpoint import StoreCheckpoint
from shoal.store.commitlog import CommitLog
from shoal.store.consume_queue_table import ConsumeQueueTable
from shoal.store.index_service import IndexService
from shoal.store.java_hash import tags_code
from shoal.store.properties import KEYS, TAGS, UNIQ_CLIENT_MESSAGE_ID_KEYIDX, decode_properties
from shoal.store.record import RecordHeader, RecordKind, check_record
from shoal.store.service import ServiceThread
from shoal.store.sysflag import TRANSACTION_TYPE_MASK, TransactionType, gets_consume_queue_entry

log = logging.getLogger(__name__)

IDLE_POLL_S = 0.001  # RocketMQ's reput polls every 1 ms


class DispatchRequest(NamedTuple):
    """What a dispatched message tells its listeners (long polling, delay, metrics)."""

    topic: str
    queue_id: int
    commitlog_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    queue_offset: int
    properties: dict[str, str]


TagsCodeHook = Callable[[str, dict[str, str], int, int], int | None]
"""(topic, properties, store_timestamp, default tagsCode) -> tagsCode override or None."""


class Dispatcher:
    def __init__(
        self,
        commitlog: CommitLog,
        consume_queues: ConsumeQueueTable,
        index: IndexService | None,
        checkpoint: StoreCheckpoint,
    ) -> None:
        self.commitlog = commitlog
        self.consume_queues = consume_queues
        self.index = index
        self.checkpoint = checkpoint
        self.reput_from_offset = 0
        self.tags_code_hook: TagsCodeHook | None = None
        self.listeners: list[Callable[[DispatchRequest], None]] = []
        self.dispatched_count = 0
        self._lock = threading.Lock()
        self._reported_damage_at = -1

    @property
    def behind_bytes(self) -> int:
        return max(0, self.commitlog.max_offset - self.reput_from_offset)

    def dispatch_available(self, count_max: int = 1 << 62) -> int:
        """Dispatch every readable record not yet dispatched (at most `count_max`); returns how many."""
        with self._lock:
            return self._dispatch_locked(count_max)

    def _dispatch_locked(self, count_max: int) -> int:
        dispatched = 0
        while dispatched < count_max and self.reput_from_offset < self.commitlog.max_offset:
            if self.reput_from_offset < self.commitlog.min_offset:
                log.warning(
                    "dispatch offset %d is below the CommitLog start %d (cleaned): skipping ahead",
                    self.reput_from_offset,
                    self.commitlog.min_offset,
                )
                self.reput_from_offset = self.commitlog.min_offset
            found = self.commitlog.data_from(self.reput_from_offset)
            if found is None:
                break
            view, _segment_start = found
            try:
                consumed, count, stop = self._dispatch_view(view, count_max - dispatched)
            finally:
                view.release()
            dispatched += count
            self.reput_from_offset += consumed
            if stop:
                break
        self.dispatched_count += dispatched
        return dispatched

    def _dispatch_view(self, view: memoryview, count_max: int) -> tuple[int, int, bool]:
        """Dispatch records in one segment's readable bytes: (bytes consumed, records, stop)."""
        position = 0
        count = 0
        limit = len(view)
        base = self.reput_from_offset
        while position < limit and count < count_max:
            check = check_record(
                view, position, limit, check_crc=False, expected_physical_offset=base + position
            )
            if check.kind is RecordKind.END_OF_FILE:
                return self.commitlog.rolled_offset(base + position) - base, count, False
            if check.kind is RecordKind.INVALID or check.header is None:
                if check.size > 0:
                    log.error("skipping %d bytes at %d: %s", check.size, base + position, check.reason)
                    position += check.size
                    continue
                if self._reported_damage_at != base + position:
                    self._reported_damage_at = base + position
                    log.error("dispatch stopped at CommitLog offset %d: %s", base + position, check.reason)
                return position, count, True
            self._dispatch_one(check.header, view, position)
            position += check.size
            count += 1
        return position, count, False

    def _dispatch_one(self, header: RecordHeader, view: memoryview, position: int) -> None:
        start = header.properties_position
        properties = decode_properties(view[start : start + header.properties_length])
        commitlog_offset = header.physical_offset
        store_timestamp = header.store_timestamp
        code = tags_code(properties.get(TAGS))
        if self.tags_code_hook is not None:
            override = self.tags_code_hook(header.topic, properties, store_timestamp, code)
            if override is not None:
                code = override
        if gets_consume_queue_entry(header.sysflag):
            queue = self.consume_queues.find_or_create(header.topic, header.queue_id)
            queue.put(commitlog_offset, header.total_size, code, header.queue_offset)
            self.checkpoint.logics_msg_timestamp = store_timestamp
        if (
            self.index is not None
            and (header.sysflag & TRANSACTION_TYPE_MASK) != TransactionType.ROLLBACK_TYPE
        ):
            uniq_key = properties.get(UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            keys = properties.get(KEYS)
            if uniq_key or keys:
                self.index.build(header.topic, commitlog_offset, store_timestamp, uniq_key, keys)
        if self.listeners:
            request = DispatchRequest(
                header.topic,
                header.queue_id,
                commitlog_offset,
                header.total_size,
                code,
                store_timestamp,
                header.queue_offset,
                properties,
            )
            for listener in self.listeners:
                listener(request)


class DispatchService(ServiceThread):
    """Runs the Dispatcher in the background, polling every millisecond when idle."""

    name = "shoal-dispatch"

    def __init__(self, dispatcher: Dispatcher) -> None:
        super().__init__()
        self.dispatcher = dispatcher

    def run_once(self) -> None:
        if self.dispatcher.dispatch_available(4096) == 0:
            self.wait_for_running(IDLE_POLL_S)
