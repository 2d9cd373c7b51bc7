"""Transactional messages against real `shoal namesrv` / `shoal broker` processes (issue 4).

Each test starts its own cluster (tests/conftest.py `cluster_factory`) with a short
transactionTimeOut (1 s) and transactionCheckInterval (0.5 s), so a check-back comes within
about 1.5 s of a half message instead of RocketMQ's 6-66 s. Clients are Shoal's own
(`TransactionProducer`, `PullConsumer`, raw `RemotingClient` for malformed requests). Async tests
run through `asyncio.run`; the restart test uses the Blocking* facades with a plain-function
listener, which runs in worker threads.
"""

from __future__ import annotations

import asyncio
import hashlib
import signal
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest

from shoal.client import (
    Admin,
    BlockingAdmin,
    BlockingPullConsumer,
    BlockingTransactionProducer,
    ClientSettings,
    LocalTransactionState,
    Message,
    MessageExt,
    MessageQueue,
    MQBrokerError,
    Producer,
    PullConsumer,
    PullStatus,
    TransactionProducer,
    TransactionSendResult,
    decode_offset_msg_id,
)
from shoal.protocol import RequestCode, ResponseCode
from shoal.protocol.headers import EndTransactionRequestHeader
from shoal.remoting import RemotingClient
from tests.conftest import async_wait_until, wait_until

pytestmark = pytest.mark.slow

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
BROKER_NAME = "broker-a"
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
CONF = {
    "listenHost": "127.0.0.1",
    "metricsHost": "127.0.0.1",
    "transactionTimeOut": "1000",
    "transactionCheckInterval": "500",
    "haListenPort": "0",  # any free port: listenPort + 1 may be the metrics port the fixture picked
}
CHECK_SOON_S = 1.5
"""A half message older than transactionTimeOut is checked by the next round (0.5 s later)."""
QUIET_S = 2.0
"""Long enough for several check rounds: what has not happened by then is not going to."""
WAIT_S = 20.0
POLL_S = 0.05
TOPIC_QUEUES = 4
CLIENT_SETTINGS = ClientSettings(client_ip="127.0.0.1", route_refresh_interval_s=2.0, heartbeat_interval_s=1.0)


def run(coroutine: Coroutine[Any, Any, None]) -> None:
    asyncio.run(coroutine)


@pytest.fixture
def names(request: pytest.FixtureRequest) -> tuple[str, str]:
    """A topic and a producer group unique to the test."""
    digest = hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:10]
    return f"tx_{digest}_T", f"PID_tx_{digest}"


@dataclass
class Listener:
    """A TransactionListener with scripted answers that records every call."""

    execute: LocalTransactionState | None = COMMIT
    check: LocalTransactionState | None = COMMIT
    executed: list[Message] = field(default_factory=list)
    checked: list[MessageExt] = field(default_factory=list)
    during_execute: Callable[[Message], Awaitable[None]] | None = None

    async def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState | None:
        self.executed.append(message)
        if self.during_execute is not None:
            await self.during_execute(message)
        return self.execute

    async def check_local_transaction(self, message: MessageExt) -> LocalTransactionState | None:
        self.checked.append(message)
        return self.check


async def create_topic(namesrv_addr: str, broker_addr: str, topic: str) -> None:
    async with Admin(namesrv_addr, client_settings=CLIENT_SETTINGS) as admin:
        await admin.create_topic(
            topic, broker_addr=broker_addr, read_queue_nums=TOPIC_QUEUES, write_queue_nums=TOPIC_QUEUES
        )

        async def routed() -> bool:
            try:
                return bool((await admin.topic_route(topic)).queue_datas)
            except MQBrokerError:
                return False

        await async_wait_until(routed, WAIT_S, POLL_S, what=f"route of {topic}")


async def read_queue(consumer: PullConsumer, mq: MessageQueue) -> list[MessageExt]:
    """Every message of one queue from offset 0."""
    messages: list[MessageExt] = []
    offset = 0
    for _ in range(1000):
        result = await consumer.pull(mq, "*", offset, 32)
        if result.status is PullStatus.FOUND:
            messages.extend(result.messages)
        if result.status is not PullStatus.FOUND or result.next_begin_offset <= offset:
            break
        offset = result.next_begin_offset
    return messages


async def read_topic(consumer: PullConsumer, topic: str) -> list[MessageExt]:
    messages: list[MessageExt] = []
    for mq in await consumer.fetch_message_queues(topic):
        messages.extend(await read_queue(consumer, mq))
    return messages


