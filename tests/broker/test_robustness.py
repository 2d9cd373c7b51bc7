"""Bad input and load against a real Broker process: fuzzed frames, wrong requests, 500 long polls."""

from __future__ import annotations

import asyncio
import json
import random
import struct
import time

import pytest

from shoal.client.remoting import RemotingClient, RemotingTimeoutError
from shoal.protocol import (
    FrameDecoder,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    encode_frame_bytes,
    make_request,
)
from shoal.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeaderV2

pytestmark = pytest.mark.slow

WELL_FORMED_CASES = 90_000
MALFORMED_CASES = 10_000
FRAMES_PER_WRITE = 1_000
SOCKET_TIMEOUT_S = 20.0


def _send_header(topic: str, queue_id: int = 0, **overrides: object) -> dict[str, str]:
    fields: dict[str, object] = {
        "producer_group": "PID_test",
        "topic": topic,
        "default_topic": "TBW102",
        "default_topic_queue_nums": 4,
        "queue_id": queue_id,
        "sys_flag": 0,
        "born_timestamp_ms": int(time.time() * 1000),
        "flag": 0,
        "properties": "TAGS\x01TagA",
        **overrides,
    }
    return SendMessageRequestHeaderV2(**fields).to_ext_fields()  # type: ignore[arg-type]


async def _call(
    client: RemotingClient, address: str, code: int, ext: dict[str, str], body: bytes | None = None
) -> RemotingCommand:
    return await client.invoke(address, code, ext, body, timeout_s=10.0)


def _random_frame(rng: random.Random, opaque: int) -> bytes:
    """A well-framed request with a random code, random extFields and a random body (never oneway)."""
    codes = [int(code) for code in RequestCode if code != RequestCode.PULL_MESSAGE]
    code = rng.choice(codes) if rng.random() < 0.7 else rng.randrange(-32768, 32767)
    if code == RequestCode.PULL_MESSAGE:
        code = RequestCode.GET_MAX_OFFSET
    ext = {
        f"k{rng.randrange(50)}": rng.choice(["", "x", "-1", "99999999999999999999", "\x01\x02", "topic"])
        for _ in range(rng.randrange(6))
    }
    if rng.random() < 0.3:
        ext["topic"] = rng.choice(["FuzzTopic", "", "%RETRY%g", "a" * 200, "bad topic!"])
        ext["queueId"] = str(rng.randrange(-5, 40))
    body = rng.randbytes(rng.randrange(0, 64)) if rng.random() < 0.5 else None
    return encode_frame_bytes(make_request(code, opaque=opaque, ext_fields=ext, body=body))


def _malformed(rng: random.Random) -> bytes:
    kind = rng.randrange(6)
    if kind == 0:
        return rng.randbytes(rng.randrange(1, 200))  # garbage
    if kind == 1:
        return struct.pack(">i", 2**31 - 1) + rng.randbytes(8)  # absurd length
    if kind == 2:
        return struct.pack(">ii", 20, (1 << 24) | 100) + rng.randbytes(16)  # header longer than the frame
    if kind == 3:
        return struct.pack(">ii", 12, 7 << 24 | 4) + b"abcd"  # unknown serialize type
    if kind == 4:
        header = b"{not json"
        return struct.pack(">ii", 4 + len(header), len(header)) + header
    return struct.pack(">i", -5)  # negative length


async def _health_check(client: RemotingClient, address: str) -> None:
    response = await _call(client, address, RequestCode.GET_MAX_OFFSET, {"topic": "HealthTopic", "queueId": "0"})
    assert response.code == ResponseCode.SUCCESS


