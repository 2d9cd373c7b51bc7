"""The scenarios of test_cpp_client.py, run with Shoal's own Python client (`shoal.client`).

Real `shoal namesrv` / `shoal broker` processes (tests/scenarios/conftest.py: one cluster per
flush mode for the module; topics and groups are unique per test), plus what the Python client
adds: pipelined sends, orderly suspend, the DLQ, Admin, and a broker restart (its own cluster from
tests/conftest.py's `cluster_factory`). Async tests run through `asyncio.run`; the restart test
uses the Blocking* facades. Clients use short rebalance / route intervals so a scenario waits
seconds, not the Java defaults' tens of seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import signal
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from shoal.client import (
    Admin,
    BlockingAdmin,
    BlockingProducer,
    BlockingPullConsumer,
    BlockingPushConsumer,
    ClientSettings,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    ConsumerSettings,
    ConsumeStatus,
    Message,
    MessageExt,
    MessageModel,
    MessageQueue,
    MQBrokerError,
    NoRouteError,
    Producer,
    PullConsumer,
    PullStatus,
    PushConsumer,
    RemotingTimeoutError,
    SendResult,
    SendStatus,
    decode_offset_msg_id,
    retry_topic,
    select_by_hash,
)
from shoal.formats.sysflag import COMPRESSED_FLAG
from shoal.protocol import ResponseCode
from tests.conftest import async_wait_until, wait_until

pytestmark = pytest.mark.slow

BOTH_FLUSH_TYPES = pytest.mark.parametrize("flush_disk_type", ["ASYNC_FLUSH", "SYNC_FLUSH"])
POLL_INTERVAL_S = 0.02
DELIVERY_TIMEOUT_S = 20.0
"""Bound of every wait for deliveries, routes and rebalances (they normally take well under 2 s)."""
QUIET_S = 0.5
"""After the expected deliveries, exactly-once checks wait until none arrived for this long."""
IDLE_BEFORE_LIVE_S = 1.5
"""An idle consumer sees nothing for this long, so its pulls are held by the broker."""
LIVE_DELIVERY_MAX_S = 5.0
"""A live message must arrive this soon after its send: a third of the 15 s a held pull waits, so an
answer at expiry fails while a loaded CI machine (two test processes on two cores) still passes."""
PROBE_ROUND_S = 0.2
"""Broadcasting readiness probes go out at most this often."""
TOPIC_QUEUES = 4
NAME_READABLE_MAX_CHARS = 40
CLIENT_SETTINGS = ClientSettings(client_ip="127.0.0.1", route_refresh_interval_s=2.0)
CONSUMER_SETTINGS = ConsumerSettings(
    rebalance_interval_s=1.0,
    offset_persist_interval_s=1.0,
    lock_retry_delay_s=0.2,
    suspend_current_queue_s=0.2,
    local_retry_delay_s=0.5,
    shutdown_await_s=5.0,
)


# --- waiting ---


async def stays_false(predicate: Callable[[], bool], duration_s: float) -> bool:
    """True when `predicate` stayed false for `duration_s` (polled): nothing happened meanwhile."""
    try:
        await async_wait_until(predicate, duration_s, POLL_INTERVAL_S)
    except AssertionError:
        return True
    return False


def run(coroutine: Coroutine[Any, Any, None]) -> None:
    asyncio.run(coroutine)


# --- names, clients, recording ---


@dataclass(frozen=True)
class Names:
    """Topic and group names unique to one test (its name, cut, plus a hash of its node id)."""

    prefix: str

    def topic(self, suffix: str = "T") -> str:
        return f"{self.prefix}_{suffix}"

    def group(self, suffix: str = "G") -> str:
        return f"CID_{self.prefix}_{suffix}"


@pytest.fixture
def names(request: pytest.FixtureRequest) -> Names:
    readable = "".join(ch if ch.isalnum() else "_" for ch in request.node.name)[:NAME_READABLE_MAX_CHARS]
    digest = hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:8]
    return Names(f"py_{readable}_{digest}")


@dataclass
class Inbox:
    """What a push consumer's listener received, in callback order, with arrival times."""

    messages: list[MessageExt] = field(default_factory=list)
    received_at: dict[str, float] = field(default_factory=dict)
    last_at: float = 0.0

    def record(self, messages: Iterable[MessageExt]) -> None:
        now = time.monotonic()
        for message in messages:
            self.messages.append(message)
            self.received_at.setdefault(message.msg_id, now)
        self.last_at = now

    async def concurrent(self, messages: list[MessageExt]) -> ConsumeStatus:
        self.record(messages)
        return ConsumeStatus.CONSUME_SUCCESS

    def ids(self) -> Counter[str]:
        return Counter(message.msg_id for message in self.messages)

    def has(self, ids: Iterable[str]) -> bool:
        return set(ids) <= set(self.received_at)

    def quiet(self) -> bool:
        return time.monotonic() - self.last_at >= QUIET_S


def push_consumer(
    cluster: Any,
    group: str,
    topic: str,
    listener: Callable[[list[MessageExt]], Any],
    expression: str = "*",
    **options: Any,
) -> PushConsumer:
    consumer = PushConsumer(
        group,
        cluster.namesrv_addr,
        listener=listener,
        settings=CONSUMER_SETTINGS,
        client_settings=CLIENT_SETTINGS,
        **options,
    )
    consumer.subscribe(topic, expression)
    return consumer


def pull_consumer(cluster: Any, group: str) -> PullConsumer:
    return PullConsumer(group, cluster.namesrv_addr, client_settings=CLIENT_SETTINGS)


def producer_of(cluster: Any, group: str) -> Producer:
    return Producer(group, cluster.namesrv_addr, client_settings=CLIENT_SETTINGS)


async def create_topic(
    cluster: Any, topic: str, *, read_queue_nums: int = TOPIC_QUEUES, write_queue_nums: int = TOPIC_QUEUES
) -> None:
    """UPDATE_AND_CREATE_TOPIC, then wait until the NameServer routes it (registration is async)."""
    async with Admin(cluster.namesrv_addr, client_settings=CLIENT_SETTINGS) as admin:
        await admin.create_topic(
            topic, broker_addr=cluster.broker_addr, read_queue_nums=read_queue_nums, write_queue_nums=write_queue_nums
        )

        async def routed() -> bool:
            try:
                route = await admin.topic_route(topic)
            except MQBrokerError:
                return False
            return any(data.write_queue_nums == write_queue_nums for data in route.queue_datas)

        await async_wait_until(routed, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what=f"route of {topic}")


