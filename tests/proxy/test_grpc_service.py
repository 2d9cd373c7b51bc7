"""`shoal proxy` over real gRPC (the generated stubs, grpc.aio): answers for unknown topics, stale
and foreign receipt handles, settings, malformed requests, and many idle Telemetry streams."""

from __future__ import annotations

import asyncio
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from shoal.broker.config import load_broker_settings
from shoal.protocol.v2 import definition_pb2 as v2
from shoal.protocol.v2 import service_pb2 as rpc
from shoal.protocol.v2.service_pb2_grpc import MessagingServiceStub
from shoal.remoting.settings import ConfigError
from tests.conftest import Cluster, wait_until
from tests.ports import free_broker_port, free_port
from tests.tls_certs import make_tls_files

pytestmark = pytest.mark.slow

IDLE_STREAMS = 10_000
"""The issue's bar: this many open, idle Telemetry streams must not exhaust the proxy."""
CALL_TIMEOUT_S = 10.0
PROXY_RSS_BOUND_MIB = 1024
"""Measured: about 200 MiB with 10,000 streams (20 KiB each); 100 KiB or more per stream fails it."""


def resident_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(tmp_path, free_port(), free_broker_port(), free_port())
    running.start_namesrv()
    running.start_broker()
    running.start_proxy(free_port())
    yield running
    running.stop_all()


def run(coroutine) -> object:  # type: ignore[no-untyped-def]
    return asyncio.run(coroutine)


def test_unknown_topics_and_foreign_receipts_get_their_v2_codes(proxied: Cluster) -> None:
    async def scenario() -> None:
        async with grpc.aio.insecure_channel(proxied.proxy_addr) as channel:
            stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
            route = await stub.QueryRoute(
                rpc.QueryRouteRequest(topic=v2.Resource(name="NoSuchTopic")), timeout=CALL_TIMEOUT_S
            )
            assert route.status.code == v2.TOPIC_NOT_FOUND
            ack = rpc.AckMessageRequest(group=v2.Resource(name="G"), topic=v2.Resource(name="T"))
            ack.entries.add(message_id="x", receipt_handle="not-a-handle")
            acked = await stub.AckMessage(ack, timeout=CALL_TIMEOUT_S)
            assert acked.status.code == v2.INVALID_RECEIPT_HANDLE
            assert acked.entries[0].status.code == v2.INVALID_RECEIPT_HANDLE
            empty = await stub.SendMessage(rpc.SendMessageRequest(), timeout=CALL_TIMEOUT_S)
            assert empty.status.code == v2.BAD_REQUEST
            offset = await stub.GetOffset(rpc.GetOffsetRequest(), timeout=CALL_TIMEOUT_S)
            assert offset.status.code == v2.NOT_IMPLEMENTED  # offset-based RPCs: a status, not a crash
            pulled = [response async for response in stub.PullMessage(rpc.PullMessageRequest(), timeout=CALL_TIMEOUT_S)]
            assert [response.status.code for response in pulled] == [v2.NOT_IMPLEMENTED]

    run(scenario())


def test_a_producer_is_told_its_body_limit_in_the_settings_reply(proxied: Cluster) -> None:
    """A reply without max_body_size makes rocketmq-python-client refuse every send."""

    async def scenario() -> None:
        async with grpc.aio.insecure_channel(proxied.proxy_addr) as channel:
            stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
            call = stub.Telemetry(metadata=(("x-mq-client-id", "test@1"),))
            settings = v2.Settings(client_type=v2.PRODUCER)
            settings.publishing.topics.add(name="T")
            await call.write(rpc.TelemetryCommand(settings=settings))
            reply = await asyncio.wait_for(call.read(), CALL_TIMEOUT_S)
            assert reply.status.code == v2.OK
            assert reply.settings.publishing.max_body_size > 0
            assert reply.settings.publishing.validate_message_type is True  # the check is on by default
            await call.done_writing()

    run(scenario())


