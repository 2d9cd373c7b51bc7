"""QUERY_CONSUMER_OFFSET for a group without an offset, against a real Broker process, as RocketMQ
4.9.7's ConsumerManageProcessor answers it: 0 while the queue's min offset is 0 and its first message
is in memory (checkInDiskByConsumeOffset false), else QUERY_NOT_FOUND; a committed offset as is."""

from __future__ import annotations

import asyncio
import time

import pytest

from shoal.protocol import RemotingCommand, RequestCode, ResponseCode
from shoal.protocol.headers import (
    QueryConsumerOffsetRequestHeader,
    SendMessageRequestHeaderV2,
    UpdateConsumerOffsetRequestHeader,
)
from shoal.remoting import RemotingClient

pytestmark = pytest.mark.slow

TOPIC = "OffsetTopic"


def _send_fields() -> dict[str, str]:
    return SendMessageRequestHeaderV2(
        producer_group="PID_offsets",
        topic=TOPIC,
        default_topic="TBW102",
        default_topic_queue_nums=1,
        queue_id=0,
        sys_flag=0,
        born_timestamp_ms=int(time.time() * 1000),
        flag=0,
    ).to_ext_fields()


def _query(group: str, topic: str = TOPIC) -> dict[str, str]:
    return QueryConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=0).to_ext_fields()


def _answers(address: str) -> list[RemotingCommand]:
    async def run() -> list[RemotingCommand]:
        client = RemotingClient()
        try:
            for _ in range(3):
                sent = await client.invoke(address, RequestCode.SEND_MESSAGE_V2, _send_fields(), b"x")
                assert sent.code == ResponseCode.SUCCESS, sent.remark
            new_group = await client.invoke(address, RequestCode.QUERY_CONSUMER_OFFSET, _query("CID_new"))
            no_queue = await client.invoke(address, RequestCode.QUERY_CONSUMER_OFFSET, _query("CID_new", "NoSuchTopic"))
            update = UpdateConsumerOffsetRequestHeader(
                consumer_group="CID_old", topic=TOPIC, queue_id=0, commit_offset=2
            )
            updated = await client.invoke(address, RequestCode.UPDATE_CONSUMER_OFFSET, update.to_ext_fields())
            assert updated.code == ResponseCode.SUCCESS, updated.remark
            committed = await client.invoke(address, RequestCode.QUERY_CONSUMER_OFFSET, _query("CID_old"))
            return [new_group, no_queue, committed]
        finally:
            await client.close()

    return asyncio.run(run())


def test_a_new_group_gets_offset_0_while_the_queue_head_is_in_memory(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: 0 for a new group on a queue starting at 0 in memory, and on a queue that does not exist;
    the committed offset for a group that has one. Method: send 3, query."""
    new_group, no_queue, committed = _answers(cluster.broker_addr)
    assert (new_group.code, new_group.ext_fields.get("offset")) == (ResponseCode.SUCCESS, "0")
    assert (no_queue.code, no_queue.ext_fields.get("offset")) == (ResponseCode.SUCCESS, "0")
    assert (committed.code, committed.ext_fields.get("offset")) == (ResponseCode.SUCCESS, "2")


def test_a_new_group_gets_query_not_found_once_the_queue_head_is_on_disk(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """Goal: QUERY_NOT_FOUND (the client then applies consume-from-where) when the first message counts
    as on disk (accessMessageInMemoryMaxRatio=0); a queue with no message still answers 0. Method: query."""
    running = cluster_factory({"accessMessageInMemoryMaxRatio": "0"})
    new_group, no_queue, committed = _answers(running.broker_addr)
    assert new_group.code == ResponseCode.QUERY_NOT_FOUND
    assert new_group.remark == "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
    assert (no_queue.code, no_queue.ext_fields.get("offset")) == (ResponseCode.SUCCESS, "0")
    assert (committed.code, committed.ext_fields.get("offset")) == (ResponseCode.SUCCESS, "2")