@dataclass
class Env:
    """One test's cluster, topic, group and reading consumer."""

    cluster: Any
    topic: str
    group: str
    reader: PullConsumer

    def producer(self, listener: Listener) -> TransactionProducer:
        # Listener may answer None on purpose (a listener that returns null), outside the Protocol's types.
        return TransactionProducer(self.group, self.cluster.namesrv_addr, listener, client_settings=CLIENT_SETTINGS)  # type: ignore[arg-type]

    async def visible(self) -> list[MessageExt]:
        return await read_topic(self.reader, self.topic)

    async def queue(self, topic: str, queue_id: int = 0) -> list[MessageExt]:
        """One queue of a (system) topic; [] while the broker has not created the topic yet."""
        try:
            return await read_queue(self.reader, MessageQueue(topic, BROKER_NAME, queue_id))
        except MQBrokerError as error:
            if error.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
            return []


async def env_of(cluster: Any, names: tuple[str, str]) -> Env:
    topic, group = names
    await create_topic(cluster.namesrv_addr, cluster.broker_addr, topic)
    reader = PullConsumer(f"CID_{group}", cluster.namesrv_addr, client_settings=CLIENT_SETTINGS)
    await reader.start()
    await reader.fetch_message_queues(topic)
    return Env(cluster, topic, group, reader)


def tx_message(topic: str, index: int = 0, **options: Any) -> Message:
    return Message(topic, f"tx-{index}".encode(), tags="TagTx", keys=f"k{index}", **options)


def end_fields(result: TransactionSendResult, group: str, action: int, **overrides: Any) -> dict[str, str]:
    """END_TRANSACTION extFields about the half message of `result`."""
    _, commitlog_offset = decode_offset_msg_id(result.offset_msg_id)
    values: dict[str, Any] = {
        "producer_group": group,
        "tran_state_table_offset": result.queue_offset,
        "commit_log_offset": commitlog_offset,
        "commit_or_rollback": action,
        "msg_id": result.msg_id,
        **overrides,
    }
    return EndTransactionRequestHeader(**values).to_ext_fields()


# --- commit and rollback by the sender ---


def test_commit_becomes_visible_only_after_end_transaction(cluster_factory: Any, names: tuple[str, str]) -> None:
    """Goal: a committed message is invisible while the local transaction runs, visible once after.
    Method: the listener pulls the topic during execute_local_transaction, then commits."""

    async def scenario() -> None:
        env = await env_of(cluster_factory(CONF), names)
        seen_during: list[int] = []

        async def look(_message: Message) -> None:
            seen_during.append(len(await env.visible()))

        listener = Listener(execute=COMMIT, during_execute=look)
        async with env.producer(listener) as producer:
            result = await producer.send_message_in_transaction(tx_message(env.topic), arg="order-1")
            assert result.local_transaction_state is COMMIT
            assert seen_during == [0], "the half message was visible before END_TRANSACTION"
            await async_wait_until(lambda: _count(env, 1), WAIT_S, POLL_S, what="the committed message")
            (message,) = await env.visible()
            assert message.msg_id == result.msg_id == result.transaction_id
            assert message.body == b"tx-0"
            assert message.queue_id == result.message_queue.queue_id
            assert message.sysflag & 0xC == 0x8, "stored with the COMMIT transaction type"
            assert message.prepared_transaction_offset == decode_offset_msg_id(result.offset_msg_id)[1]
            assert message.properties.get("TRAN_MSG") == "true"
            assert "REAL_TOPIC" not in message.properties
            assert "REAL_QID" not in message.properties
            await asyncio.sleep(QUIET_S)
            assert len(await env.visible()) == 1
            assert listener.checked == [], "a committed transaction was checked back"
        await env.reader.shutdown()

    run(scenario())


async def _count(env: Env, expected: int) -> bool:
    return len(await env.visible()) >= expected


def test_rollback_is_never_visible(cluster_factory: Any, names: tuple[str, str]) -> None:
    """Goal: a rolled-back message never reaches consumers and is never checked. Method: execute
    answers ROLLBACK; after several check rounds the topic is still empty."""

    async def scenario() -> None:
        env = await env_of(cluster_factory(CONF), names)
        listener = Listener(execute=ROLLBACK)
        async with env.producer(listener) as producer:
            result = await producer.send_message_in_transaction(tx_message(env.topic))
            assert result.local_transaction_state is ROLLBACK
            await asyncio.sleep(CHECK_SOON_S + QUIET_S)
            assert await env.visible() == []
            assert listener.checked == []
        await env.reader.shutdown()

    run(scenario())


