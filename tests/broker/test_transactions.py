"""shoal.broker.transactions without processes: the pure parts (op messages, the half-message
rewrite, check decisions, the transaction table, END refusals) and TransactionService over a real
MessageStore on small files (put, commit, rollback, check rounds, discard, rebuild, repair)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from shoal.broker.client_manager import ProducerManager
from shoal.broker.config import BrokerConfig
from shoal.broker.processors.end_transaction import end_refusal
from shoal.broker.topic_manager import TopicManager
from shoal.broker.transactions.checking import TransactionCheckService
from shoal.broker.transactions.half_message import (
    TRANS_SYS_GROUP,
    HalfRecord,
    check_request_body,
    committed_message,
    half_properties,
    is_half_message_send,
    renewed_half_message,
)
from shoal.broker.transactions.op_message import REMOVE_TAG, OpEntry, op_body, op_message, parse_op
from shoal.broker.transactions.service import TransactionService
from shoal.broker.transactions.transaction_table import CheckDecision, TransactionTable, check_decision
from shoal.formats.properties import decode_properties
from shoal.formats.record import decode_header, encode_host, encode_record_into, record_length
from shoal.formats.sysflag import TRANSACTION_TYPE_MASK, TransactionType
from shoal.formats.topics import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from shoal.protocol import RemotingCommand, RequestCode
from shoal.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from shoal.store import MessageStore, MessageToStore, StoreSettings
from shoal.store.metadata import ConsumerOffsetTable, TopicConfigTable

GROUP = "PID_orders"
STORE_HOST = encode_host("127.0.0.1", 10911)
BORN_HOST = encode_host("10.0.0.7", 5555)
T0_MS = 1_700_000_000_000


# --- op messages ---


def test_op_message_body_is_the_decimal_half_queue_offset() -> None:
    """Goal: op messages are RocketMQ's (topic, queue 0, tags d, ASCII offset). Method: build one."""
    assert op_body(1234) == b"1234"
    message = op_message(1234, 1200, STORE_HOST, T0_MS)
    assert (message.topic, message.queue_id, bytes(message.body)) == (TRANS_OP_HALF_TOPIC, 0, b"1234")
    properties = decode_properties(message.properties)
    assert properties["TAGS"] == REMOVE_TAG == "d"
    assert properties["WAIT"] == "true"
    assert properties["TRAN_PREPARED_QUEUE_OFFSET"] == "1200"
    assert message.born_host == STORE_HOST and message.born_timestamp_ms == T0_MS
    assert message.sysflag & TRANSACTION_TYPE_MASK == 0


def test_parse_op_reads_ours_rocketmq_4_and_5_and_skips_garbage() -> None:
    """Goal: ops written by Shoal, RocketMQ 4 and 5 are understood; junk is ignored. Method: bodies."""
    ours = op_message(7, 3, STORE_HOST, T0_MS)
    assert parse_op(bytes(ours.body), decode_properties(ours.properties)) == [OpEntry(3, 7)]
    assert parse_op(b"42", {"TAGS": "d"}) == [OpEntry(42, 42)]
    assert parse_op(b"1,2,5", {"TAGS": "d"}) == [OpEntry(1, 1), OpEntry(2, 2), OpEntry(5, 5)]
    for body, properties in [(b"42", {"TAGS": "x"}), (b"abc", {"TAGS": "d"}), (b"-1", {"TAGS": "d"}), (b"", {})]:
        assert parse_op(body, properties) == []


# --- the half-message rewrite ---


def test_half_properties_strip_delays_and_forged_bookkeeping_and_add_the_real_destination() -> None:
    """Goal: a half message keeps the producer's properties except delays and broker-only keys.
    Method: rewrite a property string carrying DELAY, a 5.x timer and a forged check count."""
    sent = "\x02".join(
        [
            "TAGS\x01TagA",
            "DELAY\x013",
            "TRAN_MSG\x01true",
            "TIMER_DELAY_SEC\x0130",
            "PGROUP\x01" + GROUP,
            "TRAN_PREPARED_QUEUE_OFFSET\x015",
            "TRANSACTION_CHECK_TIMES\x0199",
            "UNIQ_KEY\x01ABC",
        ]
    )
    rewritten = half_properties(sent, "Orders", 3)
    assert rewritten.split("\x02") == [
        "TAGS\x01TagA",
        "TRAN_MSG\x01true",
        "PGROUP\x01" + GROUP,
        "UNIQ_KEY\x01ABC",
        "REAL_TOPIC\x01Orders",
        "REAL_QID\x013",
    ]
    assert half_properties(None, "T", 0) == "REAL_TOPIC\x01T\x02REAL_QID\x010"


