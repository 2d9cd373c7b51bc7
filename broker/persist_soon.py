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

So the heartbeat answers first and the write runs on the loop right after (`call_soon`: the answer
has left by then). An auto-created group or retry topic lost to a crash in between is created again
by the next heartbeat, as it would be after RocketMQ's unsynced write. Requests made in one loop
iteration share one write; the write reads the table when it runs, so a slave's metadata sync that
swapped the table meanwhile gets the table it installed written, never the one it replaced.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


class PersistSoon:
    """Call `persist` once on the running loop's next iteration however often it is requested
    before then; called outside a running loop (start-up, tests), it persists at once."""

    def __init__(self, persist: Callable[[], None], what: str) -> None:
        self._persist = persist
        self._what = what
        self._scheduled = False

    def __call__(self) -> None:
        if self._scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._persist()
            return
        self._scheduled = True
        loop.call_soon(self._run)

    @property
    def pending(self) -> bool:
        return self._scheduled

    def _run(self) -> None:
        self._scheduled = False
        try:
            self._persist()
        except OSError:
            log.exception("persisting %s failed", self._what)