# --- the check-back ---


@pytest.mark.parametrize(("answer", "visible"), [(COMMIT, 1), (ROLLBACK, 0)])
def test_unknown_then_check_decides(
    cluster_factory: Any, names: tuple[str, str], answer: LocalTransactionState, visible: int
) -> None:
    """Goal: UNKNOW leaves the decision to the check-back, whose answer is applied once. Method:
    execute answers UNKNOW, check answers `answer`; wait for the check, then for quiet."""

    async def scenario() -> None:
        env = await env_of(cluster_factory(CONF), names)
        listener = Listener(execute=UNKNOW, check=answer)
        async with env.producer(listener) as producer:
            result = await producer.send_message_in_transaction(tx_message(env.topic))
            assert result.local_transaction_state is UNKNOW
            assert await env.visible() == []
            await async_wait_until(lambda: bool(listener.checked), WAIT_S, POLL_S, what="a check-back")
            checked = listener.checked[0]
            assert checked.topic == env.topic, "the check carries the real topic"
            assert checked.queue_id == result.message_queue.queue_id
            assert checked.msg_id == result.msg_id
            assert checked.properties["PGROUP"] == env.group
            if visible:
                await async_wait_until(
                    lambda: _count(env, 1), WAIT_S, POLL_S, what="the message committed by the check"
                )
            await asyncio.sleep(QUIET_S)
            assert [m.msg_id for m in await env.visible()] == [result.msg_id] * visible
            assert len(listener.checked) == 1, "an answered transaction was checked again"
        await env.reader.shutdown()

    run(scenario())


def test_second_producer_answers_when_the_sender_died(cluster_factory: Any, names: tuple[str, str]) -> None:
    """Goal: the check goes to any live producer of the group. Method: producer A sends with
    UNKNOW and shuts down; producer B of the same group answers the check with COMMIT."""

    async def scenario() -> None:
        env = await env_of(cluster_factory(CONF), names)
        first, second = Listener(execute=UNKNOW, check=ROLLBACK), Listener(check=COMMIT)
        async with env.producer(second) as survivor:
            await survivor.fetch_publish_queues(env.topic)  # heartbeats: the broker knows it now
            sender = env.producer(first)
            await sender.start()
            result = await sender.send_message_in_transaction(tx_message(env.topic))
            await sender.shutdown()
            await async_wait_until(
                lambda: _count(env, 1), WAIT_S, POLL_S, what="the message committed by the surviving producer"
            )
            assert [m.msg_id for m in await env.visible()] == [result.msg_id]
            assert first.checked == []
            assert [m.msg_id for m in second.checked] == [result.msg_id]
            assert survivor.checks_answered == 1
        await env.reader.shutdown()

    run(scenario())


def test_check_max_moves_the_message_to_the_max_time_topic(cluster_factory: Any, names: tuple[str, str]) -> None:
    """Goal: after transactionCheckMax unanswered checks the transaction is rolled back and kept
    in TRANS_CHECK_MAX_TIME_TOPIC. Method: checkMax 2, every check answers UNKNOW."""

    async def scenario() -> None:
        env = await env_of(cluster_factory({**CONF, "transactionCheckMax": "2"}), names)
        listener = Listener(execute=UNKNOW, check=UNKNOW)
        async with env.producer(listener) as producer:
            result = await producer.send_message_in_transaction(tx_message(env.topic))

            async def parked() -> bool:
                return any(m.msg_id == result.msg_id for m in await env.queue(MAX_TIME_TOPIC))

            await async_wait_until(parked, WAIT_S, POLL_S, what=f"the message in {MAX_TIME_TOPIC}")
            await asyncio.sleep(QUIET_S)
            assert len(listener.checked) == 2
            (kept,) = await env.queue(MAX_TIME_TOPIC)
            assert kept.properties["REAL_TOPIC"] == env.topic
            assert kept.properties["TRANSACTION_CHECK_TIMES"] == "2"
            assert await env.visible() == []
            last = listener.checked[-1]
            async with Raw() as raw:
                response = await raw.end(
                    env.cluster.broker_addr,
                    EndTransactionRequestHeader(
                        producer_group=env.group,
                        tran_state_table_offset=last.queue_offset,
                        commit_log_offset=last.commitlog_offset,
                        commit_or_rollback=8,
                        msg_id=result.msg_id,
                    ).to_ext_fields(),
                )
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert "already" in (response.remark or "")
            assert await env.visible() == []
        await env.reader.shutdown()

    run(scenario())


