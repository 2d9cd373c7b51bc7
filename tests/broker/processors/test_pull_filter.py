"""SQL92 property filters over the wire against a real Broker process: CHECK_CLIENT_CONFIG, filters
registered by HEART_BEAT, PULL_MESSAGE's refusals and filtering, long polling and filterSupportRetry,
with RocketMQ 4.9.7's response codes and remarks."""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from shoal.broker.limits import SUBSCRIPTION_CATCH_UP_HELD_MAX_COUNT, SUBSCRIPTION_CATCH_UP_WAIT_S
from shoal.formats.properties import decode_properties, encode_properties
from shoal.formats.record import decode_header
from shoal.protocol import MessageModel, PullSysFlag, RemotingCommand, RequestCode, ResponseCode
from shoal.protocol.bodies import CheckClientRequestBody, ConsumerData, HeartbeatData, SubscriptionData
from shoal.protocol.headers import GetMaxOffsetRequestHeader, PullMessageRequestHeader, SendMessageRequestHeaderV2
from shoal.remoting import RemotingClient

pytestmark = pytest.mark.slow

ENABLED = {"enablePropertyFilter": "true"}
TOPIC = "FilterTopic"
GROUP = "CID_filter"
DISPATCH_TIMEOUT_S = 30.0
"""Dispatch takes milliseconds; this bound only tells a lost message from a slow machine."""
DISPATCH_POLL_S = 0.01
RED_FROM_3_TO_7 = "a BETWEEN 3 AND 7 AND color = 'red'"


def _send_fields(topic: str, properties: dict[str, str]) -> dict[str, str]:
    return SendMessageRequestHeaderV2(
        producer_group="PID_filter",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=1,
        queue_id=0,
        sys_flag=0,
        born_timestamp_ms=int(time.time() * 1000),
        flag=0,
        properties=encode_properties(properties).decode("utf-8"),
    ).to_ext_fields()


def _pull_fields(
    offset: int,
    *,
    sub_version: int = 0,
    sys_flag: int = PullSysFlag.SUSPEND,
    expression: str | None = None,
    expression_type: str | None = None,
    suspend_ms: int = 0,
    topic: str = TOPIC,
    max_count: int = 32,
) -> dict[str, str]:
    return PullMessageRequestHeader(
        consumer_group=GROUP,
        topic=topic,
        queue_id=0,
        queue_offset=offset,
        max_msg_nums=max_count,
        sys_flag=sys_flag,
        commit_offset=0,
        suspend_timeout_ms=suspend_ms,
        subscription=expression,
        sub_version=sub_version,
        expression_type=expression_type,
    ).to_ext_fields()


def _heartbeat(*subscriptions: SubscriptionData) -> bytes:
    return HeartbeatData("127.0.0.1@filter", (), (ConsumerData(GROUP, subscription_data_set=subscriptions),)).to_json()


def _sql(expression: str, version: int = 100, topic: str = TOPIC) -> SubscriptionData:
    return SubscriptionData(topic=topic, sub_string=expression, sub_version=version, expression_type="SQL92")


def _records(body: bytes | memoryview | None) -> list[dict[str, str]]:
    """The properties of each record in a pull response body."""
    found, position = [], 0
    data = body or b""
    while position < len(data):
        record = decode_header(data, position)
        start = record.properties_position
        found.append(decode_properties(data[start : start + record.properties_length]))
        position += record.total_size
    return found


