"""Spark scan benchmark: the shoal data source against a plain Python scan and against Parquet.

    python bench/spark_scan.py [--messages N] [--store DIR] [--work DIR] [--master local[2]]

Writes (or reuses, with --store) a store of N 1 KB messages through shoal.store (batches of 32,
ASYNC_FLUSH, 1 GiB segments; every body is distinct random bytes, so Parquet cannot compress or
dictionary-encode them away), then in one run measures records/s and MB/s (of record bytes) for:
  1. python scan      shoal.store.inspection.iter_commitlog over the files, one process
  2. shoal, full      spark.read.format("shoal"): count(*) + sum(length(body)), every column
  3. shoal, body      the same with option columns=body: what Parquet's pruned read also reads
  4. shoal, projected the same with option columns=body_length (Python sources get no pruning)
  5. parquet          the same messages exported to Parquet by Spark, then count + sum(length(body))
Each Spark case runs once to warm the Python workers, then is timed (best of --repeat runs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from shoal.formats.properties import encode_properties
from shoal.formats.record import RecordKind
from shoal.store import BatchEntry, FlushDiskType, FlushSettings, MessageStore, MessageToStore, StoreSettings
from shoal.store.inspection import iter_commitlog

BODY_BYTES = 1024
BATCH_SIZE = 32
QUEUES = 8
TOPICS = ("BenchA", "BenchB", "BenchC", "BenchD")


def write_store(root: Path, count: int) -> None:
    store = MessageStore(StoreSettings(root_dir=root, flush=FlushSettings(flush_disk_type=FlushDiskType.ASYNC_FLUSH)))
    store.open()
    store.start()
    started = time.perf_counter()
    try:
        for first in range(0, count, BATCH_SIZE):
            size = min(BATCH_SIZE, count - first)
            batch_index = first // BATCH_SIZE
            properties = encode_properties({"TAGS": f"tag{batch_index % 5}", "KEYS": f"key{first}"})
            template = MessageToStore(TOPICS[batch_index % len(TOPICS)], batch_index % QUEUES, b"", properties)
            random_bytes = os.urandom(BODY_BYTES * size)
            entries = [
                BatchEntry(0, random_bytes[i * BODY_BYTES : (i + 1) * BODY_BYTES], properties) for i in range(size)
            ]
            result = store.append_batch(template, entries)
            assert result.ok, result.status
    finally:
        store.shutdown()
    print(f"wrote {count} messages in {time.perf_counter() - started:.1f} s to {root}", file=sys.stderr)


def python_scan(store_dir: Path) -> tuple[int, int]:
    """(records, bytes of records) by the store's own reader."""
    records = record_bytes = 0
    for item in iter_commitlog(store_dir / "commitlog", check_crc=False):
        if item.check.kind is RecordKind.MESSAGE and item.check.header is not None:
            records += 1
            record_bytes += item.check.size
    return records, record_bytes


def timed(action: Callable[[], tuple[int, int]], repeat: int) -> tuple[float, tuple[int, int]]:
    best = float("inf")
    result = (0, 0)
    for _ in range(repeat):
        started = time.perf_counter()
        result = action()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    arguments.add_argument("--messages", type=int, default=1_000_000)
    arguments.add_argument("--store", type=Path, default=None, help="reuse this store instead of writing one")
    arguments.add_argument("--work", type=Path, default=None, help="where to write the store and Parquet")
    arguments.add_argument("--master", default="local[2]")
    arguments.add_argument("--repeat", type=int, default=2)
    args = arguments.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="shoal-spark-bench-"))
    store_dir = args.store or work / "store"
    if args.store is None:
        write_store(store_dir, args.messages)

    from shoal.spark.session import session

    spark = session("shoal-spark-bench", args.master)
    spark.sparkContext.setLogLevel("ERROR")
    store = str(store_dir)

    def shoal_full() -> tuple[int, int]:
        row = spark.read.format("shoal").load(store).selectExpr("count(*)", "sum(length(body))").first()
        assert row is not None
        return int(row[0]), int(row[1])

    def shoal_body() -> tuple[int, int]:
        frame = spark.read.format("shoal").option("columns", "body").load(store)
        row = frame.selectExpr("count(*)", "sum(length(body))").first()
        assert row is not None
        return int(row[0]), int(row[1])

    def shoal_projected() -> tuple[int, int]:
        frame = spark.read.format("shoal").option("columns", "body_length").load(store)
        row = frame.selectExpr("count(*)", "sum(body_length)").first()
        assert row is not None
        return int(row[0]), int(row[1])

    parquet_dir = work / "messages.parquet"
    export_started = time.perf_counter()
    spark.read.format("shoal").load(store).drop("body_crc_ok").write.mode("overwrite").parquet(str(parquet_dir))
    export_s = time.perf_counter() - export_started

    def parquet() -> tuple[int, int]:
        row = spark.read.parquet(str(parquet_dir)).selectExpr("count(*)", "sum(length(body))").first()
        assert row is not None
        return int(row[0]), int(row[1])

    cases: list[tuple[str, Callable[[], tuple[int, int]], int]] = [
        ("python scan (shoal.store)", python_scan_of(store_dir), 1),
        ("shoal, every column", shoal_full, args.repeat),
        ("shoal, columns=body", shoal_body, args.repeat),
        ("shoal, columns=body_length", shoal_projected, args.repeat),
        ("parquet (Spark)", parquet, args.repeat),
    ]
    _records, log_bytes = python_scan(store_dir)  # also warms the page cache for every case
    results = {}
    for name, action, repeat in cases:
        if repeat > 1:
            action()  # warm the Python workers and the JIT
        seconds, (records, body_bytes) = timed(action, repeat)
        results[name] = (seconds, records, body_bytes)
    counts = {records for _seconds, records, _body in results.values()}
    assert len(counts) == 1, f"cases disagree on the record count: {results}"

    print(f"\n{counts.pop()} records, {log_bytes / 1e6:.0f} MB of records, master {args.master}")
    parquet_bytes = sum(path.stat().st_size for path in parquet_dir.rglob("*"))
    print(f"export to Parquet took {export_s:.1f} s ({parquet_bytes / 1e6:.0f} MB)")
    print(f"{'case':<30} {'seconds':>8} {'records/s':>12} {'MB/s':>8}")
    for name, (seconds, records, body_bytes) in results.items():
        del body_bytes
        print(f"{name:<30} {seconds:8.2f} {records / seconds:12,.0f} {log_bytes / seconds / 1e6:8.0f}")
    parquet_s = results["parquet (Spark)"][0]
    python_s = results["python scan (shoal.store)"][0]
    for name in ("shoal, every column", "shoal, columns=body", "shoal, columns=body_length"):
        seconds = results[name][0]
        print(
            f"{name}: {seconds / parquet_s:.2f}x Parquet's time, {python_s / seconds:.1f}x faster than the Python scan"
        )
    spark.stop()
    if args.work is None and args.store is None:
        shutil.rmtree(work, ignore_errors=True)


def python_scan_of(store_dir: Path) -> Callable[[], tuple[int, int]]:
    return lambda: python_scan(store_dir)


if __name__ == "__main__":
    main()