class QueueReader:
    """Reads a topic with a PullConsumer from offset 0, remembering where each queue got to."""

    def __init__(self, consumer: PullConsumer, topic: str, expression: str = "*") -> None:
        self.consumer = consumer
        self.topic = topic
        self.expression = expression
        self.offsets: dict[MessageQueue, int] = {}
        self.messages: list[MessageExt] = []

    async def read(self) -> list[MessageExt]:
        for mq in await self.consumer.fetch_message_queues(self.topic):
            offset = self.offsets.get(mq, 0)
            for _ in range(1000):  # bounded: each round either advances or stops
                result = await self.consumer.pull(mq, self.expression, offset, 32)
                advanced = result.next_begin_offset > offset
                offset = max(offset, result.next_begin_offset)
                if result.status is PullStatus.FOUND:
                    self.messages.extend(result.messages)
                if result.status not in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG) or not advanced:
                    break
            self.offsets[mq] = offset
        return self.messages

    async def read_until(self, count: int) -> list[MessageExt]:
        """Pull until `count` messages were read (the CQ dispatch trails the send by a moment)."""

        async def enough() -> bool:
            return len(await self.read()) >= count

        await async_wait_until(
            enough, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what=f"{count} messages pulled from {self.topic}"
        )
        return self.messages


def message(topic: str, index: int, *, tags: str = "TagA", prefix: str = "m", body: bytes | None = None) -> Message:
    """Key `<prefix><index>`, property seq=<index>."""
    return Message(
        topic,
        body if body is not None else f"{prefix}-body-{index}".encode(),
        tags=tags,
        keys=(f"{prefix}{index}",),
        properties={"seq": str(index)},
    )


def queues_of(messages: Iterable[MessageExt]) -> set[int]:
    return {received.queue_id for received in messages}


# --- 1. sync send + pull back ---


@BOTH_FLUSH_TYPES
def test_sync_send_returns_ok_and_pulled_messages_match_every_field(cluster: Any, names: Names) -> None:
    """Goal: SEND_MESSAGE_V2 of 20 messages returns SEND_OK with per-queue increasing offsets and
    ids that name the stored records. Method: send with tags/keys/properties, pull everything
    back and compare each field, the UNIQ_KEY and the decoded offset message id."""
    topic = names.topic()

    async def scenario() -> None:
        await create_topic(cluster, topic)
        sent = [
            Message(
                topic,
                f"body-{i}-ünïcödé-✓".encode(),
                tags="TagA" if i % 2 else "TagB",
                keys=(f"k{i}", f"alt{i}"),
                properties={"color": f"c{i}-é", "seq": str(i)},
            )
            for i in range(20)
        ]
        async with producer_of(cluster, names.group("P")) as producer:
            results = [await producer.send(item) for item in sent]
        async with pull_consumer(cluster, names.group()) as puller:
            pulled = await QueueReader(puller, topic).read_until(len(sent))

        assert [result.status for result in results] == [SendStatus.SEND_OK] * 20
        assert len({result.msg_id for result in results}) == 20
        offsets_by_queue: dict[int, list[int]] = defaultdict(list)
        for result in results:
            assert result.message_queue.topic == topic
            offsets_by_queue[result.message_queue.queue_id].append(result.queue_offset)
        assert len(offsets_by_queue) > 1, "the producer spreads sends over the topic's queues"
        for queue_id, offsets in offsets_by_queue.items():
            assert offsets == list(range(len(offsets))), f"queue {queue_id}: offsets {offsets} in send order"

        by_id = {received.msg_id: received for received in pulled}
        assert len(pulled) == 20 and set(by_id) == {result.msg_id for result in results}
        for spec, result in zip(sent, results, strict=True):
            received = by_id[result.msg_id]
            assert (received.topic, received.tags, received.keys, received.body) == (
                topic,
                spec.tags,
                spec.keys,
                spec.body,
            )
            assert received.properties.items() >= spec.properties.items()
            assert received.properties["UNIQ_KEY"] == result.msg_id
            assert (received.queue_id, received.queue_offset) == (
                result.message_queue.queue_id,
                result.queue_offset,
            )
            assert received.offset_msg_id == result.offset_msg_id
            assert decode_offset_msg_id(result.offset_msg_id) == (cluster.broker_addr, received.commitlog_offset)
            assert received.store_host == cluster.broker_addr
            assert received.reconsume_times == 0
            assert received.sysflag & COMPRESSED_FLAG == 0

    run(scenario())


# --- 2. pipelined sends ---


def test_two_thousand_concurrent_sends_on_one_producer_all_succeed(cluster: Any, names: Names) -> None:
    """Goal: sends pipelined on one connection (matched by opaque) all succeed, each stored once.
    Method: asyncio.gather of 2,000 `send` calls; check results, per-queue offsets, and pull all."""
    topic = names.topic()
    count = 2000

    async def scenario() -> None:
        await create_topic(cluster, topic)
        async with producer_of(cluster, names.group("P")) as producer:
            results: list[SendResult] = await asyncio.gather(
                *(producer.send(message(topic, i, body=f"p-{i}".encode()), timeout_s=60.0) for i in range(count))
            )
        async with pull_consumer(cluster, names.group()) as puller:
            pulled = await QueueReader(puller, topic).read_until(count)

        assert {result.status for result in results} == {SendStatus.SEND_OK}
        assert len({result.msg_id for result in results}) == count
        offsets_by_queue: dict[int, list[int]] = defaultdict(list)
        for result in results:
            offsets_by_queue[result.message_queue.queue_id].append(result.queue_offset)
        assert sorted(offsets_by_queue) == list(range(TOPIC_QUEUES))
        for queue_id, offsets in offsets_by_queue.items():
            assert sorted(offsets) == list(range(len(offsets))), f"queue {queue_id}: gaps or duplicate offsets"
        assert Counter(received.msg_id for received in pulled) == Counter({result.msg_id: 1 for result in results})
        assert sorted(received.body for received in pulled) == sorted(f"p-{i}".encode() for i in range(count))

    run(scenario())


