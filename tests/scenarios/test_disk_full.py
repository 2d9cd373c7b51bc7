"""A full disk while dispatching: the store refuses writes (it does not acknowledge what consumers
cannot see), logs one line per state change, exposes a gauge, and recovers alone.

A real full disk: a 2 MiB tmpfs (as in test_retention.py; needs root to mount, skipped with its
reason elsewhere) holding the store, then filled by a filler file, so that the next ConsumeQueue
file or IndexFile cannot be allocated (ENOSPC) while the current CommitLog segment still has room.
And a real broker on a volume smaller than its default files.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shoal.client import ClientSettings, Message, MQBrokerError, Producer, ProducerSettings
from shoal.formats.properties import encode_properties
from shoal.formats.record import decode_header
from shoal.protocol import ResponseCode
from shoal.store import (
    CommitLogSettings,
    ConsumeQueueSettings,
    FlushSettings,
    GetMessageStatus,
    IndexSettings,
    MessageStore,
    MessageToStore,
    PutStatus,
    StoreSettings,
)
from tests.conftest import Cluster
from tests.ports import free_broker_port, free_port
from tests.scenarios.conftest import mounted_tmpfs

WaitUntil = Callable[..., None]
CLIENT = ClientSettings(client_ip="127.0.0.1", route_refresh_interval_s=2.0)
TOPIC = "Full"
REFUSING_S = 1.0  # how long the test keeps sending while the disk is full


def fill(path: Path) -> None:
    """Write `path` until the file system is full (ENOSPC at page granularity)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for chunk in (64 * 1024, 4096, 512):
            data = b"\xff" * chunk
            while True:
                try:
                    os.write(fd, data)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    finally:
        os.close(fd)


def body_of(view: memoryview) -> bytes:
    header = decode_header(view, 0)
    return bytes(view[header.body_position : header.body_position + header.body_length])


def bodies_in(store: MessageStore, queue_id: int) -> list[bytes]:
    found: list[bytes] = []
    offset = 0
    while offset < store.max_offset_in_queue(TOPIC, queue_id):
        got = store.get_messages(TOPIC, queue_id, offset, 32)
        assert got.status is GetMessageStatus.FOUND, got.status
        found.extend(body_of(view) for view in got.messages)
        offset = got.next_begin_offset
        got.release()
    return found


@pytest.mark.parametrize("blocked", ["new ConsumeQueue file", "new IndexFile"])
def test_a_full_disk_during_dispatch_refuses_writes_logs_twice_and_recovers(
    tiny_tmpfs: Path, wait_until: WaitUntil, caplog: pytest.LogCaptureFixture, blocked: str
) -> None:
    """Goal: ENOSPC in dispatch refuses puts (SERVICE_NOT_AVAILABLE), one log line in and one out,
    a gauge, recovery when space returns, every acknowledged message consumable. Method: tmpfs."""
    settings = StoreSettings(
        root_dir=tiny_tmpfs / "store",
        commitlog=CommitLogSettings(
            segment_size_bytes=256 * 1024, message_body_size_max_bytes=16 * 1024, preallocate_next_segment=False
        ),
        consume_queue=ConsumeQueueSettings(units_per_file=1024),
        index=IndexSettings(hash_slots=64, entries=256),
    )
    store = MessageStore(settings, disk_usage=lambda _path: 0.10)  # usage ratios are not under test
    store.open()
    store.start()
    acknowledged: dict[int, list[bytes]] = {0: [], 1: []}

    def send(queue_id: int, body: bytes) -> PutStatus:
        result = store.put_message(MessageToStore(TOPIC, queue_id, body, encode_properties({"KEYS": body.hex()})))
        if result.status is PutStatus.PUT_OK:
            acknowledged[queue_id].append(body)
        return result.status

    try:
        for index in range(20):
            assert send(0, b"before-%d" % index) is PutStatus.PUT_OK
        wait_until(lambda: store.dispatch_behind_bytes == 0, 5)
        fill(tiny_tmpfs / "filler")
        with caplog.at_level(logging.INFO, logger="shoal.store"):
            # Enough to need the next file: a new queue's first ConsumeQueue file, or a 2nd IndexFile.
            queue_id, count = (1, 1) if blocked == "new ConsumeQueue file" else (0, 240)
            for index in range(count):
                assert send(queue_id, b"full-%d" % index) is PutStatus.PUT_OK
            # Acknowledging would promise what consumers cannot see: puts must be refused shortly.
            wait_until(lambda: send(0, b"probe") is PutStatus.SERVICE_NOT_AVAILABLE, 5)
            assert store._dispatcher.failing and store.stats()["dispatch_failing"] == 1.0
            refused = store.put_message(MessageToStore(TOPIC, 0, b"refused"))
            assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE, refused
            assert "dispatch cannot write" in refused.remark and "No space left" in refused.remark
            deadline = time.monotonic() + REFUSING_S
            while time.monotonic() < deadline:  # producers keep trying; the dispatcher keeps retrying
                assert send(0, b"refused") is PutStatus.SERVICE_NOT_AVAILABLE
                time.sleep(0.001)
            assert store._dispatcher.write_failures_total > 3, "it retries while the disk is full"
            (tiny_tmpfs / "filler").unlink()
            wait_until(lambda: not store._dispatcher.failing, 5)
            assert store.stats()["dispatch_failing"] == 0.0
            assert send(0, b"after") is PutStatus.PUT_OK
            wait_until(lambda: store.dispatch_behind_bytes == 0, 5)
        lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(lines) == 2, lines
        assert "cannot write" in lines[0] and "No space left" in lines[0]
        assert "writes again" in lines[1]
        for queue_id, bodies in acknowledged.items():
            assert bodies_in(store, queue_id) == bodies
    finally:
        store.shutdown()
    reopened = MessageStore(settings, disk_usage=lambda _path: 0.10)
    report = reopened.open()
    try:
        assert report.last_exit_ok and report.lossless, report.summary()
        for queue_id, bodies in acknowledged.items():
            assert bodies_in(reopened, queue_id) == bodies
            crcs = [zlib.crc32(b) for b in bodies]
            assert crcs == [zlib.crc32(b) for b in bodies_in(reopened, queue_id)]
    finally:
        reopened.shutdown()


