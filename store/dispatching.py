"""The Dispatcher (RocketMQ's ReputMessageService): follow the CommitLog, build ConsumeQueues and the index.

It reads only what the CommitLog made readable, one record at a time, from `reput_from_offset`,
so it works the same on records we appended, records a master replicated to us, and records
found during recovery. Units already present are skipped (the ConsumeQueue's
`max_physical_offset` and the index's end offset), so dispatching twice is harmless.

Two failures never stop it silently while the broker keeps acknowledging:

- Damage in the CommitLog (bytes that are no record): dispatch resynchronises at the next record
  valid at its position (store/damage.py), skips the range, logs it once, and counts it
  (`damaged_ranges_total`, `damaged_bytes_total`); a ConsumeQueue whose messages were lost there
  gets blank units, so logical offsets still equal the records' QUEUEOFFSET. Ranges recovery
  already found are skipped without a new report.
- A write error (ENOSPC creating a ConsumeQueue or IndexFile): the record is retried with a
  backoff (DISPATCH_RETRY_BACKOFF_MIN_MS doubling to _MAX_MS), one log line when the failure
  starts and one when it ends; meanwhile `write_failure` is set and the store refuses puts
  (SERVICE_NOT_AVAILABLE, as RocketMQ does when a logic queue cannot be written).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from typing import NamedTuple

from shoal.formats.covered_run import covered_run
from shoal.formats.dispatch_run import dispatch_runs
from shoal.formats.java_hash import tags_code
from shoal.formats.properties import KEYS, TAGS, UNIQ_CLIENT_MESSAGE_ID_KEYIDX, decode_properties, find_properties
from shoal.formats.record import (
    RecordCheck,
    RecordKind,
    check_record,
    dispatch_fields,
)
from shoal.formats.sysflag import (
    TRANSACTION_TYPE_MASK,
    TransactionType,
)
from shoal.store import limits
from shoal.store.checkpoint import StoreCheckpoint
from shoal.store.commitlog import CommitLog
from shoal.store.consume_queue import ConsumeQueue, UnitRun
from shoal.store.consume_queue_table import ConsumeQueueTable
from shoal.store.damage import DamagedRange, find_resync
from shoal.store.errors import SegmentNotReadyError
from shoal.store.index_file import UniqueKey
from shoal.store.index_service import IndexService
from shoal.store.message import DispatchListener, DispatchRequest, TagsCodeHook
from shoal.store.service import ServiceThread

log = logging.getLogger(__name__)

_DISPATCHED_PROPERTIES = (TAGS.encode(), KEYS.encode(), UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode())
"""What each record's ConsumeQueue unit and index entries need, read without decoding the map."""


