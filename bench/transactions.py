"""Transactional-message benchmark: round trip and throughput of `send_message_in_transaction`.

    .venv/bin/python bench/transactions.py [--latency N] [--throughput N] [--window W] [--checks N]

Starts a real NameServer and Broker (separate processes, data in a temp dir, free loopback ports)
per flush mode, and with `shoal.client.TransactionProducer` measures:
  1. round trip: N transactions one after another (half message sent and stored, an empty local
     transaction committing, END_TRANSACTION sent oneway): p50 / p99 / max of the call
  2. visible: the same, until a long-polling pull consumer holds the committed message
  3. throughput: N transactions with W in flight; transactions/s of the calls, and until every
     committed message is in its ConsumeQueue
  4. check-back: N transactions answering UNKNOW, then committed by the check-back (timeout
     100 ms, interval 100 ms): time until all are visible
Bodies are 128 random bytes. Prints one line per measurement and a SUMMARY line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from shoal.client import (
    Admin,
    ClientSettings,
    LocalTransactionState,
    Message,
    MessageExt,
    MessageQueue,
    PullConsumer,
    TransactionProducer,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from listen_ports import free_port

TOPIC = "BenchTx"
QUEUES = 8
BODY = os.urandom(128)
START_TIMEOUT_S = 30.0
WAIT_TIMEOUT_S = 120.0
CLIENT = ClientSettings(client_ip="127.0.0.1", heartbeat_interval_s=1.0, route_refresh_interval_s=5.0)
NAMESRV_READY = re.compile(rb"NameServer listening on port (\d+)")
BROKER_READY = re.compile(rb"Broker \S+ listening on port (\d+)")


class Cluster:
    """A NameServer and a Broker as processes; `with Cluster(...) as cluster:`."""

    def __init__(self, work: Path, flush: str, extra: dict[str, str]) -> None:
        self.work = work
        self.flush = flush
        self.extra = extra
        self.processes: list[subprocess.Popen[bytes]] = []
        self.namesrv_addr = self.broker_addr = ""

    def __enter__(self) -> Cluster:
        namesrv_port = self._spawn(["namesrv", "--port", "0"], "namesrv.log", NAMESRV_READY)
        self.namesrv_addr = f"127.0.0.1:{namesrv_port}"
        conf = {
            "brokerIP1": "127.0.0.1",
            "listenHost": "127.0.0.1",
            "metricsPort": "-1",
            "haListenPort": str(free_port()),
            "namesrvAddr": self.namesrv_addr,
            "storePathRootDir": str(self.work / "store"),
            "flushDiskType": self.flush,
            **self.extra,
        }
        path = self.work / "broker.conf"
        path.write_text("".join(f"{key}={value}\n" for key, value in conf.items()))
        broker_port = self._spawn(["broker", "-c", str(path), "--port", "0"], "broker.log", BROKER_READY)
        self.broker_addr = f"127.0.0.1:{broker_port}"
        return self

    def _spawn(self, args: list[str], log_name: str, ready: re.Pattern[bytes]) -> int:
        log_path = self.work / log_name
        with log_path.open("wb") as log:
            process = subprocess.Popen([sys.executable, "-m", "shoal.cli.main", *args], stdout=log, stderr=log)
        self.processes.append(process)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            match = ready.search(log_path.read_bytes())
            if match:
                return int(match.group(1))
            if process.poll() is not None:
                raise RuntimeError(f"{args[0]} exited:\n{log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.05)
        raise RuntimeError(f"{args[0]} did not start within {START_TIMEOUT_S} s")

    def __exit__(self, *_exc: object) -> None:
        for process in reversed(self.processes):
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(30)
            if process.poll() is None:
                process.kill()


class Listener:
    def __init__(self, execute: LocalTransactionState, check: LocalTransactionState) -> None:
        self.execute = execute
        self.check = check

    async def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState:
        return self.execute

    async def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
        return self.check


async def _visible(consumer: PullConsumer, queues: list[MessageQueue]) -> int:
    return sum([await consumer.max_offset(mq) for mq in queues])


async def _wait_visible(consumer: PullConsumer, queues: list[MessageQueue], count: int) -> None:
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    while await _visible(consumer, queues) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {await _visible(consumer, queues)} of {count} committed messages visible")
        await asyncio.sleep(0.002)


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered) * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms, max {ordered[-1] * 1000:.2f} ms"


async def run_mode(cluster: Cluster, flush: str, args: argparse.Namespace, results: dict[str, float]) -> None:
    async with Admin(cluster.namesrv_addr, client_settings=CLIENT) as admin:
        await admin.create_topic(
            TOPIC, broker_addr=cluster.broker_addr, read_queue_nums=QUEUES, write_queue_nums=QUEUES
        )
    committing = Listener(LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.COMMIT_MESSAGE)
    async with (
        TransactionProducer("PID_bench_tx", cluster.namesrv_addr, committing, client_settings=CLIENT) as producer,
        PullConsumer("CID_bench_tx", cluster.namesrv_addr, client_settings=CLIENT) as consumer,
    ):
        for _ in range(200):  # the topic's route reaches the NameServer a moment after creation
            with contextlib.suppress(Exception):
                queues = await consumer.fetch_message_queues(TOPIC)
                if queues:
                    break
            await asyncio.sleep(0.05)
        await producer.fetch_publish_queues(TOPIC)
        for _ in range(50):  # warm-up
            await producer.send_message_in_transaction(Message(TOPIC, BODY))
        await _wait_visible(consumer, queues, 50)

        samples = []
        for _ in range(args.latency):
            started = time.perf_counter()
            await producer.send_message_in_transaction(Message(TOPIC, BODY))
            samples.append(time.perf_counter() - started)
        print(f"{flush:11} round trip ({args.latency} sequential): {_ms(samples)}", flush=True)
        results[f"{flush}_round_trip_p50_ms"] = statistics.median(samples) * 1000

        visible = []
        base = await _visible(consumer, queues)
        for index in range(min(args.latency, 200)):
            started = time.perf_counter()
            await producer.send_message_in_transaction(Message(TOPIC, BODY))
            await _wait_visible(consumer, queues, base + index + 1)
            visible.append(time.perf_counter() - started)
        print(f"{flush:11} send to visible ({len(visible)} sequential): {_ms(visible)}", flush=True)

        base = await _visible(consumer, queues)
        window = asyncio.Semaphore(args.window)

        async def one() -> None:
            async with window:
                await producer.send_message_in_transaction(Message(TOPIC, BODY))

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(args.throughput)))
        sent_s = time.perf_counter() - started
        await _wait_visible(consumer, queues, base + args.throughput)
        visible_s = time.perf_counter() - started
        rate = args.throughput / sent_s
        print(
            f"{flush:11} throughput ({args.throughput}, {args.window} in flight): {rate:,.0f} tx/s sent, "
            f"{args.throughput / visible_s:,.0f} tx/s committed and visible",
            flush=True,
        )
        results[f"{flush}_tx_per_s"] = rate


async def run_checks(cluster: Cluster, args: argparse.Namespace, results: dict[str, float]) -> None:
    async with Admin(cluster.namesrv_addr, client_settings=CLIENT) as admin:
        await admin.create_topic(
            TOPIC, broker_addr=cluster.broker_addr, read_queue_nums=QUEUES, write_queue_nums=QUEUES
        )
    unknown = Listener(LocalTransactionState.UNKNOW, LocalTransactionState.COMMIT_MESSAGE)
    async with (
        TransactionProducer("PID_bench_check", cluster.namesrv_addr, unknown, client_settings=CLIENT) as producer,
        PullConsumer("CID_bench_check", cluster.namesrv_addr, client_settings=CLIENT) as consumer,
    ):
        for _ in range(200):
            with contextlib.suppress(Exception):
                queues = await consumer.fetch_message_queues(TOPIC)
                if queues:
                    break
            await asyncio.sleep(0.05)
        await producer.fetch_publish_queues(TOPIC)
        window = asyncio.Semaphore(64)

        async def one() -> None:
            async with window:
                await producer.send_message_in_transaction(Message(TOPIC, BODY))

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(args.checks)))
        await _wait_visible(consumer, queues, args.checks)
        elapsed_s = time.perf_counter() - started
        print(
            f"check-back  {args.checks} UNKNOW transactions committed by checks in {elapsed_s:.2f} s "
            f"({args.checks / elapsed_s:,.0f} tx/s; {producer.checks_answered} checks answered)",
            flush=True,
        )
        results["checkback_tx_per_s"] = args.checks / elapsed_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=int, default=1000, help="sequential transactions")
    parser.add_argument("--throughput", type=int, default=20_000, help="transactions for the throughput run")
    parser.add_argument("--window", type=int, default=256, help="transactions in flight")
    parser.add_argument("--checks", type=int, default=5_000, help="transactions resolved by the check-back")
    parser.add_argument("--modes", default="ASYNC_FLUSH,SYNC_FLUSH")
    args = parser.parse_args()
    results: dict[str, float] = {}
    for flush in args.modes.split(","):
        with tempfile.TemporaryDirectory(prefix="shoal-bench-tx-") as work, Cluster(Path(work), flush, {}) as cluster:
            asyncio.run(run_mode(cluster, flush, args, results))
    fast_checks = {"transactionTimeOut": "100", "transactionCheckInterval": "100"}
    with (
        tempfile.TemporaryDirectory(prefix="shoal-bench-tx-") as work,
        Cluster(Path(work), "ASYNC_FLUSH", fast_checks) as cluster,
    ):
        asyncio.run(run_checks(cluster, args, results))
    print("SUMMARY " + " ".join(f"{key}={value:.1f}" for key, value in results.items()), flush=True)


if __name__ == "__main__":
    main()
