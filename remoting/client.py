"""The client side of remoting connections: connections by address, requests and responses.

`RemotingClient` keeps one connection per address (all traffic to a broker, long polls included,
is multiplexed on it, as RocketMQ clients do), matches responses to requests by `opaque`, and
hands requests that the server sends us (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE,
...) to a handler. Every wait is bounded by a timeout. Used by `shoal.client` (which translates
these errors into its own tree) and by the broker (registration with NameServers, slave sync,
promotion).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import NoReturn

from shoal.protocol import RemotingCommand, make_request
from shoal.protocol.acl_signature import Credentials
from shoal.remoting import limits
from shoal.remoting.connection import Connection
from shoal.remoting.errors import RemotingConnectError, RemotingError

log = logging.getLogger(__name__)

__all__ = ["RemotingClient", "RemotingConnection", "RequestHandler", "split_address"]

RequestHandler = Callable[["RemotingConnection", RemotingCommand], Awaitable[RemotingCommand | None]]


class RemotingConnection(Connection):
    """A connection this side opened; requests from the server go to `handler` (one task each)."""

    def __init__(self, address: str, handler: RequestHandler | None) -> None:
        super().__init__(address)
        self.handler = handler
        self.closed = asyncio.get_running_loop().create_future()
        self._tasks: set[asyncio.Task[None]] = set()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self.closed.done():
            self.closed.set_result(None)

    def handle_request(self, command: RemotingCommand) -> None:
        if self.handler is None:
            return
        task = asyncio.get_running_loop().create_task(self._handle(command))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, command: RemotingCommand) -> None:
        assert self.handler is not None
        try:
            response = await self.handler(self, command)
        except Exception:
            log.exception("handling request code %d from %s failed", command.code, self.address)
            return
        if response is not None and not command.is_oneway:
            self.send(response)


class RemotingClient:
    """Connections by address, created on first use and replaced when they close."""

    def __init__(
        self,
        *,
        handler: RequestHandler | None = None,
        connect_timeout_s: float = limits.CONNECT_TIMEOUT_S,
        credentials: Credentials | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.ssl_context = ssl_context
        """TLS for every connection (`shoal.remoting.tls.ClientTlsSettings.context`); None: plain."""
        self.handler = handler
        self.connect_timeout_s = connect_timeout_s
        self.credentials = credentials
        """When set, every request this client sends is ACL-signed (Java's AclClientRPCHook)."""
        self._connections: dict[str, RemotingConnection] = {}
        self._connecting: dict[str, asyncio.Future[RemotingConnection]] = {}
        self._opaque = itertools.count(1)

    def next_opaque(self) -> int:
        return next(self._opaque) % limits.OPAQUE_MAX

    async def connection(self, address: str) -> RemotingConnection:
        existing = self._connections.get(address)
        if existing is not None and existing.is_open:
            return existing
        pending = self._connecting.get(address)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[RemotingConnection] = asyncio.get_running_loop().create_future()
        self._connecting[address] = future
        try:
            connection = await self._connect(address)
            self._connections[address] = connection
            future.set_result(connection)
            return connection
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters get it through shield
            raise
        finally:
            del self._connecting[address]

    async def _connect(self, address: str) -> RemotingConnection:
        loop = asyncio.get_running_loop()
        try:
            host, port = split_address(address)
            tls = self.ssl_context
            _transport, connection = await asyncio.wait_for(
                loop.create_connection(
                    lambda: RemotingConnection(address, self.handler),
                    host,
                    port,
                    ssl=tls,
                    server_hostname=host if tls is not None else None,
                    ssl_handshake_timeout=limits.TLS_HANDSHAKE_TIMEOUT_S if tls is not None else None,
                ),
                self.connect_timeout_s + (limits.TLS_HANDSHAKE_TIMEOUT_S if tls is not None else 0.0),
            )
        except (OSError, TimeoutError, ValueError) as exc:  # ssl.SSLError is an OSError
            what = " over TLS" if self.ssl_context is not None else ""
            reason = str(exc) or ("timed out" if isinstance(exc, TimeoutError) else type(exc).__name__)
            if what and isinstance(exc, ConnectionError | ssl.SSLEOFError):
                reason += " (the server closed the TLS handshake: does that port serve TLS?)"
            raise RemotingConnectError(f"cannot connect to {address}{what}: {reason}") from None
        return connection

    async def invoke(
        self,
        address: str,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes | memoryview | None = None,
        *,
        timeout_s: float = limits.REQUEST_TIMEOUT_S,
    ) -> RemotingCommand:
        """Send a request and wait for its response."""
        try:
            connection = self._connections.get(address)
            if connection is None or not connection.is_open:  # else no coroutine to look it up
                connection = await self.connection(address)
            return await connection.request(self._signed(code, ext_fields, body), timeout_s)
        except RemotingError as error:
            self.failed(error)

    def invoke_soon(
        self,
        address: str,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes | memoryview | None = None,
        *,
        timeout_s: float = limits.REQUEST_TIMEOUT_S,
    ) -> asyncio.Future[RemotingCommand] | None:
        """`invoke` without its coroutines, when `address` has an open connection: the request is
        sent, and the future its response completes is returned (a RemotingError it raises goes to
        `failed`, as `invoke`'s do). None when there is no open connection: call `invoke`."""
        connection = self._connections.get(address)
        if connection is None or not connection.is_open:
            return None
        try:
            return connection.request_soon(self._signed(code, ext_fields, body), timeout_s)
        except RemotingError as error:
            self.failed(error)

    async def invoke_oneway(
        self, address: str, code: int, ext_fields: Mapping[str, str] | None = None, body: bytes | None = None
    ) -> None:
        try:
            connection = await self.connection(address)
            connection.send(self._signed(code, ext_fields, body, oneway=True))
        except RemotingError as error:
            self.failed(error)

    def _signed(
        self, code: int, ext_fields: Mapping[str, str] | None, body: bytes | memoryview | None, *, oneway: bool = False
    ) -> RemotingCommand:
        """A new request with the next opaque, signed when this client has credentials."""
        request = make_request(code, opaque=self.next_opaque(), ext_fields=ext_fields, body=body, oneway=oneway)
        if self.credentials is not None:
            self.credentials.sign(request.ext_fields, body)
        return request

    def failed(self, error: RemotingError) -> NoReturn:
        """How a failed `invoke` reaches its caller: `error` itself here; a subclass may translate it
        into its own exception tree (shoal.client does, in one place)."""
        raise error

    async def close(self) -> None:
        connections = list(self._connections.values())
        self._connections.clear()
        for connection in connections:
            connection.close()
        for connection in connections:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(connection.closed), 1.0)


def split_address(address: str) -> tuple[str, int]:
    """("host", port) of "host:port", "[v6]:port" or Java's bracketless "v6:port"."""
    host, separator, port = address.rpartition(":")
    if not separator or not port.isdigit():
        raise ValueError(f"address {address!r} is not host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)