def test_fuzzed_frames_never_crash_the_broker(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: 100,000 random and malformed frames never crash the broker or disturb others.
    Method: pipeline random well-framed requests and expect one response each; send malformed
    bytes on fresh connections and expect them closed; a separate client stays served throughout."""

    async def run() -> None:
        rng = random.Random(20261121)
        healthy = RemotingClient()
        await _health_check(healthy, cluster.broker_addr)
        answered = 0
        reader, writer = await asyncio.open_connection("127.0.0.1", cluster.broker_port)
        decoder = FrameDecoder()
        opaque = 0
        for _batch in range(WELL_FORMED_CASES // FRAMES_PER_WRITE):
            frames = []
            for _ in range(FRAMES_PER_WRITE):
                opaque += 1
                frames.append(_random_frame(rng, opaque))
            writer.write(b"".join(frames))
            await writer.drain()
            got = 0
            while got < FRAMES_PER_WRITE:
                data = await asyncio.wait_for(reader.read(1 << 20), SOCKET_TIMEOUT_S)
                assert data, "the broker closed a connection that only sent well-formed frames"
                for response in decoder.feed(data):
                    assert response.is_response
                    got += 1
            answered += got
            await _health_check(healthy, cluster.broker_addr)
        writer.close()
        closed = 0
        for _ in range(MALFORMED_CASES):
            reader, writer = await asyncio.open_connection("127.0.0.1", cluster.broker_port)
            writer.write(_malformed(rng))
            writer.write_eof()  # a truncated frame is only known to be truncated at the end of the stream
            await writer.drain()
            with_eof = await asyncio.wait_for(reader.read(), SOCKET_TIMEOUT_S)
            closed += 1
            del with_eof
            writer.close()
        await _health_check(healthy, cluster.broker_addr)
        await healthy.close()
        assert answered == WELL_FORMED_CASES
        assert closed == MALFORMED_CASES

    asyncio.run(run())
    assert cluster.alive("broker")


def test_bad_requests_get_rocketmq_codes_and_readable_remarks(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: wrong requests get the right response code and a remark. Method: send each to a real broker."""

    async def run() -> None:
        client = RemotingClient()
        address = cluster.broker_addr
        ok = await _call(client, address, RequestCode.SEND_MESSAGE_V2, _send_header("GoodTopic"), b"hello")
        assert ok.code == ResponseCode.SUCCESS, ok.remark
        assert ok.ext_fields["MSG_REGION"] == "DefaultRegion" and "msgId" in ok.ext_fields
        bad_queue = await _call(
            client, address, RequestCode.SEND_MESSAGE_V2, _send_header("GoodTopic", queue_id=99), b"x"
        )
        assert bad_queue.code == ResponseCode.SYSTEM_ERROR and "queueId[99] is illegal" in (bad_queue.remark or "")
        too_big = await _call(
            client, address, RequestCode.SEND_MESSAGE_V2, _send_header("GoodTopic"), b"x" * (4 * 1024 * 1024 + 1)
        )
        assert too_big.code == ResponseCode.MESSAGE_ILLEGAL and "maxMessageSize" in (too_big.remark or "")
        bad_name = await _call(client, address, RequestCode.SEND_MESSAGE_V2, _send_header("bad topic!"), b"x")
        assert bad_name.code == ResponseCode.MESSAGE_ILLEGAL
        system = await _call(client, address, RequestCode.SEND_MESSAGE_V2, _send_header("SCHEDULE_TOPIC_XXXX"), b"x")
        assert system.code == ResponseCode.NO_PERMISSION
        missing = await _call(client, address, RequestCode.SEND_MESSAGE_V2, {"b": "GoodTopic"}, b"x")
        assert missing.code == ResponseCode.SYSTEM_ERROR and "a" in (missing.remark or "")
        unknown = await _call(client, address, 9999, {})
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert unknown.remark == " request type 9999 not supported"
        view = await _call(client, address, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "123456789"})
        assert view.code == ResponseCode.SYSTEM_ERROR and "can not find message" in (view.remark or "")
        query = await _call(
            client,
            address,
            RequestCode.QUERY_CONSUMER_OFFSET,
            {"consumerGroup": "G", "topic": "GoodTopic", "queueId": "0"},
        )
        assert query.code == ResponseCode.SUCCESS and query.ext_fields["offset"] == "0"  # head in memory: start at 0
        pull_unknown = await _call(
            client,
            address,
            RequestCode.PULL_MESSAGE,
            PullMessageRequestHeader(
                consumer_group="G",
                topic="NoSuchTopic",
                queue_id=0,
                queue_offset=0,
                max_msg_nums=32,
                sys_flag=4,
                commit_offset=0,
                suspend_timeout_ms=0,
                subscription="*",
                sub_version=0,
            ).to_ext_fields(),
        )
        assert pull_unknown.code == ResponseCode.TOPIC_NOT_EXIST
        await client.close()
        # the NameServer, like RocketMQ's, answers nothing to an unknown code
        ns = RemotingClient()
        with pytest.raises(RemotingTimeoutError):
            await ns.invoke(cluster.namesrv_addr, 9999, {}, timeout_s=1.0)
        await ns.close()

    asyncio.run(run())


def test_unknown_topic_is_refused_when_auto_create_is_off(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """Goal: TOPIC_NOT_EXIST with a remark when auto-creation is off.
    Method: a broker with autoCreateTopicEnable=false."""
    running = cluster_factory({"autoCreateTopicEnable": "false"})

    async def run() -> None:
        client = RemotingClient()
        response = await _call(client, running.broker_addr, RequestCode.SEND_MESSAGE_V2, _send_header("NewTopic"), b"x")
        assert response.code == ResponseCode.TOPIC_NOT_EXIST
        assert "topic[NewTopic] not exist" in (response.remark or "")
        route = await _call(client, running.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "NewTopic"})
        assert route.code == ResponseCode.TOPIC_NOT_EXIST
        await client.close()

    asyncio.run(run())


