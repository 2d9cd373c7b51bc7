"""Storage benchmark: what the disk allows, and what shoal.store does with it, in one run.

    python bench/store_append.py [--messages N] [--dir PATH]

Cases, all on the same file system, 1 KB random bodies:
  1. raw sequential write: 1 MiB os.write chunks + one fdatasync (the ceiling)
  2. append with ASYNC_FLUSH from one Python thread (single messages, then batches of 32)
  3. append with SYNC_FLUSH from 64 concurrent asyncio writers (group commit)
  4. sequential read of everything through the ConsumeQueues (zero-copy views)
Prints one line per case and a SUMMARY line; numbers vary +-15% between runs on this VM, so compare
ratios taken in the same run (docs/performance.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from shoal.formats.properties import encode_properties
from shoal.store import (
    BatchEntry,
    FlushDiskType,
    FlushSettings,
    MessageStore,
    MessageToStore,
    StoreSettings,
)

BODY_BYTES = 1024
BODY_VARIANTS = 256  # distinct random bodies, reused round-robin (no compression anywhere, so reuse is fair)
QUEUES = 8
SYNC_WRITERS = 64
BATCH_SIZE = 32
TOPIC = "BenchTopic"


def _bodies() -> list[bytes]:
    return [os.urandom(BODY_BYTES) for _ in range(BODY_VARIANTS)]


def raw_write(directory: Path, total_bytes: int) -> float:
    """Seconds to write `total_bytes` sequentially and fdatasync once."""
    path = directory / "raw.bin"
    chunk = os.urandom(1024 * 1024)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    started = time.perf_counter()
    written = 0
    while written < total_bytes:
        written += os.write(fd, chunk)
    os.fdatasync(fd)
    elapsed = time.perf_counter() - started
    os.close(fd)
    path.unlink()
    return elapsed


def _open(root: Path, flush: FlushDiskType, *, background_dispatch: bool = True) -> MessageStore:
    store = MessageStore(StoreSettings(root_dir=root, flush=FlushSettings(flush_disk_type=flush)))
    store.open()
    store.start(background_dispatch=background_dispatch)
    store.wait_prepared()  # the first segment is mapped: allocation is not in the timing
    return store


def append_async_flush(
    root: Path, count: int, bodies: list[bytes], properties: bytes, *, dispatch_running: bool
) -> tuple[float, MessageStore]:
    # Without dispatch running this measures the append path alone; dispatch catches up afterwards.
    store = _open(root, FlushDiskType.ASYNC_FLUSH, background_dispatch=dispatch_running)
    append = store.append_message
    started = time.perf_counter()
    for number in range(count):
        result = append(MessageToStore(TOPIC, number % QUEUES, bodies[number % BODY_VARIANTS], properties))
        if result.append is None:
            raise SystemExit(f"put failed: {result.status} {result.remark}")
    return time.perf_counter() - started, store


def append_sync_flush(root: Path, count: int, bodies: list[bytes], properties: bytes) -> tuple[float, int]:
    store = _open(root, FlushDiskType.SYNC_FLUSH)

    async def writer(index: int) -> None:
        put = store.put_message_async
        for number in range(index, count, SYNC_WRITERS):
            result = await put(MessageToStore(TOPIC, number % QUEUES, bodies[number % BODY_VARIANTS], properties))
            if not result.ok:
                raise SystemExit(f"put failed: {result.status} {result.remark}")

    async def main() -> float:
        started = time.perf_counter()
        await asyncio.gather(*(writer(i) for i in range(SYNC_WRITERS)))
        return time.perf_counter() - started

    elapsed = asyncio.run(main())
    flushes = int(store.stats()["flush_count"])
    store.shutdown()
    return elapsed, flushes


def append_batched(root: Path, count: int, bodies: list[bytes], properties: bytes) -> float:
    """ASYNC_FLUSH appends in batches of BATCH_SIZE (one SEND_BATCH_MESSAGE each), dispatch deferred."""
    store = _open(root, FlushDiskType.ASYNC_FLUSH, background_dispatch=False)
    template = MessageToStore(TOPIC, 0, b"", properties)
    started = time.perf_counter()
    for first in range(0, count, BATCH_SIZE):
        template.queue_id = (first // BATCH_SIZE) % QUEUES
        entries = [BatchEntry(0, bodies[(first + i) % BODY_VARIANTS], properties) for i in range(BATCH_SIZE)]
        result = store.append_batch(template, entries)
        if result.append is None:
            raise SystemExit(f"batch failed: {result.status} {result.remark}")
    elapsed = time.perf_counter() - started
    store.shutdown()
    return elapsed


def dispatch_all(store: MessageStore) -> tuple[float, int]:
    started = time.perf_counter()
    dispatched = 0
    while store.dispatch_behind_bytes:
        dispatched += store.dispatch_now()
    return time.perf_counter() - started, dispatched


def read_all(store: MessageStore, expected: int) -> float:
    dispatch_all(store)
    started = time.perf_counter()
    read = 0
    for queue_id in range(QUEUES):
        offset = 0
        while True:
            found = store.get_messages(TOPIC, queue_id, offset, 32)
            if not found.messages:
                break
            read += len(found.messages)
            offset = found.next_begin_offset
            found.release()
    elapsed = time.perf_counter() - started
    if read != expected:
        raise SystemExit(f"read {read} messages, expected {expected}")
    return elapsed


def _line(label: str, rate: float, record_bytes: int, raw_mb_s: float, extra: str = "") -> None:
    mb_s = rate * record_bytes / 1e6
    print(f"{label:<40}: {rate:9.0f} msgs/s {mb_s:6.0f} MB/s ({mb_s / raw_mb_s:4.0%} of raw){extra}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=400_000, help="messages per case (default 400,000)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir under ./build)")
    args = parser.parse_args()
    sys.setswitchinterval(0.0002)  # let the flush thread get the GIL back quickly (performance.md §1.5)
    base = args.dir or Path("build")
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-store-", dir=base))
    count = args.messages
    bodies = _bodies()
    properties = encode_properties({"TAGS": "TagA", "KEYS": "order-1"})
    record_bytes = 91 + BODY_BYTES + len(TOPIC) + len(properties)
    total_bytes = count * record_bytes
    try:
        raw_s = raw_write(work, total_bytes)
        raw_mb_s = total_bytes / raw_s / 1e6
        print(
            f"{'raw sequential write (ceiling)':<40}: {raw_mb_s:9.0f} MB/s ({total_bytes / 1e6:.0f} MB)",
            flush=True,
        )

        alone_s, store = append_async_flush(work / "alone", count, bodies, properties, dispatch_running=False)
        alone_rate = count / alone_s
        _line("append ASYNC_FLUSH, dispatch deferred", alone_rate, record_bytes, raw_mb_s)
        dispatch_s, dispatched = dispatch_all(store)
        dispatch_rate = dispatched / dispatch_s
        _line("dispatch catch-up (ConsumeQueue + index)", dispatch_rate, record_bytes, raw_mb_s)
        store.shutdown()
        shutil.rmtree(work / "alone")

        batched_rate = count / append_batched(work / "batched", count, bodies, properties)
        _line(f"append ASYNC_FLUSH, batches of {BATCH_SIZE}", batched_rate, record_bytes, raw_mb_s)
        shutil.rmtree(work / "batched")

        async_s, store = append_async_flush(work / "async", count, bodies, properties, dispatch_running=True)
        async_rate = count / async_s
        _line("append ASYNC_FLUSH, dispatch running", async_rate, record_bytes, raw_mb_s)
        read_rate = count / read_all(store, count)
        _line("sequential read via ConsumeQueue", read_rate, record_bytes, raw_mb_s)
        store.shutdown()
        shutil.rmtree(work / "async")

        sync_s, flushes = append_sync_flush(work / "sync", count, bodies, properties)
        sync_rate = count / sync_s
        _line(
            f"append SYNC_FLUSH, {SYNC_WRITERS} asyncio writers",
            sync_rate,
            record_bytes,
            raw_mb_s,
            f"; {count / max(flushes, 1):.0f} msgs per fdatasync",
        )
        print(
            f"SUMMARY store raw_MBps={raw_mb_s:.0f} append_alone={alone_rate:.0f} batched={batched_rate:.0f} "
            f"dispatch={dispatch_rate:.0f} "
            f"append_with_dispatch={async_rate:.0f} sync_flush_{SYNC_WRITERS}={sync_rate:.0f} cq_read={read_rate:.0f}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