def test_a_send_whose_answer_never_comes_fails_with_the_clients_timeout_error(cluster: Any, names: Names) -> None:
    """Goal: a send over an open connection (the pipelined path, which awaits its response without
    `invoke`) turns a response that never comes into shoal.client's RemotingTimeoutError, not the
    transport's, within its timeout; the producer sends again once the broker answers. Method:
    send once (route and connection open), stop the broker (SIGSTOP), send with a 1 s timeout;
    continue the broker and send again."""
    topic = names.topic()

    async def scenario() -> None:
        await create_topic(cluster, topic)
        async with producer_of(cluster, names.group("P")) as producer:
            assert (await producer.send(message(topic, 0))).status is SendStatus.SEND_OK
            assert cluster.broker is not None
            cluster.broker.send_signal(signal.SIGSTOP)
            try:
                started = time.monotonic()
                with pytest.raises(RemotingTimeoutError):
                    await producer.send(message(topic, 1), timeout_s=1.0)
                assert time.monotonic() - started < 10, "the send's own timeout bounds it"
            finally:
                cluster.broker.send_signal(signal.SIGCONT)
            assert (await producer.send(message(topic, 2), timeout_s=30.0)).status is SendStatus.SEND_OK

    run(scenario())


# --- 3. oneway + compressed ---


@BOTH_FLUSH_TYPES
def test_oneway_and_compressed_bodies_are_consumed_intact(cluster: Any, names: Names) -> None:
    """Goal: oneway sends and bodies of >= 4 KiB (zlib'd by the producer, sysFlag bit 0) reach a
    push consumer intact. Method: small and 6-8 KiB bodies oneway plus one large sync send."""
    topic = names.topic()
    large = [
        ("".join(f"{i}:{j * 7919 % 10007:05d};" for j in range(1300)))[: 6000 + 1000 * i].encode() for i in range(3)
    ]
    oneway = [message(topic, i) for i in range(5)] + [message(topic, 10 + i, body=body) for i, body in enumerate(large)]
    synced = message(topic, 20, body=large[0][::-1])
    expected = {item.keys[0]: item.body for item in [*oneway, synced]}

    async def scenario() -> None:
        await create_topic(cluster, topic)
        async with producer_of(cluster, names.group("P")) as producer:
            for item in oneway:
                await producer.send_oneway(item)
            result = await producer.send(synced)
        assert result.status is SendStatus.SEND_OK
        inbox = Inbox()
        consumer = push_consumer(cluster, names.group(), topic, inbox.concurrent)
        async with consumer:
            await async_wait_until(
                lambda: len(inbox.messages) >= len(expected),
                DELIVERY_TIMEOUT_S,
                POLL_INTERVAL_S,
                what="every oneway and compressed message",
            )

        assert {received.keys[0]: received.body for received in inbox.messages} == expected
        assert len(inbox.messages) == len(expected)
        compressed = [received for received in inbox.messages if len(received.body) >= 4096]
        assert len(compressed) == 4
        for received in compressed:
            assert received.sysflag & COMPRESSED_FLAG, "a large body was stored uncompressed"
            assert received.store_size_bytes < len(received.body)

    run(scenario())


# --- 4. batch ---


def test_batch_send_is_consumed_in_full_with_consecutive_offsets(cluster: Any, names: Names) -> None:
    """Goal: SEND_BATCH_MESSAGE stores every message of the batch on one queue at consecutive
    offsets, each with its own UNIQ_KEY. Method: batch-send 10, consume by push, compare."""
    topic = names.topic()
    batch = [message(topic, i, prefix="b") for i in range(10)]

    async def scenario() -> None:
        await create_topic(cluster, topic)
        async with producer_of(cluster, names.group("P")) as producer:
            result = await producer.send_batch(batch)
        inbox = Inbox()
        async with push_consumer(cluster, names.group(), topic, inbox.concurrent):
            await async_wait_until(
                lambda: len(inbox.messages) >= len(batch), DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what="the whole batch"
            )

        assert result.status is SendStatus.SEND_OK
        uniq_keys = result.msg_id.split(",")
        assert len(uniq_keys) == 10 and len(result.offset_msg_id.split(",")) == 10
        by_offset = sorted(inbox.messages, key=lambda received: received.queue_offset)
        assert [received.queue_offset for received in by_offset] == list(
            range(result.queue_offset, result.queue_offset + 10)
        )
        assert queues_of(by_offset) == {result.message_queue.queue_id}
        assert [(received.keys, received.body) for received in by_offset] == [(item.keys, item.body) for item in batch]
        assert [received.msg_id for received in by_offset] == uniq_keys
        assert [received.properties["seq"] for received in by_offset] == [str(i) for i in range(10)]
        assert [received.offset_msg_id for received in by_offset] == result.offset_msg_id.split(",")

    run(scenario())


# --- 5. orderly ---


async def wait_for_split(consumers: list[PushConsumer], topic: str, queue_count: int) -> list[set[MessageQueue]]:
    """Until the consumers own disjoint, non-empty sets of `topic`'s queues covering all of them."""
    owned: list[set[MessageQueue]] = []

    def split() -> bool:
        owned[:] = [{mq for mq in consumer.assigned_queues() if mq.topic == topic} for consumer in consumers]
        union = set().union(*owned)
        return all(owned) and len(union) == queue_count and sum(len(part) for part in owned) == queue_count

    await async_wait_until(
        split,
        DELIVERY_TIMEOUT_S,
        POLL_INTERVAL_S,
        what=f"the queues of {topic} split between {len(consumers)} consumers",
    )
    return owned


