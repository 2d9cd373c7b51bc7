"""The slave side of HA (RocketMQ's HAClient): follow a master's CommitLog over its HA port.

Connect to the master's HA address (haMasterAddress, else what the NameServer told us at
registration), optionally exchange the Shoal hello/state (epoch fencing: the `reconcile` hook may
truncate our store first), report our max offset, then append every frame that continues our
CommitLog. Frames are cut at record boundaries (`RecordAligner`), appended with
`CommitLog.append_raw`, flushed first when our own flush mode is SYNC_FLUSH, and reported back
after every batch and after `HASettings.keepalive_interval_s` of silence (haSendHeartbeatInterval,
at most 1 s). Our Dispatcher builds the ConsumeQueues and the index from the appended bytes. A link
that breaks the protocol, or whose master is gone (`liveness.py`: silent ANSWER_TIMEOUT_S past
its heartbeat cadence, or no state ANSWER_TIMEOUT_S after our hello), is closed and retried after
`haReconnectInterval`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from shoal.broker.replication import limits
from shoal.broker.replication.codec import (
    MasterState,
    RecordAligner,
    TransferDecoder,
    TransferFrame,
    encode_ack,
    encode_hello,
)
from shoal.broker.replication.errors import HAProtocolError, OffsetMismatchError, PeerSilentError, StaleEpochError
from shoal.broker.replication.liveness import Liveness
from shoal.broker.replication.settings import HASettings
from shoal.broker.replication.store_seam import ReplicaTarget
from shoal.remoting import limits as remoting_limits
from shoal.remoting import split_address

log = logging.getLogger(__name__)


@dataclass
class SlaveHooks:
    master_address: Callable[[], str | None]
    epoch: Callable[[], int]
    reconcile: Callable[[MasterState], Awaitable[None]]
    """Called with the master's state before we report an offset; may truncate, raises StaleEpochError."""
    on_appended: Callable[[], None]
    ask_address: Callable[[], None]
    """No master address yet: ask the NameServer again (register now) instead of waiting a period."""