class _Rewind(Exception):
    """Raised inside a dispatch pass: restart it from `offset` (a ConsumeQueue lags behind)."""

    def __init__(self, offset: int) -> None:
        super().__init__(offset)
        self.offset = offset


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
        self.tags_code_hook_topics: frozenset[str] | None = None
        """When set, the hook runs only for these topics (it costs a property decode per message)."""
        self.listeners: list[DispatchListener] = []
        self.dispatched_count = 0
        self._lock = threading.Lock()
        self._reported_damage_at = -1
        self._topic_names: dict[bytes, str] = {}
        self.rewind_on_gap = False
        """During recovery only: a ConsumeQueue found behind the others (its files older than the
        CommitLog's, as in a store copied file by file) makes dispatch restart from that queue's
        end instead of writing a unit after a gap. Units already present are skipped, so the
        second pass only fills what is missing; listeners are not attached yet."""
        self._rewound: set[tuple[str, int]] = set()
        self.covered_end_offset = 0
        """Below this CommitLog offset records may already be in their ConsumeQueue and the index
        (recovery sets it to where the ConsumeQueues end): such a record is skipped from its
        fixed fields, without decoding its topic or properties (RocketMQ's ConsumeQueue and
        IndexService return at once for those too)."""
        self.records_decoded = 0
        """Records whose topic and properties dispatch decoded (those it did not skip as covered)."""
        self.damaged: dict[int, DamagedRange] = {}
        """Damaged CommitLog ranges by start offset (recovery's and our own), oldest dropped past
        DAMAGED_RANGES_TRACKED_MAX_COUNT."""
        self.damaged_ranges_total = 0
        self.damaged_bytes_total = 0
        self._damage_search: tuple[DamagedRange, int] | None = None
        """A damage whose end is not known yet, and the offset the search for it has reached."""
        self.write_failure: OSError | None = None
        """The last write error while dispatch cannot write (e.g. ENOSPC); None when it can."""
        self.write_failures_total = 0
        self._failing_since_s = 0.0
        self._retry_at_s = 0.0
        self._backoff_ms = limits.DISPATCH_RETRY_BACKOFF_MIN_MS
        self._failed_with: OSError | None = None
        self._file_wait_s: float | None = None
        """During a `dispatch_available(file_wait_s=...)` pass: how long a new file may be waited for."""

    @property
    def behind_bytes(self) -> int:
        return max(0, self.commitlog.max_offset - self.reput_from_offset)

    @property
    def failing(self) -> bool:
        """True while dispatch cannot write ConsumeQueue or index files (the store refuses puts)."""
        return self.write_failure is not None

    @contextlib.contextmanager
    def paused(self, *, caught_up: bool = False) -> Iterator[None]:
        """Hold dispatch still (no ConsumeQueue or index writes) while the caller changes the
        ConsumeQueue table (CLEAN_EXPIRED_CONSUMEQUEUE). `caught_up`: first dispatch what is
        already appended, so no unit of a queue being removed is still on its way to it."""
        with self._lock:
            if caught_up and self.write_failure is None:
                self._dispatch_locked(limits.COUNT_UNBOUNDED)
            yield

    def note_damage(self, ranges: list[DamagedRange]) -> None:
        """Damaged ranges recovery found and reported: skipped silently when dispatch meets them."""
        with self._lock:
            for damaged in ranges:
                self._record_damage_locked(damaged)

    def dispatch_available(self, count_max: int = limits.COUNT_UNBOUNDED, *, file_wait_s: float | None = None) -> int:
        """Dispatch every readable record not yet dispatched (at most `count_max`); returns how many.
        After a write error it retries only once the backoff has passed. `file_wait_s`: a new
        ConsumeQueue file is created by the allocation thread and waited for at most this long;
        dispatch stops before the record that needs it and the next call continues (an event loop
        must not wait for a slow disk). None: files are created here, as recovery needs."""
        with self._lock:
            if self.write_failure is not None and time.monotonic() < self._retry_at_s:
                return 0
            self._file_wait_s = file_wait_s
            try:
                dispatched = self._dispatch_locked(count_max)
            finally:
                self._file_wait_s = None
            failed, self._failed_with = self._failed_with, None
            if failed is not None:
                self._on_write_failure_locked(failed)
            elif self.write_failure is not None:
                self._on_write_recovered_locked()
            return dispatched

    def _on_write_failure_locked(self, error: OSError) -> None:
        now = time.monotonic()
        self.write_failures_total += 1
        if self.write_failure is None:
            self._failing_since_s = now
            self._backoff_ms = limits.DISPATCH_RETRY_BACKOFF_MIN_MS
            log.error(
                "dispatch cannot write ConsumeQueue/index files at CommitLog offset %d: %s; "
                "the store refuses writes until it can (retrying every %d ms at most)",
                self.reput_from_offset,
                error,
                limits.DISPATCH_RETRY_BACKOFF_MAX_MS,
            )
        else:
            self._backoff_ms = min(self._backoff_ms * 2, limits.DISPATCH_RETRY_BACKOFF_MAX_MS)
        self.write_failure = error
        self._retry_at_s = now + self._backoff_ms / 1000

    def _on_write_recovered_locked(self) -> None:
        log.warning(
            "dispatch writes again after %.1f s and %d failed attempts; the store accepts writes",
            time.monotonic() - self._failing_since_s,
            self.write_failures_total,
        )
        self.write_failure = None
        self._backoff_ms = limits.DISPATCH_RETRY_BACKOFF_MIN_MS

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
            except _Rewind as rewind:
                self.reput_from_offset = rewind.offset
                continue
            finally:
                view.release()
            dispatched += count
            self.reput_from_offset += consumed
            if stop:
                break
        self.dispatched_count += dispatched
        return dispatched

    def _dispatch_view(self, view: memoryview, count_max: int) -> tuple[int, int, bool]:
        """Dispatch records in one segment's readable bytes: (bytes consumed, records, stop).

        One pass: the common record (the next of its queue, no transaction, no tagsCode hook)
        goes through the fast path, its unit appended to its queue's open UnitRun; the runs are
        published and the listeners told what arrived once, when the pass ends. Anything unusual
        goes through `check_record` for a precise reason and `_dispatch_one`."""
        dispatch_pass = _Pass(bool(self.listeners))
        try:
            consumed, count, stop = self._dispatch_records(view, count_max, dispatch_pass)
            unindexed = dispatch_pass.keys[0][2] if dispatch_pass.keys else -1
            try:
                self._write_keys(dispatch_pass)
            except OSError as error:
                # Dispatch again from the first message whose key may be missing: its unit and
                # the keys written are found present then.
                self._failed_with = error
                return min(consumed, unindexed - self.reput_from_offset), count, True
            return consumed, count, stop
        finally:
            self._end_pass(dispatch_pass)

    def _write_keys(self, dispatch_pass: _Pass) -> None:
        """Index the unique keys the pass's fast path kept (before any other key, in CommitLog order)."""
        keys = dispatch_pass.keys
        if keys and self.index is not None:
            self.index.build_unique_keys(keys)
            keys.clear()

    def _dispatch_records(self, view: memoryview, count_max: int, dispatch_pass: _Pass) -> tuple[int, int, bool]:
        position = 0
        count = 0
        limit = len(view)
        base = self.reput_from_offset
        topics = self._topic_names
        damaged = self.damaged
        covered_end = self.covered_end_offset if not self.listeners else 0
        queues: dict[tuple[bytes, int], ConsumeQueue] = {}
        """ConsumeQueues by raw topic and queue id, for this pass (the table changes only while
        dispatch is held still, under the lock this pass holds)."""
        index = self.index
        runs = dispatch_pass.runs
        listening = dispatch_pass.listening
        unique_keys = dispatch_pass.keys if index is not None else None
        while position < limit and count < count_max:
            if damaged and base + position in damaged:
                # Known damage (found by recovery with the CRC check dispatch does not do): skip it
                # even where its first bytes still frame as a record.
                resume = damaged[base + position].end_offset
                if resume - base >= limit:
                    return resume - base, count, False
                position = resume - base
                continue
            if base + position < covered_end:
                # Records dispatched before a crash (replayed from the checkpoint): skipped in runs.
                keys_before = len(unique_keys) if unique_keys is not None else 0
                consumed, taken, missing = covered_run(
                    view,
                    position,
                    limit,
                    base + position,
                    covered_end - base,
                    index.last_indexed_offset if index is not None else covered_end,
                    queues,
                    topics,
                    1 if damaged else count_max - count,  # known damage is looked up per record
                    unique_keys,
                )
                if taken:
                    position += consumed
                    count += taken
                    if unique_keys is not None:
                        dispatch_pass.decoded += len(unique_keys) - keys_before
                    continue
                if missing is not None and self._find_queue(missing, queues):
                    continue
            if runs and not damaged:
                # Records of queues with an open run, interleaved as spread sends leave them: one call.
                consumed, taken, last_timestamp = dispatch_runs(
                    view,
                    position,
                    limit,
                    base + position,
                    count_max - count,
                    runs,
                    DispatchRequest,
                    unique_keys,
                    listening,
                )
                if taken:
                    position, count = position + consumed, count + dispatch_pass.took(taken, last_timestamp)
                    continue
            fast = dispatch_fields(view, position, limit, base + position)
            if fast is not None:
                size, queue_id, queue_offset, physical, sysflag, store_timestamp, raw_topic, raw_properties = fast
                run = None
                if not damaged:
                    run = runs.get((raw_topic, queue_id)) or self._open_run(dispatch_pass, raw_topic, queue_id)
                if run is not None:
                    # The common case: this record and the next ones of its queue, written in one call.
                    consumed, taken, last_timestamp = run.units.extend(
                        view,
                        position,
                        limit,
                        base + position,
                        count_max - count,
                        raw_topic,
                        unique_keys,
                        run.arrived if listening else None,
                    )
                    if taken:
                        position, count = position + consumed, count + dispatch_pass.took(taken, last_timestamp)
                        continue
                tags, keys, uniq_key = find_properties(raw_properties, _DISPATCHED_PROPERTIES)
                topic = topics.get(raw_topic) or _topic_name(raw_topic, topics)
            else:
                check = check_record(view, position, limit, check_crc=False, expected_physical_offset=base + position)
                if check.kind is RecordKind.END_OF_FILE:
                    return self.commitlog.rolled_offset(base + position) - base, count, False
                if check.kind is not RecordKind.MESSAGE or check.header is None:
                    resume = self._skip_damage_locked(view, position, base, check)
                    if resume < 0:
                        return position, count, True
                    if resume - base >= limit:
                        return resume - base, count, False
                    position = resume - base
                    continue
                header = check.header
                size, queue_id, queue_offset = header.total_size, header.queue_id, header.queue_offset
                physical, sysflag, store_timestamp = header.physical_offset, header.sysflag, header.store_timestamp
                topic = header.topic
                raw_topic = topic.encode()
                raw_properties = bytes(
                    view[header.properties_position : header.properties_position + header.properties_length]
                )
                tags, keys, uniq_key = find_properties(raw_properties, _DISPATCHED_PROPERTIES)
            dispatch_pass.decoded += 1
            try:
                self._dispatch_one(
                    dispatch_pass,
                    _Record(size, queue_id, queue_offset, physical, sysflag, store_timestamp, raw_properties),
                    topic,
                    raw_topic,
                    (tags, keys, uniq_key),
                )
            except OSError as error:
                self._failed_with = error  # retried from this record after a backoff
                return self._resume_at(dispatch_pass, position), count, True
            except SegmentNotReadyError:
                return position, count, True  # nothing written: dispatched in full on a later pass
            position += size
            count += 1
        return position, count, False

    def _resume_at(self, dispatch_pass: _Pass, position: int) -> int:
        """Where dispatch resumes after a write error at `position`: there, or at the first
        message of the pass whose unique key is not indexed yet."""
        if dispatch_pass.keys:
            return min(position, dispatch_pass.keys[0][2] - self.reput_from_offset)
        return position

    def _end_pass(self, dispatch_pass: _Pass) -> None:
        """Publish the pass's runs, then tell the listeners what arrived."""
        self.records_decoded += dispatch_pass.decoded
        for run in dispatch_pass.runs.values():
            run.units.close()
        if dispatch_pass.last_timestamp:
            self.checkpoint.logics_msg_timestamp = dispatch_pass.last_timestamp
        arrivals = dispatch_pass.arrivals
        if arrivals:
            for listener in self.listeners:
                listener(arrivals)

    def _find_queue(self, key: tuple[bytes, int], queues: dict[tuple[bytes, int], ConsumeQueue]) -> bool:
        """Learn what a covered run missed of (raw topic, queue id): the topic's name (cached in
        `_topic_names`) and its ConsumeQueue (added to the pass's `queues`). False when neither
        could be added (then its record is dispatched in full, which creates what it needs)."""
        raw_topic, queue_id = key
        learned = False
        if raw_topic not in self._topic_names:
            _topic_name(raw_topic, self._topic_names)
            learned = raw_topic in self._topic_names
        topic = self._topic_names.get(raw_topic)
        if key not in queues and topic is not None:
            found = self.consume_queues.find(topic, queue_id)
            if found is not None:
                queues[key] = found
                learned = True
        return learned

    def _skip_damage_locked(self, view: memoryview, position: int, base: int, check: RecordCheck) -> int:
        """Where dispatch resumes after the damage at `position`: a CommitLog offset (maybe the
        next segment's start), or -1 while no intact record follows in what is readable yet."""
        start = base + position
        known = self.damaged.get(start)
        if known is not None:
            return known.end_offset
        limit = len(view)
        segment_size = self.commitlog.segment_size
        segment_end = segment_size - base % segment_size
        pending = self._damage_search
        if pending is not None and pending[0].start_offset == start:
            damaged, searched_to = pending
        else:
            damaged, searched_to = DamagedRange(start, start, check.reason or "no record"), start + 1
            if check.header is not None and check.header.physical_offset == start:
                damaged.add_record_offset(start)
        found = find_resync(view, max(position + 1, searched_to - base), limit, limit, base, segment_end)
        for lost in found.lost_positions:
            damaged.add_record_offset(base + lost)
        if found.position >= 0:
            damaged.end_offset = base + found.position
        elif limit >= segment_end and self.commitlog.max_offset > base + segment_end:
            damaged.end_offset = base + segment_end  # the damage runs to the end of a finished segment
        else:
            # A record is readable only once complete, so a position whose magic code was not
            # readable yet (the last 7 bytes) is searched again when more bytes arrive.
            self._damage_search = (damaged, max(searched_to, base + limit - 7))
            if self._reported_damage_at != start:
                self._reported_damage_at = start
                log.error(
                    "dispatch waits at damaged CommitLog offset %d (%s): no intact record follows yet",
                    start,
                    damaged.reason,
                )
            return -1
        self._damage_search = None
        self._record_damage_locked(damaged)
        log.error("dispatch skipped damage: %s", damaged.describe())
        return damaged.end_offset

    def _record_damage_locked(self, damaged: DamagedRange) -> None:
        if damaged.start_offset in self.damaged:
            return
        if len(self.damaged) >= limits.DAMAGED_RANGES_TRACKED_MAX_COUNT:
            del self.damaged[next(iter(self.damaged))]
        self.damaged[damaged.start_offset] = damaged
        self.damaged_ranges_total += 1
        self.damaged_bytes_total += damaged.size_bytes

    def _damage_between(self, low: int, high: int) -> bool:
        """True when a known damaged range starts in [low, high) (messages may have been lost there)."""
        return any(low <= start < high for start in self.damaged)

    def _rewind_to_fill(
        self, queue: ConsumeQueue, topic: str, queue_id: int, queue_offset: int, commitlog_offset: int
    ) -> None:
        """Raise _Rewind when the records `queue` misses can still be read (once per queue)."""
        restart = queue.max_physical_offset
        if (
            queue.max_offset == 0
            or (topic, queue_id) in self._rewound
            or not self.commitlog.min_offset <= restart < commitlog_offset
        ):
            return
        self._rewound.add((topic, queue_id))
        log.warning(
            "ConsumeQueue %s-%d ends at logic offset %d but the CommitLog holds offset %d at %d: "
            "dispatching again from %d to fill it",
            topic,
            queue_id,
            queue.max_offset,
            queue_offset,
            commitlog_offset,
            restart,
        )
        raise _Rewind(restart)

    def _dispatch_one(
        self,
        dispatch_pass: _Pass,
        record: _Record,
        topic: str,
        raw_topic: bytes,
        found: tuple[str | None, str | None, str | None],
    ) -> None:
        """A record the fast path did not take: a transaction, a gap or a duplicate, a queue
        without a file with room, a topic the tagsCode hook rewrites. Its queue's run (closed here
        first) is opened again after it when the queue can take the next ones on the fast path."""
        size, queue_id, queue_offset, commitlog_offset, sysflag, store_timestamp, raw_properties = record
        tags, keys, uniq_key = found
        key = (raw_topic, queue_id)
        run = dispatch_pass.runs.pop(key, None)
        if run is not None:
            run.units.close()
        code = 0
        coded = False
        transaction = sysflag & TRANSACTION_TYPE_MASK
        if transaction in _CONSUME_QUEUE_TYPES:
            queue = self.consume_queues.find_or_create(topic, queue_id)
            if commitlog_offset + size > queue.max_physical_offset:  # else a duplicate: put() would refuse it
                if queue_offset > queue.max_offset:
                    if self.rewind_on_gap:
                        self._rewind_to_fill(queue, topic, queue_id, queue_offset, commitlog_offset)
                    if self.damaged and self._damage_between(queue.max_physical_offset, commitlog_offset):
                        queue.fill_blanks_to(queue_offset, self._file_wait_s)  # lost in the damage
                code, coded = self._tags_code(topic, tags, raw_properties, store_timestamp), True
                queue.put(commitlog_offset, size, code, queue_offset, self._file_wait_s)
            self.checkpoint.logics_msg_timestamp = store_timestamp
            if not self._hooked(topic):
                units = queue.open_run()
                if units is not None:
                    dispatch_pass.runs[key] = _QueueRun(units, topic, dispatch_pass.arrived_at(topic, queue_id))
        if self.index is not None and transaction != TransactionType.ROLLBACK_TYPE and (uniq_key or keys):
            self._write_keys(dispatch_pass)
            self.index.build(topic, commitlog_offset, store_timestamp, uniq_key, keys)
        if dispatch_pass.listening:
            if not coded:
                code = self._tags_code(topic, tags, raw_properties, store_timestamp)
            dispatch_pass.arrived_at(topic, queue_id).append(
                DispatchRequest(
                    topic, queue_id, commitlog_offset, size, code, store_timestamp, queue_offset, raw_properties
                )
            )

    def _open_run(self, dispatch_pass: _Pass, raw_topic: bytes, queue_id: int) -> _QueueRun | None:
        """A run for a queue this pass has not written yet, opened before its first record so that
        record takes the fast path too (with few records per queue per pass, as under many
        synchronous senders, the first of each was most of dispatch's cost). None where only
        `_dispatch_one` can go: a topic or queue not known yet, a hooked topic, a full file."""
        topic = self._topic_names.get(raw_topic)
        if topic is None or self._hooked(topic):
            return None
        queue = self.consume_queues.find(topic, queue_id)
        units = queue.open_run() if queue is not None else None
        if units is None:
            return None
        run = dispatch_pass.runs[(raw_topic, queue_id)] = _QueueRun(
            units, topic, dispatch_pass.arrived_at(topic, queue_id)
        )
        return run

    def _hooked(self, topic: str) -> bool:
        """True when the tagsCode hook may rewrite this topic's codes (its records take `_tags_code`)."""
        return self.tags_code_hook is not None and (
            self.tags_code_hook_topics is None or topic in self.tags_code_hook_topics
        )

    def _tags_code(self, topic: str, tags: str | None, raw_properties: bytes, store_timestamp: int) -> int:
        """The unit's tagsCode: the TAGS hash, or what the hook makes of it for its topics."""
        code = tags_code(tags)
        hook = self.tags_code_hook
        if hook is not None and self._hooked(topic):
            override = hook(topic, decode_properties(raw_properties), store_timestamp, code)
            if override is not None:
                code = override
        return code