def test_orderly_consumers_keep_per_key_order_while_sharing_queues(cluster: Any, names: Names) -> None:
    """Goal: send with select_by_hash puts each key on one queue, and two orderly consumers of one
    group (LOCK_BATCH_MQ) split the queues and see each key in send order, also across a
    SUSPEND_CURRENT_QUEUE_A_MOMENT. Method: 4 keys x 10 interleaved sends after the split; one
    listener call suspends k1's 4th message once."""
    topic = names.topic()
    group = names.group()
    keys, per_key = [f"k{key}" for key in range(4)], 10
    attempts: list[tuple[int, str, int]] = []  # (consumer, key, seq) per listener call
    suspended: list[str] = []

    def listener(index: int) -> Callable[[list[MessageExt]], Awaitable[ConsumeOrderlyStatus]]:
        async def consume(messages: list[MessageExt]) -> ConsumeOrderlyStatus:
            for received in messages:
                attempts.append((index, received.keys[0], int(received.properties["seq"])))
            if any(received.msg_id not in suspended and received.body == b"k1-3" for received in messages):
                suspended.extend(received.msg_id for received in messages)
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            return ConsumeOrderlyStatus.SUCCESS

        return consume

    async def scenario() -> None:
        await create_topic(cluster, topic)
        consumers = [push_consumer(cluster, group, topic, listener(index), orderly=True) for index in range(2)]
        async with consumers[0], consumers[1]:
            owned = await wait_for_split(consumers, topic, TOPIC_QUEUES)
            async with producer_of(cluster, names.group("P")) as producer:
                results = [
                    (
                        key,
                        await producer.send(
                            Message(
                                topic, f"{key}-{seq}".encode(), tags="TagA", keys=(key,), properties={"seq": str(seq)}
                            ),
                            selector=select_by_hash,
                            arg=key,
                        ),
                    )
                    for seq in range(per_key)
                    for key in keys
                ]
            await async_wait_until(
                lambda: len(attempts) >= len(results) + 1 and bool(suspended),
                DELIVERY_TIMEOUT_S,
                POLL_INTERVAL_S,
                what="every ordered message",
            )

        offsets_by_key: dict[str, list[int]] = defaultdict(list)
        queue_of_key: dict[str, set[int]] = defaultdict(set)
        for key, result in results:
            offsets_by_key[key].append(result.queue_offset)
            queue_of_key[key].add(result.message_queue.queue_id)
        assert all(len(queue_ids) == 1 for queue_ids in queue_of_key.values()), queue_of_key
        assert all(offsets == list(range(per_key)) for offsets in offsets_by_key.values()), offsets_by_key
        owner = {mq.queue_id: index for index, queues in enumerate(owned) for mq in queues}

        sequence_by_key: dict[str, list[int]] = defaultdict(list)
        consumers_by_key: dict[str, set[int]] = defaultdict(set)
        for index, key, seq in attempts:
            sequence_by_key[key].append(seq)
            consumers_by_key[key].add(index)
        expected = {key: list(range(per_key)) for key in keys}
        expected["k1"] = [0, 1, 2, 3, *range(3, per_key)]  # the suspended message again, then the rest
        assert dict(sequence_by_key) == expected
        for key in keys:
            (queue_id,) = queue_of_key[key]
            assert consumers_by_key[key] == {owner[queue_id]}, f"{key} was consumed by {consumers_by_key[key]}"
        assert {index for index, _key, _seq in attempts} == {0, 1}, "one orderly consumer got nothing"

    run(scenario())


# --- 6. tag expression, two groups ---


@BOTH_FLUSH_TYPES
def test_tag_expression_delivers_matching_messages_once_per_group(cluster: Any, names: Names) -> None:
    """Goal: a concurrent push consumer subscribed with `TagA || TagB` gets exactly the matching
    messages, each once per group, and two groups each get all of them. Method: 30 sends over
    TagA/TagB/TagC, one consumer per group, count deliveries by UNIQ_KEY after a quiet period."""
    topic = names.topic()

    async def scenario() -> None:
        await create_topic(cluster, topic)
        sent = [message(topic, i, tags=("TagA", "TagB", "TagC")[i % 3]) for i in range(30)]
        async with producer_of(cluster, names.group("P")) as producer:
            results = [await producer.send(item) for item in sent]
        matching = {result.msg_id for item, result in zip(sent, results, strict=True) if item.tags != "TagC"}
        inboxes = [Inbox(), Inbox()]
        consumers = [
            push_consumer(cluster, names.group(f"G{index}"), topic, inbox.concurrent, "TagA || TagB")
            for index, inbox in enumerate(inboxes)
        ]
        async with consumers[0], consumers[1]:
            await async_wait_until(
                lambda: all(inbox.has(matching) for inbox in inboxes),
                DELIVERY_TIMEOUT_S,
                POLL_INTERVAL_S,
                what="matching messages",
            )
            await async_wait_until(
                lambda: all(inbox.quiet() for inbox in inboxes),
                DELIVERY_TIMEOUT_S,
                POLL_INTERVAL_S,
                what="no more deliveries",
            )

        for inbox in inboxes:
            assert inbox.ids() == Counter(dict.fromkeys(matching, 1))
            assert {received.tags for received in inbox.messages} == {"TagA", "TagB"}

    run(scenario())


# --- 7. clustering rebalance ---