class HAClient:
    def __init__(self, store: ReplicaTarget, settings: HASettings, hooks: SlaveHooks) -> None:
        self.store = store
        self.settings = settings
        self.hooks = hooks
        self.connected = False
        self.connected_address: str | None = None
        self.master_state: MasterState | None = None
        self.confirmed_offset = 0
        """The highest offset the master said a slave acknowledged (Shoal extension): a
        promotion never happens below it."""
        self.master_max_offset = 0
        """The master's end as last seen (state frames, or the end of the last frame)."""
        self.last_frame_s = 0.0
        self.caught_up_s = 0.0
        """When our end last matched the master's end we knew of."""
        self.bytes_received_total = 0
        self.dead_links_total = 0
        """Connections closed because the master was gone (silent past its heartbeat cadence)."""
        self._last_report_s = 0.0
        self.last_error = ""
        self._task: asyncio.Task[None] | None = None
        self._address_known = asyncio.Event()
        self.ssl_context: ssl.SSLContext | None = None
        """TLS to the master's HA port (Shoal's tls.ha.enable; RocketMQ's HA link is plain)."""

    def start(self) -> None:
        assert self._task is None, "started twice"
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ha-client")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.connected = False

    def wakeup(self) -> None:
        """The master's address may have changed (a registration answered)."""
        self._address_known.set()

    @property
    def running(self) -> bool:
        return self._task is not None

    @property
    def lag_bytes(self) -> int:
        return max(0, self.master_max_offset - self.store.wrote_offset)

    # --- connection loop ---
    async def _run(self) -> None:
        while True:
            address = self.hooks.master_address()
            if not address:
                self._address_known.clear()
                self.hooks.ask_address()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._address_known.wait(), self.settings.reconnect_interval_s)
                continue
            try:
                await self._connect_and_follow(address)
            except (HAProtocolError, PeerSilentError, StaleEpochError, OSError, TimeoutError, ValueError) as error:
                if isinstance(error, PeerSilentError):
                    self.dead_links_total += 1
                message = f"{type(error).__name__}: {error}"
                if message != self.last_error:
                    log.warning("replication from %s stopped: %s", address, message)
                self.last_error = message
            finally:
                if self.connected:
                    log.info("disconnected from master %s", address)
                self.connected = False
                self.connected_address = None
            await asyncio.sleep(self.settings.reconnect_interval_s)

    async def _connect_and_follow(self, address: str) -> None:
        host, port = split_address(address)
        tls = self.ssl_context
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                host,
                port,
                ssl=tls,
                server_hostname=host if tls is not None else None,
                ssl_handshake_timeout=remoting_limits.TLS_HANDSHAKE_TIMEOUT_S if tls is not None else None,
            ),
            limits.CONNECT_TIMEOUT_S + (remoting_limits.TLS_HANDSHAKE_TIMEOUT_S if tls is not None else 0.0),
        )
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await self._follow(address, reader, writer)
        finally:
            writer.close()

    async def _follow(self, address: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = TransferDecoder(limits.FRAME_BODY_MAX_BYTES, limits.EPOCH_HISTORY_MAX_COUNT)
        self.last_frame_s = time.monotonic()
        settings = self.settings
        liveness = Liveness(settings.heartbeat_interval_s, settings.housekeeping_interval_s, self.last_frame_s)
        if self.settings.extension_enable:
            writer.write(encode_hello(self.hooks.epoch()))
            await writer.drain()
            state = await self._first_state(reader, decoder)
            await self.hooks.reconcile(state)
            self._on_state(state)
        store = self.store
        aligner = RecordAligner(store.wrote_offset, store.segment_size, limits.PENDING_RECORD_MAX_BYTES)
        self.connected = True
        self.connected_address = address
        self.last_error = ""
        log.info("following master %s from offset %d", address, aligner.start_offset)
        self._report(writer)
        liveness.heard(time.monotonic(), unasked=False)  # the state came; reconciling took our time, not the master's
        watchdog = asyncio.create_task(self._watchdog(writer, liveness))
        try:
            while True:
                data = await reader.read(limits.SLAVE_READ_CHUNK_BYTES)
                if not data:
                    if watchdog.done() and not watchdog.cancelled() and watchdog.exception() is None:
                        raise PeerSilentError(watchdog.result())
                    raise ConnectionResetError("the master closed the connection")
                self.last_frame_s = time.monotonic()
                self.bytes_received_total += len(data)
                frames = decoder.feed(data)
                # Heartbeats alone come after the master's write silence: the gap shows its cadence.
                unasked = bool(frames) and all(isinstance(frame, TransferFrame) and not frame.body for frame in frames)
                liveness.heard(self.last_frame_s, unasked=unasked)
                if self._apply(frames, aligner):
                    if store.sync_flush:
                        await asyncio.to_thread(store.flush_to_end)
                    self._report(writer)
        finally:
            watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await watchdog

    async def _watchdog(self, writer: asyncio.StreamWriter, liveness: Liveness) -> str:
        """Reports after keepalive_interval_s of silence; closes the link once the master is gone
        (the reader then ends with this task's result as the reason). No timer per read."""
        keepalive_s = self.settings.keepalive_interval_s
        while True:
            await asyncio.sleep(limits.LIVENESS_CHECK_INTERVAL_S)
            now = time.monotonic()
            verdict = liveness.verdict(now)
            if verdict is not None:
                writer.transport.abort()
                return f"the master is gone: {verdict}"
            if now - self._last_report_s >= keepalive_s:
                self._report(writer)

    async def _first_state(self, reader: asyncio.StreamReader, decoder: TransferDecoder) -> MasterState:
        """The master's state, which a Shoal master sends as soon as it read our hello."""
        wait_s = min(limits.ANSWER_TIMEOUT_S, self.settings.housekeeping_interval_s)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                data = await asyncio.wait_for(
                    reader.read(limits.SLAVE_READ_CHUNK_BYTES), max(0.0, deadline - time.monotonic())
                )
            except TimeoutError:
                raise PeerSilentError(
                    f"the master sent no state within {wait_s:.1f} s of our hello (a dead link; or a RocketMQ "
                    "master: set haShoalExtensionEnable=false)"
                ) from None
            if not data:
                raise ConnectionResetError("the master closed the connection after our hello")
            frames = decoder.feed(data)
            if frames:
                first = frames[0]
                if not isinstance(first, MasterState) or len(frames) > 1:
                    raise HAProtocolError("the master sent data before its state")
                return first

    def _apply(self, frames: list[TransferFrame | MasterState], aligner: RecordAligner) -> bool:
        """Append the frames' whole records; True when our CommitLog grew."""
        store = self.store
        grew = False
        for frame in frames:
            if isinstance(frame, MasterState):
                current = self.master_state
                if current is not None and frame.epoch != current.epoch:
                    raise StaleEpochError(f"the master moved from epoch {current.epoch} to {frame.epoch}")
                self._on_state(frame)
                continue
            if not store.segment_count and aligner.pending_bytes == 0 and frame.offset != aligner.start_offset:
                self._begin_empty_log(frame.offset, aligner)
            start, ready = aligner.feed(frame.offset, frame.body)
            self.master_max_offset = max(self.master_max_offset, frame.offset + len(frame.body))
            if ready:
                try:
                    store.append_replicated(ready, start)
                except ValueError as error:
                    raise OffsetMismatchError(str(error)) from None
                grew = True
        if grew:
            self.hooks.on_appended()
        if store.wrote_offset >= self.master_max_offset:
            self.caught_up_s = time.monotonic()
        return grew

    def _begin_empty_log(self, offset: int, aligner: RecordAligner) -> None:
        """An empty slave takes whatever segment the master starts with (its last one, RocketMQ's rule)."""
        if offset % self.store.segment_size:
            raise OffsetMismatchError(f"an empty slave cannot start at {offset}: not a segment start")
        self.store.start_empty_at(offset)
        aligner.start_offset = offset
        log.info("empty CommitLog: replication starts at the master's segment %d", offset)

    def _on_state(self, state: MasterState) -> None:
        self.master_state = state
        self.confirmed_offset = max(self.confirmed_offset, state.confirmed_offset)
        self.master_max_offset = max(self.master_max_offset, state.max_offset)

    def _report(self, writer: asyncio.StreamWriter) -> None:
        """Tell the master our CommitLog end (its ack and where to continue)."""
        if writer.transport.get_write_buffer_size() > limits.SLAVE_WRITE_BUFFER_MAX_BYTES:
            writer.transport.abort()
            raise TimeoutError("the master does not read our reports")
        writer.write(encode_ack(self.store.wrote_offset))
        self._last_report_s = time.monotonic()
