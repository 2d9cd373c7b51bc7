"""Asyncio transport for the remoting protocol, server side (NameServer and Broker).

Each connection is a `shoal.remoting.Connection` (frames decoded and responses matched to requests
as on the client side) that hands requests to the processor registered for their code.
Processors are plain functions that return the response (the fast path: no task per request) or
an awaitable of it (sends that wait for a group commit, parked pulls), which then runs as a task,
so responses may leave out of order as RocketMQ's do. A response is a `RemotingCommand`, or the
whole frame already encoded (`bytes`: the send path's answers, `shoal.protocol.send_frames`).

Large responses (pulls) are written with `socket.sendmsg` straight from the CommitLog's
memoryviews when the transport has nothing buffered, so record bytes are never copied.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import cast

from shoal.protocol import (
    HeaderFieldError,
    ProtocolError,
    RemotingCommand,
    ResponseCode,
    encode_frame,
    encode_frame_with_body_parts,
    make_response,
)
from shoal.remoting import Connection, limits
from shoal.remoting.tls_listener import PLAIN_TLS, ServerTls, TlsListener

log = logging.getLogger(__name__)

Response = RemotingCommand | bytes | None
"""A command, an encoded frame, or None (no answer)."""
Processor = Callable[["ServerConnection", RemotingCommand], Response | Awaitable[Response]]
RunProcessor = Callable[
    ["ServerConnection", list[RemotingCommand]], Sequence[Response | Awaitable[Response] | Exception]
]
"""Answers a run of requests of one code, one answer per request in order (`register_run`): a
response, an awaitable of one, or the exception handling that request raised."""
ConnectionListener = Callable[["ServerConnection"], None]
Gate = Callable[[str, RemotingCommand], RemotingCommand | None]
"""(peer host, request) -> None to go on, or the response that refuses it."""


class Verdict(enum.Enum):
    PASSED = "passed"
    """`RemotingServer.gate_all`'s verdict on a request the gate let through."""