def test_two_consumers_split_queues_and_the_survivor_takes_over(cluster: Any, names: Names) -> None:
    """Goal: two clustering consumers of one group split the queues (GET_CONSUMER_LIST_BY_GROUP,
    NOTIFY_CONSUMER_IDS_CHANGED); when one shuts down (offsets persisted, UNREGISTER_CLIENT) the
    other takes every queue over from the committed offsets. Method: 40 sends after the split,
    shut one down, 40 more; every message is consumed exactly once overall."""
    topic = names.topic()
    group = names.group()

    async def scenario() -> None:
        await create_topic(cluster, topic)
        inboxes = [Inbox(), Inbox()]
        consumers = [push_consumer(cluster, group, topic, inbox.concurrent) for inbox in inboxes]
        async with producer_of(cluster, names.group("P")) as producer:
            await consumers[0].start()
            async with consumers[1]:
                try:
                    owned = await wait_for_split(consumers, topic, TOPIC_QUEUES)
                    first = [await producer.send(message(topic, i, prefix="a")) for i in range(40)]
                    await async_wait_until(
                        lambda: (
                            set(inboxes[0].received_at) | set(inboxes[1].received_at)
                            >= {result.msg_id for result in first}
                        ),
                        DELIVERY_TIMEOUT_S,
                        POLL_INTERVAL_S,
                        what="the first 40 messages",
                    )
                finally:
                    await consumers[0].shutdown()
                await async_wait_until(
                    lambda: len([mq for mq in consumers[1].assigned_queues() if mq.topic == topic]) == TOPIC_QUEUES,
                    DELIVERY_TIMEOUT_S,
                    POLL_INTERVAL_S,
                    what="the survivor owning every queue",
                )
                second = [await producer.send(message(topic, i, prefix="b")) for i in range(40)]
                await async_wait_until(
                    lambda: inboxes[1].has(result.msg_id for result in second),
                    DELIVERY_TIMEOUT_S,
                    POLL_INTERVAL_S,
                    what="40 more",
                )
                await async_wait_until(inboxes[1].quiet, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what="no more deliveries")

        everything = inboxes[0].ids() + inboxes[1].ids()
        assert everything == Counter({result.msg_id: 1 for result in [*first, *second]})
        first_ids = {result.msg_id for result in first}
        split_queues = [queues_of(m for m in inbox.messages if m.msg_id in first_ids) for inbox in inboxes]
        assert split_queues == [{mq.queue_id for mq in queues} for queues in owned]
        assert not split_queues[0] & split_queues[1]
        assert not {result.msg_id for result in second} & set(inboxes[0].received_at)

    run(scenario())


# --- 8. broadcasting ---


def test_broadcasting_consumers_each_get_every_new_message(cluster: Any, names: Names, tmp_path: Path) -> None:
    """Goal: BROADCASTING consumers (local offset files; a new queue starts at GET_MAX_OFFSET) each
    get every message sent after they started and none sent before. Method: 4 earlier sends; the
    consumers start; probes go to every queue until both saw one from each; then 12 live sends."""
    topic = names.topic()
    group = names.group()

    async def scenario() -> None:
        await create_topic(cluster, topic)
        inboxes = [Inbox(), Inbox()]
        consumers = [
            push_consumer(
                cluster,
                group,
                topic,
                inbox.concurrent,
                message_model=MessageModel.BROADCASTING,
                offset_store_path=tmp_path / f"offsets{index}.json",
            )
            for index, inbox in enumerate(inboxes)
        ]
        async with producer_of(cluster, names.group("P")) as producer:
            earlier = [await producer.send(message(topic, i, prefix="early")) for i in range(4)]
            async with consumers[0], consumers[1]:
                queues = await producer.fetch_publish_queues(topic)

                def probed(inbox: Inbox) -> set[int]:
                    return queues_of(m for m in inbox.messages if m.keys[0].startswith("probe"))

                last_round = [0.0]

                async def ready() -> bool:
                    if all(probed(inbox) == set(range(TOPIC_QUEUES)) for inbox in inboxes):
                        return True
                    if time.monotonic() - last_round[0] >= PROBE_ROUND_S:
                        last_round[0] = time.monotonic()
                        for mq in queues:
                            if any(mq.queue_id not in probed(inbox) for inbox in inboxes):
                                await producer.send(message(topic, mq.queue_id, prefix="probe"), queue=mq)
                    return False

                await async_wait_until(
                    ready, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what="both consumers pulling every queue"
                )
                live = [await producer.send(message(topic, i, prefix="live")) for i in range(12)]
                live_ids = {result.msg_id for result in live}
                await async_wait_until(
                    lambda: all(inbox.has(live_ids) for inbox in inboxes),
                    DELIVERY_TIMEOUT_S,
                    POLL_INTERVAL_S,
                    what="the live messages",
                )
                await async_wait_until(
                    lambda: all(inbox.quiet() for inbox in inboxes),
                    DELIVERY_TIMEOUT_S,
                    POLL_INTERVAL_S,
                    what="no more deliveries",
                )

        earlier_ids = {result.msg_id for result in earlier}
        for inbox in inboxes:
            counts = inbox.ids()
            assert {msg_id: counts[msg_id] for msg_id in live_ids} == dict.fromkeys(live_ids, 1)
            assert not earlier_ids & set(counts), "a broadcasting consumer got a message sent before it started"
        assert all(path.exists() for path in (tmp_path / "offsets0.json", tmp_path / "offsets1.json"))

    run(scenario())


# --- 9. consume from where ---


def test_fresh_groups_get_earlier_messages_whatever_consume_from_where(cluster: Any, names: Names) -> None:
    """Goal: QUERY_CONSUMER_OFFSET answers 0 for a group that never committed while the queue's
    head is in memory (consumer.py query_offset, like Java), so fresh FIRST_OFFSET and LAST_OFFSET
    groups both consume the messages sent before they started. Method: 12 sends, check the
    broker's answer with a PullConsumer, then one push group per consume-from-where."""
    topic = names.topic()

    async def scenario() -> None:
        await create_topic(cluster, topic)
        async with producer_of(cluster, names.group("P")) as producer:
            results = [await producer.send(message(topic, i)) for i in range(12)]
        async with pull_consumer(cluster, names.group("Probe")) as puller:
            queues = sorted(await puller.fetch_message_queues(topic))

            async def dispatched() -> bool:  # the ConsumeQueues trail the CommitLog by a moment
                return sum([await puller.max_offset(mq) for mq in queues]) == 12

            await async_wait_until(
                dispatched, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what="12 messages in the ConsumeQueues"
            )
            assert [await puller.fetch_offset(mq) for mq in queues] == [0] * TOPIC_QUEUES
        expected = Counter({result.msg_id: 1 for result in results})
        for where in (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET):
            inbox = Inbox()
            group = names.group(where.value.rsplit("_", 2)[-2])
            async with push_consumer(cluster, group, topic, inbox.concurrent, consume_from_where=where):
                await async_wait_until(
                    functools.partial(inbox.has, expected),
                    DELIVERY_TIMEOUT_S,
                    POLL_INTERVAL_S,
                    what=f"earlier messages for {where}",
                )
                await async_wait_until(inbox.quiet, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what="no more deliveries")
            assert inbox.ids() == expected, where

    run(scenario())


