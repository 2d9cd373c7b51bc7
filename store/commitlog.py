"""The CommitLog: every message of every topic appended to one log of fixed-size segments.

Appends happen under the put lock, in the caller's thread, straight into the mapped segment
(or the transient-pool buffer). The queue offset of a message is assigned here from the
topic-queue table, so records carry their ConsumeQueue index; the Dispatcher writes the
ConsumeQueue units afterwards. Spec §1.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from shoal.formats.batch_records import COMPILED_ENCODE_BATCH_INTO, encode_batch_into
from shoal.formats.record import (
    COMPILED_ENCODE_RECORD_INTO,
    END_OF_FILE_MIN_BLANK_LENGTH,
    FIXED_LENGTH_V4,
    TAIL,
    RecordCheck,
    RecordHeader,
    RecordKind,
    body_crc,
    check_record,
    encode_blank_into,
    encode_record_into,
    encoded_record_problem,
    record_length,
    with_host_flags,
)
from shoal.formats.sysflag import (
    BORNHOST_V6_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    TRANSACTION_TYPE_MASK,
    TransactionType,
)
from shoal.store import limits
from shoal.store.clock import Clock
from shoal.store.errors import PutStatus, RecordEncodingError, StoreError
from shoal.store.mapped_file import MappedFile
from shoal.store.mapped_file_queue import MappedFileQueue
from shoal.store.message import AppendResult, BatchEntry, MessageToStore, validate_message

log = logging.getLogger(__name__)

_V6_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
_NO_QUEUE_OFFSET = frozenset({int(TransactionType.PREPARED_TYPE), int(TransactionType.ROLLBACK_TYPE)})
DEFAULT_STORE_HOST = bytes([127, 0, 0, 1]) + (10911).to_bytes(4, "big")


@dataclass
class PutLockStats:
    """When the current put took the lock (0 when none holds it): RocketMQ's busy detection."""

    begin_monotonic_s: float = 0.0


