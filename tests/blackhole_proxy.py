"""A TCP proxy that can blackhole a link, for tests of silent partitions (issue 25).

    proxy = BlackholeProxy(target_port)   # forwards 127.0.0.1:proxy.start() to 127.0.0.1:target_port
    proxy.blackhole()                     # no byte moves, in either direction; no socket is closed
    proxy.heal()                          # the held bytes go through, in order

A blackhole is a network that drops packets: neither end hears a FIN or a reset, so each learns
that the other is gone only from its own timeouts. While blackholed the proxy neither reads nor
writes, so the senders' socket buffers fill as they would in front of a dead route; a chunk read
just before is held, never dropped (TCP would retransmit it). A connection accepted meanwhile is
carried to the target only after the heal (a real blackhole drops the SYN; here the dialler's
connect succeeds, then nothing answers). A close or reset of one end reaches the other only after
the heal. The proxy runs its own event loop in a thread, for tests that drive processes
synchronously.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

PUMP_CHUNK_BYTES = 64 * 1024
CALL_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0

T = TypeVar("T")


class BlackholeProxy:
    """127.0.0.1:`port` -> 127.0.0.1:`target_port`, blackholed on demand."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.carried_total = 0
        """Connections carried to the target so far."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="blackhole-proxy", daemon=True)
        self._open: asyncio.Event | None = None
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[Any]] = set()
        self._closing = False

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> int:
        self._thread.start()
        self.port = self._call(self._listen())
        return self.port

    def blackhole(self) -> None:
        """From now on no byte passes, either way; every socket stays open."""
        self._call(self._set_open(False))

    def heal(self) -> None:
        """Bytes flow again, the held ones first; closes seen meanwhile are passed on."""
        self._call(self._set_open(True))

    def stop(self) -> None:
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(STOP_TIMEOUT_S)
        self._loop.close()

    # --- on the proxy's loop ---
    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(CALL_TIMEOUT_S)

    async def _listen(self) -> int:
        self._open = asyncio.Event()
        self._open.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _set_open(self, flowing: bool) -> None:
        assert self._open is not None
        if flowing:
            self._open.set()
        else:
            self._open.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._open is not None
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        self._writers.add(writer)
        try:
            await self._open.wait()
            if self._closing:
                return
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
            except OSError:
                return
            self.carried_total += 1
            self._writers.add(upstream_writer)
            try:
                pumps = (self._pump(reader, upstream_writer), self._pump(upstream_reader, writer))
                await asyncio.gather(*pumps, return_exceptions=True)
            finally:
                self._writers.discard(upstream_writer)
                upstream_writer.close()
        finally:
            self._writers.discard(writer)
            writer.close()
            self._handlers.discard(handler)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy one direction until its end closes; then close the other end (after a heal)."""
        assert self._open is not None
        try:
            while True:
                await self._open.wait()
                data = await reader.read(PUMP_CHUNK_BYTES)
                await self._open.wait()  # read just before the blackhole: held, not lost
                if not data:
                    break
                writer.write(data)
                await writer.drain()
        except OSError:
            pass  # a reset: passed on as a close below
        finally:
            await self._open.wait()
            writer.close()

    async def _shutdown(self) -> None:
        """Reset every connection and let each handler end by itself (a cancelled handler of
        `asyncio.start_server` is logged as an error)."""
        assert self._open is not None and self._server is not None
        self._closing = True
        self._open.set()
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        if self._handlers:
            await asyncio.wait(set(self._handlers), timeout=STOP_TIMEOUT_S)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), STOP_TIMEOUT_S)