def v2_message(topic: str, kind: int, body: bytes, group: str = "") -> v2.Message:
    message = v2.Message(topic=v2.Resource(name=topic), body=body)
    system = message.system_properties
    system.message_id = "01" + body.hex().ljust(32, "0")[:32]
    system.body_encoding = v2.IDENTITY
    system.message_type = kind  # type: ignore[assignment]
    if group:
        system.message_group = group
    return message


def admin(cluster: Cluster, *arguments: str) -> str:
    """`shoal admin` as a user runs it."""
    command = [sys.executable, "-m", "shoal.cli.main", "admin", *arguments]
    done = subprocess.run(command, check=True, capture_output=True, text=True, timeout=60)
    return done.stdout


def test_a_send_must_match_its_topics_message_type(proxied: Cluster) -> None:
    """Goal: as RocketMQ 5's proxy (enableTopicMessageTypeCheck), a v5 send whose type is not its
    topic's `message.type` is refused with MESSAGE_PROPERTY_CONFLICT_WITH_TYPE and stores nothing;
    routes tell clients the type each queue accepts; a topic without the attribute is NORMAL.
    Method: `shoal admin topic-create -a +message.type=FIFO` and a plain topic; sends of each kind."""
    printed = admin(
        proxied, "topic-create", "-n", proxied.namesrv_addr, "--queues", "2", "-a", "+message.type=FIFO", "Fifo"
    )
    assert "+message.type=FIFO" in printed
    admin(proxied, "topic-create", "-n", proxied.namesrv_addr, "--queues", "2", "Plain")

    async def scenario() -> None:
        async with grpc.aio.insecure_channel(proxied.proxy_addr) as channel:
            stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
            for topic, accepted in (("Fifo", [v2.FIFO]), ("Plain", [v2.NORMAL])):
                route = await stub.QueryRoute(rpc.QueryRouteRequest(topic=v2.Resource(name=topic)), timeout=30)
                assert route.status.code == v2.OK, route.status
                assert {tuple(queue.accept_message_types) for queue in route.message_queues} == {tuple(accepted)}
            cases = [
                ("Fifo", v2.NORMAL, "", v2.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
                ("Fifo", v2.FIFO, "orders-1", v2.OK),
                ("Plain", v2.FIFO, "orders-1", v2.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
                ("Plain", v2.NORMAL, "", v2.OK),
            ]
            for index, (topic, kind, group, expected) in enumerate(cases):
                request = rpc.SendMessageRequest(messages=[v2_message(topic, kind, bytes([index]), group)])
                sent = await stub.SendMessage(request, timeout=30)
                assert sent.status.code == expected, (topic, kind, sent.status)
            refused = await stub.SendMessage(
                rpc.SendMessageRequest(messages=[v2_message("Fifo", v2.NORMAL, b"x")]), timeout=30
            )
            assert refused.status.message == (
                "TopicMessageType validate failed, the expected type is FIFO, but actual type is NORMAL"
            )

    run(scenario())
    stats = admin(proxied, "topic-stats", "-n", proxied.namesrv_addr, "Fifo")
    assert sum(int(line.split()[-1]) for line in stats.splitlines()) == 1  # only the FIFO send was stored


def test_the_type_check_can_be_turned_off(tmp_path: Path) -> None:
    """`shoal proxy --no-topic-message-type-check`: a FIFO send to a NORMAL topic passes, and
    producers are told not to validate either."""
    running = Cluster(tmp_path, free_port(), free_broker_port(), free_port())
    running.start_namesrv()
    running.start_broker()
    running.start_proxy(free_port(), "--no-topic-message-type-check")
    try:
        admin(running, "topic-create", "-n", running.namesrv_addr, "--queues", "2", "Plain")

        async def scenario() -> None:
            async with grpc.aio.insecure_channel(running.proxy_addr) as channel:
                stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
                request = rpc.SendMessageRequest(messages=[v2_message("Plain", v2.FIFO, b"f", "g")])
                sent = await stub.SendMessage(request, timeout=30)
                assert sent.status.code == v2.OK, sent.status
                call = stub.Telemetry(metadata=(("x-mq-client-id", "test@2"),))
                settings = v2.Settings(client_type=v2.PRODUCER)
                settings.publishing.topics.add(name="Plain")
                await call.write(rpc.TelemetryCommand(settings=settings))
                reply = await asyncio.wait_for(call.read(), CALL_TIMEOUT_S)
                assert reply.settings.publishing.validate_message_type is False
                await call.done_writing()

        run(scenario())
    finally:
        running.stop_all()


def test_malformed_bytes_get_a_grpc_status_and_the_proxy_serves_on(proxied: Cluster) -> None:
    async def scenario() -> None:
        async with grpc.aio.insecure_channel(proxied.proxy_addr) as channel:
            raw = channel.unary_unary(
                "/apache.rocketmq.v2.MessagingService/SendMessage",
                request_serializer=lambda data: data,
                response_deserializer=rpc.SendMessageResponse.FromString,
            )
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await raw(b"\xff\xff\xff\xff not protobuf", timeout=CALL_TIMEOUT_S)
            assert failed.value.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)
            stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
            route = await stub.QueryRoute(rpc.QueryRouteRequest(topic=v2.Resource(name="Nope")), timeout=CALL_TIMEOUT_S)
            assert route.status.code == v2.TOPIC_NOT_FOUND

    run(scenario())


def test_ten_thousand_idle_telemetry_streams_do_not_exhaust_the_proxy(proxied: Cluster) -> None:
    """Goal: a fleet of connected, idle clients (each holds a Telemetry stream) costs the proxy a
    bounded amount and it keeps answering. Method: open 10,000 streams over a few channels (HTTP/2
    multiplexes them), then ask for a route; the proxy process must still be alive."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    channels_needed = 20

    async def scenario() -> None:
        channels = [grpc.aio.insecure_channel(proxied.proxy_addr) for _ in range(channels_needed)]
        calls = []
        try:
            settings = rpc.TelemetryCommand(settings=v2.Settings(client_type=v2.SIMPLE_CONSUMER))
            for index in range(IDLE_STREAMS):  # as a client starts: its settings, the server's reply
                stub = MessagingServiceStub(channels[index % channels_needed])  # type: ignore[no-untyped-call]
                call = stub.Telemetry(metadata=(("x-mq-client-id", f"idle@{index}"),))
                await call.write(settings)
                reply = await asyncio.wait_for(call.read(), 60)
                assert reply.status.code == v2.OK
                calls.append(call)
            stub = MessagingServiceStub(channels[0])  # type: ignore[no-untyped-call]
            route = await stub.QueryRoute(rpc.QueryRouteRequest(topic=v2.Resource(name="Nope")), timeout=60)
            assert route.status.code == v2.TOPIC_NOT_FOUND
            rss_mib = resident_mib(proxied.processes["proxy"].pid)
            print(f"proxy resident memory with {IDLE_STREAMS} idle streams: {rss_mib:.0f} MiB")
            assert rss_mib < PROXY_RSS_BOUND_MIB
        finally:
            for call in calls:
                call.cancel()
            for channel in channels:
                await channel.close()

    assert soft > channels_needed * 4, (soft, hard)
    run(scenario())
    assert proxied.alive("proxy")


def test_a_broker_serves_v5_clients_from_its_own_process(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Goal: `shoal broker --grpc-port` (RocketMQ 5's local proxy mode) answers gRPC beside remoting.
    Method: start a broker with it, create a topic by a send, ask QueryRoute over gRPC."""
    running = Cluster(tmp_path, free_port(), free_broker_port(), free_port())
    grpc_port = free_port()
    running.start_namesrv()
    running.start_broker({}, "--grpc-port", str(grpc_port))
    try:
        wait_until(lambda: f"gRPC proxy listening on port {grpc_port}" in running.log("broker"), 30, 0.1)

        async def scenario() -> None:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
                stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
                route = await stub.QueryRoute(rpc.QueryRouteRequest(topic=v2.Resource(name="TBW102")), timeout=30)
                assert route.status.code == v2.OK, route.status
                assert {queue.broker.name for queue in route.message_queues} == {"broker-a"}
                endpoint = route.message_queues[0].broker.endpoints.addresses[0]
                assert (endpoint.host, endpoint.port) == ("127.0.0.1", grpc_port)

        run(scenario())
    finally:
        running.stop_all()


def test_grpc_server_port_in_broker_conf_serves_tls_with_the_brokers_certificate(tmp_path: Path) -> None:
    """Goal: broker.conf's grpcServerPort turns on the local proxy (what the operator writes), and a
    broker in tls.server.mode=enforcing serves gRPC with its own certificate, TLS only, while the
    proxy reaches the TLS-only broker and NameServer over TLS. Method: a TLS-only NameServer and
    broker; QueryRoute and a send over a channel that trusts the test CA; a plain channel fails."""
    files = make_tls_files(tmp_path / "tls")
    tls = {
        "tls.server.mode": "enforcing",
        "tls.server.certPath": str(files.server_cert),
        "tls.server.keyPath": str(files.server_key),
    }
    running = Cluster(tmp_path, free_port(), free_broker_port(), free_port())
    grpc_port = free_port()
    namesrv_conf = tmp_path / "namesrv.conf"
    namesrv_conf.write_text("".join(f"{key}={value}\n" for key, value in {"listenHost": "127.0.0.1", **tls}.items()))
    running._spawn(
        "namesrv",
        ["namesrv", "-c", str(namesrv_conf), "--port", str(running.namesrv_port)],
        running.namesrv_port,
        "listening",
    )
    try:
        running.start_broker({**tls, "grpcServerPort": str(grpc_port)})
        wait_until(lambda: f"gRPC proxy listening on port {grpc_port}" in running.log("broker"), 30, 0.1)
        credentials = grpc.ssl_channel_credentials(root_certificates=files.ca.read_bytes())

        async def scenario() -> None:
            async with grpc.aio.secure_channel(f"127.0.0.1:{grpc_port}", credentials) as channel:
                stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
                route = await stub.QueryRoute(rpc.QueryRouteRequest(topic=v2.Resource(name="TBW102")), timeout=30)
                assert route.status.code == v2.OK, route.status
                message = v2.Message(topic=v2.Resource(name="TBW102"), body=b"over tls")
                message.system_properties.message_id = "01" + "0" * 30
                message.system_properties.body_encoding = v2.IDENTITY
                message.system_properties.message_type = v2.NORMAL
                sent = await stub.SendMessage(rpc.SendMessageRequest(messages=[message]), timeout=30)
                assert sent.status.code == v2.OK, sent.status
            async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as plain:
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await MessagingServiceStub(plain).QueryRoute(  # type: ignore[no-untyped-call]
                        rpc.QueryRouteRequest(topic=v2.Resource(name="TBW102")), timeout=5
                    )
                assert refused.value.code() == grpc.StatusCode.UNAVAILABLE

        run(scenario())
    finally:
        running.stop_all()


def test_grpc_server_port_on_another_ports_number_is_refused_in_one_line(tmp_path: Path) -> None:
    """Goal: grpcServerPort equal to one of the broker's own ports is a startup error naming both
    keys, not a bind failure later. Method: grpcServerPort = metricsPort."""
    running = Cluster(tmp_path, free_port(), free_broker_port(), free_port())
    settings = {"listenPort": str(running.broker_port), "metricsPort": str(running.metrics_port)}
    settings["grpcServerPort"] = settings["metricsPort"]
    with pytest.raises(ConfigError, match=r"^grpcServerPort=\d+ is not allowed: it equals metricsPort"):
        load_broker_settings(settings, root_dir=tmp_path)
