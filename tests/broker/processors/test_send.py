"""The send processor against a real Broker process: the broker owns the SYSFLAG bits it writes."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time

import pytest

from shoal.client.message import MessageExt, decode_messages
from shoal.formats.batch import encode_batch_body
from shoal.formats.sysflag import BORNHOST_V6_FLAG, COMPRESSION_TYPE_MASK, STOREHOSTADDRESS_V6_FLAG
from shoal.protocol import FrameDecoder, RemotingCommand, RequestCode, ResponseCode, encode_frame_bytes
from shoal.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeader
from shoal.remoting import RemotingClient
from tests.broker.acknowledged import Acknowledged, assert_consumable, assert_store_verifies

TOPIC = "SysFlagTopic"
V6_BITS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
ALL_BUT_COMPRESSED = -1 & ~0x1  # every bit a client could set, the body left uncompressed
POISON_SYSFLAGS = [BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, V6_BITS, ALL_BUT_COMPRESSED, 0x40 | 0x80 | 0x4000]
LATER_MESSAGES_PER_POISON = 5


def _header(sys_flag: int, *, batch: bool = False, topic: str = TOPIC) -> SendMessageRequestHeader:
    return SendMessageRequestHeader(
        producer_group="PID_sysflag",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=0,
        sys_flag=sys_flag,
        born_timestamp_ms=int(time.time() * 1000),
        flag=0,
        properties="TAGS\x01TagA",
        batch=batch,
    )


async def _send_all(address: str, acknowledged: Acknowledged) -> None:
    """Each poison sysflag through SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE, each
    followed by ordinary messages; every one must be acknowledged."""
    client = RemotingClient()

    async def send(code: int, ext: dict[str, str], body: bytes) -> None:
        response = await client.invoke(address, code, ext, body, timeout_s=10.0)
        acknowledged.add(TOPIC, response)

    for sys_flag in POISON_SYSFLAGS:
        await send(RequestCode.SEND_MESSAGE, _header(sys_flag).to_ext_fields(), b"v1 poison")
        await send(RequestCode.SEND_MESSAGE_V2, _header(sys_flag).to_v2().to_ext_fields(), b"v2 poison")
        batch = encode_batch_body([(0, b"batch poison 1", b""), (0, b"batch poison 2", b"")])
        await send(RequestCode.SEND_BATCH_MESSAGE, _header(sys_flag, batch=True).to_v2().to_ext_fields(), batch)
        for index in range(LATER_MESSAGES_PER_POISON):
            await send(RequestCode.SEND_MESSAGE_V2, _header(0).to_v2().to_ext_fields(), b"later %d" % index)
    await client.close()


async def _stored_sysflags(address: str) -> list[int]:
    """The sysflag of every stored message (the first 32 hold every poison case)."""
    return [message.sysflag for message in await _pulled(address, 32)]


@pytest.mark.slow
def test_client_sysflag_bits_never_make_a_record_unreadable(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: a send whose sysFlag claims IPv6 hosts (or sets any bit the broker owns) is stored
    readable, and every message acknowledged after it stays consumable, also after a restart.
    Method: v1, v2 and batch sends with poison sysFlags between ordinary sends; pull everything;
    the stored sysflags keep only the compression bits; stop, `shoal store verify`, restart, pull."""
    acknowledged = Acknowledged()
    asyncio.run(_send_all(cluster.broker_addr, acknowledged))
    assert acknowledged.count == len(POISON_SYSFLAGS) * (4 + LATER_MESSAGES_PER_POISON)
    asyncio.run(assert_consumable(cluster.broker_addr, acknowledged))
    stored = asyncio.run(_stored_sysflags(cluster.broker_addr))
    assert stored and all(sysflag & ~COMPRESSION_TYPE_MASK == 0 for sysflag in stored), [hex(f) for f in stored]
    assert cluster.stop("broker") == 0
    assert_store_verifies(cluster.store_dir)
    cluster.start_broker()
    asyncio.run(assert_consumable(cluster.broker_addr, acknowledged))
    assert "undecodable" not in cluster.log("broker")


