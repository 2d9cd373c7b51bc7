"""GET_TOPIC_CONFIG (351) and GET_SUBSCRIPTIONGROUP_CONFIG (352), RocketMQ 5.x's reads of one topic's
or group's config, against a real broker: what a 5.x admin client reads back after creating a
topic, and how the gRPC proxy learns that a group is FIFO."""

from __future__ import annotations

import asyncio
import json

import pytest

from shoal.formats.json_compat import loads
from shoal.protocol import RequestCode, ResponseCode
from shoal.remoting import RemotingClient
from tests.broker.request_fields import send_fields

pytestmark = pytest.mark.slow


def test_one_topic_and_one_group_config_read_back(cluster) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        client = RemotingClient()
        address = cluster.broker_addr
        try:
            sent = await client.invoke(address, RequestCode.SEND_MESSAGE_V2, send_fields("ReadBack", queues=3), b"x")
            assert sent.code == ResponseCode.SUCCESS, sent.remark
            topic = await client.invoke(address, RequestCode.GET_TOPIC_CONFIG, {"topic": "ReadBack"})
            assert topic.code == ResponseCode.SUCCESS, topic.remark
            config = loads(topic.body or b"")
            assert isinstance(config, dict)
            assert (config["topicName"], config["readQueueNums"], config["writeQueueNums"]) == ("ReadBack", 3, 3)
            missing = await client.invoke(address, RequestCode.GET_TOPIC_CONFIG, {"topic": "NoSuchTopic"})
            assert missing.code == ResponseCode.TOPIC_NOT_EXIST
            body = json.dumps({"groupName": "GID_fifo", "consumeMessageOrderly": True, "retryMaxTimes": 5}).encode()
            made = await client.invoke(address, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
            assert made.code == ResponseCode.SUCCESS, made.remark
            group = await client.invoke(address, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "GID_fifo"})
            assert group.code == ResponseCode.SUCCESS, group.remark
            read = loads(group.body or b"")
            assert isinstance(read, dict)
            assert (read["groupName"], read["consumeMessageOrderly"], read["retryMaxTimes"]) == ("GID_fifo", True, 5)
            unknown = await client.invoke(address, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "GID_none"})
            assert unknown.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        finally:
            await client.close()

    asyncio.run(scenario())
