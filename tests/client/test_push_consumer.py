"""Push consumer: how pull results move offsets (PullCallback rules) and how the listener's verdict
commits them, on a consumer that is built but never connects (broadcasting, offsets in a tmp file)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from shoal.client.consume_service import ConsumeStatus
from shoal.client.message import MessageExt
from shoal.client.process_queue import ProcessQueue
from shoal.client.pull import PullResult, PullStatus
from shoal.client.push_consumer import PushConsumer, _RunningParts
from shoal.client.settings import ConsumerSettings
from shoal.protocol import ConsumerData, MessageModel, MessageQueue

MQ = MessageQueue("T", "broker-a", 0)
Wait = Callable[[Callable[[], bool], float], Awaitable[None]]


def parts(tmp_path: Path, listener: Callable[[list[MessageExt]], object]) -> _RunningParts:
    consumer = PushConsumer(
        "cg",
        "127.0.0.1:1",
        listener=listener,
        message_model=MessageModel.BROADCASTING,
        offset_store_path=tmp_path / "offsets.json",
        settings=ConsumerSettings(offset_moved_delay_s=0.0),
    )
    consumer.subscribe("T", "TagA")
    running = _RunningParts(consumer)
    running.rebalancer.table[MQ] = ProcessQueue(MQ)
    return running


def found(next_begin: int, *offsets: int) -> PullResult:
    messages = [MessageExt(topic="T", body=b"x", tags="TagA", queue_offset=offset) for offset in offsets]
    return PullResult(PullStatus.FOUND, next_begin, 0, next_begin, messages)


def test_found_messages_are_consumed_and_committed_past_the_pulled_range(
    tmp_path: Path, async_wait_until: Wait
) -> None:
    """Goal: FOUND advances the pull offset; consumption commits up to nextBeginOffset. Method: 2 messages."""
    consumed: list[int] = []

    def listener(messages: list[MessageExt]) -> ConsumeStatus:
        consumed.extend(message.queue_offset for message in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    async def run() -> None:
        running = parts(tmp_path, listener)
        queue = running.rebalancer.table[MQ]
        queue.next_offset = 5
        assert await running._handle_pull_result(queue, found(9, 5, 6)) is queue
        assert queue.next_offset == 9
        await async_wait_until(lambda: running.offset_store.read_memory(MQ) == 9, 5.0)
        assert sorted(consumed) == [5, 6]
        assert running.concurrent is not None
        await running.concurrent.shutdown(1.0)

    asyncio.run(run())


def test_empty_results_record_the_offset_only_when_nothing_is_cached(tmp_path: Path) -> None:
    """Goal: correctTagsOffset: NO_NEW_MSG / all-filtered FOUND move the committed offset only with
    an empty cache (else in-flight messages would be skipped). Method: both cases."""

    async def run() -> None:
        running = parts(tmp_path, lambda _messages: ConsumeStatus.CONSUME_SUCCESS)
        queue = running.rebalancer.table[MQ]
        queue.next_offset = 3
        await running._handle_pull_result(queue, PullResult(PullStatus.NO_NEW_MSG, 3, 0, 3))
        assert running.offset_store.read_memory(MQ) == 3
        await running._handle_pull_result(queue, PullResult(PullStatus.FOUND, 7, 0, 7, []))
        assert (queue.next_offset, running.offset_store.read_memory(MQ)) == (7, 7)
        queue.put([MessageExt(topic="T", body=b"x", queue_offset=7)])  # in flight
        await running._handle_pull_result(queue, PullResult(PullStatus.NO_MATCHED_MSG, 12, 0, 12))
        assert (queue.next_offset, running.offset_store.read_memory(MQ)) == (12, 7)

    asyncio.run(run())


def test_offset_illegal_restarts_the_queue_at_the_brokers_offset(tmp_path: Path) -> None:
    """Goal: OFFSET_ILLEGAL drops the queue's cache and continues at nextBeginOffset, even backwards.

    Method: a queue at 50 told to go to 20; the store takes 20, a fresh ProcessQueue replaces the old.
    """

    async def run() -> None:
        running = parts(tmp_path, lambda _messages: ConsumeStatus.CONSUME_SUCCESS)
        queue = running.rebalancer.table[MQ]
        queue.next_offset = 50
        running.offset_store.update(MQ, 50, increase_only=True)
        fresh = await running._handle_pull_result(queue, PullResult(PullStatus.OFFSET_ILLEGAL, 20, 20, 30))
        assert queue.dropped
        assert fresh is not None and fresh is not queue and not fresh.dropped
        assert fresh.next_offset == 20
        assert running.rebalancer.table[MQ] is fresh
        assert running.offset_store.read_memory(MQ) == 20
        assert (tmp_path / "offsets.json").exists()  # persisted at once

    asyncio.run(run())


def test_heartbeat_carries_java_enum_names_and_the_retry_subscription(tmp_path: Path) -> None:
    """Goal: ConsumerData as Java sends it; clustering groups also subscribe %RETRY%<group>."""
    consumer = PushConsumer("cg", "127.0.0.1:1", listener=lambda _messages: None)
    consumer.subscribe("T", "TagA || TagB")
    data = _RunningParts(consumer).heartbeat_data().consumer_data_set[0]
    assert isinstance(data, ConsumerData)
    wire = data.to_dict()
    assert (wire["consumeType"], wire["messageModel"]) == ("CONSUME_PASSIVELY", "CLUSTERING")
    assert wire["consumeFromWhere"] == "CONSUME_FROM_LAST_OFFSET"
    topics = {item.topic: item.sub_string for item in data.subscription_data_set}
    assert topics == {"T": "TagA || TagB", "%RETRY%cg": "*"}
    broadcasting = parts(tmp_path, lambda _messages: None).heartbeat_data().consumer_data_set[0]
    assert [item.topic for item in broadcasting.subscription_data_set] == ["T"]
