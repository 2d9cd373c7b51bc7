"""Connected v5 clients, by `x-mq-client-id`, and the outbox of each one's Telemetry stream.

A client opens one Telemetry stream per endpoint; the server answers its settings there and sends
it commands (an orphaned transaction to check, ...). `Outbox` is that stream's queue: bounded
(`TELEMETRY_QUEUE_MAX`, the oldest dropped past it) so a client that stopped reading costs a
fixed amount of memory.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator

from shoal.protocol.v2 import definition_pb2 as v2
from shoal.protocol.v2 import service_pb2 as rpc
from shoal.proxy.limits import TELEMETRY_QUEUE_MAX

log = logging.getLogger(__name__)


class Outbox:
    """Commands for one Telemetry stream; iterate to send them, until `close`."""

    def __init__(self) -> None:
        self.settings: v2.Settings | None = None
        """What the client last reported (its type, the topics it publishes, ...)."""
        self._items: deque[rpc.TelemetryCommand] = deque()
        self._ready = asyncio.Event()
        self._closed = False

    def put(self, command: rpc.TelemetryCommand) -> None:
        if len(self._items) >= TELEMETRY_QUEUE_MAX:
            self._items.popleft()
            log.warning("a Telemetry stream is not read: its oldest command was dropped")
        self._items.append(command)
        self._ready.set()

    def close(self) -> None:
        self._closed = True
        self._ready.set()

    async def __aiter__(self) -> AsyncIterator[rpc.TelemetryCommand]:
        while True:
            while self._items:
                yield self._items.popleft()
            if self._closed:
                return
            self._ready.clear()
            await self._ready.wait()


class Sessions:
    def __init__(self) -> None:
        self.outboxes: dict[str, list[Outbox]] = {}
        self.last_seen: dict[str, float] = {}

    def open(self, client_id: str) -> Outbox:
        outbox = Outbox()
        self.outboxes.setdefault(client_id, []).append(outbox)
        self.seen(client_id)
        return outbox

    def close(self, client_id: str, outbox: Outbox) -> None:
        outboxes = self.outboxes.get(client_id)
        if outboxes is not None and outbox in outboxes:
            outboxes.remove(outbox)
            if not outboxes:
                del self.outboxes[client_id]

    def seen(self, client_id: str) -> None:
        if client_id:
            self.last_seen[client_id] = time.monotonic()

    def forget(self, client_id: str) -> None:
        self.last_seen.pop(client_id, None)
        for outbox in self.outboxes.pop(client_id, []):
            outbox.close()

    def producer_of(self, topic: str) -> Outbox | None:
        """The stream of a connected producer that publishes `topic` (else of any producer): where
        a check of an orphaned transaction goes, as RocketMQ 5 sends it to one of the group."""
        fallback = None
        for outboxes in self.outboxes.values():
            for outbox in outboxes:
                settings = outbox.settings
                if settings is None or not settings.HasField("publishing"):
                    continue
                if any(resource.name == topic for resource in settings.publishing.topics):
                    return outbox
                fallback = fallback or outbox
        return fallback
