"""A Spark Structured Streaming query from a topic into Parquet, on Shoal and on Apache RocketMQ
4.9.7 in the same run (issue 30's figure).

    python bench/spark_stream.py [--messages 200000] [--rate 20000] [--seconds 60] [--systems shoal,rocketmq]

For each system (a NameServer and one broker, started here; RocketMQ from tools/get_rocketmq.py's
jars), with Spark in local[2] in this process and 1 KiB bodies on a topic of 8 queues:
  1. drain:     --messages sent beforehand (batches of 64); the query (readStream.format("rocketmq")
                -> Parquet with a checkpoint, micro-batches as fast as they go, at most --max-batch
                messages each) reads them all: messages/s from its first micro-batch to the last,
                and the micro-batch durations (p50, max).
  2. sustained: a producer thread sends --rate messages/s for --seconds while the query runs
                (trigger every second): the rate the query processed, its micro-batch durations
                and its lag at the end (how far it fell behind).
The brokers run ASYNC_FLUSH with the same pull limits (--transfer-count messages and
--transfer-bytes per pull: broker.conf maxTransfer*OnMessageInMemory, keys both read; RocketMQ's
defaults are 32 and 256 KiB) and the query pulls --transfer-count messages at a time. Results: a
table on stdout and --json FILE.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
BODY_BYTES = 1024
QUEUES = 8
BATCH = 64
TOPIC = "SparkBench"


def _load_by_path(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


vs = _load_by_path("shoal_bench_vs_rocketmq", REPO_ROOT / "bench" / "vs_rocketmq.py")


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def fill(namesrv: str, count: int, rate: float | None = None, stop: threading.Event | None = None) -> int:
    """Send `count` 1 KiB messages in batches of BATCH (at `rate` messages/s if given); the number acknowledged."""
    from shoal.client import BlockingProducer, ClientSettings, Message

    body = os.urandom(BODY_BYTES)
    sent = 0
    started = time.monotonic()
    with BlockingProducer(
        "spark-bench-producer", namesrv, client_settings=ClientSettings(client_ip="127.0.0.1")
    ) as producer:
        while sent < count and not (stop is not None and stop.is_set()):
            producer.send_batch([Message(TOPIC, body, tags="T") for _ in range(BATCH)])
            sent += BATCH
            if rate:
                ahead = sent / rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
    return sent


def durations_ms(progress: list[dict[str, Any]]) -> list[float]:
    return [float(p["durationMs"]["triggerExecution"]) for p in progress if p.get("numInputRows", 0) > 0]


def run_query(
    spark: Any, namesrv: str, work: Path, name: str, args: argparse.Namespace, trigger: str | None, starting: str
) -> Any:
    reader = spark.readStream.format("rocketmq").options(
        namesrv=namesrv, topics=TOPIC, startingOffsets=starting, maxMessagesPerTrigger=str(args.max_batch),
        pullBatchSize=str(args.transfer_count), pullsInFlight="4",
    )  # fmt: skip
    writer = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(work / f"{name}.parquet"))
        .option("checkpointLocation", str(work / f"{name}.checkpoint"))
    )
    if trigger:
        writer = writer.trigger(processingTime=trigger)
    return writer.start()


def wait_rows(query: Any, total: int, timeout_s: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = sum(p.get("numInputRows", 0) for p in query.recentProgress)
        if done >= total:
            return list(query.recentProgress)
        time.sleep(0.2)
    raise SystemExit(f"the query read {done} of {total} messages in {timeout_s:.0f} s")


def measure(system: Any, spark: Any, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from shoal.client import BlockingAdmin, ClientSettings

    system.start_namesrv()
    conf = {
        "flushDiskType": "ASYNC_FLUSH",
        "maxTransferCountOnMessageInMemory": str(args.transfer_count),
        "maxTransferBytesOnMessageInMemory": str(args.transfer_bytes),
    }
    broker = system.start_broker("broker-a", work / "broker", conf)
    try:
        with BlockingAdmin(system.namesrv_addr, client_settings=ClientSettings(client_ip="127.0.0.1")) as admin:
            admin.create_topic(TOPIC, broker_addr=broker.addr, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        log(f"{system.name}: sending {args.messages} messages")
        fill(system.namesrv_addr, args.messages)
        log(f"{system.name}: draining them")
        query = run_query(spark, system.namesrv_addr, work, "drain", args, None, "earliest")
        progress = wait_rows(query, args.messages, args.timeout)
        query.stop()
        batches = durations_ms(progress)
        first_start = time.mktime(time.strptime(progress[0]["timestamp"][:19], "%Y-%m-%dT%H:%M:%S"))
        last = progress[-1]
        last_end = (
            time.mktime(time.strptime(last["timestamp"][:19], "%Y-%m-%dT%H:%M:%S"))
            + last["durationMs"]["triggerExecution"] / 1000
        )
        drain_s = max(last_end - first_start, 1e-3)
        result: dict[str, Any] = {
            "drain_messages_per_s": round(args.messages / drain_s),
            "drain_batches": len(batches),
            "drain_batch_ms_p50": round(statistics.median(batches)),
            "drain_batch_ms_max": round(max(batches)),
        }
        log(f"{system.name}: drain {result}")
        log(f"{system.name}: sustained {args.rate}/s for {args.seconds} s")
        stop = threading.Event()
        sender = threading.Thread(target=fill, args=(system.namesrv_addr, 10**12, args.rate, stop), daemon=True)
        query = run_query(spark, system.namesrv_addr, work, "sustained", args, "1 second", "latest")
        time.sleep(5)  # the query starts at the drained topic's end: nothing to do yet
        sender.start()
        started = time.monotonic()
        time.sleep(args.seconds)
        stop.set()
        sender.join(60)
        elapsed = time.monotonic() - started
        progress = [p for p in query.recentProgress if p.get("numInputRows", 0) > 0]
        query.stop()
        rows = sum(p["numInputRows"] for p in progress)
        batches = durations_ms(progress)
        result |= {
            "sustained_offered_per_s": args.rate,
            "sustained_processed_per_s": round(rows / elapsed),
            "sustained_batch_ms_p50": round(statistics.median(batches)) if batches else None,
            "sustained_batch_ms_max": round(max(batches)) if batches else None,
        }
        log(f"{system.name}: sustained {result}")
        return result
    finally:
        broker.stop()
        system.stop_namesrv()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rate", type=int, default=20_000, help="sustained phase: messages/s offered")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--max-batch", type=int, default=100_000, help="maxMessagesPerTrigger")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--transfer-count", type=int, default=32, help="messages per pull (and the brokers' limit)")
    parser.add_argument("--transfer-bytes", type=int, default=256 * 1024, help="the brokers' bytes per pull")
    parser.add_argument("--systems", default="shoal,rocketmq")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    from shoal.spark.session import session

    spark = session("spark-stream-bench", "local[2]", {"spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    lib = None
    results: dict[str, Any] = {}
    for name in args.systems.split(","):
        work = Path(tempfile.mkdtemp(prefix=f"spark-stream-{name}-"))
        try:
            if name == "rocketmq" and lib is None:
                lib = vs._load_by_path(
                    "shoal_tools_get_rocketmq", REPO_ROOT / "tools" / "get_rocketmq.py"
                ).ensure_jars()
            system = vs.make_system(name, work, lib or Path())
            results[name] = measure(system, spark, args, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    spark.stop()
    print(f"| figure | {' | '.join(results)} |")
    print(f"|---|{'---|' * len(results)}")
    for key in next(iter(results.values())):
        print(f"| {key} | {' | '.join(str(values.get(key)) for values in results.values())} |")
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
