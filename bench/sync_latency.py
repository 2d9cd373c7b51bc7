"""Where one synchronous send's time goes: client round trip, broker, and the CommitLog flush.

    .venv/bin/python bench/sync_latency.py [--sends N] [--rounds R]

For each round, starts a real NameServer and Broker per flush mode (ASYNC_FLUSH, SYNC_FLUSH, then
SYNC_FLUSH with syncFlushInline=true; modes alternate so all see the same machine load), sends N
1 KB messages one at a time with `shoal.client`, and reads the broker's /metrics before and after to split
the SYNC_FLUSH time: mean fdatasync per flush (`shoal_store_flush_seconds` /
`shoal_store_flushes`). Prints p50 / p99 per mode and round, then medians.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from shoal.client import Message, Producer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from client_cpu import create_topic, wait_port
from listen_ports import free_broker_port, free_port

TOPIC = "CpuBenchTopic"
PAYLOAD = os.urandom(1024)


MODES = {
    "ASYNC_FLUSH": "flushDiskType=ASYNC_FLUSH\n",
    "SYNC_FLUSH": "flushDiskType=SYNC_FLUSH\n",
    "SYNC_FLUSH_INLINE": "flushDiskType=SYNC_FLUSH\nsyncFlushInline=true\n",
}
"""SYNC_FLUSH group-commits on the GroupCommitService thread (the default: a slow disk never holds
the event loop); SYNC_FLUSH_INLINE runs the fdatasync on the loop itself (no thread hop)."""


def start_cluster(work: Path, flush: str) -> tuple[list[subprocess.Popen[bytes]], str, int]:
    namesrv_port, broker_port, metrics_port = free_port(), free_broker_port(), free_port()
    conf = work / "broker.conf"
    conf.write_text(
        f"brokerIP1=127.0.0.1\nlistenPort={broker_port}\nmetricsPort={metrics_port}\n"
        f"namesrvAddr=127.0.0.1:{namesrv_port}\nstorePathRootDir={work / 'store'}\n{MODES[flush]}"
    )
    log = (work / "servers.log").open("ab")
    python = [sys.executable, "-m", "shoal.cli.main", "--log-level", "WARNING"]
    processes = [subprocess.Popen([*python, "namesrv", "--port", str(namesrv_port)], stdout=log, stderr=log)]
    wait_port(namesrv_port, 30)
    processes.append(subprocess.Popen([*python, "broker", "-c", str(conf)], stdout=log, stderr=log))
    if not wait_port(broker_port, 60):
        raise SystemExit(f"broker did not start: {(work / 'servers.log').read_text()[-2000:]}")
    return processes, f"127.0.0.1:{namesrv_port}", metrics_port


def flush_stats(metrics_port: int) -> tuple[float, float]:
    """(flushes, seconds spent flushing) from the broker's Prometheus text."""
    deadline = time.monotonic() + 30  # the metrics port opens a moment after the broker's
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as answer:
                text = answer.read().decode()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("shoal_store_flushes_total", "shoal_store_flush_seconds_total"):
            values[name] = float(value)
    return values.get("shoal_store_flushes_total", 0.0), values.get("shoal_store_flush_seconds_total", 0.0)


async def sends(namesrv: str, count: int) -> list[float]:
    await create_topic(namesrv)
    producer = Producer("PID_latency", namesrv)
    await producer.start()
    for _ in range(50):  # route, connection, first segment pages
        await producer.send(Message(TOPIC, PAYLOAD))
    samples = []
    for _ in range(count):
        began = time.perf_counter_ns()
        await producer.send(Message(TOPIC, PAYLOAD))
        samples.append((time.perf_counter_ns() - began) / 1000)
    await producer.shutdown()
    return samples


def run(flush: str, count: int) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory(prefix="shoal-latency-") as tmp:
        processes, namesrv, metrics_port = start_cluster(Path(tmp), flush)
        try:
            before = flush_stats(metrics_port)
            samples = sorted(asyncio.run(sends(namesrv, count)))
            after = flush_stats(metrics_port)
        finally:
            for process in reversed(processes):
                process.terminate()
            for process in processes:
                process.wait(30)
    flushes = after[0] - before[0]
    flush_us = (after[1] - before[1]) / flushes * 1e6 if flushes else 0.0
    return samples[len(samples) // 2], samples[int(len(samples) * 0.99)], flush_us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sends", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float, float]]] = {mode: [] for mode in MODES}
    for round_index in range(args.rounds):
        for flush, rows in results.items():
            p50, p99, flush_us = run(flush, args.sends)
            rows.append((p50, p99, flush_us))
            print(f"round {round_index} {flush}: p50 {p50:.0f} us, p99 {p99:.0f} us, mean flush {flush_us:.0f} us")
    for flush, rows in results.items():
        p50 = statistics.median(row[0] for row in rows)
        p99 = statistics.median(row[1] for row in rows)
        flush_us = statistics.median(row[2] for row in rows)
        print(f"SUMMARY sync_latency {flush} p50={p50:.0f}us p99={p99:.0f}us mean_flush={flush_us:.0f}us")


if __name__ == "__main__":
    main()
