"""One TCP connection speaking the remoting protocol: what both ends share.

`Connection` feeds received bytes to one `shoal.protocol.FrameDecoder`, matches responses to the
requests this side sent (by `opaque`, each wait bounded by its own timer) and hands every request
the peer sends to `handle_request`, which each end implements: `shoal.remoting.client` passes it to
a handler, the broker's `RemotingServer` routes it to a processor. A malformed frame closes only
its own connection (the frames decoded before it are still handled).
"""

from __future__ import annotations

import abc
import asyncio
import logging
from typing import cast

from shoal.protocol import FrameDecoder, FrameError, RemotingCommand, encode_frame
from shoal.remoting import limits
from shoal.remoting.errors import RemotingError, RemotingTimeoutError

log = logging.getLogger(__name__)

__all__ = ["Connection"]


class Connection(asyncio.Protocol, abc.ABC):
    """Frames in, responses matched to pending requests; requests from the peer to `handle_request`."""

    def __init__(self, address: str) -> None:
        self.address = address
        """The peer's "host:port"."""
        self.transport: asyncio.Transport | None = None
        self.decoder = FrameDecoder()
        self.pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        """Requests this side sent, by opaque, until their response arrives."""

    # --- asyncio.Protocol ---
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses

    def data_received(self, data: bytes) -> None:
        commands = self.decode(data)
        if commands is not None:
            for command in commands:
                self.receive(command)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        failure = RemotingError(f"connection to {self.address} closed" + (f": {exc}" if exc else ""))
        for future in self.pending.values():
            if not future.done():
                future.set_exception(failure)
        self.pending.clear()

    # --- frames in ---
    def decode(self, data: bytes) -> list[RemotingCommand] | None:
        """The commands completed by `data`; None when a malformed frame closed the connection
        (the commands decoded before it have been received)."""
        try:
            return self.decoder.feed(data)
        except FrameError as error:
            log.warning("closing %s: malformed frame: %s", self.address, error)
            for command in error.decoded_before:
                self.receive(command)
            self.close()
            return None

    def receive(self, command: RemotingCommand) -> None:
        """A response completes the request waiting for it (a late one is dropped); a request goes
        to `handle_request`."""
        if command.is_response:
            future = self.pending.pop(command.opaque, None)
            if future is not None and not future.done():
                future.set_result(command)
            return
        self.handle_request(command)

    @abc.abstractmethod
    def handle_request(self, command: RemotingCommand) -> None:
        """A request (or oneway) from the peer; each end decides what to do with it."""

    # --- frames out ---
    def send(self, command: RemotingCommand) -> None:
        if self.transport is None or self.transport.is_closing():
            raise RemotingError(f"connection to {self.address} is closed")
        self.transport.writelines(encode_frame(command))

    async def request(self, command: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send `command` and wait for its response: RemotingTimeoutError after `timeout_s`,
        RemotingError if the connection closes first."""
        if len(self.pending) >= limits.PENDING_REQUESTS_MAX_COUNT:
            raise RemotingError(f"{limits.PENDING_REQUESTS_MAX_COUNT} requests already pending on {self.address}")
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