class Wire:
    """One connection to the broker (heartbeats register subscriptions on it)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.client = RemotingClient()

    async def call(self, code: int, fields: dict[str, str] | None = None, body: bytes | None = None) -> RemotingCommand:
        return await self.client.invoke(self.address, code, fields, body)

    async def send(self, properties: dict[str, str], topic: str = TOPIC) -> None:
        """Send, then wait until the ConsumeQueue has the message: dispatch runs after the send is answered
        (as RocketMQ's reput does), and a pull at once may find nothing yet on a busy machine."""
        answer = await self.call(RequestCode.SEND_MESSAGE_V2, _send_fields(topic, properties), b"body")
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        queue_offset = int(answer.ext_fields["queueOffset"])
        deadline = time.monotonic() + DISPATCH_TIMEOUT_S
        while await self.max_offset(topic) <= queue_offset:
            assert time.monotonic() < deadline, f"{topic} offset {queue_offset} not dispatched"
            await asyncio.sleep(DISPATCH_POLL_S)

    async def max_offset(self, topic: str) -> int:
        answer = await self.call(
            RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic=topic, queue_id=0).to_ext_fields()
        )
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        return int(answer.ext_fields["offset"])

    async def heartbeat(self, *subscriptions: SubscriptionData) -> None:
        answer = await self.call(RequestCode.HEART_BEAT, body=_heartbeat(*subscriptions))
        assert answer.code == ResponseCode.SUCCESS, answer.remark

    async def pull(self, offset: int, **options: Any) -> RemotingCommand:
        return await self.call(RequestCode.PULL_MESSAGE, _pull_fields(offset, **options))

    async def pull_all(self, **options: Any) -> tuple[list[dict[str, str]], list[tuple[int, str | None]]]:
        """Follow nextBeginOffset from 0 to the end: the records delivered and each answer's (code, remark)."""
        offset = 0
        delivered: list[dict[str, str]] = []
        answers: list[tuple[int, str | None]] = []
        while True:
            answer = await self.pull(offset, **options)
            answers.append((answer.code, answer.remark))
            if answer.code not in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY):
                return delivered, answers
            delivered.extend(_records(answer.body))
            offset = int(answer.ext_fields["nextBeginOffset"])

    async def close(self) -> None:
        await self.client.close()


def _run(address: str, scenario: Callable[[Wire], Any]) -> Any:
    async def run() -> Any:
        wire = Wire(address)
        try:
            return await scenario(wire)
        finally:
            await wire.close()

    return asyncio.run(run())


async def _send_mixed(wire: Wire, count: int = 10) -> None:
    """Message i: a=i, color red for even i and blue for odd, tag TagA for i < 5 else TagB."""
    for index in range(count):
        color = "red" if index % 2 == 0 else "blue"
        await wire.send({"a": str(index), "color": color, "TAGS": "TagA" if index < 5 else "TagB"})


def _check_body(expression_type: str, expression: str) -> bytes:
    subscription = SubscriptionData(topic=TOPIC, sub_string=expression, expression_type=expression_type)
    return CheckClientRequestBody("127.0.0.1@filter", GROUP, subscription).to_json()


@pytest.mark.parametrize(
    ("conf", "expression_type", "expression", "code", "remark"),
    [
        (ENABLED, "SQL92", RED_FROM_3_TO_7, ResponseCode.SUCCESS, None),
        (ENABLED, "TAG", "TagA || TagB", ResponseCode.SUCCESS, None),
        (ENABLED, "SQL92", "a BETWEEN 3", ResponseCode.SUBSCRIPTION_PARSE_FAILED, "Invalid MessageSelector"),
        (ENABLED, "SQL92", "", ResponseCode.SUBSCRIPTION_PARSE_FAILED, "Invalid MessageSelector"),
        (ENABLED, "XPATH", "/a", ResponseCode.SUBSCRIPTION_PARSE_FAILED, "unsupported expression type"),
        (
            {},
            "SQL92",
            RED_FROM_3_TO_7,
            ResponseCode.SYSTEM_ERROR,
            "does not support consumer to filter message by SQL92",
        ),
        ({}, "TAG", "*", ResponseCode.SUCCESS, None),
    ],
)
def test_check_client_config_answers_as_rocketmq(  # type: ignore[no-untyped-def]
    cluster_factory, conf: dict[str, str], expression_type: str, expression: str, code: int, remark: str | None
) -> None:
    """Goal: CHECK_CLIENT_CONFIG passes tags and valid SQL92, refuses bad SQL92 with 23 and SQL92 on a
    broker without enablePropertyFilter with SYSTEM_ERROR. Method: send the request, read code and remark."""
    running = cluster_factory(conf)

    async def scenario(wire: Wire) -> RemotingCommand:
        return await wire.call(RequestCode.CHECK_CLIENT_CONFIG, body=_check_body(expression_type, expression))

    answer = _run(running.broker_addr, scenario)
    assert answer.code == code, answer.remark
    if remark is None:
        assert not answer.remark
    else:
        assert remark in (answer.remark or "")


