"""The proxy process's gRPC server: `MessagingService` on a grpc.aio server, started and stopped.

server = ProxyServer(ProxySettings(namesrv_addrs=("127.0.0.1:9876",), port=8081))
port = await server.start()
...
await server.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from shoal.acl import AccessValidator, AclFileWatcher, start_acl
from shoal.protocol import RemotingCommand
from shoal.protocol.acl_signature import Credentials
from shoal.protocol.v2 import definition_pb2 as v2
from shoal.protocol.v2.service_pb2_grpc import add_MessagingServiceServicer_to_server
from shoal.proxy.brokers import Brokers
from shoal.proxy.limits import BROKER_HEARTBEAT_INTERVAL_S, GRPC_MAX_MESSAGE_BYTES, GRPC_PORT
from shoal.proxy.service import PRODUCER_GROUP, MessagingService
from shoal.proxy.sessions import Sessions
from shoal.remoting.tls import ClientTlsSettings

log = logging.getLogger(__name__)

STOP_GRACE_S = 2.0
"""Calls in flight get this long to finish when the proxy stops."""


@dataclass(frozen=True, slots=True)
class ProxySettings:
    namesrv_addrs: tuple[str, ...]
    host: str = "0.0.0.0"
    port: int = GRPC_PORT
    """0: any free port (`start` returns it)."""
    advertised_host: str | None = None
    """The host QueryRoute tells clients to connect to; default `host`, or 127.0.0.1 for 0.0.0.0."""
    plain_acl_file: Path | None = None
    """Check every call against this plain_acl.yml (RocketMQ 5's `MQv2-HMAC-SHA1` signatures); reloaded
    when it changes. None: calls are not checked."""
    credentials: Credentials | None = None
    """The proxy's own account, signing its remoting requests to brokers that have aclEnable."""
    tls_cert: Path | None = None
    """PEM certificate (chain) of the gRPC port; with `tls_key`, the port speaks TLS only."""
    tls_key: Path | None = None
    check_message_type: bool = True
    """RocketMQ 5 proxy's enableTopicMessageTypeCheck: a send whose type (normal, FIFO, delay,
    transaction) is not its topic's `message.type` is refused with MESSAGE_PROPERTY_CONFLICT_WITH_TYPE."""
    remoting_tls: ClientTlsSettings = field(default_factory=ClientTlsSettings)
    """How the proxy connects to NameServers and brokers (tls.enable and tls.client.*)."""


def endpoints_of(host: str, port: int) -> v2.Endpoints:
    endpoints = v2.Endpoints(scheme=v2.IPv6 if ":" in host else v2.IPv4)
    endpoints.addresses.add(host=host, port=port)
    return endpoints


def check_bindable(host: str, port: int) -> None:
    """Raise the OSError a bind of (host, port) gets (EADDRINUSE, ...), worded as asyncio words it,
    so the CLI's one-line startup errors name the port; grpc itself only says "Failed to bind"."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as failure:
            raise OSError(
                failure.errno, f"{failure.strerror} (while attempting to bind on address ({host!r}, {port}))"
            ) from None


class ProxyServer:
    def __init__(self, settings: ProxySettings) -> None:
        self.settings = settings
        self.sessions = Sessions()
        self.brokers = Brokers(
            settings.namesrv_addrs,
            PRODUCER_GROUP,
            self._on_check,
            settings.credentials,
            settings.remoting_tls.context(),
        )
        self.acl: AccessValidator | None = None
        self._acl_watcher: AclFileWatcher | None = None
        if settings.plain_acl_file is not None:
            self.acl, self._acl_watcher = start_acl(str(settings.plain_acl_file), namesrv=False)
        self.port = 0
        self._server: grpc.aio.Server | None = None
        self._service: MessagingService | None = None
        self._heartbeats: asyncio.Task[None] | None = None

    async def _on_check(self, address: str, request: RemotingCommand) -> None:
        if self._service is not None:
            await self._service.check_transaction(address, request)

    async def _heartbeat_every_interval(self) -> None:
        while True:
            await asyncio.sleep(BROKER_HEARTBEAT_INTERVAL_S)
            await self.brokers.heartbeat()

    async def start(self) -> int:
        settings = self.settings
        options = [
            ("grpc.max_receive_message_length", GRPC_MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", GRPC_MAX_MESSAGE_BYTES),
        ]
        if settings.port:
            check_bindable(settings.host, settings.port)
        server = grpc.aio.server(options=options)
        address = f"{settings.host}:{settings.port}"
        try:
            if settings.tls_cert is not None and settings.tls_key is not None:
                pair = (settings.tls_key.read_bytes(), settings.tls_cert.read_bytes())
                self.port = server.add_secure_port(address, grpc.ssl_server_credentials([pair]))
            else:
                self.port = server.add_insecure_port(address)
        except RuntimeError as failure:  # grpc names no errno: the check above usually has
            raise OSError(f"cannot listen on {settings.host}:{settings.port}: {failure}") from None
        host = settings.advertised_host or ("127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host)
        service = MessagingService(
            self.brokers,
            endpoints_of(host, self.port),
            self.sessions,
            self.acl,
            check_message_type=settings.check_message_type,
        )
        add_MessagingServiceServicer_to_server(service, server)  # type: ignore[no-untyped-call]
        await server.start()
        self._server, self._service = server, service
        self._heartbeats = asyncio.get_running_loop().create_task(self._heartbeat_every_interval())
        if self._acl_watcher is not None:
            self._acl_watcher.start()
        log.info(
            "gRPC proxy (apache.rocketmq.v2.MessagingService) listening on %s:%d (%s)",
            settings.host,
            self.port,
            "TLS" if settings.tls_cert is not None else "plain",
        )
        return self.port

    async def stop(self) -> None:
        if self._acl_watcher is not None:
            await self._acl_watcher.stop()
        if self._heartbeats is not None:
            self._heartbeats.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeats
        if self._server is not None:
            await self._server.stop(STOP_GRACE_S)
            self._server = None
        await self.brokers.close()

    async def wait_closed(self) -> None:
        if self._server is not None:
            await self._server.wait_for_termination()
