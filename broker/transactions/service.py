"""`TransactionService`: the store side of transactional messages (RocketMQ's
TransactionalMessageBridge and TransactionalMessageServiceImpl, spec §11).

Every step runs on the broker's event loop and is synchronous from reading a half copy to
updating the `TransactionTable`, so an END_TRANSACTION and a check round never interleave inside
one transaction. The order of the writes is chosen for at-least-once delivery: a commit stores
the message in its real topic *before* the op message, so a crash between the two can repeat a
commit (the next start repairs even that through the index: `_repair`) but never lose one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple, TypeVar

from shoal.broker.client_manager import ProducerManager
from shoal.broker.config import BrokerConfig
from shoal.broker.topic_manager import PERM_READ, PERM_WRITE, TopicManager
from shoal.broker.transactions import limits
from shoal.broker.transactions.half_message import (
    HALF_QUEUE_ID,
    TRANS_SYS_GROUP,
    HalfRecord,
    check_request_body,
    committed_message,
    discarded_message,
    renewed_half_message,
)
from shoal.broker.transactions.op_message import OpEntry, op_message, parse_op
from shoal.broker.transactions.transaction_table import CheckDecision, TransactionTable, check_decision
from shoal.formats.properties import decode_properties
from shoal.formats.record import RecordHeader, decode_header
from shoal.formats.sysflag import TransactionType, transaction_type
from shoal.formats.topics import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from shoal.protocol import RequestCode, make_request
from shoal.protocol.headers import CheckTransactionStateRequestHeader
from shoal.store import GetMessageStatus, MessageStore, MessageToStore, PutResult, PutStatus, StoreError
from shoal.store.metadata import ConsumerOffsetTable

log = logging.getLogger(__name__)

REPAIR_QUERY_MAX_COUNT = 32
"""Index hits examined per unresolved transaction when looking for a commit without an op."""


T = TypeVar("T")


class QueueRecord(NamedTuple):
    queue_offset: int
    record: HalfRecord


class RepairCandidate(NamedTuple):
    """Where the commit of an unresolved transaction would be: real topic and UNIQ_KEY."""

    topic: str
    uniq_key: str


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _queue_record(queue_offset: int, header: RecordHeader, view: memoryview) -> QueueRecord:
    return QueueRecord(queue_offset, HalfRecord.of(header, view))


def _op_entries(queue_offset: int, header: RecordHeader, view: memoryview) -> list[tuple[int, OpEntry]]:
    start = header.properties_position
    properties = decode_properties(view[start : start + header.properties_length])
    body = bytes(view[header.body_position : header.body_position + header.body_length])
    return [(queue_offset, entry) for entry in parse_op(body, properties)]


class TransactionService:
    """Half messages in, commits/rollbacks/checks out; the state lives in `table`."""

    def __init__(
        self,
        store: MessageStore,
        topics: TopicManager,
        offsets: ConsumerOffsetTable,
        producers: ProducerManager,
        config: BrokerConfig,
        *,
        on_append: Callable[[], None],
        next_opaque: Callable[[], int],
        is_master: Callable[[], bool] = lambda: True,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        if config.transaction_check_interval_ms < limits.CHECK_INTERVAL_MIN_MS:
            raise ValueError(f"transactionCheckInterval must be at least {limits.CHECK_INTERVAL_MIN_MS} ms")
        if config.transaction_timeout_ms < 0 or config.transaction_check_max < 0:
            raise ValueError("transactionTimeOut and transactionCheckMax must not be negative")
        self.store = store
        self.topics = topics
        self.offsets = offsets
        self.producers = producers
        self.config = config
        self.on_append = on_append
        self.next_opaque = next_opaque
        self.is_master = is_master
        self.clock = clock
        self.table = TransactionTable()
        self._loaded_as_master = False
        self.checks_sent = 0
        self.checks_without_producer = 0
        self.discarded = 0

    # --- start-up ---
    def load(self) -> None:
        """Rebuild the table from the op queue (from P) and the half queue (from H), then repair
        transactions whose commit was stored but whose op message was not (a crash between them)."""
        self._loaded_as_master = self.is_master()
        half_progress = self._progress(TRANS_HALF_TOPIC)
        op_progress = self._progress(TRANS_OP_HALF_TOPIC)
        ops = list(self._op_entries(op_progress))
        latest_records: dict[int, RepairCandidate] = {}
        copies: list[tuple[int, int]] = []
        for queue_offset, record in self._half_records(half_progress):
            copies.append((queue_offset, record.key))
            destination = record.real_destination()
            if destination is not None and record.uniq_key:
                latest_records[record.key] = RepairCandidate(destination[0], record.uniq_key)
        op_end = self.store.max_offset_in_queue(TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID)
        self.table = TransactionTable.rebuild(half_progress, op_progress, ops, copies, op_end)
        repaired = self._repair({key: latest_records[key] for key in self.table.pending if key in latest_records})
        log.info(
            "transactions: %d unresolved (%d committed ones repaired), half progress %d, op progress %d",
            len(self.table.pending),
            repaired,
            half_progress,
            op_progress,
        )

    def sync_role(self) -> None:
        """Rebuild the table when this broker became master: as a slave it received half messages
        by replication, which never passed through `put_half`, so its table is stale."""
        master = self.is_master()
        if master and not self._loaded_as_master:
            log.info("transactions: this broker is master now: rebuilding the state from the store")
            self.load()
        self._loaded_as_master = master

    def _progress(self, topic: str) -> int:
        """The saved progress on `topic`, clamped to what the queue holds."""
        saved = self.offsets.query(TRANS_SYS_GROUP, topic, HALF_QUEUE_ID)
        low = self.store.min_offset_in_queue(topic, HALF_QUEUE_ID)
        high = self.store.max_offset_in_queue(topic, HALF_QUEUE_ID)
        return min(max(saved, low), high)

    def _op_entries(self, offset: int) -> Iterator[tuple[int, OpEntry]]:
        end = self.store.max_offset_in_queue(TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID)
        while offset < end:
            batch, offset = self._read_batch(TRANS_OP_HALF_TOPIC, offset, end, limits.OP_BATCH_MAX_COUNT, _op_entries)
            for entries in batch:
                yield from entries

    def _half_records(self, offset: int) -> Iterator[QueueRecord]:
        end = self.store.max_offset_in_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID)
        while offset < end:
            batch, offset = self.half_batch(offset, end)
            yield from batch

    def half_batch(self, offset: int, end: int) -> tuple[list[QueueRecord], int]:
        """Up to CHECK_BATCH_MAX_COUNT half copies from `offset` (below `end`), copied out of the
        CommitLog, and the offset to continue from (`end` when the queue has nothing more)."""
        return self._read_batch(TRANS_HALF_TOPIC, offset, end, limits.CHECK_BATCH_MAX_COUNT, _queue_record)

    def _read_batch(
        self, topic: str, offset: int, end: int, count_max: int, convert: Callable[[int, RecordHeader, memoryview], T]
    ) -> tuple[list[T], int]:
        """Records of queue 0 of `topic` from `offset`, converted while their views are valid;
        retention gaps are skipped (OFFSET_TOO_SMALL answers where the queue now starts)."""
        found = self.store.get_messages(topic, HALF_QUEUE_ID, offset, min(count_max, end - offset))
        try:
            batch = [
                convert(queue_offset, decode_header(view, 0), view)
                for queue_offset, view in zip(found.queue_offsets, found.messages, strict=True)
                if queue_offset < end
            ]
        finally:
            found.release()
        next_offset = found.next_begin_offset
        if found.status is not GetMessageStatus.FOUND and next_offset <= offset:
            next_offset = end  # nothing readable (no queue, or the CQ is behind): stop here
        return batch, min(max(next_offset, offset + len(batch)), end)

    def _repair(self, candidates: dict[int, RepairCandidate]) -> int:
        """Resolve unresolved transactions whose committed message is already in the real topic
        (found by UNIQ_KEY in the index with the COMMIT transaction type, which only a commit
        writes)."""
        if not self.store.index_enabled:
            return 0
        repaired = 0
        for key, (topic, uniq_key) in candidates.items():
            found = self.store.query_by_key(topic, uniq_key, REPAIR_QUERY_MAX_COUNT)
            for _, view in found:
                view.release()
            if any(self._commits(header, key) for header, _ in found):
                log.warning("transaction %d (%s) was committed but its op message is missing: repaired", key, uniq_key)
                self._resolve(key)
                repaired += 1
        return repaired

    def _commits(self, header: RecordHeader, key: int) -> bool:
        """Whether `header` is the committed message of transaction `key`: COMMIT type, and its
        PREPARED_TX_OFFSET names a half copy of that transaction (a UNIQ_KEY alone could be reused)."""
        if transaction_type(header.sysflag) is not TransactionType.COMMIT_TYPE:
            return False
        half = self.half_record(header.prepared_transaction_offset)
        return half is not None and half.is_half and half.key == key

    # --- half messages ---
    def refusal(self) -> str | None:
        """Why a new half message cannot be taken now (None: it can)."""
        self.sync_role()
        if self.table.tracked_count >= limits.TRANSACTIONS_TRACKED_MAX_COUNT:
            return f"[TRANSACTION]too many unresolved transactions ({limits.TRANSACTIONS_TRACKED_MAX_COUNT})"
        return None

    def put_half(self, message: MessageToStore) -> PutResult:
        """Store a half message (its properties already rewritten by `half_properties`) in the half
        queue and start tracking its transaction."""
        self.topics.create_if_absent(TRANS_HALF_TOPIC, 1, PERM_READ | PERM_WRITE)
        message.topic = TRANS_HALF_TOPIC
        message.queue_id = HALF_QUEUE_ID
        result = self._append(message)
        if result.append is not None:
            offset = result.append.queue_offset
            self.table.add_copy(offset, offset)
        return result

    # --- resolution ---
    def half_record(self, commitlog_offset: int) -> HalfRecord | None:
        """The record at a CommitLog offset (any topic), or None if there is none."""
        if commitlog_offset < 0:
            return None
        found = self.store.message_at(commitlog_offset)
        if found is None:
            return None
        header, view = found
        try:
            return HalfRecord.of(header, view)
        finally:
            view.release()

    def commit(self, record: HalfRecord) -> PutResult:
        """Store the message in its real topic and queue, then the op message."""
        try:
            message = committed_message(record)
        except StoreError as error:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, remark=str(error))
        result = self._append(message)
        if result.append is not None:
            self._resolve(record.key)
        return result

    def rollback(self, record: HalfRecord) -> bool:
        """Write the op message only; False when it could not be written (nothing changed)."""
        return self._resolve(record.key, must_write=True)

    def _resolve(self, key: int, *, must_write: bool = False) -> bool:
        latest = self.table.pending[key]
        self.topics.create_if_absent(TRANS_OP_HALF_TOPIC, 1, PERM_READ | PERM_WRITE)
        result = self._append(op_message(latest, key, self.store.store_host, self.clock()))
        if result.append is None:
            log.error("op message for transaction %d not stored (%s): %s", key, result.status.value, result.remark)
            if must_write:
                return False
        self.table.resolve(key, result.append.queue_offset if result.append is not None else None)
        return True

    def _append(self, message: MessageToStore) -> PutResult:
        result = self.store.append_message(message)
        if result.append is not None:
            self.on_append()
        return result

    # --- check-back ---
    def decide(self, queue_offset: int, record: HalfRecord) -> CheckDecision:
        """What the check round does with the copy at `queue_offset` (a copy without REAL_TOPIC
        cannot be committed or checked: it is discarded)."""
        config = self.config
        latest = self.table.is_latest(record.key, queue_offset)
        if latest and record.real_destination() is None:
            return CheckDecision.DISCARD
        return check_decision(
            latest_of_pending=latest,
            check_times=record.check_times,
            check_max=config.transaction_check_max,
            age_ms=self.clock() - record.header.born_timestamp,
            immunity_ms=record.immunity_ms(config.transaction_timeout_ms),
            has_immunity_property=record.has_immunity_property(),
        )

    def renew(self, record: HalfRecord, check_times: int) -> HalfRecord | None:
        """Put the next copy of a half message; returns it as stored (None: the put failed)."""
        key = record.key
        try:
            message = renewed_half_message(record, key, check_times)
        except StoreError as error:
            log.error("transaction %d: cannot renew its half message: %s", key, error)
            return None
        result = self._append(message)
        if result.append is None:
            log.error("transaction %d: renewed half message not stored (%s)", key, result.status.value)
            return None
        append = result.append
        self.table.add_copy(key, append.queue_offset)
        header = record.header._replace(
            total_size=append.wrote_bytes,
            queue_offset=append.queue_offset,
            physical_offset=append.wrote_offset,
            store_timestamp=append.store_timestamp,
            store_host=append.store_host,
            prepared_transaction_offset=0,
        )
        return HalfRecord(header, record.body, message.properties, decode_properties(message.properties))

    def discard(self, record: HalfRecord) -> bool:
        """Checks ran out: keep the message in TRANS_CHECK_MAX_TIME_TOPIC, resolve as rolled back."""
        self.topics.create_if_absent(TRANS_CHECK_MAX_TIME_TOPIC, 1, PERM_READ | PERM_WRITE)
        result = self._append(discarded_message(record))
        if result.append is None:
            log.error("transaction %d: not moved to %s (%s)", record.key, TRANS_CHECK_MAX_TIME_TOPIC, result.status)
            return False
        log.warning(
            "transaction %d (%s) of group %s checked %d times without an answer: moved to %s",
            record.key,
            record.uniq_key,
            record.producer_group,
            record.check_times,
            TRANS_CHECK_MAX_TIME_TOPIC,
        )
        self.discarded += 1
        return self._resolve(record.key, must_write=True)

    def send_check(self, record: HalfRecord) -> bool:
        """CHECK_TRANSACTION_STATE (oneway) about `record` to one live producer of its group."""
        channel = self.producers.any_channel(record.producer_group)
        if channel is None:
            self.checks_without_producer += 1
            log.info(
                "transaction %d: no producer of group %r is connected to check it", record.key, record.producer_group
            )
            return False
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=record.queue_offset,
            commit_log_offset=record.commitlog_offset,
            msg_id=record.uniq_key,
            transaction_id=record.uniq_key,
            offset_msg_id=record.offset_msg_id,
        )
        request = make_request(
            RequestCode.CHECK_TRANSACTION_STATE,
            opaque=self.next_opaque(),
            ext_fields=header.to_ext_fields(),
            body=check_request_body(record),
            oneway=True,
        )
        channel.connection.send(request)
        self.checks_sent += 1
        return True

    def save_progress(self, half_progress: int) -> None:
        """Every copy below `half_progress` is settled: record both progress offsets. Transactions
        whose latest copy is below it were removed by retention (or the round skipped a gap in
        the queue) before anyone resolved them: they are forgotten, loudly."""
        for key in self.table.forget_below(half_progress):
            log.error("transaction %d: its half message is gone (retention) before it was resolved", key)
        self.table.advance(half_progress)
        self.offsets.commit(TRANS_SYS_GROUP, TRANS_HALF_TOPIC, HALF_QUEUE_ID, half_progress)
        self.offsets.commit(TRANS_SYS_GROUP, TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID, self.table.op_progress)