def test_heartbeat_sql92_subscription_filters_pulls_by_properties_and_tags(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """Goal: a pull of a group whose heartbeat subscribed with SQL92 gets exactly the messages whose
    properties (TAGS included) match, and moves past the others. Method: 10 mixed messages, pull to the end."""
    running = cluster_factory(ENABLED)

    async def scenario(wire: Wire) -> tuple[list[int], list[int], list[tuple[int, str | None]]]:
        await _send_mixed(wire)
        await wire.heartbeat(_sql(RED_FROM_3_TO_7))
        delivered, _ = await wire.pull_all(sub_version=100, max_count=2)
        await wire.heartbeat(_sql("TAGS = 'TagB' AND color <> 'red'", version=200))
        by_tag, _ = await wire.pull_all(sub_version=200)
        await wire.heartbeat(_sql("a > 100", version=300))
        _, none_answers = await wire.pull_all(sub_version=300)
        return [int(p["a"]) for p in delivered], [int(p["a"]) for p in by_tag], none_answers

    delivered, by_tag, none_answers = _run(running.broker_addr, scenario)
    assert delivered == [4, 6]
    assert by_tag == [5, 7, 9]
    # nothing matches: one pull reads past all 10 (NO_MATCHED_MESSAGE), the next finds the end
    assert none_answers == [
        (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE"),
        (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE"),
    ]


def test_pull_refusals_match_rocketmq(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """Goal: SUBSCRIPTION_NOT_EXIST without a heartbeat, SUBSCRIPTION_NOT_LATEST for a newer subVersion,
    FILTER_DATA_NOT_EXIST when the registered SQL92 expression did not compile, FILTER_DATA_NOT_LATEST when
    the filter is older than the pull's subVersion. Method: pull after each heartbeat."""
    running = cluster_factory(ENABLED)

    async def scenario(wire: Wire) -> list[tuple[int, str | None]]:
        await wire.send({"a": "1"})
        answers = []
        answer = await wire.pull(0)
        answers.append((answer.code, answer.remark))
        await wire.heartbeat(_sql("a = 1", version=100))
        answer = await wire.pull(0, sub_version=101)
        answers.append((answer.code, answer.remark))
        await wire.heartbeat(_sql("a = ", version=200))  # the new expression does not compile
        answer = await wire.pull(0, sub_version=200)
        answers.append((answer.code, answer.remark))
        # older than the subscription the broker holds (kept at 200), but the filter is registered anew at 150
        await wire.heartbeat(_sql("a = 1", version=150))
        answer = await wire.pull(0, sub_version=200)
        answers.append((answer.code, answer.remark))
        await wire.heartbeat(_sql("a = 1", version=300))
        answer = await wire.pull(0, sub_version=300)
        answers.append((answer.code, answer.remark))
        return answers

    answers = _run(running.broker_addr, scenario)
    assert answers[0][0] == ResponseCode.SUBSCRIPTION_NOT_EXIST
    assert answers[1] == (ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
    assert answers[2][0] == ResponseCode.FILTER_DATA_NOT_EXIST
    assert answers[3] == (ResponseCode.FILTER_DATA_NOT_LATEST, "the consumer's consumer filter data not latest")
    assert answers[4] == (ResponseCode.SUCCESS, "FOUND")


def test_a_pull_that_overtakes_its_heartbeat_waits_for_it(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """Goal: a pull whose subVersion is newer than the broker's (a Java consumer's rebalance sends its
    pulls, then on another thread the heartbeat with the new version) is answered FOUND once that
    heartbeat comes, not SUBSCRIPTION_NOT_LATEST (which costs the consumer a second); the same for a
    SQL92 filter's FILTER_DATA_NOT_LATEST; a version that never comes is still refused, after the
    wait. Method: on one connection, each pull is written before its heartbeat (`invoke_soon`)."""
    running = cluster_factory(ENABLED)

    async def scenario(wire: Wire) -> dict[str, Any]:
        await wire.send({"a": "1"})
        await wire.heartbeat(SubscriptionData(topic=TOPIC, sub_string="*", sub_version=100))
        answers: dict[str, Any] = {}
        for name, subscription in (
            ("tags", SubscriptionData(topic=TOPIC, sub_string="*", sub_version=101)),
            ("sql92", _sql("a = 1", version=102)),
        ):
            pending = wire.client.invoke_soon(
                wire.address, RequestCode.PULL_MESSAGE, _pull_fields(0, sub_version=subscription.sub_version)
            )
            assert pending is not None  # the connection is open: the pull is on the wire first
            await wire.heartbeat(subscription)
            answers[name] = await pending
        started = time.monotonic()
        answers["never"] = await wire.pull(0, sub_version=103)
        answers["waited_s"] = time.monotonic() - started
        return answers

    answers = _run(running.broker_addr, scenario)
    assert (answers["tags"].code, len(_records(answers["tags"].body))) == (ResponseCode.SUCCESS, 1)
    assert (answers["sql92"].code, len(_records(answers["sql92"].body))) == (ResponseCode.SUCCESS, 1)
    assert answers["never"].code == ResponseCode.SUBSCRIPTION_NOT_LATEST
    assert answers["waited_s"] >= SUBSCRIPTION_CATCH_UP_WAIT_S


def _note_done(order: list[int], index: int, _done: object) -> None:
    order.append(index)


def test_pulls_past_the_held_limit_are_refused_at_once(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: a flood of pulls with made-up subscription versions holds at most
    SUBSCRIPTION_CATCH_UP_HELD_MAX_COUNT of them; the rest are answered SUBSCRIPTION_NOT_LATEST at
    once, and so are the held ones after the wait. Method: one connection writes the limit plus 40
    such pulls back to back (none is ever caught up); the first 40 answers to come back are the 40
    written last, and every answer is 25."""
    extra = 40
    total = SUBSCRIPTION_CATCH_UP_HELD_MAX_COUNT + extra

    async def scenario(wire: Wire) -> tuple[list[int], set[int]]:
        await wire.send({"a": "1"})
        await wire.heartbeat(SubscriptionData(topic=TOPIC, sub_string="*", sub_version=100))
        order: list[int] = []
        pending = []
        for index in range(total):
            future = wire.client.invoke_soon(wire.address, RequestCode.PULL_MESSAGE, _pull_fields(0, sub_version=200))
            assert future is not None
            future.add_done_callback(functools.partial(_note_done, order, index))
            pending.append(future)
        answers = await asyncio.gather(*pending)
        return order, {answer.code for answer in answers}

    order, codes = _run(cluster.broker_addr, scenario)
    assert codes == {ResponseCode.SUBSCRIPTION_NOT_LATEST}
    assert sorted(order[:extra]) == list(range(SUBSCRIPTION_CATCH_UP_HELD_MAX_COUNT, total))


def test_sql92_without_enable_property_filter_is_refused_on_pull(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: with enablePropertyFilter=false (the default) a SQL92 pull, from a heartbeat or its own
    subscription, gets SYSTEM_ERROR "does not support"; a tag pull still works. Method: pull both ways."""

    async def scenario(wire: Wire) -> list[tuple[int, str | None]]:
        await wire.send({"a": "1"})
        await wire.heartbeat(_sql("a = 1"))
        by_heartbeat = await wire.pull(0, sub_version=100)
        own = await wire.pull(
            0, sys_flag=PullSysFlag.SUBSCRIPTION, expression="a = 1", expression_type="SQL92", sub_version=1
        )
        tags = await wire.pull(0, sys_flag=PullSysFlag.SUBSCRIPTION, expression="*", expression_type="TAG")
        return [(answer.code, answer.remark) for answer in (by_heartbeat, own, tags)]

    refused = (ResponseCode.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92")
    assert _run(cluster.broker_addr, scenario) == [refused, refused, (ResponseCode.SUCCESS, "FOUND")]


def test_pull_with_its_own_sql92_subscription_is_filtered(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """Goal: a pull carrying its subscription (sysFlag SUBSCRIPTION, as DefaultMQPullConsumer sends)
    is filtered by it without a heartbeat; an expression that does not parse gets 23. Method: pull both."""
    running = cluster_factory(ENABLED)
    own = {"sys_flag": PullSysFlag.SUBSCRIPTION, "expression_type": "SQL92", "sub_version": 1}

    async def scenario(wire: Wire) -> tuple[list[int], RemotingCommand]:
        await _send_mixed(wire)
        delivered, _ = await wire.pull_all(expression="color IN ('red') AND a >= 5", **own)
        bad = await wire.pull(0, expression="color IN red", **own)
        return [int(p["a"]) for p in delivered], bad

    delivered, bad = _run(running.broker_addr, scenario)
    assert delivered == [6, 8]
    assert (bad.code, bad.remark) == (
        ResponseCode.SUBSCRIPTION_PARSE_FAILED,
        "parse the consumer's subscription failed",
    )


def test_long_polling_wakes_a_sql92_pull_only_for_a_matching_message(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """Goal: a held SQL92 pull is not answered for a message that fails its filter, and is answered
    at once for one that passes, with only that one. Method: hold a pull, send blue, then red."""
    running = cluster_factory(ENABLED)

    async def scenario(wire: Wire) -> tuple[bool, float, RemotingCommand]:
        await wire.send({"color": "blue", "a": "0"})
        await wire.heartbeat(_sql("color = 'red'"))
        held = asyncio.ensure_future(wire.pull(1, sub_version=100, suspend_ms=8_000))
        await asyncio.sleep(0.3)
        await wire.send({"color": "blue", "a": "1"})
        await asyncio.sleep(1.0)  # a wake-up would have answered by now
        answered_for_blue = held.done()
        started = time.monotonic()
        await wire.send({"color": "red", "a": "2"})
        answer = await asyncio.wait_for(held, 8)
        return answered_for_blue, time.monotonic() - started, answer

    answered_for_blue, waited_s, answer = _run(running.broker_addr, scenario)
    assert not answered_for_blue
    assert waited_s < 3.0, "the matching message did not wake the pull"
    assert answer.code == ResponseCode.SUCCESS
    assert [p["a"] for p in _records(answer.body)] == ["2"]
    assert answer.ext_fields["nextBeginOffset"] == "3"


@pytest.mark.parametrize(("support_retry", "expected"), [("true", ["9"]), ("false", ["1", "9"])])
def test_filter_support_retry_filters_retry_messages_by_the_original_topic(  # type: ignore[no-untyped-def]
    cluster_factory, support_retry: str, expected: list[str]
) -> None:
    """Goal: with filterSupportRetry a %RETRY% pull delivers only messages matching the group's SQL92
    filter of their RETRY_TOPIC; without it, all. Method: store two retry messages, pull the retry topic."""
    running = cluster_factory({**ENABLED, "filterSupportRetry": support_retry})
    retry = f"%RETRY%{GROUP}"

    async def scenario(wire: Wire) -> list[str]:
        await wire.send({"a": "0"})  # creates the topic
        retry_subscription = SubscriptionData(topic=retry, sub_string="*", sub_version=100)
        await wire.heartbeat(_sql("a > 5"), retry_subscription)
        for value in ("1", "9"):
            await wire.send({"a": value, "RETRY_TOPIC": TOPIC}, topic=retry)
        delivered, _ = await wire.pull_all(topic=retry, sub_version=100)
        return [p["a"] for p in delivered]

    assert _run(running.broker_addr, scenario) == expected


def test_a_broadcasting_group_without_consume_broadcast_enable_is_refused_on_pull(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: as RocketMQ, a pull of a BROADCASTING group whose subscription group has
    consumeBroadcastEnable=false gets NO_PERMISSION. Method: create the group, heartbeat, pull."""

    async def scenario(wire: Wire) -> RemotingCommand:
        await wire.send({"a": "1"})
        config = json.dumps({"groupName": GROUP, "consumeBroadcastEnable": False}).encode()
        created = await wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=config)
        assert created.code == ResponseCode.SUCCESS, created.remark
        subscription = SubscriptionData(topic=TOPIC, sub_string="*", sub_version=100)
        consumer = ConsumerData(GROUP, message_model=MessageModel.BROADCASTING, subscription_data_set=(subscription,))
        beat = await wire.call(
            RequestCode.HEART_BEAT, body=HeartbeatData("127.0.0.1@filter", (), (consumer,)).to_json()
        )
        assert beat.code == ResponseCode.SUCCESS, beat.remark
        return await wire.pull(0, sub_version=100)

    answer = _run(cluster.broker_addr, scenario)
    assert (answer.code, answer.remark) == (
        ResponseCode.NO_PERMISSION,
        f"the consumer group[{GROUP}] can not consume by broadcast way",
    )
