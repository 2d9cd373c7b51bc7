"""A store several times the broker's memory limit: it opens reading only what recovery scans,
and serves new and old messages (issue 25 item 2).

A real memory limit: the restarted broker runs in a cgroup v1 memory group, which charges it
for its RSS and for every page of the store it reads. The store's pages are dropped from the
page cache (`POSIX_FADV_DONTNEED`) before the restart, so the broker starts cold, as after a reboot.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from shoal.client import (
    ClientSettings,
    Message,
    MessageQueue,
    Producer,
    PullConsumer,
    PullStatus,
    SendStatus,
)
from tests.cgroups import cgroup, unavailable_reason
from tests.conftest import Cluster

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(unavailable_reason("memory") is not None, reason=str(unavailable_reason("memory"))),
]

CLIENT_SETTINGS = ClientSettings(client_ip="127.0.0.1", route_refresh_interval_s=2.0)
TOPIC = "BigStore"
SEGMENT_BYTES = 64 * 1024 * 1024
BODY_BYTES = 60 * 1024
BATCH_COUNT = 16
STORE_BYTES = 640 * 1024 * 1024
"""Ten CommitLog segments: five times the memory limit."""
MEMORY_LIMIT_BYTES = 128 * 1024 * 1024
OPEN_READ_MAX_BYTES = 4 * SEGMENT_BYTES
"""What opening may read: recovery scans the last three segments, as RocketMQ does (and the
ConsumeQueues' last files); MAP_POPULATE read every segment, the whole store, and looking for
stale bytes past the end read the rest of the last (zero-filled) segment."""


def drop_from_page_cache(root: Path) -> None:
    """Evict every store file's clean pages, so the next reader reads from disk (a cold start)."""
    for path in root.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def read_bytes_of(pid: int) -> int:
    """Bytes the process made the block layer read (/proc/<pid>/io): page-cache misses only."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    raise AssertionError(f"no read_bytes in /proc/{pid}/io")


async def fill(cluster: Cluster) -> int:
    """Send STORE_BYTES of incompressible bodies in batches; returns how many messages."""
    sent = 0
    async with Producer("big-store", cluster.namesrv_addr, client_settings=CLIENT_SETTINGS) as producer:
        queue = MessageQueue(TOPIC, "broker-a", 0)
        await producer.send(Message(TOPIC, b"first"), queue=queue)
        sent += 1
        while sent * BODY_BYTES < STORE_BYTES:
            batch = [Message(TOPIC, os.urandom(BODY_BYTES)) for _ in range(BATCH_COUNT)]
            result = await producer.send_batch(batch, queue=queue, timeout_s=30.0)
            assert result.status is SendStatus.SEND_OK, result
            sent += BATCH_COUNT
    return sent


async def serve_new_and_old(cluster: Cluster, sent: int) -> tuple[bytes, bytes, int]:
    """Send one message after the restart, then read the queue's first and newest messages."""
    async with Producer("big-store-after", cluster.namesrv_addr, client_settings=CLIENT_SETTINGS) as producer:
        result = await producer.send(Message(TOPIC, b"after the restart"), queue=MessageQueue(TOPIC, "broker-a", 0))
        assert result.status is SendStatus.SEND_OK, result
    async with PullConsumer("big-store-reader", cluster.namesrv_addr, client_settings=CLIENT_SETTINGS) as consumer:
        queue = MessageQueue(TOPIC, "broker-a", 0)
        first = await consumer.pull(queue, "*", 0, 1)
        last = await consumer.pull(queue, "*", sent, 1)
    assert first.status is PullStatus.FOUND and last.status is PullStatus.FOUND, (first.status, last.status)
    return first.messages[0].body, last.messages[0].body, last.max_offset


def test_a_store_five_times_the_memory_limit_opens_cold_and_serves(
    cluster_factory: Callable[[dict[str, str]], Cluster],
) -> None:
    """Goal: opening reads what recovery needs, not the store; the broker serves within its
    memory limit. Method: 640 MiB CommitLog, restart cold in a 128 MiB memory cgroup, read
    /proc/<pid>/io, send, and pull the queue's first and newest messages."""
    cluster = cluster_factory({"mappedFileSizeCommitLog": str(SEGMENT_BYTES)})
    sent = asyncio.run(fill(cluster))
    assert cluster.stop("broker", signal.SIGTERM) == 0
    drop_from_page_cache(cluster.store_dir)
    with cgroup("memory", "big-store") as group:
        group.limit_memory(MEMORY_LIMIT_BYTES)
        cluster.broker_cgroups.append(group.path)
        cluster.start_broker({"mappedFileSizeCommitLog": str(SEGMENT_BYTES)})
        pid = cluster.processes["broker"].pid
        opened_read = read_bytes_of(pid)
        assert group.path.name in Path(f"/proc/{pid}/cgroup").read_text()  # the limit applies to it
        first, last, max_offset = asyncio.run(serve_new_and_old(cluster, sent))
        assert cluster.alive("broker")
        oom_kills = group.read("memory.oom_control")
        cluster.stop("broker", signal.SIGTERM)
        cluster.broker_cgroups.clear()
    assert opened_read < OPEN_READ_MAX_BYTES, f"opening read {opened_read} bytes of a {STORE_BYTES}-byte store"
    assert first == b"first"
    assert last == b"after the restart"
    assert max_offset == sent + 1
    assert "oom_kill 0" in oom_kills or "oom_kill" not in oom_kills, oom_kills