# --- bad input ---


class Raw:
    """A bare remoting client for END_TRANSACTION with a response expected (clients send it oneway)."""

    def __init__(self) -> None:
        self.client = RemotingClient()

    async def __aenter__(self) -> Raw:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.client.close()

    async def end(self, address: str, ext_fields: dict[str, str]) -> Any:
        return await self.client.invoke(address, RequestCode.END_TRANSACTION, ext_fields, timeout_s=5.0)


def test_bad_end_transaction_answers_clearly_and_changes_nothing(cluster_factory: Any, names: tuple[str, str]) -> None:
    """Goal: END_TRANSACTION for an unknown offset, a non-half message, the wrong group or queue
    offset, or an already resolved transaction answers SYSTEM_ERROR with a remark and writes
    nothing. Method: raw requests around one pending and one committed transaction; the op queue
    and the topic are compared before and after."""

    async def scenario() -> None:
        env = await env_of(cluster_factory({**CONF, "transactionTimeOut": "60000"}), names)
        address = env.cluster.broker_addr
        async with env.producer(Listener(execute=UNKNOW, check=UNKNOW)) as producer, Raw() as raw:
            pending = await producer.send_message_in_transaction(tx_message(env.topic, 1))
            plain = await producer.send(Message(env.topic, b"plain"))
            ops_before = len(await env.queue(OP_TOPIC))
            visible_before = len(await env.visible())
            bad = {
                "no message at CommitLog offset": end_fields(pending, env.group, 8, commit_log_offset=10**12),
                "is not a half message": end_fields(
                    pending,
                    env.group,
                    8,
                    commit_log_offset=decode_offset_msg_id(plain.offset_msg_id)[1],
                    tran_state_table_offset=plain.queue_offset,
                ),
                "belongs to producer group": end_fields(pending, "PID_someone_else", 8),
                "is not the queue offset": end_fields(pending, env.group, 12, tran_state_table_offset=999),
                "is not 0, 8 or 12": end_fields(pending, env.group, 5),
            }
            for expected, fields in bad.items():
                response = await raw.end(address, fields)
                assert response.code == ResponseCode.SYSTEM_ERROR, expected
                assert expected in (response.remark or ""), (expected, response.remark)
            assert len(await env.queue(OP_TOPIC)) == ops_before
            assert len(await env.visible()) == visible_before == 1

            assert (await raw.end(address, end_fields(pending, env.group, 8))).code == ResponseCode.SUCCESS
            await async_wait_until(lambda: _count(env, 2), WAIT_S, POLL_S, what="the committed message")
            ops_after_commit = len(await env.queue(OP_TOPIC))
            for action in (8, 12):
                response = await raw.end(address, end_fields(pending, env.group, action))
                assert response.code == ResponseCode.SYSTEM_ERROR
                assert "already committed, rolled back or discarded" in (response.remark or "")
            assert len(await env.queue(OP_TOPIC)) == ops_after_commit == ops_before + 1
            assert Counter(m.msg_id for m in await env.visible()) == Counter({pending.msg_id: 1, plain.msg_id: 1})
        await env.reader.shutdown()

    run(scenario())


# --- delays ---