_CONSUME_QUEUE_TYPES = frozenset({int(TransactionType.NOT_TYPE), int(TransactionType.COMMIT_TYPE)})


class _Record(NamedTuple):
    """A record's fields dispatch uses, as the CommitLog holds them."""

    size: int
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    sysflag: int
    store_timestamp: int
    raw_properties: bytes


class _QueueRun:
    """One queue's open UnitRun in a pass, with its topic as text and the list its arrivals go to."""

    __slots__ = ("arrived", "topic", "units")

    def __init__(self, units: UnitRun, topic: str, arrived: list[DispatchRequest]) -> None:
        self.units = units
        self.topic = topic
        self.arrived = arrived


class _Pass:
    """What one dispatch pass keeps until it ends: open runs by (raw topic, queue id), unique
    keys to index, what arrived by (topic, queue id) for the listeners, the last ConsumeQueue
    store time."""

    __slots__ = ("arrivals", "decoded", "keys", "last_timestamp", "listening", "runs")

    def __init__(self, listening: bool) -> None:
        self.listening = listening
        self.runs: dict[tuple[bytes, int], _QueueRun] = {}
        self.arrivals: dict[tuple[str, int], list[DispatchRequest]] = {}
        self.decoded = 0
        self.last_timestamp = 0
        self.keys: list[UniqueKey] = []
        """Unique keys of messages the fast path wrote, to index in one run (in CommitLog order:
        written before any other key)."""

    def took(self, count: int, last_timestamp: int) -> int:
        """`count` records a run call wrote, the last stored at `last_timestamp`; returns `count`."""
        self.decoded += count
        self.last_timestamp = last_timestamp
        return count

    def arrived_at(self, topic: str, queue_id: int) -> list[DispatchRequest]:
        arrived = self.arrivals.get((topic, queue_id))
        if arrived is None:
            arrived = self.arrivals[(topic, queue_id)] = []
        return arrived