class ServerConnection(Connection):
    """A connection a client opened: its requests go to the server's processors."""

    def __init__(self, server: RemotingServer) -> None:
        super().__init__("")
        self.server = server
        self.peer_host = ""
        self.peer_port = 0
        self.last_active_s = time.monotonic()
        self.partial_frame_since_s = 0.0
        """When the request frame still incomplete began to arrive; 0 when none is."""
        self._raw: socket.socket | None = None
        self.tls = False
        """Whether this connection runs over TLS (then every write goes through the transport)."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._held: list[bytes] | None = None
        """While one read's requests are handled: their small answers, written together after the last."""

    @property
    def requests_in_progress(self) -> int:
        return len(self._tasks)

    # --- asyncio.Protocol ---
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.peer_host, self.peer_port = str(peer[0]), int(peer[1])
        self.address = f"{self.peer_host}:{self.peer_port}"
        transport.set_write_buffer_limits(high=limits.CONNECTION_WRITE_BUFFER_HIGH_BYTES)
        sock = transport.get_extra_info("socket")
        self.tls = transport.get_extra_info("ssl_object") is not None
        if self.tls and sock is not None:  # no raw socket: sendmsg would write around the TLS layer
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        elif sock is not None:
            try:
                self._raw = socket.socket(fileno=sock.fileno())
                self._raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                self._raw = None
        if not self.server.accept(self):
            transport.close()

    def data_received(self, data: bytes) -> None:
        now = self.last_active_s = time.monotonic()
        commands = self.decode(data)
        if commands is None:
            return
        if not self.decoder.buffered_bytes:
            self.partial_frame_since_s = 0.0
        elif commands or not self.partial_frame_since_s:
            self.partial_frame_since_s = now  # a new frame began in this chunk
        if len(commands) == 1:
            self.receive(commands[0])
            return
        # Several requests in one read (a pipelining client): the answers given while handling
        # them leave in one write system call, not one each (11% of the loop's time under load).
        held: list[bytes] = []
        self._held = held
        try:
            if self.server.gate is None:
                self._receive_all(commands, None)
            else:
                self._receive_all(commands, self.server.gate_all(self.peer_host, commands))
        finally:
            self._held = None
            self._write_held(held)

    def _receive_all(
        self, commands: list[RemotingCommand], verdicts: list[RemotingCommand | Verdict | None] | None
    ) -> None:
        """The requests of one read. Consecutive requests of a code with a run processor
        (`RemotingServer.register_run`: sends) go to it together, so what does not change from one
        request to the next is looked up once per run. With a gate (the ACL check), its verdicts on
        all of them come first (`gate_all`): back to back, its code and the signature's hashing
        stay in the CPU caches; interleaved with the processors, each check cost twice its cost in
        a loop (measured with `bench/acl.py`)."""
        runs = self.server.run_processors
        count = len(commands)
        index = 0
        while index < count:
            command = commands[index]
            verdict = None if verdicts is None else verdicts[index]
            run_processor = runs.get(command.code) if runs else None
            if (
                run_processor is not None
                and not command.is_response
                and (verdicts is None or verdict is Verdict.PASSED)
                and command.code not in self.server.withheld_codes
            ):
                end = index + 1
                while (
                    end < count
                    and commands[end].code == command.code
                    and not commands[end].is_response
                    and (verdicts is None or verdicts[end] is Verdict.PASSED)
                ):
                    end += 1
                if end - index > 1:
                    self._handle_run(run_processor, commands[index:end])
                    index = end
                    continue
            if verdicts is None or verdict is None:
                self.receive(command)
            elif verdict is Verdict.PASSED:
                self.handle_request(command, gated=True)
            else:
                self.reply(verdict, command)
            index += 1

    def _handle_run(self, run_processor: RunProcessor, requests: list[RemotingCommand]) -> None:
        """Requests of one code, in order, past the gate: the run processor answers each (it
        catches what one request raises, so the others are still answered)."""
        self.server.requests_total += len(requests)
        try:
            results = run_processor(self, requests)
        except Exception:  # a bug outside the per-request handling: nothing is known to be stored
            log.exception("requests code %d from %s failed", requests[0].code, self.address)
            for request in requests:
                self._reply_error(request, RuntimeError("internal error"))
            return
        for request, result in zip(requests, results, strict=True):
            if isinstance(result, RemotingCommand | bytes):
                self.reply(result, request)
            elif isinstance(result, Exception):
                if not isinstance(result, ProtocolError):
                    log.error(
                        "request code %d from %s failed",
                        request.code,
                        self.address,
                        exc_info=(type(result), result, result.__traceback__),
                    )
                self._reply_error(request, result)
            elif result is not None:
                self._answer_later(request, result)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self._raw is not None:
            self._raw.detach()  # the fd belongs to the transport
            self._raw = None
        for task in list(self._tasks):
            task.cancel()
        self.server.forget(self)

    # --- requests ---
    def handle_request(self, command: RemotingCommand, *, gated: bool = False) -> None:
        """Process `command`; `gated`: the server's gate has already let it through."""
        try:
            result = self.server.process(self, command, gated=gated)
        except ProtocolError as error:
            self._reply_error(command, error)
            return
        except Exception as error:
            log.exception("request code %d from %s failed", command.code, self.address)
            self._reply_error(command, error)
            return
        if inspect.isawaitable(result):
            self._answer_later(command, result)
        elif result is not None:
            self.reply(result, command)

    def _answer_later(self, command: RemotingCommand, pending: Awaitable[Response]) -> None:
        """Answer once `pending` is done (a task), or SYSTEM_BUSY at once when too many wait."""
        if len(self._tasks) >= limits.PENDING_TASKS_PER_CONNECTION_MAX_COUNT:
            if inspect.iscoroutine(pending):
                pending.close()
            self.reply(make_response(command, ResponseCode.SYSTEM_BUSY, "[OVERLOAD]system busy"), command)
            return
        task = asyncio.get_running_loop().create_task(self._finish(command, pending))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish(self, command: RemotingCommand, pending: Awaitable[Response]) -> None:
        try:
            response = await pending
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.exception("request code %d from %s failed", command.code, self.address)
            self._reply_error(command, error)
            return
        if response is not None:
            self.reply(response, command)

    def _reply_error(self, command: RemotingCommand, error: Exception) -> None:
        remark = (
            str(error) if isinstance(error, ProtocolError) else f"internal error: {error.__class__.__name__}: {error}"
        )
        code = ResponseCode.SYSTEM_ERROR
        if isinstance(error, HeaderFieldError):
            remark = f"invalid request header: {error}"
        self.reply(make_response(command, code, remark), command)

    def reply(self, response: RemotingCommand | bytes, request: RemotingCommand) -> None:
        """Send `response` (a command or its encoded frame) unless the request was oneway."""
        if request.is_oneway:
            return
        if isinstance(response, bytes):
            transport = self.transport
            if transport is not None and not transport.is_closing():
                self.write_parts((response,))
                self.last_active_s = time.monotonic()
            return
        self.send(response)

    def send(self, command: RemotingCommand, body_parts: Sequence[bytes | memoryview] | None = None) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        try:
            parts = encode_frame(command) if body_parts is None else encode_frame_with_body_parts(command, body_parts)
        except ProtocolError as error:
            log.error("cannot encode response code %d to %s: %s", command.code, self.address, error)
            parts = encode_frame(make_response(command, ResponseCode.SYSTEM_ERROR, f"response too large: {error}"))
        self.write_parts(parts)
        self.last_active_s = time.monotonic()

    def write_parts(self, parts: Sequence[bytes | memoryview]) -> None:
        """Gather-write when possible (no copy of record bytes), else one buffered write."""
        transport = self.transport
        if transport is None:  # closed meanwhile: nothing to write to
            return
        total = len(parts[0]) if len(parts) == 1 else sum(len(part) for part in parts)
        held = self._held
        if held is not None:
            if total < limits.GATHER_WRITE_MIN_BYTES:
                # Joined now: a pull's parts are views of the CommitLog, released once `send` returns.
                held.append(parts[0] if len(parts) == 1 and isinstance(parts[0], bytes) else b"".join(parts))
                return
            self._write_held(held)  # what was answered first is written first
        raw = self._raw
        if raw is not None and total >= limits.GATHER_WRITE_MIN_BYTES and transport.get_write_buffer_size() == 0:
            try:
                sent = raw.sendmsg(parts)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as error:
                log.info("write to %s failed: %s", self.address, error)
                transport.close()
                return
            if sent >= total:
                return
            transport.write(_remainder(parts, sent))
            return
        transport.write(parts[0] if len(parts) == 1 else b"".join(parts))

    def _write_held(self, held: list[bytes]) -> None:
        if not held:
            return
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.write(held[0] if len(held) == 1 else b"".join(held))
        held.clear()


