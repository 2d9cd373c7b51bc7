"""Metadata written just after the request that changed it is answered, not before.

A heartbeat naming a new consumer group auto-creates the group (subscriptionGroup.json) and its
`%RETRY%` topic (topics.json). Each safe write (`write_json_file_safely`) costs up to three
fsyncs: tens of milliseconds when the disk is busy (measured 7-75 ms per heartbeat on a SYNC_MASTER
and its slave after a load phase), where RocketMQ 4.9.7's write (`MixAll.string2File`, no fsync)
costs well under one. A slow heartbeat answer loses a race in the Java client: a new push consumer
heartbeats every broker of the topic (master, then slave) holding its heartbeat lock; the master's
NOTIFY_CONSUMER_IDS_CHANGED starts a rebalance meanwhile, which raises the subscription's version
and heartbeats again with `tryLock` — dropped while the first heartbeat still waits on the slave.
The consumer's pulls then carry a version the master never heard of and get
SUBSCRIPTION_NOT_LATEST, retried after 1 s (pullTimeDelayMillsWhenException), until the client's
first scheduled heartbeat (1 s after start) brings it: a second lost at the start of such a
consumer (a drain of 6,000 messages at 5.5k/s instead of 50k/s). The race is the client's and
RocketMQ loses it too at times (so do pulls that simply overtake the rebalance's heartbeat);
a slave answering in tens of milliseconds lost it at almost every new consumer.

So the heartbeat answers first and the write runs in a thread right after, never on the loop (its
fsyncs would stall every other request there). An auto-created group or retry topic lost to a crash
in between is created again by the next heartbeat, as it would be after RocketMQ's unsynced write.
Requests made before a write starts share it; one made while a write runs gets another write after
it. The write reads the table when it runs (under the table's lock), so a slave's metadata sync that
swapped the table meanwhile gets the table it installed written, never the one it replaced.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


class PersistSoon:
    """Run `persist` in a thread soon, once however often it is requested before that write starts;
    called outside a running loop (start-up, tests), it persists at once."""

    def __init__(self, persist: Callable[[], None], what: str) -> None:
        self._persist = persist
        self._what = what
        self._scheduled = False
        """A write is requested that has not started yet."""
        self._writer: asyncio.Task[None] | None = None

    def __call__(self) -> None:
        if self._scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._persist()
            return
        self._scheduled = True
        if self._writer is None:
            self._writer = loop.create_task(self._write())

    @property
    def pending(self) -> bool:
        return self._scheduled or self._writer is not None

    async def wait(self) -> None:
        """Until no write is requested or running (tests, shutdown)."""
        while self._writer is not None:
            await asyncio.shield(self._writer)

    async def _write(self) -> None:
        try:
            while self._scheduled:
                self._scheduled = False  # a request from here on needs a write of its own
                try:
                    await asyncio.to_thread(self._persist)
                except OSError:
                    log.exception("persisting %s failed", self._what)
        finally:
            self._writer = None
