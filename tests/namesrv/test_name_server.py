"""The NameServer as a real process configured by namesrv.conf: every request is answered (codes it
does not implement as RocketMQ 5 answers them), its own config is readable and updatable, and
idle or stalled connections are closed."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal.protocol import RemotingCommand, RequestCode, ResponseCode, make_request
from shoal.protocol.framing import FrameDecoder, encode_frame_bytes
from shoal.protocol.headers import RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader
from shoal.protocol.route_bodies import RegisterBrokerBody, TopicRouteData
from shoal.remoting import RemotingClient
from tests.conftest import Cluster
from tests.ports import free_port
from tests.remoting.test_server import seconds_until_closed

pytestmark = pytest.mark.slow

IDLE_S = 2
PARTIAL_FRAME_S = 1
SCAN_SLACK_S = 2.0


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[Cluster]:
    """A NameServer started with `shoal namesrv -c namesrv.conf` and short connection timeouts."""
    running = Cluster(tmp_path, free_port(), 0, 0)
    conf = tmp_path / "namesrv.conf"
    conf.write_text(
        f"listenHost=127.0.0.1\nlistenPort={running.namesrv_port}\n"
        f"serverChannelMaxIdleTimeSeconds={IDLE_S}\nserverChannelPartialFrameTimeoutSeconds={PARTIAL_FRAME_S}\n"
        "maxConnections=100\n"
    )
    running._spawn("namesrv", ["namesrv", "-c", str(conf)], running.namesrv_port, "NameServer listening")
    yield running
    running.stop_all()


def test_unknown_request_codes_get_request_code_not_supported(namesrv: Cluster) -> None:
    """Goal: the NameServer never leaves a request unanswered. Method: an unknown code and codes
    RocketMQ's NameServer knows but Shoal's does not; each answers REQUEST_CODE_NOT_SUPPORTED
    with RocketMQ's remark."""

    async def run() -> None:
        client = RemotingClient()
        for code in (9999, RequestCode.GET_KVLIST_BY_NAMESPACE, RequestCode.GET_UNIT_TOPIC_LIST):
            response = await client.invoke(namesrv.namesrv_addr, code, {}, timeout_s=5.0)
            assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            assert response.remark == f" request type {int(code)} not supported"
        await client.close()

    asyncio.run(run())


def test_namesrv_config_can_be_read_and_updated(namesrv: Cluster) -> None:
    """Goal: GET_NAMESRV_CONFIG and UPDATE_NAMESRV_CONFIG as RocketMQ's. Method: read the file's
    values back; refuse a path key (NO_PERMISSION), a bad value and an unknown key (SYSTEM_ERROR);
    apply a good update and read it back."""

    async def run() -> None:
        client = RemotingClient()
        address = namesrv.namesrv_addr

        async def config() -> dict[str, str]:
            response = await client.invoke(address, RequestCode.GET_NAMESRV_CONFIG, {}, timeout_s=5.0)
            assert response.code == ResponseCode.SUCCESS
            lines = bytes(response.body or b"").decode().splitlines()
            return dict(line.split("=", 1) for line in lines)

        async def update(text: str) -> tuple[int, str | None]:
            response = await client.invoke(address, RequestCode.UPDATE_NAMESRV_CONFIG, {}, text.encode(), timeout_s=5.0)
            return response.code, response.remark

        before = await config()
        assert before["serverChannelMaxIdleTimeSeconds"] == str(IDLE_S) and before["maxConnections"] == "100"
        assert await update("kvConfigPath=/tmp/x\n") == (ResponseCode.NO_PERMISSION, "Can not update config path")
        code, remark = await update("maxConnections=0\n")
        assert code == ResponseCode.SYSTEM_ERROR and "maxConnections" in (remark or "")
        code, remark = await update("noSuchKey=1\n")
        assert code == ResponseCode.SYSTEM_ERROR and "noSuchKey" in (remark or "")
        assert await update("scanNotActiveBrokerInterval=5000\nmaxConnections=50\n") == (ResponseCode.SUCCESS, None)
        after = await config()
        assert after["scanNotActiveBrokerInterval"] == "5000" and after["maxConnections"] == "50"
        assert after["listenPort"] == before["listenPort"]
        await client.close()

    asyncio.run(run())