# --- 10. RECONSUME_LATER, retry topic, DLQ ---


def test_reconsume_later_redelivers_then_dead_letters_after_max_reconsume_times(cluster: Any, names: Names) -> None:
    """Goal: RECONSUME_LATER sends a message back (CONSUMER_SEND_MSG_BACK) and it returns from
    %RETRY%<group> with reconsume_times >= 1 under its original topic; after max_reconsume_times
    (2) it goes to %DLQ%<group>. Method: one key fails once, one always; pull the DLQ."""
    topic = names.topic()
    group = names.group()
    inbox = Inbox()
    deliveries = inbox.messages

    async def listener(messages: list[MessageExt]) -> ConsumeStatus:
        inbox.record(messages)
        (received,) = messages
        if received.keys[0] == "poison" or (received.keys[0] == "m2" and received.reconsume_times == 0):
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    def attempts(key: str) -> list[MessageExt]:
        return [received for received in deliveries if received.keys[0] == key]

    async def scenario() -> None:
        await create_topic(cluster, topic)
        async with producer_of(cluster, names.group("P")) as producer:
            results = [await producer.send(message(topic, i)) for i in range(4)]
            poison = await producer.send(Message(topic, b"poison-body", tags="TagP", keys=("poison",)))
        dlq = f"%DLQ%{group}"
        async with push_consumer(cluster, group, topic, listener, max_reconsume_times=2):
            await async_wait_until(
                lambda: len(attempts("m2")) >= 2, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what="m2 delivered again"
            )
            await async_wait_until(
                lambda: len(attempts("poison")) >= 3, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what="poison tried 3 times"
            )
            async with pull_consumer(cluster, names.group("Dlq")) as puller:

                async def dlq_routed() -> bool:
                    try:
                        return bool(await puller.fetch_message_queues(dlq))
                    except NoRouteError:  # until the broker registers the DLQ it created
                        return False

                await async_wait_until(dlq_routed, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what=f"a route of {dlq}")
                dead = await QueueReader(puller, dlq).read_until(1)
            await async_wait_until(inbox.quiet, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what="no more deliveries")

        assert {key: len(attempts(key)) for key in ("m0", "m1", "m2", "m3", "poison")} == {
            "m0": 1,
            "m1": 1,
            "m2": 2,
            "m3": 1,
            "poison": 3,
        }
        first, again = attempts("m2")
        assert (first.reconsume_times, first.topic) == (0, topic)
        assert again.reconsume_times >= 1
        assert again.msg_id == first.msg_id == results[2].msg_id
        assert again.topic == topic, "a retried message is shown under its original topic"
        assert again.retry_topic == topic
        assert again.body == first.body
        assert [received.reconsume_times for received in attempts("poison")] == [0, 1, 2]
        (dead_letter,) = dead
        assert dead_letter.topic == dlq
        assert dead_letter.msg_id == poison.msg_id
        assert (dead_letter.body, dead_letter.tags, dead_letter.keys) == (b"poison-body", "TagP", ("poison",))
        assert dead_letter.retry_topic == topic
        assert dead_letter.reconsume_times == 3

    run(scenario())


# --- 11. long polling ---


def test_message_sent_to_an_idle_push_consumer_is_delivered_at_once(cluster: Any, names: Names) -> None:
    """Goal: a pull the broker holds (FLAG_SUSPEND, up to 15 s) is answered as soon as a message
    arrives. Method: the consumer drains a warm-up message, stays idle so its pulls are held,
    then 5 sync sends; each must arrive well before the hold would have expired."""
    topic = names.topic()

    async def scenario() -> None:
        await create_topic(cluster, topic)
        inbox = Inbox()
        async with (
            producer_of(cluster, names.group("P")) as producer,
            push_consumer(cluster, names.group(), topic, inbox.concurrent),
        ):
            warmup = await producer.send(message(topic, 0, prefix="warmup"))
            await async_wait_until(
                lambda: inbox.has([warmup.msg_id]), DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what="the warm-up message"
            )
            # idle: nothing arrives while the consumer's pulls are parked at the broker
            assert await stays_false(lambda: len(inbox.messages) > 1, IDLE_BEFORE_LIVE_S)
            latencies_s: dict[str, float] = {}
            for i in range(5):
                result = await producer.send(message(topic, i, prefix="live"))
                sent_at = time.monotonic()
                await async_wait_until(
                    functools.partial(inbox.has, [result.msg_id]), 10.0, POLL_INTERVAL_S, what="live"
                )
                latencies_s[result.msg_id] = inbox.received_at[result.msg_id] - sent_at

        assert max(latencies_s.values()) < LIVE_DELIVERY_MAX_S, latencies_s
        assert len(inbox.messages) == 6

    run(scenario())


# --- the pull consumer: tags, offsets, long polling; auto-created topics ---