@pytest.mark.parametrize(
    ("properties", "topic", "reconsume_times", "expected"),
    [
        ("TRAN_MSG\x01true", "Orders", 0, True),
        ("TRAN_MSG\x01TRUE\x02PGROUP\x01g", "Orders", 0, True),
        ("TRAN_MSG\x01false", "Orders", 0, False),
        (None, "Orders", 0, False),
        ("TRAN_MSG\x01true", "%RETRY%CID_x", 0, False),
        ("TRAN_MSG\x01true", "Orders", 1, False),
    ],
)
def test_which_sends_are_half_messages(
    properties: str | None, topic: str, reconsume_times: int, expected: bool
) -> None:
    """Goal: TRAN_MSG=true makes a half message, except for messages coming back to a retry topic
    (old clients re-send committed messages that still carry TRAN_MSG). Method: cases."""
    assert is_half_message_send(properties, topic, reconsume_times) is expected


def half_record(queue_offset: int = 4, physical_offset: int = 4096, **extra: str) -> HalfRecord:
    """A half record as the broker stores it, encoded and decoded with the store's codec."""
    properties = half_properties("\x02".join(["TAGS\x01TagA", "TRAN_MSG\x01true", "PGROUP\x01" + GROUP]), "Orders", 2)
    if extra:
        properties += "".join(f"\x02{name}\x01{value}" for name, value in extra.items())
    raw = properties.encode()
    body, topic = b"order #1", TRANS_HALF_TOPIC.encode()
    buffer = bytearray(record_length(len(body), len(topic), len(raw)))
    encode_record_into(
        buffer,
        0,
        body,
        topic,
        raw,
        0,
        7,
        queue_offset,
        physical_offset,
        0,
        T0_MS,
        BORN_HOST,
        T0_MS + 5,
        STORE_HOST,
        0,
        0,
        99,
    )
    return HalfRecord.of(decode_header(buffer, 0), memoryview(buffer))


def test_commit_builds_the_real_message_with_commit_type_and_the_half_offset() -> None:
    """Goal: the committed message goes to REAL_TOPIC/REAL_QID as COMMIT with PREPARED_TX_OFFSET.
    Method: committed_message of a decoded half record."""
    record = half_record(TRAN_PREPARED_QUEUE_OFFSET="1")
    message = committed_message(record)
    assert (message.topic, message.queue_id, bytes(message.body)) == ("Orders", 2, b"order #1")
    assert message.sysflag & TRANSACTION_TYPE_MASK == TransactionType.COMMIT_TYPE
    assert message.prepared_transaction_offset == 4096
    assert (message.flag, message.born_timestamp_ms, message.born_host) == (7, T0_MS, BORN_HOST)
    properties = decode_properties(message.properties)
    assert properties["TRAN_MSG"] == "true" and properties["PGROUP"] == GROUP
    assert not {"REAL_TOPIC", "REAL_QID", "TRAN_PREPARED_QUEUE_OFFSET"} & set(properties)


def test_renewed_copy_counts_checks_and_names_the_transaction() -> None:
    """Goal: a renewed copy carries TRANSACTION_CHECK_TIMES and the transaction key. Method: renew twice."""
    record = half_record(queue_offset=4)
    assert record.key == 4 and record.check_times == 0
    renewed = renewed_half_message(record, record.key, 1)
    assert (renewed.topic, renewed.queue_id, renewed.born_timestamp_ms) == (TRANS_HALF_TOPIC, 0, T0_MS)
    properties = decode_properties(renewed.properties)
    assert properties["TRANSACTION_CHECK_TIMES"] == "1"
    assert properties["TRAN_PREPARED_QUEUE_OFFSET"] == "4"
    assert half_record(queue_offset=9, TRAN_PREPARED_QUEUE_OFFSET="4", TRANSACTION_CHECK_TIMES="1").key == 4


def test_check_request_body_is_the_record_with_the_real_topic_and_queue() -> None:
    """Goal: CHECK_TRANSACTION_STATE's body decodes as a record of the real topic and queue with
    the copy's own offsets. Method: decode it with the store codec."""
    record = half_record(queue_offset=4, physical_offset=4096)
    body = check_request_body(record)
    header = decode_header(body, 0)
    assert header.total_size == len(body)
    assert (header.topic, header.queue_id) == ("Orders", 2)
    assert (header.queue_offset, header.physical_offset, header.body_crc) == (4, 4096, 99)
    assert body[header.body_position : header.body_position + header.body_length] == b"order #1"