async def _send_v2(address: str, topic: str) -> RemotingCommand:
    """One SEND_MESSAGE_V2 of b"x" to `topic`."""
    client = RemotingClient()
    try:
        ext = _header(0, topic=topic).to_v2().to_ext_fields()
        return await client.invoke(address, RequestCode.SEND_MESSAGE_V2, ext, b"x", timeout_s=10.0)
    finally:
        await client.close()


@pytest.mark.slow
def test_unknown_topic_is_refused_when_auto_create_is_off(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """Goal: TOPIC_NOT_EXIST with a remark when auto-creation is off.
    Method: a broker with autoCreateTopicEnable=false."""
    running = cluster_factory({"autoCreateTopicEnable": "false"})

    async def run() -> None:
        response = await _send_v2(running.broker_addr, "NewTopic")
        assert response.code == ResponseCode.TOPIC_NOT_EXIST
        assert "topic[NewTopic] not exist" in (response.remark or "")
        client = RemotingClient()
        route = await client.invoke(
            running.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "NewTopic"}, None, timeout_s=10.0
        )
        assert route.code == ResponseCode.TOPIC_NOT_EXIST
        await client.close()

    asyncio.run(run())


@pytest.mark.slow
def test_slave_refuses_writes(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """Goal: a SLAVE answers sends with SERVICE_NOT_AVAILABLE. Method: a broker with brokerRole=SLAVE, brokerId=1."""
    running = cluster_factory({"brokerRole": "SLAVE", "brokerId": "1"})

    async def run() -> None:
        response = await _send_v2(running.broker_addr, "GoodTopic")
        assert response.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "slave" in (response.remark or "")

    asyncio.run(run())


@pytest.mark.slow
def test_a_send_that_creates_its_topic_is_answered_once_the_namesrv_routes_it(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: as RocketMQ registers a topic it auto-creates before answering the send, a client that
    asks the NameServer right after its first SEND_OK finds the route (a Go client's push consumer
    started right after its producer failed with "route info not found" when Shoal answered first).
    Method: one at a time and then 16 at once, sends to new topics, each followed at once by
    GET_ROUTEINFO_BY_TOPIC; then with the NameServer stopped, a send to a new topic still succeeds."""

    async def send_then_route(client: RemotingClient, topic: str) -> None:
        response = await client.invoke(
            cluster.broker_addr, RequestCode.SEND_MESSAGE_V2, _header(0, topic=topic).to_v2().to_ext_fields(), b"x",
            timeout_s=10.0,
        )  # fmt: skip
        assert response.code == ResponseCode.SUCCESS, response.remark
        route = await client.invoke(
            cluster.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, None, timeout_s=10.0
        )
        assert route.code == ResponseCode.SUCCESS, (topic, route.remark)

    async def run() -> None:
        client = RemotingClient()
        try:
            for index in range(4):
                await send_then_route(client, f"RoutedAtOnce{index}")
            await asyncio.gather(*(send_then_route(client, f"RoutedInBurst{index}") for index in range(16)))
        finally:
            await client.close()

    asyncio.run(run())
    cluster.stop("namesrv")

    async def without_namesrv() -> float:
        started = time.monotonic()
        response = await _send_v2(cluster.broker_addr, "CreatedWhileNamesrvDown")
        assert response.code == ResponseCode.SUCCESS, response.remark
        return time.monotonic() - started

    assert asyncio.run(without_namesrv()) < 5.0


def _frame(code: int, opaque: int, ext: dict[str, str], body: bytes) -> bytes:
    return encode_frame_bytes(RemotingCommand(code=code, opaque=opaque, ext_fields=ext, body=body))


def _pipelined(address: str, frames: list[bytes]) -> dict[int, RemotingCommand]:
    """Write every frame in one system call (one read at the broker, a run of requests) and read
    the answers, by opaque."""
    host, port = address.rsplit(":", 1)
    answers: dict[int, RemotingCommand] = {}
    decoder = FrameDecoder()
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(b"".join(frames))
        while len(answers) < len(frames):
            data = sock.recv(1 << 16)
            assert data, f"the broker closed the connection after {len(answers)} answers"
            for command in decoder.feed(data):
                answers[command.opaque] = command
    return answers


def test_pipelined_sends_read_together_are_stored_and_answered_as_one_by_one(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: a run of sends in one read (the lane for plain SEND_MESSAGE_V2, the general path for
    the rest) answers each as a lone send is answered and stores the same record.
    Method: the topic is made by a first send; then one write carries plain V2 sends with tags,
    keys and WAIT=false, the same messages as SEND_MESSAGE (general path), a queue id out of range,
    an unreadable field, a batch flag on a plain body, and more plain sends; answers by opaque;
    pull everything and compare what each path stored."""
    assert asyncio.run(_send_v2(cluster.broker_addr, TOPIC)).code == ResponseCode.SUCCESS
    properties = "TAGS\x01TagA\x02KEYS\x01k1 k2\x02WAIT\x01false\x02UNIQ_KEY\x01ABC"
    plain = dataclasses.replace(_header(0), properties=properties, flag=7)
    frames, expected = [], {}
    for opaque in range(1, 21):
        frames.append(_frame(RequestCode.SEND_MESSAGE_V2, opaque, plain.to_v2().to_ext_fields(), b"lane %d" % opaque))
        expected[opaque] = ResponseCode.SUCCESS
    for opaque in range(21, 26):
        frames.append(_frame(RequestCode.SEND_MESSAGE, opaque, plain.to_ext_fields(), b"lane %d" % (opaque - 20)))
        expected[opaque] = ResponseCode.SUCCESS
    out_of_range = dataclasses.replace(plain, queue_id=999).to_v2().to_ext_fields()
    frames.append(_frame(RequestCode.SEND_MESSAGE_V2, 26, out_of_range, b"refused"))
    expected[26] = ResponseCode.SYSTEM_ERROR
    unreadable = {**plain.to_v2().to_ext_fields(), "e": "x"}
    frames.append(_frame(RequestCode.SEND_MESSAGE_V2, 27, unreadable, b"refused"))
    expected[27] = ResponseCode.SYSTEM_ERROR
    for opaque in range(28, 40):
        frames.append(_frame(RequestCode.SEND_MESSAGE_V2, opaque, plain.to_v2().to_ext_fields(), b"late %d" % opaque))
        expected[opaque] = ResponseCode.SUCCESS
    answers = _pipelined(cluster.broker_addr, frames)
    assert {opaque: answer.code for opaque, answer in answers.items()} == expected
    assert "invalid request header" in (answers[27].remark or "")
    assert all(answers[o].ext_fields["queueOffset"] for o in expected if expected[o] == ResponseCode.SUCCESS)
    pulled = asyncio.run(_pulled(cluster.broker_addr, 1 + 20 + 5 + 12))
    assert len(pulled) == 1 + 20 + 5 + 12
    by_body: dict[bytes, list[MessageExt]] = {}
    for message in pulled:
        by_body.setdefault(bytes(message.body), []).append(message)
    for index in range(1, 6):  # stored in the order read: the lane's V2 copy, then the general path's V1
        lane, general = by_body[b"lane %d" % index]
        assert _stored_fields(lane) == _stored_fields(general)
        assert lane.properties["CLUSTER"] == "DefaultCluster" and "WAIT" not in lane.properties
        assert (lane.tags, lane.keys, lane.flag) == ("TagA", ("k1", "k2"), 7)


def _stored_fields(message: MessageExt) -> tuple[object, ...]:
    return (
        message.topic,
        message.properties,
        message.sysflag,
        message.flag,
        message.queue_id,
        message.born_timestamp_ms,
        message.born_host,
        message.reconsume_times,
        message.prepared_transaction_offset,
    )


async def _pulled(address: str, count: int) -> list[MessageExt]:
    """Every message of queue 0, pulled 32 at a time (the broker's cap per pull)."""
    client = RemotingClient()
    messages: list[MessageExt] = []
    try:
        while len(messages) < count:
            header = PullMessageRequestHeader(
                consumer_group="CID_send",
                topic=TOPIC,
                queue_id=0,
                queue_offset=len(messages),
                max_msg_nums=32,
                sys_flag=4,
                commit_offset=0,
                suspend_timeout_ms=0,
                subscription="*",
                sub_version=0,
            )
            response: RemotingCommand = await client.invoke(
                address, RequestCode.PULL_MESSAGE, header.to_ext_fields(), timeout_s=10.0
            )
            if response.code != ResponseCode.SUCCESS:
                break
            messages.extend(decode_messages(response.body or b""))
    finally:
        await client.close()
    return messages
