"""The victim of test_crash_recovery: append acknowledged messages until SIGKILLed.

    python crash_writer.py <store_dir> <ack_file>

Opens a SYNC_FLUSH store with small segments and appends messages (random bodies of varying
sizes, several topics and queues, a KEYS property) with `put_message` in a loop. After each
acknowledged put it appends one line to the ack file and fsyncs it, so a line exists only for a
message the store acknowledged as durable:

    <topic> <queueId> <queueOffset> <commitlogOffset> <crc32 of body>

The KEYS property holds `key_of(crc)` (and the body size), so the test can query the index
from the line alone.
The test kills this process at random moments; it never exits on its own (bounded by a
deadline in case the test dies first).
"""

from __future__ import annotations

import os
import random
import sys
import time
import zlib
from pathlib import Path

from shoal.formats.properties import encode_properties
from shoal.store import (
    CommitLogSettings,
    ConsumeQueueSettings,
    FlushDiskType,
    FlushSettings,
    IndexSettings,
    MessageStore,
    MessageToStore,
    PutStatus,
    StoreSettings,
)

TOPICS = ("CrashA", "CrashB", "CrashC")
QUEUES_PER_TOPIC = 3
BODY_SIZE_MAX_BYTES = 6000
RUN_DEADLINE_S = 60.0  # never outlive a test that forgot us


def writer_settings(root: Path) -> StoreSettings:
    """Small CommitLog segments, ConsumeQueue and index files, so every round crosses files; a
    thorough ConsumeQueue/index/checkpoint flush every 300 ms, so kills land between index marks
    (recovery keeps the marked keys of the unfilled index file and rebuilds the rest)."""
    return StoreSettings(
        root_dir=root,
        commitlog=CommitLogSettings(segment_size_bytes=64 * 1024, message_body_size_max_bytes=16 * 1024),
        consume_queue=ConsumeQueueSettings(units_per_file=64),
        index=IndexSettings(hash_slots=64, entries=256),
        flush=FlushSettings(
            flush_disk_type=FlushDiskType.SYNC_FLUSH,
            flush_consume_queue_interval_ms=100,
            flush_consume_queue_thorough_interval_ms=300,
        ),
    )


def key_of(crc: int) -> str:
    return f"crc{crc:08x}"


def main(store_dir: Path, ack_path: Path) -> None:
    rng = random.Random(os.getpid() ^ time.time_ns())
    store = MessageStore(writer_settings(store_dir))
    store.open()
    store.start()
    ack_fd = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    deadline = time.monotonic() + RUN_DEADLINE_S
    while time.monotonic() < deadline:
        topic = rng.choice(TOPICS)
        queue_id = rng.randrange(QUEUES_PER_TOPIC)
        body = rng.randbytes(rng.randrange(0, BODY_SIZE_MAX_BYTES))
        crc = zlib.crc32(body)
        keys = f"{key_of(crc)} {len(body)}b"
        properties = encode_properties({"KEYS": keys, "TAGS": f"tag{queue_id}"})
        result = store.put_message(MessageToStore(topic, queue_id, body, properties))
        if result.status is not PutStatus.PUT_OK or result.append is None:
            raise SystemExit(f"put refused: {result.status} {result.remark}")
        line = f"{topic} {queue_id} {result.append.queue_offset} {result.append.wrote_offset} {crc}\n"
        os.write(ack_fd, line.encode())
        os.fsync(ack_fd)
    store.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