class CommitLog:
    def __init__(
        self,
        queue: MappedFileQueue,
        clock: Clock,
        *,
        store_host: bytes = DEFAULT_STORE_HOST,
        check_crc_on_recover: bool = True,
    ) -> None:
        self.queue = queue
        self.clock = clock
        self.store_host = store_host
        self.check_crc_on_recover = check_crc_on_recover
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.put_lock = threading.Lock()
        self.lock_stats = PutLockStats()
        self._topic_bytes: dict[str, bytes] = {}
        self.segment_size = queue.file_size
        self._store_host_extra = len(store_host) - 8
        self._store_host_flag = STOREHOSTADDRESS_V6_FLAG if len(store_host) == 20 else 0
        self._now_ms = clock.now_ms
        self._current: MappedFile | None = None

    # --- offsets ---
    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    @property
    def max_offset(self) -> int:
        """End of readable (committed) data."""
        return self.queue.max_offset

    def topic_bytes(self, topic: str) -> bytes:
        cached = self._topic_bytes.get(topic)
        if cached is None:
            cached = topic.encode("utf-8")
            if len(self._topic_bytes) < limits.TOPIC_NAMES_CACHED_MAX_COUNT:
                self._topic_bytes[topic] = cached
        return cached

    # --- appends ---
    def append_messages(
        self, messages: Sequence[MessageToStore], size_max_bytes: int
    ) -> list[AppendResult | StoreError | OSError]:
        """Check and append each message as one record, in order, under one hold of the put lock
        and with one store timestamp (pipelined sends read together; RocketMQ stamps a batch's
        records alike). Each message's outcome is in its place: its AppendResult, the StoreError
        that refused it (a limit `validate_message` names, or RecordEncodingError: nothing became
        visible) or the OSError of a segment that could not be created; the others go on. The v6
        bits of each sysflag are set from the hosts written, whatever the caller passed."""
        outcomes: list[AppendResult | StoreError | OSError] = []
        topic_bytes = self.topic_bytes
        with self.put_lock:
            self.lock_stats.begin_monotonic_s = time.monotonic()
            try:
                store_timestamp = self._now_ms()
                for message in messages:
                    topic = topic_bytes(message.topic)
                    try:
                        outcome = self._append_locked(message, topic, store_timestamp, size_max_bytes)
                    except (StoreError, OSError) as error:
                        outcomes.append(error)
                    else:
                        outcomes.append(outcome)
            finally:
                self.lock_stats.begin_monotonic_s = 0.0
        return outcomes

    def _append_locked(
        self, message: MessageToStore, topic: bytes, store_timestamp: int, size_max_bytes: int
    ) -> AppendResult:
        """One record of `append_messages`, the put lock held."""
        body = message.body
        properties = message.properties
        born_host = message.born_host
        length = (
            FIXED_LENGTH_V4 + len(body) + len(topic) + len(properties) + len(born_host) - 8 + self._store_host_extra
        )
        if (
            length > size_max_bytes
            or not topic
            or len(topic) > limits.TOPIC_LENGTH_MAX_BYTES
            or len(properties) > limits.PROPERTIES_LENGTH_MAX_BYTES
        ):  # the same record length: validate_message names the limit and raises
            validate_message(topic, len(body), len(properties), size_max_bytes, len(born_host) + len(self.store_host))
        queue_id = message.queue_id
        sysflag = (
            message.sysflag & ~_V6_FLAGS | (BORNHOST_V6_FLAG if len(born_host) == 20 else 0) | self._store_host_flag
        )
        takes_offset = (sysflag & TRANSACTION_TYPE_MASK) not in _NO_QUEUE_OFFSET
        mapped = self._current
        if mapped is None or length + END_OF_FILE_MIN_BLANK_LENGTH > mapped.file_size - mapped.wrote_position:
            mapped = self._segment_for(length)
        position = mapped.wrote_position
        physical = mapped.file_from_offset + position
        key = (message.topic, queue_id)
        queue_offset = self.topic_queue_table.get(key, 0) if takes_offset else 0
        try:  # positional: matching 17 keywords would cost ~0.7 us per record, the encoder ~1.3 us
            written = encode_record_into(
                mapped.target,
                position,
                body,
                topic,
                properties,
                queue_id,
                message.flag,
                queue_offset,
                physical,
                sysflag,
                message.born_timestamp_ms,
                born_host,
                store_timestamp,
                self.store_host,
                message.reconsume_times,
                message.prepared_transaction_offset,
                body_crc(body),
            )
            if written != length or encode_record_into is not COMPILED_ENCODE_RECORD_INTO:
                problem = encoded_record_problem(mapped.target, position, length, physical)
            else:
                problem = None  # the compiled encoder refuses what would not frame
        except (struct.error, ValueError, IndexError, KeyError) as error:
            problem = f"{error.__class__.__name__}: {error}"
        if problem is not None:
            self._discard_locked(mapped, position, length, problem)
        self._wrote_locked(mapped, position + length, store_timestamp)
        if takes_offset:
            self.topic_queue_table[key] = queue_offset + 1
        return AppendResult(PutStatus.PUT_OK, physical, length, store_timestamp, queue_offset, 1, self.store_host)

    def append_batch(
        self, template: MessageToStore, entries: list[BatchEntry], *, topic: bytes
    ) -> tuple[AppendResult, list[int]]:
        """Append a batch atomically into one segment with consecutive queue offsets: each entry's
        flag, body and properties with the rest of `template` (topic, queue, sysflag, born host and
        time, reconsume times). Returns the result and each record's size (for the message ids).
        Every record is checked as `append` checks one; if any fails, none becomes visible."""
        assert entries and len(entries) <= limits.BATCH_MESSAGES_MAX_COUNT
        queue_id = template.queue_id
        born_host = template.born_host
        born_timestamp_ms = template.born_timestamp_ms
        reconsume_times = template.reconsume_times
        sysflag = with_host_flags(template.sysflag, born_host, self.store_host)
        store_len = len(self.store_host)
        sizes = [record_length(len(e.body), len(topic), len(e.properties), len(born_host), store_len) for e in entries]
        crcs = [body_crc(e.body) for e in entries]
        total = sum(sizes)
        key = (template.topic, queue_id)
        with self.put_lock:
            self.lock_stats.begin_monotonic_s = time.monotonic()
            try:
                mapped = self._segment_for(total)
                position = mapped.wrote_position
                first_physical = mapped.file_from_offset + position
                first_queue_offset = self.topic_queue_table.get(key, 0)
                store_timestamp = self.clock.now_ms()
                at = position
                problem = None
                for index, entry in enumerate(entries):
                    try:
                        encode_record_into(
                            mapped.target,
                            at,
                            entry.body,
                            topic,
                            entry.properties,
                            queue_id,
                            entry.flag,
                            first_queue_offset + index,
                            mapped.file_from_offset + at,
                            sysflag,
                            born_timestamp_ms,
                            born_host,
                            store_timestamp,
                            self.store_host,
                            reconsume_times,
                            0,
                            crcs[index],
                        )
                        problem = encoded_record_problem(mapped.target, at, sizes[index], mapped.file_from_offset + at)
                    except (struct.error, ValueError, IndexError, KeyError) as error:
                        problem = f"{error.__class__.__name__}: {error}"
                    if problem is not None:
                        self._discard_locked(mapped, position, total, f"batch record {index}: {problem}")
                    at += sizes[index]
                self._wrote_locked(mapped, at, store_timestamp)
                self.topic_queue_table[key] = first_queue_offset + len(entries)
            finally:
                self.lock_stats.begin_monotonic_s = 0.0
        result = AppendResult(
            PutStatus.PUT_OK,
            first_physical,
            total,
            store_timestamp,
            first_queue_offset,
            len(entries),
            self.store_host,
        )
        return result, sizes

    def append_batch_body(
        self, template: MessageToStore, body: bytes | memoryview, shared_properties: bytes, sizes: list[int], *,
        topic: bytes,
    ) -> AppendResult:  # fmt: skip
        """`append_batch` from the batch body itself (shoal.formats.batch_records): its blocks,
        whose record `sizes` the caller has from `batch_record_sizes` and checked against the limits,
        each joined with `shared_properties`. One call writes every record, none becomes visible if
        one would not frame."""
        assert sizes and len(sizes) <= limits.BATCH_MESSAGES_MAX_COUNT
        queue_id = template.queue_id
        sysflag = with_host_flags(template.sysflag, template.born_host, self.store_host)
        total = sum(sizes)
        key = (template.topic, queue_id)
        with self.put_lock:
            self.lock_stats.begin_monotonic_s = time.monotonic()
            try:
                mapped = self._segment_for(total)
                position = mapped.wrote_position
                first_physical = mapped.file_from_offset + position
                first_queue_offset = self.topic_queue_table.get(key, 0)
                store_timestamp = self.clock.now_ms()
                try:
                    written = encode_batch_into(
                        mapped.target,
                        position,
                        body,
                        shared_properties,
                        topic,
                        queue_id,
                        first_queue_offset,
                        first_physical,
                        sysflag,
                        template.born_timestamp_ms,
                        template.born_host,
                        store_timestamp,
                        self.store_host,
                        template.reconsume_times,
                    )
                    problem = None if written == total else f"wrote {written} bytes where the sizes add up to {total}"
                    at = position
                    if problem is None and encode_batch_into is not COMPILED_ENCODE_BATCH_INTO:
                        for index, size in enumerate(sizes):  # the compiled encoder refuses what would not frame
                            problem = encoded_record_problem(mapped.target, at, size, mapped.file_from_offset + at)
                            if problem is not None:
                                problem = f"batch record {index}: {problem}"
                                break
                            at += size
                except (struct.error, ValueError, IndexError, KeyError) as error:
                    problem = f"{error.__class__.__name__}: {error}"
                if problem is not None:
                    self._discard_locked(mapped, position, total, problem)
                self._wrote_locked(mapped, position + total, store_timestamp)
                self.topic_queue_table[key] = first_queue_offset + len(sizes)
            finally:
                self.lock_stats.begin_monotonic_s = 0.0
        return AppendResult(
            PutStatus.PUT_OK, first_physical, total, store_timestamp, first_queue_offset, len(sizes), self.store_host
        )

    def _wrote_locked(self, mapped: MappedFile, end: int, store_timestamp: int) -> None:
        """Records were written up to `end` of `mapped` (the put lock held): move its write
        position there, and warm the pages ahead when it reaches the warming mark."""
        mapped.last_store_timestamp = store_timestamp
        mapped.wrote_position = end
        if end >= mapped.warm_at:
            self.queue.warm_ahead(mapped)

    def _discard_locked(self, mapped: MappedFile, position: int, length: int, problem: str) -> NoReturn:
        """Refuse an append whose encoded bytes failed the check: the write position stays, and
        the first bytes are cleared so that even a crash before they are overwritten never lets
        recovery read them as a record."""
        clear = min(TAIL.size, mapped.file_size - position)
        mapped.target[position : position + clear] = bytes(clear)
        offset = mapped.file_from_offset + position
        log.error("refused a %d-byte append at CommitLog offset %d: it would not decode: %s", length, offset, problem)
        raise RecordEncodingError(f"record at CommitLog offset {offset} would not decode ({problem}); not stored")

    def append_raw(self, data: bytes | memoryview, physical_offset: int) -> int:
        """Append bytes another CommitLog wrote (a replica): they must start exactly at our end.
        Returns the new max wrote offset. Blank records and segment ends are copied as they are."""
        view = memoryview(data)
        with self.put_lock:
            expected = self.queue.max_wrote_offset
            if physical_offset != expected:
                raise ValueError(f"replicated bytes start at {physical_offset}, our CommitLog ends at {expected}")
            at = 0
            while at < len(view):
                mapped = self.queue.last_file(physical_offset + at)
                room = mapped.file_size - mapped.wrote_position
                chunk = min(room, len(view) - at)
                start = mapped.wrote_position
                mapped.target[start : start + chunk] = view[at : at + chunk]
                mapped.wrote_position = start + chunk
                if mapped.wrote_position >= mapped.warm_at:
                    self.queue.warm_ahead(mapped)
                at += chunk
            self._current = None
            return self.queue.max_wrote_offset

    def _segment_for(self, length: int) -> MappedFile:
        """The segment with room for `length` bytes plus a blank record; closes a full one (held lock).
        If the next segment cannot be created the error propagates and the put lock is released
        with the busy clock reset, so the store keeps answering."""
        try:
            mapped = self.queue.last_file(self.queue.max_wrote_offset)
            remaining = mapped.file_size - mapped.wrote_position
            if length + END_OF_FILE_MIN_BLANK_LENGTH > remaining:
                encode_blank_into(mapped.target, mapped.wrote_position, remaining)
                mapped.wrote_position = mapped.file_size
                mapped = self.queue.last_file(0)
        except BaseException:
            self.lock_stats.begin_monotonic_s = 0.0
            raise
        self._current = mapped
        return mapped

    def forget_current_segment(self) -> None:
        """Called after recovery or truncation changed the segment list."""
        self._current = None

    def is_os_page_cache_busy(self, busy_timeout_s: float) -> bool:
        """True while one put has held the lock longer than the timeout (spec §5.3)."""
        begin = self.lock_stats.begin_monotonic_s
        return begin > 0 and time.monotonic() - begin > busy_timeout_s

    # --- reads ---
    def read(self, offset: int, size: int) -> memoryview | None:
        """A zero-copy view of `size` bytes at `offset`, or None when not (or no longer) readable."""
        mapped = self.queue.find_by_offset(offset)
        if mapped is None:
            return None
        position = offset - mapped.file_from_offset
        if position + size > mapped.read_position:
            return None
        return mapped.slice(position, size)

    def data_from(self, offset: int) -> tuple[memoryview, int] | None:
        """Readable bytes of one segment from `offset` on (never crossing segments), with the
        segment's start offset. `getData` in RocketMQ."""
        mapped = self.queue.find_by_offset(offset)
        if mapped is None:
            return None
        position = offset - mapped.file_from_offset
        readable = mapped.read_position
        if position > readable:
            return None
        return mapped.slice(position, readable - position), mapped.file_from_offset

    def check_at(self, offset: int, *, check_crc: bool = False) -> RecordCheck:
        """Classify the record at a global offset (message, blank, or damage)."""
        mapped = self.queue.find_by_offset(offset)
        if mapped is None:
            return RecordCheck(RecordKind.INVALID, -1, reason=f"offset {offset} is outside the CommitLog")
        position = offset - mapped.file_from_offset
        return check_record(
            mapped.view, position, mapped.read_position, check_crc=check_crc, expected_physical_offset=offset
        )

    def header_at(self, offset: int) -> RecordHeader | None:
        check = self.check_at(offset)
        return check.header if check.kind is RecordKind.MESSAGE else None

    def rolled_offset(self, offset: int) -> int:
        """The start of the segment after the one holding `offset` (`rollNextFile`)."""
        return offset + self.segment_size - offset % self.segment_size