# --- decisions and the table ---


@pytest.mark.parametrize(
    ("latest", "times", "age_ms", "immune", "expected"),
    [
        (False, 0, 10_000, False, CheckDecision.SKIP),
        (True, 15, 10_000, False, CheckDecision.DISCARD),
        (True, 15, 0, False, CheckDecision.DISCARD),
        (True, 0, 5_999, False, CheckDecision.WAIT),
        (True, 0, 5_999, True, CheckDecision.RENEW),
        (True, 0, 6_000, False, CheckDecision.CHECK),
        (True, 14, 60_000, False, CheckDecision.CHECK),
        (True, 0, -5, False, CheckDecision.CHECK),
    ],
)
def test_check_decision(latest: bool, times: int, age_ms: int, immune: bool, expected: CheckDecision) -> None:
    """Goal: RocketMQ's per-message choice (timeout 6 s, max 15). Method: table of cases."""
    decision = check_decision(
        latest_of_pending=latest,
        check_times=times,
        check_max=15,
        age_ms=age_ms,
        immunity_ms=6_000,
        has_immunity_property=immune,
    )
    assert decision is expected


def test_transaction_table_tracks_copies_resolutions_and_progress() -> None:
    """Goal: a transaction is pending until resolved through any copy; ops are forgotten once the
    half progress passes their latest copy. Method: drive a table by hand."""
    table = TransactionTable()
    table.add_copy(0, 0)
    table.add_copy(1, 1)
    table.add_copy(0, 2)  # transaction 0 renewed by a check
    assert table.is_latest(0, 2) and not table.is_latest(0, 0)
    assert table.resolve(1, op_offset=0) == 1
    assert not table.is_pending(1) and table.is_pending(0)
    table.advance(2)
    assert table.op_progress == 1, "the op of transaction 1 (latest copy 1) is below the progress"
    assert table.resolve(0, op_offset=1) == 2
    table.advance(2)
    assert table.op_progress == 1, "transaction 0's latest copy (2) is not passed yet"
    table.advance(3)
    assert table.op_progress == 2 and table.tracked_count == 0


def test_transaction_table_rebuild_after_restart() -> None:
    """Goal: rebuild finds exactly the unresolved transactions from the ops after P and the copies
    after H. Method: copies 5..9 (6 renews 5, 8 renews 7), ops resolving 5 (via copy 6) and 9."""
    ops = [(3, OpEntry(2, 2)), (4, OpEntry(5, 6)), (5, OpEntry(9, 9))]
    copies = [(5, 5), (6, 5), (7, 7), (8, 7), (9, 9)]
    table = TransactionTable.rebuild(5, 3, ops, copies, op_end=6)
    assert table.pending == {7: 8}
    assert [op.op_offset for op in table.ops] == [4, 5], "the op about copy 2 (< H) is done"
    assert table.op_progress == 4 and table.op_end == 6


def end_header(record: HalfRecord, **overrides: object) -> EndTransactionRequestHeader:
    values: dict[str, object] = {
        "producer_group": GROUP,
        "tran_state_table_offset": record.queue_offset,
        "commit_log_offset": record.commitlog_offset,
        "commit_or_rollback": 8,
        "msg_id": "ABC",
        **overrides,
    }
    return EndTransactionRequestHeader(**values)  # type: ignore[arg-type]


def test_end_refusal_names_what_is_wrong() -> None:
    """Goal: each bad END_TRANSACTION gets its own remark; a good one none. Method: cases."""
    record = half_record()
    table = TransactionTable()
    table.add_copy(4, 4)
    assert end_refusal(record, end_header(record), table) is None
    assert "no message at CommitLog offset" in (end_refusal(None, end_header(record), table) or "")
    assert "belongs to producer group" in (end_refusal(record, end_header(record, producer_group="x"), table) or "")
    wrong_offset = end_refusal(record, end_header(record, tran_state_table_offset=5), table)
    assert "is not the queue offset" in (wrong_offset or "")
    table.resolve(4, op_offset=0)
    assert "already committed, rolled back or discarded" in (end_refusal(record, end_header(record), table) or "")


# --- the service over a real store ---


