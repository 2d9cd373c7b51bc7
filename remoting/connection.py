"""One TCP connection speaking the remoting protocol: what both ends share.

`Connection` feeds received bytes to one `shoal.protocol.FrameDecoder`, matches responses to the
requests this side sent (by `opaque`, each wait bounded by its own deadline, swept by one timer) and hands every request
the peer sends to `handle_request`, which each end implements: `shoal.remoting.client` passes it to
a handler, the broker's `RemotingServer` routes it to a processor. A malformed frame closes only
its own connection (the frames decoded before it are still handled).
"""

from __future__ import annotations

import abc
import asyncio
import logging
import time
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
        self._outgoing: list[bytes | memoryview] | None = None
        """Frames queued during this turn of the event loop (see `send`); None before its first."""
        self._written_s = 0.0
        self._deadlines: dict[int, tuple[float, int, float]] = {}
        """Pending requests' (deadline on the loop clock, request code, timeout_s), by opaque."""
        self._sweep: asyncio.TimerHandle | None = None
        self._sweep_at_s = 0.0

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
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        failure = RemotingError(f"connection to {self.address} closed" + (f": {exc}" if exc else ""))
        for future in self.pending.values():
            if not future.done():
                future.set_exception(failure)
        self.pending.clear()
        self._deadlines.clear()

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
            opaque = command.opaque
            future = self.pending.pop(opaque, None)
            if future is not None:
                self._deadlines.pop(opaque, None)
                if not future.done():
                    future.set_result(command)
            return
        self.handle_request(command)

    @abc.abstractmethod
    def handle_request(self, command: RemotingCommand) -> None:
        """A request (or oneway) from the peer; each end decides what to do with it."""

    # --- frames out ---
    def send(self, command: RemotingCommand) -> None:
        """Write the frame, or queue it behind frames written less than
        `limits.WRITE_COALESCE_MAX_S` ago; whatever is queued goes out with the next write or at
        the end of this turn of the event loop.

        Pipelined sends (hundreds of tasks each sending one request in one turn) would otherwise
        pay one `send` system call per frame, the largest single cost of the client's send path.
        The bound keeps the peer busy meanwhile: holding every frame to the end of the turn made
        the two processes take turns instead of working at once (a pull consumer decoding 8
        responses sent its next 7 pulls a millisecond late). The first frame of a turn, and so a
        lone synchronous send, never waits."""
        transport = self.transport
        if transport is None or transport.is_closing():
            raise RemotingError(f"connection to {self.address} is closed")
        parts = encode_frame(command)
        outgoing = self._outgoing
        now_s = time.perf_counter()
        if outgoing is None:
            self._outgoing = []
            asyncio.get_running_loop().call_soon(self.flush)
        elif now_s - self._written_s < limits.WRITE_COALESCE_MAX_S:
            outgoing.extend(parts)
            return
        else:
            outgoing.extend(parts)
            parts = outgoing
            self._outgoing = []
        self._written_s = now_s
        transport.writelines(parts)

    def flush(self) -> None:
        """Write the frames queued by `send` this turn (nothing when none are, or the connection closed)."""
        outgoing = self._outgoing
        self._outgoing = None
        if outgoing and self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(outgoing)

    async def request(self, command: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send `command` and wait for its response: RemotingTimeoutError after `timeout_s`,
        RemotingError if the connection closes first."""
        future = self.request_soon(command, timeout_s)
        try:
            return await future
        finally:  # cancelled meanwhile: forget it now rather than at its response or deadline
            self.pending.pop(command.opaque, None)
            self._deadlines.pop(command.opaque, None)

    def request_soon(self, command: RemotingCommand, timeout_s: float) -> asyncio.Future[RemotingCommand]:
        """Send `command`; the future its response completes (RemotingTimeoutError after
        `timeout_s`, RemotingError if the connection closes first). No coroutine: a pipelined send
        awaits the future itself. The request is forgotten when its response arrives, the sweep
        fails it, or the connection closes."""
        if len(self.pending) >= limits.PENDING_REQUESTS_MAX_COUNT:
            raise RemotingError(f"{limits.PENDING_REQUESTS_MAX_COUNT} requests already pending on {self.address}")
        self.send(command)  # a closed connection raises here, before anything is registered
        loop = asyncio.get_running_loop()
        future: asyncio.Future[RemotingCommand] = loop.create_future()
        opaque = command.opaque
        self.pending[opaque] = future
        # No timer per request (a TimerHandle and a heap push and cancel each, a tenth of a
        # pipelined send's cost): one sweep per connection, due at the earliest deadline.
        deadline_s = loop.time() + timeout_s
        self._deadlines[opaque] = (deadline_s, command.code, timeout_s)
        if self._sweep is None or deadline_s < self._sweep_at_s:
            self._schedule_sweep(loop, deadline_s)
        return future

    def _schedule_sweep(self, loop: asyncio.AbstractEventLoop, at_s: float) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
        self._sweep = loop.call_at(at_s, self._expire_overdue)
        self._sweep_at_s = at_s

    def _expire_overdue(self) -> None:
        """Fail every request past its deadline (RemotingTimeoutError), then wait for the next."""
        self._sweep = None
        loop = asyncio.get_running_loop()
        now_s = loop.time()
        earliest_s: float | None = None
        for opaque, (deadline_s, code, timeout_s) in list(self._deadlines.items()):
            if deadline_s <= now_s:
                del self._deadlines[opaque]
                future = self.pending.pop(opaque, None)
                if future is not None and not future.done():
                    future.set_exception(
                        RemotingTimeoutError(
                            f"no response from {self.address} to request code {code} within {timeout_s:.1f} s"
                        )
                    )
            elif earliest_s is None or deadline_s < earliest_s:
                earliest_s = deadline_s
        if earliest_s is not None and self.transport is not None:
            self._schedule_sweep(loop, earliest_s)

    def close(self) -> None:
        if self.transport is not None:
            self.flush()  # frames queued this turn still go out, as they would have unqueued
            self.transport.close()

    @property
    def is_open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()
