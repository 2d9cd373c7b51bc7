"""POP consumption over remoting against a real broker process: leases, acks, invisible time,
redelivery with the attempt counted, tag filters, and leases that survive a SIGKILL."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from shoal.client.message import decode_messages
from shoal.formats.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from shoal.protocol import RemotingCommand, RequestCode, ResponseCode
from shoal.protocol.headers import AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, PopMessageRequestHeader
from shoal.remoting import RemotingClient
from tests.broker.request_fields import send_fields

pytestmark = pytest.mark.slow

GROUP = "CID_pop"


def tagged(topic: str, tag: str) -> dict[str, str]:
    fields = send_fields(topic, producer_group="PID_pop", queues=1)
    fields["i"] = f"TAGS{NAME_VALUE_SEPARATOR}{tag}{PROPERTY_SEPARATOR}"
    return fields


def pop_fields(topic: str, *, invisible_ms: int, poll_ms: int = 0, count: int = 32, tag: str = "*") -> dict[str, str]:
    return PopMessageRequestHeader(
        consumer_group=GROUP,
        topic=topic,
        queue_id=0,
        max_msg_nums=count,
        invisible_time_ms=invisible_ms,
        poll_time_ms=poll_ms,
        born_time_ms=int(time.time() * 1000),
        init_mode=1,
        exp_type="TAG",
        exp=tag,
    ).to_ext_fields()


def extra_info(response: RemotingCommand, topic: str, offset: int) -> str:
    """An extraInfo as a RocketMQ 5 client builds it: the pop time is field 1."""
    return f"0 {response.ext_fields['popTime']} {response.ext_fields['invisibleTime']} 0 0 broker-a 0 {offset}"


def bodies_and_attempts(response: RemotingCommand) -> list[tuple[bytes, int, int]]:
    """(body, queue offset, attempt) per popped record; the attempt is RECONSUMETIMES + 1."""
    messages = decode_messages(response.body or b"")
    return [(message.body, message.queue_offset, message.reconsume_times + 1) for message in messages]


def run_with_client(scenario: Callable[[RemotingClient], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        client = RemotingClient()
        try:
            return await scenario(client)
        finally:
            await client.close()

    return asyncio.run(run())


async def send(client: RemotingClient, address: str, topic: str, body: bytes, tag: str = "A") -> None:
    sent = await client.invoke(address, RequestCode.SEND_MESSAGE_V2, tagged(topic, tag), body)
    assert sent.code == ResponseCode.SUCCESS, sent.remark


async def pop_until(client: RemotingClient, address: str, fields: dict[str, str], count: int) -> RemotingCommand:
    """Pop until `count` records come back together (dispatch of fresh sends may lag a moment)."""
    deadline = time.monotonic() + 15
    while True:
        response = await client.invoke(address, RequestCode.POP_MESSAGE, fields, timeout_s=30)
        if response.code == ResponseCode.SUCCESS and len(bodies_and_attempts(response)) >= count:
            return response
        assert time.monotonic() < deadline, f"pop got {response.code} {response.remark}"
        await asyncio.sleep(0.05)


def test_pop_ack_change_and_redelivery(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: popped messages are invisible until acked; a changed invisible time brings one back
    with its attempt counted; a stale receipt cannot ack it; the tag filter holds.
    Method: send 3 tagged A and 1 tagged B, pop A with a long invisible time, ack one, change one to
    1 s, pop again."""
    topic = "PopTopic"
    address = cluster.broker_addr

    async def scenario(client: RemotingClient) -> None:
        for body in (b"a0", b"b-skip", b"a1", b"a2"):
            await send(client, address, topic, body, "B" if body.startswith(b"b") else "A")
        first = await pop_until(client, address, pop_fields(topic, invisible_ms=60_000, tag="A"), 3)
        popped = bodies_and_attempts(first)
        assert [(b, a) for b, _, a in popped] == [(b"a0", 1), (b"a1", 1), (b"a2", 1)]
        offsets = {body: offset for body, offset, _ in popped}
        assert first.ext_fields["msgOffsetInfo"].split(";")[0] == f"0 {offsets[b'a0']} 1"
        nothing = await client.invoke(address, RequestCode.POP_MESSAGE, pop_fields(topic, invisible_ms=60_000))
        assert nothing.code == ResponseCode.POLLING_TIMEOUT  # all leased or filtered out
        ack = AckMessageRequestHeader(
            consumer_group=GROUP, topic=topic, queue_id=0, extra_info=extra_info(first, topic, 0), offset=offsets[b"a0"]
        )
        acked = await client.invoke(address, RequestCode.ACK_MESSAGE, ack.to_ext_fields())
        assert acked.code == ResponseCode.SUCCESS, acked.remark
        change = ChangeInvisibleTimeRequestHeader(
            consumer_group=GROUP,
            topic=topic,
            queue_id=0,
            extra_info=extra_info(first, topic, offsets[b"a1"]),
            offset=offsets[b"a1"],
            invisible_time_ms=1_000,
        )
        changed = await client.invoke(address, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, change.to_ext_fields())
        assert changed.code == ResponseCode.SUCCESS, changed.remark
        assert changed.ext_fields["popTime"] != first.ext_fields["popTime"]
        stale = AckMessageRequestHeader(
            consumer_group=GROUP, topic=topic, queue_id=0, extra_info=extra_info(first, topic, 0), offset=offsets[b"a1"]
        )
        refused = await client.invoke(address, RequestCode.ACK_MESSAGE, stale.to_ext_fields())
        assert refused.code == ResponseCode.NO_MESSAGE  # the change ended that lease
        again = await client.invoke(
            address, RequestCode.POP_MESSAGE, pop_fields(topic, invisible_ms=60_000, poll_ms=10_000), timeout_s=30
        )
        assert again.code == ResponseCode.SUCCESS, again.remark
        assert [(b, a) for b, _, a in bodies_and_attempts(again)] == [(b"a1", 2)]

    run_with_client(scenario)