@dataclass
class FakeConnection:
    """A producer connection that records what the broker sends it."""

    sent: list[RemotingCommand] = field(default_factory=list)
    address: str = "127.0.0.1:40000"
    is_open: bool = True

    def send(self, command: RemotingCommand) -> None:
        self.sent.append(command)


@dataclass
class Broker:
    """The collaborators a TransactionService needs, on a real store, with a settable clock."""

    root: Path
    settings: StoreSettings
    config: BrokerConfig
    now_ms: list[int] = field(default_factory=lambda: [T0_MS])
    connection: FakeConnection = field(default_factory=FakeConnection)

    def __post_init__(self) -> None:
        self.store = MessageStore(self.settings, store_host=STORE_HOST)
        self.store.open()
        self.store.start(background_dispatch=False)
        self.topics = TopicManager(TopicConfigTable(self.root / "topics.json", lambda: 0), self.config, lambda: None)
        self.offsets = ConsumerOffsetTable(self.root / "consumerOffset.json")
        self.offsets.load()
        self.producers = ProducerManager(120.0)
        self.producers.register(self.connection, GROUP, "client-1", "PYTHON", 401)  # type: ignore[arg-type]
        self.service = TransactionService(
            self.store,
            self.topics,
            self.offsets,
            self.producers,
            self.config,
            on_append=self.store.dispatch_now,  # type: ignore[arg-type]  # its int result is not needed
            next_opaque=iter(range(1, 1 << 30)).__next__,
            clock=lambda: self.now_ms[0],
        )
        self.service.load()
        self.checker = TransactionCheckService(self.service, 60.0)

    def restart(self) -> Broker:
        self.offsets.persist()
        self.store.shutdown()
        return Broker(self.root, self.settings, self.config, self.now_ms, self.connection)

    def send_half(self, index: int, *, born_ms: int | None = None) -> HalfRecord:
        properties = half_properties(f"TRAN_MSG\x01true\x02PGROUP\x01{GROUP}\x02UNIQ_KEY\x01U{index}", "Orders", 1)
        message = MessageToStore(
            "Orders", 1, f"m{index}".encode(), properties.encode(), born_timestamp_ms=born_ms or T0_MS
        )
        result = self.service.put_half(message)
        assert result.append is not None
        record = self.service.half_record(result.append.wrote_offset)
        assert record is not None
        return record

    def round(self) -> None:
        asyncio.run(self.checker.check_round())

    def queue(self, topic: str, queue_id: int = 0) -> list[HalfRecord]:
        found = self.store.get_messages(topic, queue_id, 0, 64)
        try:
            return [HalfRecord.of(decode_header(view, 0), view) for view in found.messages]
        finally:
            found.release()


@pytest.fixture
def broker(tmp_path: Path, small_settings: Callable[..., StoreSettings]) -> Iterator[Broker]:
    config = BrokerConfig(transaction_timeout_ms=6_000, transaction_check_max=2)
    running = Broker(tmp_path, small_settings(tmp_path / "store"), config)
    yield running
    running.store.shutdown()


def test_commit_then_a_second_end_is_refused(broker: Broker) -> None:
    """Goal: commit stores the real message and an op; the transaction is then resolved for good.
    Method: put a half message, commit it, look at the queues, try again."""
    record = broker.send_half(1)
    assert broker.queue("Orders", 1) == [], "a half message is not visible"
    assert broker.service.commit(record).append is not None
    (committed,) = broker.queue("Orders", 1)
    assert committed.header.sysflag & TRANSACTION_TYPE_MASK == TransactionType.COMMIT_TYPE
    (op,) = broker.queue(TRANS_OP_HALF_TOPIC)
    assert op.body == str(record.queue_offset).encode()
    assert "already" in (end_refusal(record, end_header(record), broker.service.table) or "")