def test_idle_and_stalled_connections_to_the_namesrv_are_closed(namesrv: Cluster) -> None:
    """Goal: namesrv.conf's serverChannelMaxIdleTimeSeconds and partial-frame limit hold. Method:
    one idle connection, one that sends half a length prefix; both closed in time."""

    async def run() -> None:
        opened_s = time.monotonic()
        idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", namesrv.namesrv_port)
        stalled_reader, stalled_writer = await asyncio.open_connection("127.0.0.1", namesrv.namesrv_port)
        stalled_writer.write(struct.pack(">i", 64)[:2])
        stalled_s = await seconds_until_closed(stalled_reader, PARTIAL_FRAME_S + SCAN_SLACK_S, opened_s)
        idle_s = await seconds_until_closed(idle_reader, IDLE_S + SCAN_SLACK_S, opened_s)
        assert stalled_s >= PARTIAL_FRAME_S * 0.9, stalled_s
        assert idle_s >= IDLE_S * 0.9, idle_s
        idle_writer.close()
        stalled_writer.close()

    asyncio.run(run())
    log = namesrv.log("namesrv")
    assert "closed 0 connections idle over 2 s (serverChannelMaxIdleTimeSeconds) and 1 with a request frame" in log
    assert "closed 1 connections idle over 2 s (serverChannelMaxIdleTimeSeconds) and 0 with a request frame" in log


def _request_from(
    source_host: str, address: str, code: int, ext_fields: dict[str, str], body: bytes
) -> RemotingCommand:
    """Send one request over a socket bound to `source_host` (another loopback address plays another
    machine) and return the answer."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5.0, source_address=(source_host, 0)) as sock:
        sock.sendall(encode_frame_bytes(make_request(code, opaque=1, ext_fields=ext_fields, body=body)))
        decoder = FrameDecoder()
        while True:
            chunk = sock.recv(65536)
            assert chunk, "the NameServer closed the connection without answering"
            answers = decoder.feed(chunk)
            if answers:
                return answers[0]


def _route_addrs(address: str, topic: str) -> dict[int, str]:
    async def ask() -> dict[int, str]:
        client = RemotingClient()
        try:
            response = await client.invoke(address, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, timeout_s=5.0)
        finally:
            await client.close()
        assert response.code == ResponseCode.SUCCESS, response.remark
        route = TopicRouteData.from_json(bytes(response.body or b""))
        return dict(route.broker_datas[0].broker_addrs)

    return asyncio.run(ask())


def test_a_registration_cannot_take_over_a_live_broker(cluster: Cluster) -> None:
    """Goal: the probe's hijack fails on the wire: REGISTER_BROKER carrying the live broker's name
    and id, from another address or another host, is refused with NO_PERMISSION and logged; the
    route keeps the real broker, also after the intruder's connection closes; UNREGISTER_BROKER
    from another host is refused too. Method: a real NameServer + Broker; raw requests from
    127.0.0.2 and 127.0.0.1."""
    topic = "TBW102"  # every broker registers it
    real = _route_addrs(cluster.namesrv_addr, topic)
    assert real == {0: cluster.broker_addr}
    broker_name = "broker-a"  # the default brokerName: the cluster fixture does not set one
    body = RegisterBrokerBody().to_json()
    for source, claimed in (
        ("127.0.0.1", "127.0.0.1:1"),
        ("127.0.0.2", "127.0.0.2:1"),
        ("127.0.0.2", cluster.broker_addr),
    ):
        header = RegisterBrokerRequestHeader(
            broker_name=broker_name,
            broker_addr=claimed,
            cluster_name="DefaultCluster",
            ha_server_addr=claimed,
            broker_id=0,
        )
        answer = _request_from(source, cluster.namesrv_addr, RequestCode.REGISTER_BROKER, header.to_ext_fields(), body)
        assert answer.code == ResponseCode.NO_PERMISSION, (source, claimed, answer.remark)
        assert answer.remark is not None and answer.remark.startswith("registration refused: ")
        assert _route_addrs(cluster.namesrv_addr, topic) == real
    unregister = UnregisterBrokerRequestHeader(
        broker_name=broker_name, broker_addr=cluster.broker_addr, cluster_name="DefaultCluster", broker_id=0
    )
    answer = _request_from(
        "127.0.0.2", cluster.namesrv_addr, RequestCode.UNREGISTER_BROKER, unregister.to_ext_fields(), b""
    )
    assert answer.code == ResponseCode.NO_PERMISSION, answer.remark
    time.sleep(1.0)  # the intruders' connections are closed: the real broker must still be routed
    assert _route_addrs(cluster.namesrv_addr, topic) == real
    assert "REGISTER_BROKER refused" in cluster.log("namesrv")
