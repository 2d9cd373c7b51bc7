"""The VIP channel (listenPort - 2): what it serves, what it withholds, and when it exists."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest

from shoal.broker.broker import BrokerController
from shoal.broker.config import load_broker_settings
from shoal.broker.vip_channel import VIP_WITHHELD_CODES
from shoal.protocol import PullSysFlag, RemotingCommand, RequestCode, ResponseCode, make_request
from shoal.protocol.headers import (
    GetMaxOffsetRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from shoal.remoting import RemotingClient
from shoal.remoting.server import RemotingServer, ServerConnection
from tests.conftest import Cluster

TOPIC = "VipTopic"


def _send_header(topic: str) -> dict[str, str]:
    return (
        SendMessageRequestHeader(
            producer_group="vip_producer",
            topic=topic,
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=0,
            sys_flag=0,
            born_timestamp_ms=1,
            flag=0,
        )
        .to_v2()
        .to_ext_fields()
    )


def _pull_header(topic: str) -> dict[str, str]:
    return PullMessageRequestHeader(
        consumer_group="vip_consumer",
        topic=topic,
        queue_id=0,
        queue_offset=0,
        max_msg_nums=32,
        sys_flag=PullSysFlag.SUBSCRIPTION,
        commit_offset=0,
        suspend_timeout_ms=0,
        sub_version=0,
        subscription="*",
    ).to_ext_fields()


def test_sibling_shares_processors_and_close_listeners_but_withholds_pulls() -> None:
    """Goal: a processor registered on the main listener serves on the VIP one too, except a
    withheld code, answered as an unknown code. Method: register after creating the sibling."""
    main = RemotingServer("broker")
    vip = main.sibling("broker-vip", withheld_codes=VIP_WITHHELD_CODES)
    answered = make_request(RequestCode.HEART_BEAT, opaque=1)
    main.register(RequestCode.HEART_BEAT, lambda connection, request: answered)
    main.register(RequestCode.PULL_MESSAGE, lambda connection, request: answered)
    connection = cast(ServerConnection, None)  # the processors above ignore it

    assert vip.process(connection, make_request(RequestCode.HEART_BEAT, opaque=2)) is answered
    refused = vip.process(connection, make_request(RequestCode.PULL_MESSAGE, opaque=3))
    assert isinstance(refused, RemotingCommand) and refused.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert main.process(connection, make_request(RequestCode.PULL_MESSAGE, opaque=4)) is answered
    assert vip.on_close is main.on_close
    assert vip.max_connections == main.max_connections
    assert {RequestCode.PULL_MESSAGE} == VIP_WITHHELD_CODES  # RocketMQ 4.9.7: only pulls


def test_vip_port_takes_sends_and_queries_but_not_pulls(cluster: Cluster) -> None:
    """Goal: a real broker listens on listenPort - 2, stores what is sent there, answers queries
    there and refuses pulls there as RocketMQ's fast server does. Method: raw requests on both
    ports of a `shoal broker` process."""
    vip = f"127.0.0.1:{cluster.broker_port - 2}"

    async def scenario() -> None:
        client = RemotingClient()
        try:
            sent = await client.invoke(vip, RequestCode.SEND_MESSAGE_V2, _send_header(TOPIC), b"through vip")
            assert sent.code == ResponseCode.SUCCESS, sent.remark
            offset = GetMaxOffsetRequestHeader(topic=TOPIC, queue_id=0).to_ext_fields()
            max_offset = await client.invoke(vip, RequestCode.GET_MAX_OFFSET, offset)
            assert max_offset.code == ResponseCode.SUCCESS and max_offset.ext_fields["offset"] == "1"
            refused = await client.invoke(vip, RequestCode.PULL_MESSAGE, _pull_header(TOPIC))
            assert refused.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            assert refused.remark == f" request type {int(RequestCode.PULL_MESSAGE)} not supported"
            pulled = await client.invoke(cluster.broker_addr, RequestCode.PULL_MESSAGE, _pull_header(TOPIC))
            assert pulled.code == ResponseCode.SUCCESS and b"through vip" in bytes(pulled.body or b"")
        finally:
            await client.close()

    asyncio.run(scenario())
    assert f"VIP channel: port {cluster.broker_port - 2}" in cluster.log("broker")


def test_fast_listen_port_zero_means_no_vip_channel(cluster_factory: Callable[[dict[str, str]], Cluster]) -> None:
    """Goal: fastListenPort=0 runs without the VIP listener. Method: start a broker with it; its
    listenPort - 2 refuses connections and the serving line says so."""
    running = cluster_factory({"fastListenPort": "0"})
    assert "VIP channel: none" in running.log("broker")

    async def connect() -> None:
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", running.broker_port - 2)

    asyncio.run(connect())


def test_ephemeral_listen_port_runs_without_vip_channel(tmp_path: Path) -> None:
    """Goal: `start(port=0)` (any free port) binds no VIP listener: clients derive port - 2 from
    the registered address, which no kernel-chosen port - 2 would serve. Method: an in-process
    broker on port 0 (no NameServer: registration retries in the background)."""
    settings = load_broker_settings(
        {
            "brokerIP1": "127.0.0.1",
            "listenHost": "127.0.0.1",
            "namesrvAddr": "127.0.0.1:9",
            "metricsPort": "-1",
            "haListenPort": "0",
            "storePathRootDir": str(tmp_path / "store"),
            "mappedFileSizeCommitLog": str(1024 * 1024),
            "maxMessageSize": str(64 * 1024),
            "maxIndexNum": "1000",
            "maxHashSlotNum": "100",
        }
    )

    async def scenario() -> None:
        broker = BrokerController(settings)
        await broker.start(port=0)
        try:
            assert broker.port > 0
            assert broker.vip_port == 0
            assert not broker.vip_server.connections
        finally:
            await broker.stop()

    asyncio.run(scenario())