def test_slave_refuses_writes(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """Goal: a SLAVE answers sends with SERVICE_NOT_AVAILABLE. Method: a broker with brokerRole=SLAVE, brokerId=1."""
    running = cluster_factory({"brokerRole": "SLAVE", "brokerId": "1"})

    async def run() -> None:
        client = RemotingClient()
        response = await _call(
            client, running.broker_addr, RequestCode.SEND_MESSAGE_V2, _send_header("GoodTopic"), b"x"
        )
        assert response.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "slave" in (response.remark or "")
        await client.close()

    asyncio.run(run())


def test_500_long_polling_connections_keep_the_broker_responsive(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: 500 held pulls do not slow other clients, and one message wakes them all.
    Method: 500 connections each park a PULL (suspend 15 s) on an empty queue; time a request on
    another connection; send one message; every pull must answer FOUND within a few seconds."""
    connections = 500

    async def run() -> None:
        client = RemotingClient()
        created = await _call(
            client, cluster.broker_addr, RequestCode.SEND_MESSAGE_V2, _send_header("PollTopic", queue_id=1), b"warm"
        )
        assert created.code == ResponseCode.SUCCESS
        ext = PullMessageRequestHeader(
            consumer_group="CID_poll",
            topic="PollTopic",
            queue_id=0,
            queue_offset=0,
            max_msg_nums=32,
            sys_flag=2 | 4,
            commit_offset=0,
            suspend_timeout_ms=15_000,
            subscription="*",
            sub_version=0,
        ).to_ext_fields()
        streams = [await asyncio.open_connection("127.0.0.1", cluster.broker_port) for _ in range(connections)]
        for index, (_reader, writer) in enumerate(streams):
            writer.write(encode_frame_bytes(make_request(RequestCode.PULL_MESSAGE, opaque=index + 1, ext_fields=ext)))
        await asyncio.gather(*(writer.drain() for _reader, writer in streams))
        await asyncio.sleep(0.5)
        started = time.monotonic()
        await _health_check(client, cluster.broker_addr)
        latency_s = time.monotonic() - started
        assert latency_s < 0.5, f"a request took {latency_s:.3f} s while 500 pulls were held"
        sent = await _call(
            client, cluster.broker_addr, RequestCode.SEND_MESSAGE_V2, _send_header("PollTopic", queue_id=0), b"wake"
        )
        assert sent.code == ResponseCode.SUCCESS

        async def answer(reader: asyncio.StreamReader) -> RemotingCommand:
            decoder = FrameDecoder()
            while True:
                data = await asyncio.wait_for(reader.read(65536), 10.0)
                assert data
                commands = decoder.feed(data)
                if commands:
                    return commands[0]

        responses = await asyncio.gather(*(answer(reader) for reader, _writer in streams))
        assert all(response.code == ResponseCode.SUCCESS for response in responses)
        assert all(response.body is not None and b"wake" in bytes(response.body) for response in responses)
        for _reader, writer in streams:
            writer.close()
        await client.close()

    asyncio.run(run())


def test_metrics_and_health_endpoints(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: /metrics is Prometheus text with store and traffic figures; /healthz says ok.
    Method: send a message, then GET both endpoints over HTTP."""

    async def run() -> None:
        client = RemotingClient()
        sent = await _call(client, cluster.broker_addr, RequestCode.SEND_MESSAGE_V2, _send_header("MetricTopic"), b"m")
        assert sent.code == ResponseCode.SUCCESS
        await client.close()

        async def get(path: str) -> tuple[str, str]:
            reader, writer = await asyncio.open_connection("127.0.0.1", cluster.metrics_port)
            writer.write(f"GET {path} HTTP/1.0\r\n\r\n".encode())
            data = await asyncio.wait_for(reader.read(), 5.0)
            writer.close()
            head, _, body = data.decode().partition("\r\n\r\n")
            return head.split("\r\n")[0], body

        status, body = await get("/metrics")
        assert status == "HTTP/1.0 200 OK"
        assert 'shoal_messages_in_total{topic="MetricTopic"} 1.0' in body
        assert "shoal_store_commitlog_max_offset" in body and "shoal_long_poll_held" in body
        assert "shoal_delay_delivered_total" in body and "shoal_transactions_tracked" in body
        assert "shoal_ha_" in body
        status, body = await get("/healthz")
        assert status == "HTTP/1.0 200 OK" and body.startswith("ok")

    asyncio.run(run())


def test_sigterm_shuts_down_cleanly_and_keeps_data(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: SIGTERM flushes, writes the checkpoint and removes `abort`; data survives a restart.
    Method: send, stop with SIGTERM, check exit code and files, restart, read the offsets back."""

    async def send_some() -> None:
        client = RemotingClient()
        for _ in range(10):
            response = await _call(
                client, cluster.broker_addr, RequestCode.SEND_MESSAGE_V2, _send_header("KeepTopic"), b"k"
            )
            assert response.code == ResponseCode.SUCCESS
        await client.close()

    asyncio.run(send_some())
    assert cluster.stop("broker") == 0
    assert not (cluster.store_dir / "abort").exists()
    assert (cluster.store_dir / "checkpoint").stat().st_size == 4096
    offsets = json.loads((cluster.store_dir / "config" / "topics.json").read_text())
    assert "KeepTopic" in offsets["topicConfigTable"]
    cluster.start_broker()

    async def check() -> None:
        client = RemotingClient()
        response = await _call(
            client, cluster.broker_addr, RequestCode.GET_MAX_OFFSET, {"topic": "KeepTopic", "queueId": "0"}
        )
        assert response.code == ResponseCode.SUCCESS and response.ext_fields["offset"] == "10"
        await client.close()

    asyncio.run(check())