def _remainder(parts: Sequence[bytes | memoryview], sent: int) -> bytes:
    """The bytes of `parts` after the first `sent` (copied: only the unsent tail)."""
    pieces: list[bytes | memoryview] = []
    for part in parts:
        size = len(part)
        if sent >= size:
            sent -= size
            continue
        pieces.append(memoryview(part)[sent:] if sent else part)
        sent = 0
    return b"".join(pieces)


class RemotingServer:
    """Listens on one port; routes requests by code to processors. Bounded: at most
    `max_connections` at once; a connection idle (no read, no write, nothing in progress) for
    `idle_timeout_s`, or whose request frame is still incomplete `partial_frame_timeout_s` after it
    began, is closed."""

    def __init__(
        self,
        name: str,
        *,
        max_connections: int = limits.SERVER_CONNECTIONS_DEFAULT_MAX_COUNT,
        idle_timeout_s: float = limits.SERVER_CHANNEL_MAX_IDLE_DEFAULT_S,
        partial_frame_timeout_s: float = limits.PARTIAL_FRAME_TIMEOUT_DEFAULT_S,
    ) -> None:
        self.name = name
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self.partial_frame_timeout_s = partial_frame_timeout_s
        self.processors: dict[int, Processor] = {}
        self.run_processors: dict[int, RunProcessor] = {}
        self.withheld_codes: frozenset[int] = frozenset()
        """Codes this listener answers as unknown although a processor is registered (`sibling`)."""
        self.gate: Gate | None = None
        """Checked before any processor (the ACL: `shoal.acl`); its answer refuses the request.
        None (aclEnable=false): nothing extra runs per request."""
        self.connections: set[ServerConnection] = set()
        self.on_close: list[ConnectionListener] = []
        self._server: asyncio.AbstractServer | None = None
        self._tls_listener: TlsListener | None = None
        self._stale_task: asyncio.Task[None] | None = None
        self.requests_total = 0
        self.refused_total = 0
        """Connections closed at once because `max_connections` were open."""
        self.closed_idle_total = 0
        self.closed_partial_frame_total = 0
        self._refused_since_full = 0  # > 0 while the cap holds (one log line when hit, one when it lifts)

    def sibling(self, name: str, *, withheld_codes: frozenset[int]) -> RemotingServer:
        """A second listener with the same limits that shares this one's processors and close
        listeners (registrations on either reach both), except `withheld_codes`, which it answers
        as unknown codes: RocketMQ's VIP channel (fastRemotingServer) serves no pulls."""
        other = RemotingServer(
            name,
            max_connections=self.max_connections,
            idle_timeout_s=self.idle_timeout_s,
            partial_frame_timeout_s=self.partial_frame_timeout_s,
        )
        other.processors = self.processors
        other.run_processors = self.run_processors
        other.on_close = self.on_close
        other.withheld_codes = withheld_codes
        return other

    def register(self, code: int, processor: Processor) -> None:
        self.processors[int(code)] = processor

    def register_run(self, code: int, processor: Processor, run_processor: RunProcessor) -> None:
        """`register`, plus a processor for several requests of `code` read together (pipelined
        sends): it must answer each as `processor` would."""
        self.register(code, processor)
        self.run_processors[int(code)] = run_processor

    def accept(self, connection: ServerConnection) -> bool:
        if len(self.connections) >= self.max_connections:
            self.refused_total += 1
            if not self._refused_since_full:
                log.warning(
                    "%s: maxConnections=%d reached: new connections are closed at once until some close "
                    "(first refused: %s)",
                    self.name,
                    self.max_connections,
                    connection.address,
                )
            self._refused_since_full += 1
            return False
        self.connections.add(connection)
        return True

    def forget(self, connection: ServerConnection) -> None:
        if connection in self.connections:
            self.connections.discard(connection)
            if self._refused_since_full:
                log.warning(
                    "%s: below maxConnections=%d again, accepting connections (%d refused meanwhile)",
                    self.name,
                    self.max_connections,
                    self._refused_since_full,
                )
                self._refused_since_full = 0
            for listener in self.on_close:
                try:
                    listener(connection)
                except Exception:
                    log.exception("connection-close listener failed")

    def gate_all(self, peer_host: str, commands: Sequence[RemotingCommand]) -> list[RemotingCommand | Verdict | None]:
        """The gate's verdict on each of `commands`, in order: Verdict.PASSED, the refusal (counted as a
        request answered), or None where `process` decides (responses, codes answered as unknown)."""
        gate = self.gate
        processors = self.processors
        withheld = self.withheld_codes
        verdicts: list[RemotingCommand | Verdict | None] = []
        for command in commands:
            code = command.code
            if gate is None or command.is_response or code not in processors or code in withheld:
                verdicts.append(None)
                continue
            try:
                refused = gate(peer_host, command)
            except Exception:  # `process` runs the gate again, and answers its error as it answers any
                verdicts.append(None)
                continue
            if refused is None:
                verdicts.append(Verdict.PASSED)
            else:
                self.requests_total += 1
                verdicts.append(refused)
        return verdicts

    def process(
        self, connection: ServerConnection, command: RemotingCommand, *, gated: bool = False
    ) -> Response | Awaitable[Response]:
        """The processor's answer to `command`; `gated`: the gate has already let it through."""
        self.requests_total += 1
        processor = self.processors.get(command.code)
        if processor is None or command.code in self.withheld_codes:
            return self.unsupported(command)
        gate = self.gate
        if gate is not None and not gated:
            refused = gate(connection.peer_host, command)
            if refused is not None:
                return refused
        return processor(connection, command)

    def unsupported(self, command: RemotingCommand) -> Response:
        """RocketMQ's answer to an unknown request code (spec §8.2)."""
        return make_response(
            command, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {command.code} not supported"
        )

    async def start(
        self, host: str, port: int, *, sock: socket.socket | None = None, tls: ServerTls = PLAIN_TLS
    ) -> int:
        """Listen on host:port, or on an already bound `sock` (so the port is known before start).
        A port with a TLS certificate tells TLS from plain by the first byte (`TlsListener`); one
        without is served by the event loop's own server."""
        loop = asyncio.get_running_loop()
        if tls.sniffs:
            if sock is None:
                sock = socket.create_server((host, port), backlog=limits.LISTEN_BACKLOG_MAX_COUNT)
            self._tls_listener = TlsListener(
                self.name,
                tls,
                lambda: ServerConnection(self),
                first_byte_timeout_s=self.idle_timeout_s,
                pending_max_count=self.max_connections,
            )
            self._tls_listener.start(sock)
            bound = int(sock.getsockname()[1])
        else:
            if sock is not None:
                self._server = await loop.create_server(lambda: ServerConnection(self), sock=sock)
            else:
                self._server = await loop.create_server(lambda: ServerConnection(self), host, port, reuse_address=True)
            sockets = self._server.sockets
            bound = int(sockets[0].getsockname()[1]) if sockets else port
        self._stale_task = loop.create_task(self._close_stale_loop())
        log.info("%s listening on %s:%d (%s)", self.name, host, bound, tls.describe())
        return bound

    @property
    def stale_scan_interval_s(self) -> float:
        """How often `close_stale` runs: half the shorter timeout, within the named bounds."""
        half = min(self.idle_timeout_s, self.partial_frame_timeout_s) / 2
        return min(max(half, limits.STALE_SCAN_INTERVAL_MIN_S), limits.STALE_SCAN_INTERVAL_MAX_S)

    async def _close_stale_loop(self) -> None:
        while True:
            await asyncio.sleep(self.stale_scan_interval_s)
            self.close_stale(time.monotonic())

    def close_stale(self, now_s: float) -> None:
        """Close connections idle past `idle_timeout_s` (none of their requests in progress) and
        those whose request frame has been arriving for longer than `partial_frame_timeout_s`;
        one log line per scan that closed any."""
        idle_before = now_s - self.idle_timeout_s
        partial_before = now_s - self.partial_frame_timeout_s
        idle = partial = 0
        for connection in list(self.connections):
            since = connection.partial_frame_since_s
            if since and since < partial_before:
                partial += 1
            elif connection.last_active_s < idle_before and not connection.requests_in_progress:
                idle += 1
            else:
                continue
            connection.close()
        if idle or partial:
            self.closed_idle_total += idle
            self.closed_partial_frame_total += partial
            log.info(
                "%s: closed %d connections idle over %.0f s (serverChannelMaxIdleTimeSeconds) and %d with a "
                "request frame incomplete over %.0f s (serverChannelPartialFrameTimeoutSeconds)",
                self.name,
                idle,
                self.idle_timeout_s,
                partial,
                self.partial_frame_timeout_s,
            )

    async def stop(self) -> None:
        if self._stale_task is not None:
            self._stale_task.cancel()
        if self._tls_listener is not None:
            await self._tls_listener.stop()
            self._tls_listener = None
            for connection in list(self.connections):
                connection.close()
        if self._server is not None:
            self._server.close()
            for connection in list(self.connections):
                connection.close()
            await self._server.wait_closed()
            self._server = None