def test_pull_consumer_filters_by_tag_and_stores_offsets(cluster: Any, names: Names) -> None:
    """Goal: PULL_MESSAGE with a tag expression returns only matching messages and its pull loop
    ends (nextBeginOffset skips unmatched runs); UPDATE_CONSUMER_OFFSET / QUERY_CONSUMER_OFFSET and
    SEARCH_OFFSET_BY_TIMESTAMP agree. Method: 24 sends over TagA/TagB/TagC, pull TagB, store offsets."""
    topic = names.topic()

    async def scenario() -> None:
        await create_topic(cluster, topic, read_queue_nums=1, write_queue_nums=1)
        sent = [message(topic, i, tags=("TagA", "TagB", "TagC")[i // 4 % 3]) for i in range(24)]
        async with producer_of(cluster, names.group("P")) as producer:
            results = [await producer.send(item) for item in sent]
        wanted = [result.msg_id for item, result in zip(sent, results, strict=True) if item.tags == "TagB"]
        async with pull_consumer(cluster, names.group()) as puller:
            await QueueReader(puller, topic).read_until(len(sent))  # everything is dispatched
            reader = QueueReader(puller, topic, "TagB")
            pulled = await reader.read()
            (mq,) = await puller.fetch_message_queues(topic)
            assert reader.offsets == {mq: 24}
            assert await puller.fetch_offset(mq) == 0  # never committed, head in memory
            await puller.update_offset(mq, 10)
            assert await puller.fetch_offset(mq) == 10
            assert (await puller.min_offset(mq), await puller.max_offset(mq)) == (0, 24)
            assert await puller.search_offset(mq, 0) == 0
            later = await puller.pull(mq, "TagB", 5)
            assert later.status is PullStatus.FOUND
            assert [received.queue_offset for received in later.messages] == [5, 6, 7, 16, 17, 18, 19]

        assert [received.msg_id for received in pulled] == wanted
        assert {received.tags for received in pulled} == {"TagB"}

    run(scenario())


def test_blocking_pull_is_answered_when_a_message_arrives(cluster: Any, names: Names) -> None:
    """Goal: a PullConsumer pull with block=True is held by the broker (long polling) and answered
    as soon as a message is stored, not when its 15 s timeout expires. Method: start the pull on
    an empty queue, send after it was parked for a while, time the answer."""
    topic = names.topic()

    async def scenario() -> None:
        await create_topic(cluster, topic, read_queue_nums=1, write_queue_nums=1)
        async with pull_consumer(cluster, names.group()) as puller, producer_of(cluster, names.group("P")) as producer:
            (mq,) = await puller.fetch_message_queues(topic)
            pending = asyncio.ensure_future(puller.pull(mq, "*", 0, block=True, timeout_s=15.0))
            assert await stays_false(pending.done, IDLE_BEFORE_LIVE_S), "the pull was answered while empty"
            result = await producer.send(message(topic, 0, prefix="held"))
            sent_at = time.monotonic()
            pulled = await asyncio.wait_for(pending, timeout=20.0)
            latency_s = time.monotonic() - sent_at

        assert pulled.status is PullStatus.FOUND
        assert [received.msg_id for received in pulled.messages] == [result.msg_id]
        assert latency_s < LIVE_DELIVERY_MAX_S

    run(scenario())


def test_send_to_an_unknown_topic_auto_creates_it(cluster: Any, names: Names) -> None:
    """Goal: a send to a topic nobody created goes through TBW102's route and creates the topic
    (defaultTopicQueueNums 4, perm 6), which then routes and reads like any other. Method: check
    the route before and after one send, then pull the message back."""
    topic = names.topic("New")

    async def scenario() -> None:
        async with Admin(cluster.namesrv_addr, client_settings=CLIENT_SETTINGS) as admin:
            with pytest.raises(MQBrokerError) as missing:
                await admin.topic_route(topic)
            assert missing.value.code == ResponseCode.TOPIC_NOT_EXIST
            async with producer_of(cluster, names.group("P")) as producer:
                result = await producer.send(message(topic, 0))
            assert result.status is SendStatus.SEND_OK

            async def routed() -> bool:  # the broker registers the new topic shortly after
                try:
                    await admin.topic_route(topic)
                except MQBrokerError:
                    return False
                return True

            await async_wait_until(routed, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what=f"a route of {topic}")
            route = await admin.topic_route(topic)
        assert [(data.read_queue_nums, data.write_queue_nums, data.perm) for data in route.queue_datas] == [(4, 4, 6)]
        async with pull_consumer(cluster, names.group()) as puller:
            pulled = await QueueReader(puller, topic).read_until(1)
        assert [received.msg_id for received in pulled] == [result.msg_id]

    run(scenario())


# --- 12. Admin ---


def test_admin_manages_topics_and_reports_offsets_progress_and_messages(cluster: Any, names: Names) -> None:
    """Goal: Admin's requests agree with what producers and consumers did: UPDATE_AND_CREATE_TOPIC
    (route queue counts), topic list, GET_TOPIC_STATS_INFO, GET_CONSUME_STATS (0 lag),
    GET_CONSUMER_LIST_BY_GROUP, VIEW_MESSAGE_BY_ID, QUERY_MESSAGE and DELETE_TOPIC. Method: one
    topic with 6 read / 4 write queues, 10 sends, one push consumer, then each admin call."""
    topic = names.topic()
    group = names.group()

    async def scenario() -> None:
        await create_topic(cluster, topic, read_queue_nums=6, write_queue_nums=4)
        async with Admin(cluster.namesrv_addr, client_settings=CLIENT_SETTINGS) as admin:
            route = await admin.topic_route(topic)
            assert [(data.read_queue_nums, data.write_queue_nums, data.perm) for data in route.queue_datas] == [
                (6, 4, 6)
            ]
            assert [address for data in route.broker_datas for address in data.broker_addrs.values()] == [
                cluster.broker_addr
            ]
            assert topic in await admin.topic_list()

            async with producer_of(cluster, names.group("P")) as producer:
                results = [await producer.send(message(topic, i, prefix="adm")) for i in range(10)]
            per_queue = Counter(result.message_queue.queue_id for result in results)
            expected_stats = {queue_id: (0, per_queue[queue_id]) for queue_id in range(4)}
            stats: dict[int, tuple[int, int]] = {}

            async def counted() -> bool:  # the ConsumeQueues trail the CommitLog by a moment
                table = (await admin.topic_stats(topic)).offset_table
                stats.update({mq.queue_id: (offset.min_offset, offset.max_offset) for mq, offset in table.items()})
                return stats == expected_stats

            with contextlib.suppress(AssertionError):  # on a timeout the assert below shows the difference
                await async_wait_until(counted, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what="topic stats")
            assert stats == expected_stats

            inbox = Inbox()
            async with push_consumer(cluster, group, topic, inbox.concurrent) as consumer:
                await async_wait_until(
                    lambda: inbox.has(result.msg_id for result in results),
                    DELIVERY_TIMEOUT_S,
                    POLL_INTERVAL_S,
                    what="consumption",
                )

                async def retry_routed() -> bool:  # group requests go to the brokers of %RETRY%<group>
                    try:
                        await admin.topic_route(retry_topic(group))
                    except MQBrokerError:
                        return False
                    return True

                await async_wait_until(
                    retry_routed, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what="the group's retry topic routed"
                )
                assert await admin.consumer_ids(group) == [consumer.client_id]

                async def caught_up() -> bool:
                    progress = await admin.consumer_progress(group, topic)
                    return len(progress) == 6 and all(
                        item.lag == 0 and item.consumer_offset == item.broker_offset for item in progress
                    )

                await async_wait_until(
                    caught_up, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what="consumer progress with 0 lag"
                )
            progress = {item.mq.queue_id: item for item in await admin.consumer_progress(group, topic)}
            assert {queue_id: item.consumer_offset for queue_id, item in progress.items()} == {
                queue_id: per_queue.get(queue_id, 0) for queue_id in range(6)
            }

            chosen = results[3]
            viewed = await admin.view_message(chosen.offset_msg_id)
            assert (viewed.topic, viewed.msg_id, viewed.keys, viewed.body) == (
                topic,
                chosen.msg_id,
                ("adm3",),
                b"adm-body-3",
            )
            assert viewed.offset_msg_id == chosen.offset_msg_id

            found: list[MessageExt] = []

            async def indexed() -> bool:
                found[:] = await admin.query_message(topic, "adm7")
                return bool(found)

            await async_wait_until(indexed, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what="the key in the index")
            assert [item.msg_id for item in found] == [results[7].msg_id]
            by_uniq = await admin.query_message_by_unique_key(topic, results[5].msg_id)
            assert [item.keys for item in by_uniq] == [("adm5",)]

            await admin.delete_topic(topic)

            async def deleted() -> bool:
                try:
                    await admin.topic_route(topic)
                except MQBrokerError as error:
                    assert error.code == ResponseCode.TOPIC_NOT_EXIST
                    return topic not in await admin.topic_list()
                return False

            await async_wait_until(
                deleted, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what="the topic gone from the NameServer"
            )

    run(scenario())


def test_admin_lists_the_connections_of_a_consumer_group(cluster: Any, names: Names) -> None:
    """Goal: GET_CONSUMER_CONNECTION_LIST names a running push consumer's client id, model and
    subscription (`mqadmin consumerConnection`). Method: start one consumer, ask Admin."""
    topic = names.topic()
    group = names.group()

    async def scenario() -> None:
        await create_topic(cluster, topic)
        async with Admin(cluster.namesrv_addr, client_settings=CLIENT_SETTINGS) as admin:
            async with push_consumer(cluster, group, topic, Inbox().concurrent) as consumer:

                async def registered() -> bool:  # group requests go to the brokers of %RETRY%<group>
                    try:
                        return await admin.consumer_ids(group) == [consumer.client_id]
                    except MQBrokerError:
                        return False

                await async_wait_until(registered, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what="the consumer registered")
                connections = await admin.consumer_connections(group)
                client_id = consumer.client_id
            assert [connection.client_id for connection in connections.connections] == [client_id]
            assert connections.message_model == "CLUSTERING"
            assert connections.consume_type == "CONSUME_PASSIVELY"
            assert topic in connections.subscriptions

    run(scenario())


# --- 13. offsets survive a broker restart ---


def test_committed_offsets_survive_a_broker_restart(
    cluster_factory: Callable[[dict[str, str]], Any], names: Names
) -> None:
    """Goal: offsets a push consumer commits (UPDATE_CONSUMER_OFFSET at shutdown) are persisted by
    the broker and still there after it restarts. Method: with the Blocking* facades, consume 8,
    stop and start the broker, send 4 more; a new consumer of the group gets exactly those 4."""
    conf = {"listenHost": "127.0.0.1", "metricsHost": "127.0.0.1", "flushDiskType": "ASYNC_FLUSH"}
    cluster = cluster_factory(conf)
    topic = names.topic()
    group = names.group()
    admin = BlockingAdmin(cluster.namesrv_addr, client_settings=CLIENT_SETTINGS)
    admin.start()
    try:
        admin.create_topic(topic, broker_addr=cluster.broker_addr, read_queue_nums=4, write_queue_nums=4)
        wait_until(lambda: topic in admin.topic_list(), DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what="the topic routed")

        def consume(expected: set[str]) -> Counter[str]:
            received: list[MessageExt] = []
            last = [time.monotonic()]

            def listener(messages: list[MessageExt]) -> ConsumeStatus:
                received.extend(messages)
                last[0] = time.monotonic()
                return ConsumeStatus.CONSUME_SUCCESS

            consumer = BlockingPushConsumer(
                group,
                cluster.namesrv_addr,
                listener=listener,
                settings=CONSUMER_SETTINGS,
                client_settings=CLIENT_SETTINGS,
            )
            consumer.subscribe(topic)
            with consumer:
                wait_until(
                    lambda: expected <= {m.msg_id for m in received},
                    DELIVERY_TIMEOUT_S,
                    POLL_INTERVAL_S,
                    what="the expected messages",
                )
                wait_until(
                    lambda: time.monotonic() - last[0] >= QUIET_S,
                    DELIVERY_TIMEOUT_S,
                    POLL_INTERVAL_S,
                    what="no more deliveries",
                )
            return Counter(m.msg_id for m in received)

        with BlockingProducer(names.group("P"), cluster.namesrv_addr, client_settings=CLIENT_SETTINGS) as producer:
            old = [producer.send(message(topic, i, prefix="old")) for i in range(8)]
        assert consume({result.msg_id for result in old}) == Counter({result.msg_id: 1 for result in old})

        assert cluster.stop("broker") == 0, "the broker did not shut down cleanly"
        cluster.start_broker(conf)
        wait_until(
            lambda: topic in admin.topic_list(),
            DELIVERY_TIMEOUT_S,
            POLL_INTERVAL_S,
            what="the topic routed again after the restart",
        )

        with BlockingPullConsumer(group, cluster.namesrv_addr, client_settings=CLIENT_SETTINGS) as puller:
            queues = puller.fetch_message_queues(topic)
            assert sum(puller.fetch_offset(mq) or 0 for mq in queues) == 8, "committed offsets lost in the restart"
        with BlockingProducer(names.group("P"), cluster.namesrv_addr, client_settings=CLIENT_SETTINGS) as producer:
            new = [producer.send(message(topic, i, prefix="new")) for i in range(4)]

        assert consume({result.msg_id for result in new}) == Counter({result.msg_id: 1 for result in new})
    finally:
        admin.shutdown()
