"""Long polling: pulls that found nothing wait here until a message arrives or they time out (spec §12).

A parked pull is answered (by re-running it without suspension) when the Dispatcher reports a
message for its queue that passes the pull's filter (its tagsCode, and for a SQL92 subscription its
properties, as RocketMQ's notifyMessageArriving checks both), or at its deadline — a timer per
request, so the answer comes when the client asked, not up to 5 s later as in RocketMQ. The
broker's store dispatches on the loop: the listener only queues (topic, queueId, tagsCode,
properties) and schedules one drain per dispatch batch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from shoal.broker import limits
from shoal.protocol import RemotingCommand
from shoal.remoting.server import ServerConnection
from shoal.store import Arrivals

log = logging.getLogger(__name__)

ArrivalFilter = Callable[[int, bytes], bool] | None
"""(tagsCode, raw properties) of an arrived message -> does it wake the pull; None: every message does."""
Arrival = tuple[int, bytes]
PullAgain = Callable[[ServerConnection, RemotingCommand], None]


@dataclass(eq=False)
class ParkedPull:
    connection: ServerConnection
    request: RemotingCommand
    key: tuple[str, int]
    offset: int
    arrival_filter: ArrivalFilter
    timer: asyncio.TimerHandle | None = None


class PullRequestHoldService:
    def __init__(
        self, loop: asyncio.AbstractEventLoop, pull_again: PullAgain, max_offset: Callable[[str, int], int]
    ) -> None:
        self.loop = loop
        self.pull_again = pull_again
        self.max_offset = max_offset
        self.parked: dict[tuple[str, int], list[ParkedPull]] = {}
        self.parked_count = 0
        self._arrived: dict[tuple[str, int], list[Arrival]] = {}
        self._scheduled = False
        self.held_total = 0
        self.woken_total = 0
        self.expired_total = 0

    def park(
        self,
        connection: ServerConnection,
        request: RemotingCommand,
        topic: str,
        queue_id: int,
        offset: int,
        timeout_ms: int,
        arrival_filter: ArrivalFilter,
    ) -> bool:
        """Hold the pull; False when too many are held already (the caller answers at once)."""
        if self.parked_count >= limits.PARKED_PULLS_MAX_COUNT:
            return False
        key = (topic, queue_id)
        parked = ParkedPull(connection, request, key, offset, arrival_filter)
        timeout_s = min(max(timeout_ms, 0), limits.PULL_SUSPEND_MAX_MS) / 1000
        parked.timer = self.loop.call_later(timeout_s, self._expire, parked)
        self.parked.setdefault(key, []).append(parked)
        self.parked_count += 1
        self.held_total += 1
        if self.max_offset(topic, queue_id) > offset:  # a message arrived while we decided to park
            self._wake_key(key, None)
        return True

    # --- the store's dispatch listener: the broker's store dispatches on this same loop ---
    def on_dispatch(self, arrivals: Arrivals) -> None:
        parked = self.parked
        if not parked:
            return
        for key, requests in arrivals.items():
            if key in parked:
                self._arrived.setdefault(key, []).extend(
                    (request.tags_code, request.raw_properties) for request in requests
                )
        if self._arrived and not self._scheduled:
            self._scheduled = True  # one drain per dispatch pass, after it
            self.loop.call_soon(self._drain)

    # --- loop thread ---
    def _drain(self) -> None:
        self._scheduled = False
        arrived, self._arrived = self._arrived, {}
        for key, arrivals in arrived.items():
            self._wake_key(key, arrivals)

    def _wake_key(self, key: tuple[str, int], arrivals: list[Arrival] | None) -> None:
        waiting = self.parked.get(key)
        if not waiting:
            return
        newest = self.max_offset(*key)
        keep: list[ParkedPull] = []
        for parked in waiting:
            wanted = parked.arrival_filter
            if newest > parked.offset and (
                wanted is None or arrivals is None or any(wanted(*arrival) for arrival in arrivals)
            ):
                self._answer(parked)
                self.woken_total += 1
            else:
                keep.append(parked)
        if keep:
            self.parked[key] = keep
        else:
            del self.parked[key]

    def _expire(self, parked: ParkedPull) -> None:
        waiting = self.parked.get(parked.key)
        if waiting is None or parked not in waiting:
            return
        waiting.remove(parked)
        if not waiting:
            del self.parked[parked.key]
        parked.timer = None
        self.expired_total += 1
        self._answer(parked)

    def _answer(self, parked: ParkedPull) -> None:
        self.parked_count -= 1
        if parked.timer is not None:
            parked.timer.cancel()
            parked.timer = None
        if not parked.connection.is_open:
            return
        try:
            self.pull_again(parked.connection, parked.request)
        except Exception:
            log.exception("answering a held pull for %s failed", parked.key)

    def connection_closed(self, connection: ServerConnection) -> None:
        for key in list(self.parked):
            waiting = self.parked[key]
            keep = [p for p in waiting if p.connection is not connection]
            for dropped in waiting:
                if dropped.connection is connection and dropped.timer is not None:
                    dropped.timer.cancel()
                    self.parked_count -= 1
            if keep:
                self.parked[key] = keep
            else:
                del self.parked[key]

    def close(self) -> None:
        for waiting in self.parked.values():
            for parked in waiting:
                if parked.timer is not None:
                    parked.timer.cancel()
        self.parked.clear()
        self.parked_count = 0
