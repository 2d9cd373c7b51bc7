"""Client bookkeeping against a real Broker process: names no group may have are refused at the
protocol boundary with RocketMQ's answers, never by an `assert` deeper in (issue 12 item 6)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from shoal.protocol import RequestCode, ResponseCode
from shoal.protocol.bodies import ConsumerData, HeartbeatData, ProducerData
from shoal.protocol.headers import SendMessageRequestHeaderV2
from shoal.remoting import RemotingClient

BAD_GROUPS = ("", " ", "bad group!", "g" * 121, "tab\there")
GOOD_GROUP = "CID_good"


def _heartbeat_body() -> bytes:
    consumers = tuple(ConsumerData(name) for name in (*BAD_GROUPS, GOOD_GROUP))
    producers = (ProducerData(""), ProducerData("PID_good"))
    return HeartbeatData("127.0.0.1@validation", producers, consumers).to_json()


def _send_to_retry_topic(group: str) -> dict[str, str]:
    return SendMessageRequestHeaderV2(
        producer_group="PID_good",
        topic=f"%RETRY%{group}",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=0,
        sys_flag=0,
        born_timestamp_ms=int(time.time() * 1000),
        flag=0,
        reconsume_times=0,
    ).to_ext_fields()


@pytest.mark.slow
@pytest.mark.parametrize("optimize", ["", "1"], ids=["asserts", "python-O"])
def test_invalid_group_names_are_refused_at_the_boundary(cluster_factory, monkeypatch, optimize: str) -> None:  # type: ignore[no-untyped-def]
    """Goal: a HEARTBEAT naming groups no group may have answers SUCCESS (as RocketMQ) and stores
    none of them; a send to their %RETRY% topic is SUBSCRIPTION_GROUP_NOT_EXIST; nothing answers
    "internal error". Method: the same requests to a broker with asserts and one under
    PYTHONOPTIMIZE (asserts stripped: validation by assert would store the nameless group)."""
    monkeypatch.setenv("PYTHONOPTIMIZE", optimize)
    running = cluster_factory({})

    async def run() -> None:
        client = RemotingClient()
        address = running.broker_addr
        beat = await client.invoke(address, RequestCode.HEART_BEAT, {}, _heartbeat_body(), timeout_s=10.0)
        retry_answers = {"": ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "bad group!": ResponseCode.SYSTEM_ERROR}
        sends = {}
        for group in retry_answers:  # "%RETRY%" is a valid topic, "%RETRY%bad group!" is not
            sends[group] = await client.invoke(
                address, RequestCode.SEND_MESSAGE_V2, _send_to_retry_topic(group), b"x", timeout_s=10.0
            )
        groups = await client.invoke(address, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {}, timeout_s=10.0)
        await client.close()
        table = json.loads(bytes(groups.body or b"{}"))["subscriptionGroupTable"]
        assert not set(BAD_GROUPS) & set(table), sorted(set(BAD_GROUPS) & set(table))
        assert GOOD_GROUP in table
        assert beat.code == ResponseCode.SUCCESS, beat.remark
        assert "The specified group is blank." in (beat.remark or "")
        for group, code in retry_answers.items():
            assert sends[group].code == code, sends[group].remark

    asyncio.run(run())
    assert "AssertionError" not in running.log("broker")


@pytest.mark.slow
def test_invalid_topics_on_send_get_rocketmq_system_error_and_remarks(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: a send to a blank, illegal or too long topic answers as RocketMQ 4.9.7's
    TopicValidator: SYSTEM_ERROR and its remark. Method: three sends to a real broker."""
    expected = {
        " ": "The specified topic is blank.",
        "bad topic!": "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
        "t" * 128: "The specified topic is longer than topic max length.",
    }

    async def run() -> None:
        client = RemotingClient()
        for topic, remark in expected.items():
            header = SendMessageRequestHeaderV2(
                producer_group="PID_good",
                topic=topic,
                default_topic="TBW102",
                default_topic_queue_nums=4,
                queue_id=0,
                sys_flag=0,
                born_timestamp_ms=0,
                flag=0,
            )
            sent = await client.invoke(
                cluster.broker_addr, RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), b"x", timeout_s=10.0
            )
            assert (sent.code, sent.remark) == (ResponseCode.SYSTEM_ERROR, remark)
        await client.close()

    asyncio.run(run())