def test_check_rounds_renew_ask_and_finally_discard(broker: Broker) -> None:
    """Goal: the check-back asks a live producer about a half message older than the timeout,
    renewing it each time, and after transactionCheckMax checks moves it to
    TRANS_CHECK_MAX_TIME_TOPIC. Method: an injected clock and a recording producer connection."""
    record = broker.send_half(1)
    young = broker.send_half(2, born_ms=T0_MS + 5_000)
    broker.now_ms[0] = T0_MS + 6_000  # the first is due, the second is 1 s too young
    broker.round()
    (request,) = broker.connection.sent
    assert (request.code, request.is_oneway) == (RequestCode.CHECK_TRANSACTION_STATE, True)
    header = CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
    body = decode_header(request.body or b"", 0)
    assert (body.topic, body.queue_id) == ("Orders", 1)
    assert (header.msg_id, header.transaction_id) == ("U1", "U1")
    assert header.tran_state_table_offset == body.queue_offset == 2, "about the renewed copy"
    assert header.commit_log_offset == body.physical_offset
    assert broker.service.table.half_progress == young.queue_offset, "stopped at the young message"

    broker.now_ms[0] = T0_MS + 20_000
    broker.round()  # checks both again (the first for the 2nd time)
    broker.round()  # the first reached the maximum: discarded; the second is checked a 2nd time
    assert len(broker.connection.sent) == 4
    (kept,) = broker.queue(TRANS_CHECK_MAX_TIME_TOPIC)
    assert kept.properties["UNIQ_KEY"] == "U1" and kept.properties["TRANSACTION_CHECK_TIMES"] == "2"
    assert not broker.service.table.is_pending(record.key)
    assert broker.service.table.is_pending(young.key)
    half_progress = broker.offsets.query(TRANS_SYS_GROUP, TRANS_HALF_TOPIC, 0)
    assert half_progress == broker.service.table.half_progress > young.queue_offset


def test_an_end_for_an_older_copy_resolves_the_transaction_once(broker: Broker) -> None:
    """Goal: after a check renewed a half message, an END for the original copy still resolves it
    (once), and an END for the renewed copy is then refused. Method: check, commit the original."""
    original = broker.send_half(1)
    broker.now_ms[0] = T0_MS + 10_000
    broker.round()
    renewed = broker.service.half_record(decode_header(broker.connection.sent[0].body or b"", 0).physical_offset)
    assert renewed is not None and renewed.key == original.key
    assert end_refusal(original, end_header(original), broker.service.table) is None
    broker.service.commit(original)
    assert "already" in (end_refusal(renewed, end_header(renewed), broker.service.table) or "")
    assert len(broker.queue("Orders", 1)) == 1


def test_restart_rebuilds_unresolved_transactions(broker: Broker) -> None:
    """Goal: after a restart exactly the unresolved transactions are pending again, renewed copies
    included. Method: commit one, roll back one, leave two (one renewed by a check), restart."""
    committed, rolled_back, left, checked = (broker.send_half(i) for i in range(4))
    broker.service.commit(committed)
    assert broker.service.rollback(rolled_back)
    broker.now_ms[0] = T0_MS + 10_000
    broker.round()  # renews `left` and `checked`
    restarted = broker.restart()
    broker.store = restarted.store  # the fixture shuts the new store down
    table = restarted.service.table
    assert set(table.pending) == {left.key, checked.key}
    assert all(latest > checked.queue_offset for latest in table.pending.values()), "the renewed copies"
    assert "already" in (end_refusal(committed, end_header(committed), table) or "")
    assert "already" in (end_refusal(rolled_back, end_header(rolled_back), table) or "")
    assert end_refusal(left, end_header(left), table) is None


def test_restart_repairs_a_commit_whose_op_message_was_lost(broker: Broker) -> None:
    """Goal: a crash between the committed message and its op message does not commit twice: the
    restart finds the commit through the index. Method: store only the committed message."""
    record = broker.send_half(1)
    assert broker.store.append_message(committed_message(record)).append is not None
    broker.store.dispatch_now()
    restarted = broker.restart()
    broker.store = restarted.store
    assert not restarted.service.table.is_pending(record.key)
    assert len(restarted.queue(TRANS_OP_HALF_TOPIC)) == 1


def test_a_promoted_slave_rebuilds_its_table(broker: Broker) -> None:
    """Goal: half messages a slave received by replication (never through put_half) are known once
    it becomes master. Method: append a half record behind the service's back as a slave, then
    switch the role and ask the service for its refusal (the send path's first call)."""
    master = [False]
    broker.service.is_master = lambda: master[0]
    broker.service.load()
    properties = half_properties(f"TRAN_MSG\x01true\x02PGROUP\x01{GROUP}", "Orders", 1).encode()
    replicated = broker.store.append_message(MessageToStore(TRANS_HALF_TOPIC, 0, b"r", properties))
    assert replicated.append is not None
    broker.store.dispatch_now()
    assert broker.service.table.pending == {}
    master[0] = True
    assert broker.service.refusal() is None
    assert broker.service.table.pending == {replicated.append.queue_offset: replicated.append.queue_offset}
