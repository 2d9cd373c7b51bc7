"""Broker-level administration on a real broker over real sockets: DELETE_EXPIRED_COMMITLOG (329)
deletes expired CommitLog segments at once, outside the deleteWhen hours (RocketMQ's
DefaultMessageStore.executeDeleteFilesManually)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from shoal.client import Admin, ClientSettings, Message, MessageQueue, Producer, SendStatus
from tests.conftest import Cluster, wait_until

pytestmark = pytest.mark.slow

SEGMENT_BYTES = 64 * 1024
BODY_BYTES = 1024
MESSAGES = 320
"""~330 KB: five full 64 KiB CommitLog segments and a sixth being written."""
CLEAN_INTERVAL_MS = 200
UNREQUESTED_ROUNDS = 5
"""Cleaning rounds watched without a request: none may delete (the hour is not in deleteWhen)."""
WAIT_S = 20.0
SETTINGS = ClientSettings(client_ip="127.0.0.1")


def segments(cluster: Cluster) -> list[int]:
    """Start offsets of the CommitLog segment files (not the `.tmp` of one being preallocated)."""
    return sorted(int(path.name) for path in (cluster.store_dir / "commitlog").iterdir() if path.name.isdigit())


def test_delete_expired_commitlog_deletes_expired_segments_outside_the_delete_hours(
    cluster_factory: Callable[[dict[str, str]], Cluster],
) -> None:
    """Goal: DELETE_EXPIRED_COMMITLOG answers SUCCESS and its cleaning rounds delete every expired
    CommitLog segment but the newest although the hour is not in deleteWhen, where the periodic
    rounds deleted none. Method: 64 KiB segments, fileReservedTime=0, deleteWhen twelve hours
    away, a round every 200 ms; six segments written; five rounds watched; Admin's request."""
    not_now = (time.localtime().tm_hour + 12) % 24
    cluster = cluster_factory(
        {
            "mappedFileSizeCommitLog": str(SEGMENT_BYTES),
            "maxMessageSize": str(16 * 1024),
            "fileReservedTime": "0",  # every segment but the newest is expired
            "deleteWhen": f"{not_now:02d}",
            "diskMaxUsedSpaceRatio": "95",  # no space pressure on a fuller test disk either
            "cleanResourceInterval": str(CLEAN_INTERVAL_MS),
        }
    )

    async def send_all() -> None:
        mq = MessageQueue(topic="Retained", broker_name="broker-a", queue_id=0)
        async with Admin(cluster.namesrv_addr, client_settings=SETTINGS) as admin:
            await admin.create_topic("Retained", broker_addr=cluster.broker_addr, read_queue_nums=1, write_queue_nums=1)
            async with Producer("PID_retained", cluster.namesrv_addr, client_settings=SETTINGS) as producer:
                for index in range(MESSAGES):
                    result = await producer.send(Message("Retained", bytes([index % 256]) * BODY_BYTES), queue=mq)
                    assert result.status is SendStatus.SEND_OK

    async def request_deletion() -> dict[str, str]:
        async with Admin(cluster.namesrv_addr, client_settings=SETTINGS) as admin:
            await admin.delete_expired_commitlog(cluster.broker_addr)  # raises unless SUCCESS
            return await admin.runtime_info(cluster.broker_addr)

    asyncio.run(send_all())
    written = segments(cluster)
    assert len(written) >= 6, written
    time.sleep(UNREQUESTED_ROUNDS * CLEAN_INTERVAL_MS / 1000)  # a negative: only watching rounds pass shows it
    assert segments(cluster)[: len(written)] == written, "a periodic round deleted outside deleteWhen"

    runtime = asyncio.run(request_deletion())
    live = int(runtime["commitLogMaxOffset"]) // SEGMENT_BYTES * SEGMENT_BYTES  # the segment being written
    assert live >= 5 * SEGMENT_BYTES and live in written, (runtime["commitLogMaxOffset"], written)
    wait_until(
        lambda: min(segments(cluster)) == live,
        WAIT_S,
        0.05,
        what="every segment before the one being written deleted",
        explain=lambda: f"written {written}, left {segments(cluster)}\n{cluster.log('broker')[-3000:]}",
    )
    assert "deleteExpiredCommitLog by " in cluster.log("broker")
