"""Serving one listening socket per `tls.server.mode`: TLS and plain told apart by the first byte.

RocketMQ's NettyRemotingServer puts a HandshakeHandler first in every channel: it looks at the
first byte the client sends, and 0x16 (a TLS handshake record) adds an SslHandler. `permissive`
serves both; `enforcing` closes a connection that starts plain; `disabled` closes one that
starts a handshake. Here the listener accepts raw sockets, waits until the first byte arrives,
peeks at it (MSG_PEEK leaves it in the kernel) and then hands the socket to the event loop as a
plain or a TLS transport, with the same protocol either way.

    tls = ServerTls.from_settings(settings.server)     # TlsConfigError before anything binds
    listener = TlsListener("broker", tls, protocol_factory, limits...)
    listener.start(bound_socket)                       # only when tls.sniffs; else create_server

Only a port that has a certificate sniffs; one without (disabled, or permissive with no
certificate) is served by `loop.create_server` exactly as before, so the plain path keeps its
cost. A plain connection is a plain transport either way (the pull path's `sendmsg` on the raw
socket stays available); a TLS one is never written around its TLS layer (ServerConnection checks).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from shoal.remoting import limits
from shoal.remoting.tls import TLS_HANDSHAKE_FIRST_BYTE, ServerTlsSettings, TlsConfigError, TlsMode

log = logging.getLogger(__name__)

ProtocolFactory = Callable[[], asyncio.BaseProtocol]


@dataclass
class ServerTls:
    """What a port does with TLS: the mode and, when it serves TLS, the context. Shared by the
    ports of one process; `reload_if_changed` swaps the context when the files change."""

    mode: TlsMode = TlsMode.DISABLED
    context: ssl.SSLContext | None = None
    settings: ServerTlsSettings | None = None
    """Where the context came from; None: never reloaded."""
    stamps: tuple[tuple[int, int], ...] = ()
    """(mtime_ns, size) of the certificate, key and trust files the context was built from."""
    reloads_total: int = 0
    _failed_stamps: tuple[tuple[int, int], ...] = ()

    @classmethod
    def from_settings(cls, settings: ServerTlsSettings) -> ServerTls:
        """TlsConfigError (one line) for a missing, unreadable or mismatched file."""
        stamps = _stamps(settings)
        return cls(settings.mode, settings.context(), settings, stamps)

    @property
    def sniffs(self) -> bool:
        return self.context is not None

    def reload_if_changed(self) -> bool:
        """Build a new context when the certificate, key or trust file changed (RocketMQ reloads its
        SslContext on such changes, FileWatchService). A set that does not load yet (the key
        written after the certificate, say) keeps the old context and is logged once; the next
        check tries again. New connections get the new context; open ones keep theirs."""
        if self.settings is None or self.context is None:
            return False
        stamps = _stamps(self.settings)
        if stamps in (self.stamps, self._failed_stamps):
            return False
        try:
            context = self.settings.context()
        except TlsConfigError as error:
            self._failed_stamps = stamps
            log.warning("TLS certificate files changed but do not load (keeping the current ones): %s", error)
            return False
        self.context, self.stamps, self._failed_stamps = context, stamps, ()
        self.reloads_total += 1
        log.info("TLS certificate files changed: new connections use them")
        return True

    def describe(self) -> str:
        if self.context is None:
            if self.mode is TlsMode.DISABLED:
                return "TLS disabled"
            return f"TLS {self.mode.value}, but no certificate (tls.server.certPath/keyPath): plain only"
        return f"TLS {self.mode.value}"


PLAIN_TLS = ServerTls()


def _stamps(settings: ServerTlsSettings) -> tuple[tuple[int, int], ...]:
    """(mtime_ns, size) of each file the server context reads; (-1, -1) for one that is missing."""
    result = []
    for path in (settings.cert_path, settings.key_path, settings.trust_cert_path):
        try:
            status = os.stat(path) if path else None
        except OSError:
            status = None
        result.append((status.st_mtime_ns, status.st_size) if status is not None else (-1, -1))
    return tuple(result)


class TlsListener:
    """The accept loop of one port that serves TLS (permissive or enforcing)."""

    def __init__(
        self,
        name: str,
        tls: ServerTls,
        protocol_factory: ProtocolFactory,
        *,
        first_byte_timeout_s: float,
        pending_max_count: int,
    ) -> None:
        assert tls.context is not None
        self.name = name
        self.tls = tls
        self.protocol_factory = protocol_factory
        self.first_byte_timeout_s = first_byte_timeout_s
        self.pending_max_count = pending_max_count
        self.tls_total = 0
        self.plain_total = 0
        self.refused_plain_total = 0
        self.failed_handshakes_total = 0
        self._logged: set[tuple[str, str]] = set()
        """(what, peer host) already logged: a refused plain connection and a failed handshake, once each per host."""
        self._listener: socket.socket | None = None
        self._accept_task: asyncio.Task[None] | None = None
        self._watch_task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()

    def start(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._listener = sock
        loop = asyncio.get_running_loop()
        self._accept_task = loop.create_task(self._accept_loop(sock))
        self._watch_task = loop.create_task(self._watch_loop())

    async def stop(self) -> None:
        if self._watch_task is not None:
            self._watch_task.cancel()
            self._watch_task = None
        if self._accept_task is not None:
            self._accept_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accept_task
            self._accept_task = None
        for task in list(self._pending):
            task.cancel()
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    async def _watch_loop(self) -> None:
        """Look at the certificate files now and then (ports sharing one ServerTls reload it once)."""
        while True:
            await asyncio.sleep(limits.TLS_CERTIFICATE_CHECK_INTERVAL_S)
            self.tls.reload_if_changed()

    async def _accept_loop(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, peer = await loop.sock_accept(listener)
            except OSError as error:  # EMFILE and friends: back off instead of spinning
                log.warning("%s: accept failed: %s", self.name, error)
                await asyncio.sleep(limits.ACCEPT_RETRY_DELAY_S)
                continue
            if len(self._pending) >= self.pending_max_count:
                sock.close()  # as many connections as the server takes are still silent
                continue
            task = loop.create_task(self._sniff(sock, _host_of(peer)))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _sniff(self, sock: socket.socket, peer_host: str) -> None:
        loop = asyncio.get_running_loop()
        try:
            first = await asyncio.wait_for(_peek_first_byte(loop, sock), self.first_byte_timeout_s)
        except (TimeoutError, OSError):
            sock.close()  # silent past the idle timeout, or reset: as an idle connection is closed
            return
        except asyncio.CancelledError:
            sock.close()
            raise
        if not first:
            sock.close()  # connected and closed without a byte (a TCP probe)
            return
        if first[0] == TLS_HANDSHAKE_FIRST_BYTE:
            await self._serve_tls(loop, sock, peer_host)
            return
        if self.tls.mode is TlsMode.ENFORCING:
            self.refused_plain_total += 1
            self._log_once(
                "plain",
                peer_host,
                "%s: closed a plain connection from %s: tls.server.mode=enforcing takes TLS only "
                "(the client needs tls.enable=true); further ones from this host are not logged",
            )
            sock.close()
            return
        self.plain_total += 1
        try:
            await loop.connect_accepted_socket(self.protocol_factory, sock)
        except OSError:
            sock.close()

    async def _serve_tls(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, peer_host: str) -> None:
        try:
            await loop.connect_accepted_socket(
                self.protocol_factory,
                sock,
                ssl=self.tls.context,
                ssl_handshake_timeout=limits.TLS_HANDSHAKE_TIMEOUT_S,
            )
        except (OSError, TimeoutError, ConnectionError) as error:  # ssl.SSLError is an OSError
            self.failed_handshakes_total += 1
            self._log_once(
                "handshake", peer_host, f"%s: TLS handshake with %s failed: {error}; further failures are not logged"
            )
            sock.close()
            return
        self.tls_total += 1

    def _log_once(self, what: str, peer_host: str, message: str) -> None:
        key = (what, peer_host)
        if key in self._logged:
            return
        if len(self._logged) >= limits.TLS_LOGGED_PEERS_MAX_COUNT:
            self._logged.clear()  # bounded: after many peers, a host may be logged again
        self._logged.add(key)
        log.warning(message, self.name, peer_host)


async def _peek_first_byte(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> bytes:
    """The first byte the peer sent, left unread; b"" when it closed without sending."""
    fd = sock.fileno()
    readable: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await readable
    finally:
        loop.remove_reader(fd)
    return sock.recv(1, socket.MSG_PEEK)


def _host_of(peer: object) -> str:
    return str(peer[0]) if isinstance(peer, tuple) and peer else str(peer)