def _topic_name(raw_topic: bytes, topics: dict[bytes, str]) -> str:
    """A record's topic as text, from the pass's cache of raw topic -> str."""
    topic = topics.get(raw_topic)
    if topic is None:
        topic = raw_topic.decode("utf-8", errors="replace")
        if len(topics) < limits.TOPIC_NAMES_CACHED_MAX_COUNT:
            topics[raw_topic] = topic
    return topic


class DispatchService(ServiceThread):
    """Runs the Dispatcher in the background, polling every millisecond when idle."""

    name = "shoal-dispatch"

    def __init__(self, dispatcher: Dispatcher) -> None:
        super().__init__()
        self.dispatcher = dispatcher

    def run_once(self) -> None:
        if self.dispatcher.dispatch_available(limits.DISPATCH_BATCH_MAX_COUNT) == 0:
            self.wait_for_running(limits.DISPATCH_IDLE_POLL_S)


class LoopDispatchDriver:
    """Runs the Dispatcher on an asyncio loop instead of a thread: `schedule()` after an append
    dispatches before the loop reads its next requests (a client that sends, then pulls, sees its
    message), and a periodic tick catches anything appended without a schedule (recovery,
    replication). Dispatching in the loop's own thread avoids GIL hand-offs between a busy
    dispatch thread and the network, which cost up to one switch interval per system call.

    The tick backs off while it finds nothing to do (doubling up to IDLE_TICK_MAX_S) and is fast
    again after any dispatch: an idle broker's loop woke 200 times a second for it, 3 % of a core
    on the benchmark VM, and an append announced with `schedule` never waits for a tick."""

    BATCH_MAX_COUNT = limits.DISPATCH_BATCH_MAX_COUNT
    TICK_S = limits.DISPATCH_TICK_S
    IDLE_TICK_MAX_S = limits.DISPATCH_IDLE_TICK_MAX_S

    def __init__(self, dispatcher: Dispatcher, loop: asyncio.AbstractEventLoop) -> None:
        self.dispatcher = dispatcher
        self.loop = loop
        self._scheduled = False
        self._stopped = False
        self._tick: asyncio.TimerHandle | None = None
        self.tick_s = self.TICK_S
        """The wait before the next tick after the one armed now."""

    def start(self) -> None:
        self._tick = self.loop.call_later(self.tick_s, self._on_tick)

    def schedule(self) -> None:
        if not self._scheduled and not self._stopped:
            self._scheduled = True
            self.loop.call_soon(self._run)

    def _run(self) -> None:
        self._scheduled = False
        self.tick_s = self.TICK_S  # busy: the next ticks catch what this pass had to leave
        if self._stopped:
            return
        dispatched = self.dispatcher.dispatch_available(
            self.BATCH_MAX_COUNT, file_wait_s=limits.SEGMENT_ALLOCATION_WAIT_MS / 1000
        )
        if dispatched >= self.BATCH_MAX_COUNT:
            self.schedule()  # more to do: continue after other callbacks had their turn

    def _on_tick(self) -> None:
        if self._stopped:
            return
        if self.dispatcher.behind_bytes:
            self.schedule()
            self.tick_s = self.TICK_S
        else:
            self.tick_s = min(self.tick_s * 2, self.IDLE_TICK_MAX_S)
        self._tick = self.loop.call_later(self.tick_s, self._on_tick)

    def halt(self) -> None:
        """From any thread: no run or tick dispatches from now on (one already running finishes)."""
        self._stopped = True

    def stop(self) -> None:
        """On the loop: halt, and cancel the tick."""
        self._stopped = True
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
