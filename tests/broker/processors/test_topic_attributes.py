"""RocketMQ 5 topic attributes on a real broker: UPDATE_AND_CREATE_TOPIC's `attributes` header
field, what GET_TOPIC_CONFIG (351) and topics.json hold afterwards, across a restart, and the
refusals with RocketMQ's codes and remarks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from shoal.formats.json_compat import loads
from shoal.protocol import RequestCode, ResponseCode
from shoal.remoting import RemotingClient
from tests.conftest import Cluster

pytestmark = pytest.mark.slow


def create_fields(topic: str, attributes: str | None = None) -> dict[str, str]:
    fields = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": "4",
        "writeQueueNums": "4",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }
    if attributes is not None:
        fields["attributes"] = attributes
    return fields


async def attributes_of(client: RemotingClient, address: str, topic: str) -> dict[str, str]:
    read = await client.invoke(address, RequestCode.GET_TOPIC_CONFIG, {"topic": topic})
    assert read.code == ResponseCode.SUCCESS, read.remark
    config = loads(read.body or b"")
    assert isinstance(config, dict)
    attributes = config.get("attributes", {})
    assert isinstance(attributes, dict)
    return {str(key): str(value) for key, value in attributes.items()}


def test_message_type_is_kept_changed_and_survives_a_restart(cluster: Cluster) -> None:
    """Goal: `+message.type=FIFO` at creation is stored, read back by 351, written to topics.json,
    kept by an update that names no attributes, changed by `+message.type=DELAY`, and still there
    after the broker restarts; a topic created without attributes has none (4.9.7's JSON)."""
    address = cluster.broker_addr

    async def create_and_change() -> None:
        client = RemotingClient()
        try:
            made = await client.invoke(
                address, RequestCode.UPDATE_AND_CREATE_TOPIC, create_fields("Typed", "+message.type=FIFO")
            )
            assert made.code == ResponseCode.SUCCESS, made.remark
            assert await attributes_of(client, address, "Typed") == {"message.type": "FIFO"}
            again = await client.invoke(address, RequestCode.UPDATE_AND_CREATE_TOPIC, create_fields("Typed"))
            assert again.code == ResponseCode.SUCCESS, again.remark
            assert await attributes_of(client, address, "Typed") == {"message.type": "FIFO"}
            changed = await client.invoke(
                address, RequestCode.UPDATE_AND_CREATE_TOPIC, create_fields("Typed", "+message.type=DELAY")
            )
            assert changed.code == ResponseCode.SUCCESS, changed.remark
            plain = await client.invoke(address, RequestCode.UPDATE_AND_CREATE_TOPIC, create_fields("Untyped"))
            assert plain.code == ResponseCode.SUCCESS, plain.remark
            assert await attributes_of(client, address, "Untyped") == {}
        finally:
            await client.close()

    asyncio.run(create_and_change())
    stored = json.loads((cluster.store_dir / "config" / "topics.json").read_text())["topicConfigTable"]
    assert stored["Typed"]["attributes"] == {"message.type": "DELAY"}
    assert "attributes" not in stored["Untyped"]
    cluster.stop("broker")
    cluster.start_broker()

    async def read_after_restart() -> None:
        client = RemotingClient()
        try:
            assert await attributes_of(client, address, "Typed") == {"message.type": "DELAY"}
        finally:
            await client.close()

    asyncio.run(read_after_restart())


@pytest.mark.parametrize(
    ("attributes", "code", "remark"),
    [
        ("+message.type=MIXED", ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported."),
        ("+message.type=URGENT", ResponseCode.SYSTEM_ERROR, "value is not in set"),
        ("+colour=red", ResponseCode.SYSTEM_ERROR, "unsupported key: colour"),
        ("+queue.type=BatchCQ", ResponseCode.SYSTEM_ERROR, "queue.type BatchCQ is not supported by Shoal"),
        ("message.type=FIFO", ResponseCode.SYSTEM_ERROR, "add/alter attribute format is wrong"),
    ],
)
def test_refused_attributes_create_nothing_and_say_why(
    cluster: Cluster, attributes: str, code: ResponseCode, remark: str
) -> None:
    async def scenario() -> None:
        client = RemotingClient()
        try:
            refused = await client.invoke(
                cluster.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, create_fields("Refused", attributes)
            )
            assert (refused.code, remark in (refused.remark or "")) == (code, True), refused.remark
            missing = await client.invoke(cluster.broker_addr, RequestCode.GET_TOPIC_CONFIG, {"topic": "Refused"})
            assert missing.code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await client.close()

    asyncio.run(scenario())


def test_mixed_is_accepted_where_enable_mixed_message_type_is_set(
    cluster_factory: Callable[[dict[str, str]], Cluster],
) -> None:
    running = cluster_factory({"enableMixedMessageType": "true"})

    async def scenario() -> None:
        client = RemotingClient()
        try:
            made = await client.invoke(
                running.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, create_fields("Mixed", "+message.type=MIXED")
            )
            assert made.code == ResponseCode.SUCCESS, made.remark
            assert await attributes_of(client, running.broker_addr, "Mixed") == {"message.type": "MIXED"}
        finally:
            await client.close()

    asyncio.run(scenario())
