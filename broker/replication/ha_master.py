"""The master side of HA (RocketMQ's AcceptSocketService + HAConnection): serve CommitLog bytes to
slaves on the HA port and collect their acks.

One connection = one `SlaveLink` with a reader task (acks, the optional Shoal hello) and a writer
task (frames). The writer starts where the slave asked (the beginning of our last segment when
it asked for 0, as RocketMQ does), sends at most `haTransferBatchSize` bytes per frame from one
segment, never re-sends what it sent on this connection, waits for the socket to drain past a
high-water mark (bounded memory per slave), and sends a heartbeat after
`HASettings.keepalive_interval_s` of silence (haSendHeartbeatInterval, at most 1 s). Bad input
(a negative offset, an offset beyond our end, a second hello) closes that one connection with a
log line; nothing a peer sends reaches the store except as a read position. So does a slave
that is gone (`liveness.py`): data it has not acked for ANSWER_TIMEOUT_S, or silence that long
past its cadence. Then the waiting SYNC_MASTER sends are answered at once (`on_slave_lost`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from shoal.broker.replication import limits
from shoal.broker.replication.codec import (
    MasterState,
    SlaveStreamDecoder,
    encode_state,
    encode_transfer_header,
)
from shoal.broker.replication.errors import HAProtocolError, PeerSilentError
from shoal.broker.replication.liveness import Liveness
from shoal.broker.replication.settings import HASettings
from shoal.broker.replication.store_seam import ReplicaSource
from shoal.remoting.tls_listener import PLAIN_TLS, ServerTls, TlsListener

log = logging.getLogger(__name__)


class Wakeup:
    """Wake every task waiting for news (new CommitLog data, a slave's first offset), with a bound."""

    def __init__(self) -> None:
        self._waiters: set[asyncio.Future[None]] = set()

    async def wait(self, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._waiters.add(future)
        timer = loop.call_later(max(0.0, timeout_s), _finish, future)
        try:
            await future
        finally:
            timer.cancel()
            self._waiters.discard(future)

    @property
    def waiting(self) -> bool:
        return bool(self._waiters)

    def notify(self) -> None:
        if self._waiters:
            waiters = list(self._waiters)
            self._waiters.clear()
            for future in waiters:
                _finish(future)


def _finish(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@dataclass
class SlaveLink:
    """One slave connection as the master sees it."""

    address: str
    liveness: Liveness
    connected_at_s: float = field(default_factory=time.monotonic)
    request_offset: int = -1
    """Where the slave asked us to start (its first report); -1 until it reported."""
    ack_offset: int = -1
    """The slave's last report: every byte before it is on the slave."""
    next_transfer_offset: int = -1
    extended: bool = False
    """The slave spoke the Shoal hello: it gets state frames (epoch, confirmed offset)."""
    epoch: int = -1
    bytes_sent_total: int = 0
    wakeup: Wakeup = field(default_factory=Wakeup)

    @property
    def reported(self) -> bool:
        return self.ack_offset >= 0


@dataclass
class MasterHooks:
    """What the HA server needs from the rest of the broker."""

    is_master: Callable[[], bool]
    state: Callable[[], MasterState]
    on_ack: Callable[[int], None]
    on_newer_epoch: Callable[[int, str], None]
    """A slave came from a newer epoch than ours: we may be a fenced master."""
    on_slave_lost: Callable[[], None]
    """A slave connection closed (the waiting sends may have no slave left)."""


class HAServer:
    def __init__(self, source: ReplicaSource, settings: HASettings, hooks: MasterHooks) -> None:
        self.source = source
        self.settings = settings
        self.hooks = hooks
        self.links: dict[int, SlaveLink] = {}
        self.new_data = Wakeup()
        self.port = 0
        self.rejected_total = 0
        self.dead_links_total = 0
        """Connections closed because the slave was gone (overdue with an ack or a report)."""
        self._server: asyncio.AbstractServer | None = None
        self._tls_listener: TlsListener | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int, *, tls: ServerTls = PLAIN_TLS) -> int:
        """Listen for slaves; with `tls` (Shoal's tls.ha.enable) TLS per tls.server.mode."""
        if tls.sniffs:
            sock = socket.create_server((host, port))
            self._tls_listener = TlsListener(
                "HA",
                tls,
                self._stream_protocol,
                first_byte_timeout_s=self.settings.housekeeping_interval_s,
                pending_max_count=limits.SLAVE_CONNECTIONS_MAX_COUNT,
            )
            self._tls_listener.start(sock)
            self.port = int(sock.getsockname()[1])
        else:
            self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
            self.port = int(self._server.sockets[0].getsockname()[1])
        log.info("HA listener on %s:%d (%s)", host, self.port, tls.describe())
        return self.port

    def _stream_protocol(self) -> asyncio.StreamReaderProtocol:
        """What asyncio.start_server makes per connection: a reader and `_serve` with its writer."""
        return asyncio.StreamReaderProtocol(asyncio.StreamReader(), self._serve)

    async def stop(self) -> None:
        if self._tls_listener is not None:
            await self._tls_listener.stop()
            self._tls_listener = None
        if self._server is not None:
            self._server.close()
        self.close_all()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    def close_all(self) -> None:
        """Drop every slave connection (stopping, or no longer master)."""
        for task in list(self._tasks):
            task.cancel()

    def notify_new_data(self) -> None:
        self.new_data.notify()

    # --- state read by the waiter, metrics and admin ---
    def slave_ok(self, master_offset: int, acked_offset: int) -> bool:
        """RocketMQ's isSlaveOK: a slave connected and less than haSlaveFallbehindMax behind `master_offset`.

        A reported slave is judged by its own ack. One connected but silent yet counts too, judged by
        `acked_offset` (the best ack of this term, RocketMQ's push2SlaveMaxOffset): RocketMQ's
        HAClient first reports haSendHeartbeatInterval (5 s) after it connects, and a RocketMQ
        master waits for such a slave (connectionCount > 0) instead of answering SLAVE_NOT_AVAILABLE."""
        fallbehind = self.settings.slave_fallbehind_max_bytes
        return any(
            master_offset - (link.ack_offset if link.reported else acked_offset) < fallbehind
            for link in self.links.values()
        )

    @property
    def connected_count(self) -> int:
        return sum(1 for link in self.links.values() if link.reported)

    # --- one connection ---
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = writer.get_extra_info("peername")
        address = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        if len(self.links) >= limits.SLAVE_CONNECTIONS_MAX_COUNT or not self.hooks.is_master():
            self.rejected_total += 1
            log.warning(
                "HA connection from %s refused: %s",
                address,
                "this broker is not a master" if not self.hooks.is_master() else "too many slave connections",
            )
            writer.close()
            return
        self._tasks.add(task)
        settings = self.settings
        link = SlaveLink(
            address, Liveness(settings.heartbeat_interval_s, settings.housekeeping_interval_s, time.monotonic())
        )
        self.links[id(link)] = link
        _tune(writer)
        log.info("slave %s connected to the HA port", address)
        reason = "stopped"
        dead = False
        read = asyncio.create_task(self._read_loop(link, reader))
        write = asyncio.create_task(self._write_loop(link, writer))
        try:
            done, _pending = await asyncio.wait({read, write}, return_when=asyncio.FIRST_COMPLETED)
            for finished in done:
                error = finished.exception()
                reason = str(error) if error is not None else finished.result() or reason
                dead = dead or isinstance(error, PeerSilentError)
        except asyncio.CancelledError:
            reason = "connection closed by this broker"
        finally:
            for job in (read, write):
                job.cancel()
            await asyncio.gather(read, write, return_exceptions=True)
            if dead:
                self.dead_links_total += 1
                writer.transport.abort()  # it would never take the bytes still queued
            else:
                writer.close()
            del self.links[id(link)]
            self._tasks.discard(task)
            self.hooks.on_slave_lost()
        level = logging.INFO if reason.startswith("closed by") else logging.WARNING
        log.log(level, "slave %s disconnected (acked up to %d): %s", address, link.ack_offset, reason)

    async def _read_loop(self, link: SlaveLink, reader: asyncio.StreamReader) -> str:
        """Acks (and the hello); silence is judged by the writer, which wakes at least every
        NEW_DATA_POLL_S (no timer per read: acks arrive thousands of times a second)."""
        decoder = SlaveStreamDecoder()
        liveness = link.liveness
        while True:
            data = await reader.read(limits.MASTER_READ_CHUNK_BYTES)
            if not data:
                return "closed by the slave"
            # A report that answers no data of ours is the slave's periodic one: it shows its cadence.
            unasked = link.reported and liveness.answer_due_s is None
            hello, offset = decoder.feed(data)
            if hello is not None:
                self._on_hello(link, hello.epoch)
            if offset is not None:
                self._on_offset(link, offset)
            still_owed = link.bytes_sent_total > 0 and link.next_transfer_offset > link.ack_offset
            liveness.heard(time.monotonic(), unasked=unasked, still_owed=still_owed)

    def _on_hello(self, link: SlaveLink, epoch: int) -> None:
        if link.reported:
            raise HAProtocolError("a hello after offsets")
        own = self.hooks.state().epoch
        if epoch > own:
            self.hooks.on_newer_epoch(epoch, link.address)
            raise HAProtocolError(
                f"the slave follows epoch {epoch}, newer than ours ({own}): this master may be fenced"
            )
        link.extended = True
        link.epoch = epoch
        link.wakeup.notify()

    def _on_offset(self, link: SlaveLink, offset: int) -> None:
        if offset < 0:
            raise HAProtocolError(f"the slave reported a negative offset {offset}")
        master_max = self.source.max_offset
        if offset > master_max:
            raise HAProtocolError(
                f"the slave reported offset {offset}, beyond our CommitLog end {master_max}: it holds bytes this "
                "master never wrote (a wrong pairing, or this master lost its tail); rejected"
            )
        if link.request_offset < 0:
            start = self.source.min_offset
            if 0 < offset < start:
                raise HAProtocolError(
                    f"the slave asks for offset {offset} but our CommitLog starts at {start} (older segments were "
                    "deleted): it cannot catch up; empty its store to let it copy from our last segment"
                )
            link.request_offset = offset
            log.info("slave %s asks for data from offset %d", link.address, offset)
            link.wakeup.notify()
        link.ack_offset = offset
        self.hooks.on_ack(offset)

    async def _write_loop(self, link: SlaveLink, writer: asyncio.StreamWriter) -> str:
        state_sent: tuple[int, int] | None = None
        while link.request_offset < 0:
            self._check_alive(link)
            if link.extended and state_sent is None:
                writer.write(encode_state(self.hooks.state()))
                state_sent = (-1, -1)
            await link.wakeup.wait(limits.NEW_DATA_POLL_S)
        link.next_transfer_offset = self._start_offset(link.request_offset)
        heartbeat_s = self.settings.keepalive_interval_s
        last_write_s = time.monotonic()
        while True:
            parts: list[bytes] = []
            if link.extended:
                current = self.hooks.state()
                if state_sent != (current.epoch, current.confirmed_offset):
                    parts.append(encode_state(current))
                    state_sent = current.epoch, current.confirmed_offset
            sent = self._take_batches(link, parts)
            now = time.monotonic()
            if sent:
                link.liveness.expect_answer(now)  # every slave acks a frame as soon as it appended it
            elif now - last_write_s >= heartbeat_s:
                parts.append(encode_transfer_header(link.next_transfer_offset, 0))
            if parts:
                writer.writelines(parts)
                last_write_s = now
            self._check_alive(link)
            if sent:
                await asyncio.sleep(0)  # a slave catching up must not keep the loop from serving requests
            else:
                await self.new_data.wait(min(heartbeat_s - (now - last_write_s), limits.NEW_DATA_POLL_S))
            await self._drain(link, writer)

    async def _drain(self, link: SlaveLink, writer: asyncio.StreamWriter) -> None:
        """Wait for the socket to take our frames below the high-water mark, while the slave lives."""
        while writer.transport.get_write_buffer_size() > limits.MASTER_WRITE_BUFFER_HIGH_BYTES:
            self._check_alive(link)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(writer.drain(), limits.NEW_DATA_POLL_S)

    def _check_alive(self, link: SlaveLink) -> None:
        verdict = link.liveness.verdict(time.monotonic())
        if verdict is not None:
            raise PeerSilentError(f"the slave is gone: {verdict}")

    def _start_offset(self, request_offset: int) -> int:
        if request_offset != 0:
            return request_offset
        end = self.source.max_offset
        return max(end - end % self.source.segment_size, self.source.min_offset)

    def _take_batches(self, link: SlaveLink, parts: list[bytes]) -> bool:
        """Frames of the data not sent yet, at most WRITE_ROUND_MAX_BYTES (one write for several
        frames: fewer system calls); a frame never crosses a segment. False: nothing new."""
        batch_bytes = self.settings.transfer_batch_bytes
        taken = 0
        while taken < limits.WRITE_ROUND_MAX_BYTES:
            offset = link.next_transfer_offset
            if offset >= self.source.max_offset:
                break
            found = self.source.data_from(offset)
            if found is None:
                break
            view, _segment_start = found
            try:
                size = min(len(view), batch_bytes)
                if size == 0:
                    break
                parts += (encode_transfer_header(offset, size), bytes(view[:size]))
            finally:
                view.release()
            link.next_transfer_offset = offset + size
            link.bytes_sent_total += size
            taken += size
        return taken > 0


def _tune(writer: asyncio.StreamWriter) -> None:
    transport = writer.transport
    transport.set_write_buffer_limits(high=limits.MASTER_WRITE_BUFFER_HIGH_BYTES)
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