def test_leases_and_acks_survive_a_sigkill(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: after a SIGKILL, an acked message stays acked and an unacked one comes back once its
    invisible time has passed, not before. Method: pop 2 with 4 s invisible, ack one, kill -9, restart,
    pop at once (nothing) and with a poll past the 4 s (the unacked one, attempt 2)."""
    topic = "PopKill"
    address = cluster.broker_addr

    async def before(client: RemotingClient) -> tuple[int, float]:
        for body in (b"k0", b"k1"):
            await send(client, address, topic, body)
        first = await pop_until(client, address, pop_fields(topic, invisible_ms=4_000), 2)
        popped = {body: offset for body, offset, _ in bodies_and_attempts(first)}
        ack = AckMessageRequestHeader(
            consumer_group=GROUP, topic=topic, queue_id=0, extra_info=extra_info(first, topic, 0), offset=popped[b"k0"]
        )
        acked = await client.invoke(address, RequestCode.ACK_MESSAGE, ack.to_ext_fields())
        assert acked.code == ResponseCode.SUCCESS, acked.remark
        return popped[b"k1"], int(first.ext_fields["popTime"]) / 1000

    offset, popped_at = run_with_client(before)
    cluster.stop("broker", signal.SIGKILL)
    cluster.start_broker()

    async def after(client: RemotingClient) -> None:
        if time.time() < popped_at + 3:  # still invisible: nothing comes back yet
            early = await client.invoke(address, RequestCode.POP_MESSAGE, pop_fields(topic, invisible_ms=4_000))
            assert early.code == ResponseCode.POLLING_TIMEOUT, bodies_and_attempts(early)
        late = await client.invoke(
            address, RequestCode.POP_MESSAGE, pop_fields(topic, invisible_ms=4_000, poll_ms=15_000), timeout_s=30
        )
        assert late.code == ResponseCode.SUCCESS, late.remark
        assert [(b, o, a) for b, o, a in bodies_and_attempts(late)] == [(b"k1", offset, 2)]
        assert time.time() >= popped_at + 4 - 0.5  # not before its invisible time (clock granularity)

    run_with_client(after)
