"""Asyncio transport for the remoting protocol, client side: connections, request/response by opaque.

`RemotingClient` keeps one connection per address (all traffic to a broker, long polls included,
is multiplexed on it, as RocketMQ clients do), matches responses to requests by `opaque`, and
hands requests that the server sends us (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE,
...) to a handler. Every wait is bounded by a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import cast

from shoal.client.errors import RemotingConnectError, RemotingError, RemotingTimeoutError
from shoal.protocol import (
    FrameDecoder,
    FrameError,
    RemotingCommand,
    encode_frame,
    make_request,
)

log = logging.getLogger(__name__)

__all__ = [
    "RemotingClient",
    "RemotingConnectError",
    "RemotingConnection",
    "RemotingError",
    "RemotingTimeoutError",
    "RequestHandler",
    "split_address",
]

CONNECT_TIMEOUT_S = 3.0
REQUEST_TIMEOUT_S = 3.0
PENDING_REQUESTS_MAX_COUNT = 65_536  # per connection; beyond this a caller is refused at once
_OPAQUE_MAX = 2**31 - 1

RequestHandler = Callable[["RemotingConnection", RemotingCommand], Awaitable[RemotingCommand | None]]


class RemotingConnection(asyncio.Protocol):
    """One TCP connection speaking the remoting protocol."""

    def __init__(self, address: str, handler: RequestHandler | None) -> None:
        self.address = address
        self.handler = handler
        self.transport: asyncio.Transport | None = None
        self.decoder = FrameDecoder()
        self.pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.closed = asyncio.get_running_loop().create_future()
        self._tasks: set[asyncio.Task[None]] = set()

    # --- asyncio.Protocol ---
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses

    def data_received(self, data: bytes) -> None:
        try:
            commands = self.decoder.feed(data)
        except FrameError as error:
            log.error("%s sent a malformed frame, closing: %s", self.address, error)
            for command in error.decoded_before:
                self._dispatch(command)
            self.close()
            return
        for command in commands:
            self._dispatch(command)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        failure = RemotingError(f"connection to {self.address} closed" + (f": {exc}" if exc else ""))
        for future in self.pending.values():
            if not future.done():
                future.set_exception(failure)
        self.pending.clear()
        if not self.closed.done():
            self.closed.set_result(None)

    # --- traffic ---
    def _dispatch(self, command: RemotingCommand) -> None:
        if command.is_response:
            future = self.pending.pop(command.opaque, None)
            if future is not None and not future.done():
                future.set_result(command)
            return
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

    def send(self, command: RemotingCommand) -> None:
        if self.transport is None or self.transport.is_closing():
            raise RemotingError(f"connection to {self.address} is closed")
        self.transport.writelines(encode_frame(command))

    async def request(self, command: RemotingCommand, timeout_s: float) -> RemotingCommand:
        if len(self.pending) >= PENDING_REQUESTS_MAX_COUNT:
            raise RemotingError(f"{PENDING_REQUESTS_MAX_COUNT} requests already pending on {self.address}")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[RemotingCommand] = loop.create_future()
        self.pending[command.opaque] = future
        # One timer per request, cheaper than asyncio.wait_for (which adds a task wrapper).
        timer = loop.call_later(timeout_s, _expire, future, self.address, command.code, timeout_s)
        try:
            self.send(command)
            return await future
        finally:
            timer.cancel()
            self.pending.pop(command.opaque, None)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    @property
    def is_open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()


def _expire(future: asyncio.Future[RemotingCommand], address: str, code: int, timeout_s: float) -> None:
    if not future.done():
        future.set_exception(
            RemotingTimeoutError(f"no response from {address} to request code {code} within {timeout_s:.1f} s")
        )


class RemotingClient:
    """Connections by address, created on first use and replaced when they close."""

    def __init__(
        self,
        *,
        handler: RequestHandler | None = None,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
    ) -> None:
        self.handler = handler
        self.connect_timeout_s = connect_timeout_s
        self._connections: dict[str, RemotingConnection] = {}
        self._connecting: dict[str, asyncio.Future[RemotingConnection]] = {}
        self._opaque = itertools.count(1)

    def next_opaque(self) -> int:
        return next(self._opaque) % _OPAQUE_MAX

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
            _transport, connection = await asyncio.wait_for(
                loop.create_connection(lambda: RemotingConnection(address, self.handler), host, port),
                self.connect_timeout_s,
            )
        except (OSError, TimeoutError, ValueError) as exc:
            raise RemotingConnectError(f"cannot connect to {address}: {exc or 'timed out'}") from None
        return connection

    async def invoke(
        self,
        address: str,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes | memoryview | None = None,
        *,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> RemotingCommand:
        """Send a request and wait for its response."""
        connection = await self.connection(address)
        request = make_request(code, opaque=self.next_opaque(), ext_fields=ext_fields, body=body)
        return await connection.request(request, timeout_s)

    async def invoke_oneway(
        self, address: str, code: int, ext_fields: Mapping[str, str] | None = None, body: bytes | None = None
    ) -> None:
        connection = await self.connection(address)
        connection.send(make_request(code, opaque=self.next_opaque(), ext_fields=ext_fields, body=body, oneway=True))

    def close_connection(self, address: str) -> None:
        connection = self._connections.pop(address, None)
        if connection is not None:
            connection.close()

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