def test_the_consume_queue_flusher_outlives_a_full_disk(
    tiny_tmpfs: Path, wait_until: WaitUntil, caplog: pytest.LogCaptureFixture
) -> None:
    """Goal: ENOSPC while writing the checkpoint does not end the ConsumeQueue flusher for good.
    Method: a store on a 2 MiB tmpfs flushing its ConsumeQueues and checkpoint every few ms; fill
    the disk, see one log line and the thread alive, free space, see the checkpoint written again."""
    settings = StoreSettings(
        root_dir=tiny_tmpfs / "store",
        commitlog=CommitLogSettings(
            segment_size_bytes=256 * 1024, message_body_size_max_bytes=16 * 1024, preallocate_next_segment=False
        ),
        consume_queue=ConsumeQueueSettings(units_per_file=1024),
        index=IndexSettings(hash_slots=64, entries=256),
        flush=FlushSettings(flush_consume_queue_interval_ms=5, flush_consume_queue_thorough_interval_ms=5),
    )
    store = MessageStore(settings, disk_usage=lambda _path: 0.10)
    store.open()
    store.start()
    checkpoint = settings.root_dir / "checkpoint"
    try:
        assert store.put_message(MessageToStore(TOPIC, 0, b"before")).status is PutStatus.PUT_OK
        wait_until(checkpoint.exists, 5)
        with caplog.at_level(logging.INFO, logger="shoal.store"):
            fill(tiny_tmpfs / "filler")
            wait_until(lambda: store._cq_flusher.out_of_space, 5)
            time.sleep(0.1)  # many more rounds fail meanwhile: still one line, thread alive
            assert store._cq_flusher.failure is None and store._cq_flusher.out_of_space
            (tiny_tmpfs / "filler").unlink()
            written = checkpoint.stat().st_mtime_ns
            wait_until(lambda: not store._cq_flusher.out_of_space, 5)
            wait_until(lambda: checkpoint.stat().st_mtime_ns != written, 5)
        lines = [r.getMessage() for r in caplog.records if "ConsumeQueue/checkpoint flush" in r.getMessage()]
        assert len(lines) == 2 and "cannot write" in lines[0] and "writes again" in lines[1], lines
    finally:
        store.shutdown()


SMALL_VOLUME_BYTES = 64 * 1024 * 1024
SENDS_ON_A_SMALL_VOLUME = 200


@pytest.fixture
def small_volume(tmp_path: Path) -> Iterator[Path]:
    """A 64 MiB tmpfs: smaller than the default CommitLog segment (1 GiB) and IndexFile (420 MiB)."""
    with mounted_tmpfs(tmp_path / "small", SMALL_VOLUME_BYTES) as mount_point:
        yield mount_point


def test_a_broker_on_a_volume_smaller_than_its_files_says_so_and_refuses_sends_with_one_line(
    small_volume: Path, tmp_path: Path
) -> None:
    """Goal: a store whose default file sizes do not fit its volume says so at start-up, answers
    SERVICE_NOT_AVAILABLE to every send, and logs one line for all of them, not one per send.
    Method: a real broker with its store on a 64 MiB tmpfs and 1 GiB segments; 200 sends."""
    cluster = Cluster(tmp_path / "cluster", free_port(), free_broker_port(), free_port())
    cluster.root.mkdir()
    cluster.start_namesrv()
    try:
        cluster.start_broker(
            {
                "storePathRootDir": str(small_volume / "store"),
                "mappedFileSizeCommitLog": str(1024 * 1024 * 1024),
                "maxIndexNum": str(20_000_000),  # RocketMQ's default (the test cluster's is smaller)
            }
        )
        codes: list[int] = []

        async def send_all() -> None:
            settings = ProducerSettings(retries_when_send_failed=0)
            async with Producer(
                "small-volume", cluster.namesrv_addr, settings=settings, client_settings=CLIENT
            ) as producer:
                for index in range(SENDS_ON_A_SMALL_VOLUME):
                    try:
                        await producer.send(Message("SmallVolume", f"m{index}".encode()), timeout_s=10.0)
                    except MQBrokerError as error:
                        codes.append(error.code)

        asyncio.run(send_all())
        assert codes == [ResponseCode.SERVICE_NOT_AVAILABLE] * SENDS_ON_A_SMALL_VOLUME, set(codes)
        assert cluster.alive("broker")
        log_text = cluster.log("broker")
        space_lines = [line for line in log_text.splitlines() if "store space:" in line]
        assert len(space_lines) == 1 and "WARNING" in space_lines[0], space_lines
        assert "a CommitLog segment (mappedFileSizeCommitLog) 1024.0 MiB" in space_lines[0]
        assert "an IndexFile (maxHashSlotNum, maxIndexNum)" in space_lines[0]
        outage_lines = [line for line in log_text.splitlines() if "cannot create the next CommitLog segment" in line]
        assert len(outage_lines) == 1, outage_lines
    finally:
        cluster.stop_all()