def test_half_message_with_a_delay_level_does_not_loop(cluster_factory: Any, names: tuple[str, str]) -> None:
    """Goal: a half message carrying DELAY is committed once, at once, and never parked in the
    schedule topic (RocketMQ 4.5's loop, spec §11.6). Method: a plain producer sends a raw half
    message with delay level 3 (10 s); a TransactionProducer of its group answers the check with
    COMMIT; and a TransactionProducer sends one with delay level 3 itself."""

    async def scenario() -> None:
        env = await env_of(cluster_factory(CONF), names)
        listener = Listener(execute=COMMIT, check=COMMIT)
        async with env.producer(listener) as answering:
            await answering.fetch_publish_queues(env.topic)
            async with Producer(env.group, env.cluster.namesrv_addr, client_settings=CLIENT_SETTINGS) as raw_sender:
                raw_half = Message(
                    env.topic, b"raw-half", properties={"TRAN_MSG": "true", "PGROUP": env.group}, delay_time_level=3
                )
                raw = await raw_sender.send(raw_half)
            assert await env.visible() == []
            started = time.monotonic()
            own = await answering.send_message_in_transaction(tx_message(env.topic, 2, delay_time_level=3))
            await async_wait_until(lambda: _count(env, 2), WAIT_S, POLL_S, what="both messages committed")
            assert time.monotonic() - started < 8.0, "the delay level was applied (10 s)"
            await asyncio.sleep(QUIET_S)
            delivered = await env.visible()
            assert Counter(m.msg_id for m in delivered) == Counter({raw.msg_id: 1, own.msg_id: 1})
            assert all("DELAY" not in m.properties for m in delivered)
            assert await env.queue(SCHEDULE_TOPIC, 2) == [], "a half message was parked in the schedule topic"
            assert len(await env.queue(HALF_TOPIC)) <= 3, "half messages were put again and again"
            assert [m.msg_id for m in listener.checked] == [raw.msg_id]
        await env.reader.shutdown()

    run(scenario())


# --- restart ---


@dataclass
class ScriptedListener:
    """Plain-function listener for the Blocking facade: the message's key says what to do."""

    allow_checks: threading.Event = field(default_factory=threading.Event)
    checked: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState:
        return {"commit": COMMIT, "rollback": ROLLBACK}.get(str(arg), UNKNOW)

    def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
        with self.lock:
            self.checked.append(message.keys[0])
        if not message.keys[0].startswith("unknown"):
            return ROLLBACK  # never asked: recorded above and asserted by the test
        return COMMIT if self.allow_checks.is_set() else UNKNOW


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGKILL], ids=["graceful", "killed"])
def test_broker_restart_with_pending_transactions(
    cluster_factory: Any, names: tuple[str, str], stop_signal: signal.Signals
) -> None:
    """Goal: a broker restart loses no transaction and commits none twice. Method: 3 commits,
    3 rollbacks and 3 UNKNOWs whose checks answer UNKNOW; restart the broker (SIGTERM or
    SIGKILL); then checks answer COMMIT: exactly the 6 committed messages arrive, once each."""
    topic, group = names
    conf = {**CONF, "transactionCheckMax": "1000"}
    cluster = cluster_factory(conf)
    run(create_topic(cluster.namesrv_addr, cluster.broker_addr, topic))
    listener = ScriptedListener()
    producer = BlockingTransactionProducer(group, cluster.namesrv_addr, listener, client_settings=CLIENT_SETTINGS)
    reader = BlockingPullConsumer(f"CID_{group}", cluster.namesrv_addr, client_settings=CLIENT_SETTINGS)
    admin = BlockingAdmin(cluster.namesrv_addr, client_settings=CLIENT_SETTINGS)
    with producer, reader, admin:

        def visible() -> Counter[str]:
            found: Counter[str] = Counter()
            for mq in reader.fetch_message_queues(topic):
                offset = 0
                while True:
                    result = reader.pull(mq, "*", offset, 32)
                    if result.status is not PullStatus.FOUND:
                        break
                    found.update(m.keys[0] for m in result.messages)
                    offset = result.next_begin_offset
            return found

        for kind in ("commit", "rollback", "unknown"):
            for index in range(3):
                message = Message(topic, f"{kind}-{index}".encode(), keys=f"{kind}{index}")
                producer.send_message_in_transaction(message, kind)
        wait_until(lambda: sum(visible().values()) == 3, WAIT_S, POLL_S, what="the 3 committed messages")
        wait_until(lambda: len(set(listener.checked)) == 3, WAIT_S, POLL_S, what="checks of the 3 UNKNOW transactions")

        cluster.stop("broker", stop_signal)
        cluster.start_broker(conf)
        wait_until(lambda: topic in admin.topic_list(), WAIT_S, POLL_S, what="the topic routed after the restart")
        listener.allow_checks.set()
        expected = Counter({f"{kind}{i}": 1 for kind in ("commit", "unknown") for i in range(3)})
        wait_until(lambda: visible() == expected, WAIT_S, POLL_S, what="the 3 UNKNOW transactions committed by checks")
        time.sleep(QUIET_S)
        assert visible() == expected, "a transaction was lost or committed twice"
        assert {key for key in listener.checked if not key.startswith("unknown")} == set()
