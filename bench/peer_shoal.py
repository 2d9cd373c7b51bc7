#!/usr/bin/env python3
"""Shoal next to the peer brokers: `../shared/bench/peers/run_peers.sh bench/peer_shoal.py`.

Starts a real NameServer and Broker (separate processes, data in a temp dir, free loopback
ports) for each configuration, produces BENCH_N random 1 KB messages with `shoal.client`,
consumes them all with pull consumers, times BENCH_LAT_N single synchronous sends, and prints
the same SUMMARY line as the peers (`common.summary`). Configurations (SHOAL_MODES):
  async-batch      ASYNC_FLUSH, SEND_BATCH_MESSAGE of SHOAL_BATCH (100) messages, 8 in flight
  sync-batch       SYNC_FLUSH (group commit), same batches
  async-pipelined  ASYNC_FLUSH, single-message sends, SHOAL_WINDOW (256) in flight
Run with the system python3 (as run_peers.sh does): it re-executes itself with the project's
.venv interpreter, which `make run` / `make test` create.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PEERS = Path(os.environ.get("SHOAL_PEERS_DIR", ROOT.parent / "shared" / "bench" / "peers"))

if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve() and os.environ.get("SHOAL_BENCH_REEXEC") != "1":
    if not VENV_PYTHON.exists():
        print("SKIP shoal: no .venv; run `make test` (or `make run`) in the project first", flush=True)
        sys.exit(0)
    os.environ["SHOAL_BENCH_REEXEC"] = "1"
    os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), __file__, *sys.argv[1:]])

sys.path.insert(0, str(PEERS))
from common import LAT_N, PAYLOAD, TMAX, N, free_port, summary, wait_port  # noqa: E402

from shoal.client import Admin, Message, MQClientError, Producer, PullConsumer, RemotingError  # noqa: E402
from shoal.client.pull import PullStatus  # noqa: E402

TOPIC = "BenchTopic"
QUEUES = 8
BATCH = int(os.environ.get("SHOAL_BATCH", "100"))
BATCHES_IN_FLIGHT = int(os.environ.get("SHOAL_BATCHES_IN_FLIGHT", "8"))
WINDOW = int(os.environ.get("SHOAL_WINDOW", "256"))
MODES = os.environ.get("SHOAL_MODES", "async-batch,sync-batch,async-pipelined").split(",")


def start_cluster(work: Path, flush: str) -> tuple[list[subprocess.Popen[bytes]], str]:
    namesrv_port, broker_port = free_port(), free_port()
    conf = work / "broker.conf"
    conf.write_text(
        f"brokerIP1=127.0.0.1\nlistenPort={broker_port}\nmetricsPort=-1\nnamesrvAddr=127.0.0.1:{namesrv_port}\n"
        f"storePathRootDir={work / 'store'}\nflushDiskType={flush}\n"
        + os.environ.get("SHOAL_BROKER_CONF", "").replace(";", "\n")
        + "\n"
    )
    log = (work / "servers.log").open("ab")
    python = [sys.executable, "-m", "shoal.cli.main", "--log-level", "WARNING"]
    processes = [subprocess.Popen([*python, "namesrv", "--port", str(namesrv_port)], stdout=log, stderr=log)]
    wait_port(namesrv_port)
    processes.append(subprocess.Popen([*python, "broker", "-c", str(conf)], stdout=log, stderr=log))
    if not wait_port(broker_port, 60):
        raise SystemExit(f"broker did not start: {(work / 'servers.log').read_text()[-2000:]}")
    return processes, f"127.0.0.1:{namesrv_port}"


async def produce(namesrv: str, mode: str) -> tuple[float, int]:
    producer = Producer("PID_bench", namesrv)
    await producer.start()
    admin = Admin(namesrv)
    await admin.start()
    deadline = time.monotonic() + 30  # the broker registers with the NameServer right after it listens
    while True:
        try:
            await admin.create_topic(TOPIC, cluster="DefaultCluster", read_queue_nums=QUEUES, write_queue_nums=QUEUES)
            break
        except MQClientError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
    await admin.shutdown()
    await warm_up(producer)
    # A fixed pool of workers, each with one request in flight: WINDOW single sends or
    # BATCHES_IN_FLIGHT batches outstanding at any moment (pipelined on one connection).
    batch = BATCH if mode.endswith("batch") else 1
    workers = BATCHES_IN_FLIGHT if batch > 1 else WINDOW
    total_requests = (N + batch - 1) // batch
    next_request = 0
    sent = 0
    started = time.perf_counter()

    async def worker() -> None:
        nonlocal next_request, sent
        while next_request < total_requests and time.perf_counter() - started < TMAX:
            next_request += 1
            if batch > 1:
                await producer.send_batch([Message(TOPIC, PAYLOAD) for _ in range(batch)])
            else:
                await producer.send(Message(TOPIC, PAYLOAD))
            sent += batch

    await asyncio.gather(*(worker() for _ in range(workers)))
    elapsed = time.perf_counter() - started
    await producer.shutdown()
    return elapsed, sent


async def warm_up(producer: Producer) -> None:
    """One send before timing (route, connection, first pages). Retried for a while: on a busy
    machine a fresh broker's first answer has taken longer than the 3 s send timeout."""
    deadline = time.monotonic() + 60
    while True:
        try:
            await producer.send(Message(TOPIC, PAYLOAD))
            return
        except RemotingError:
            if time.monotonic() > deadline:
                raise


async def consume(namesrv: str, expected: int) -> tuple[float, int]:
    consumer = PullConsumer("CID_bench", namesrv)
    await consumer.start()
    queues = await consumer.fetch_message_queues(TOPIC)
    got = 0
    started = time.perf_counter()

    async def drain(mq: object) -> int:
        """Pull one queue until every message is consumed (dispatch may trail the last sends)."""
        nonlocal got
        count = 0
        offset = 0
        while got < expected and time.perf_counter() - started < TMAX:
            result = await consumer.pull(mq, "*", offset, 32)  # type: ignore[arg-type]
            if result.status is not PullStatus.FOUND:
                await asyncio.sleep(0.001)
                continue
            count += len(result.messages)
            got += len(result.messages)
            offset = result.next_begin_offset
        return count

    await asyncio.gather(*(drain(mq) for mq in queues))
    elapsed = time.perf_counter() - started
    await consumer.shutdown()
    return elapsed, got


async def latency(namesrv: str) -> list[float]:
    producer = Producer("PID_latency", namesrv)
    await producer.start()
    await warm_up(producer)
    samples = []
    started = time.perf_counter()
    for _ in range(LAT_N):
        if time.perf_counter() - started > TMAX:
            break
        begin = time.perf_counter_ns()
        await producer.send(Message(TOPIC, PAYLOAD))
        samples.append((time.perf_counter_ns() - begin) / 1000.0)
    await producer.shutdown()
    return samples


def run(mode: str) -> None:
    flush = "SYNC_FLUSH" if mode.startswith("sync") else "ASYNC_FLUSH"
    with tempfile.TemporaryDirectory(prefix="shoal-bench-") as tmp:
        work = Path(tmp)
        processes, namesrv = start_cluster(work, flush)
        try:
            c0 = time.process_time()
            produce_s, sent = asyncio.run(produce(namesrv, mode))
            cpu_produce = (time.process_time() - c0) / produce_s
            c0 = time.process_time()
            consume_s, got = asyncio.run(consume(namesrv, sent))
            cpu_consume = (time.process_time() - c0) / consume_s
            lat = asyncio.run(latency(namesrv))
            detail = f"batch={BATCH}x{BATCHES_IN_FLIGHT} in flight" if mode.endswith("batch") else f"window={WINDOW}"
            summary(
                f"shoal-{mode}",
                produce_s,
                consume_s,
                lat,
                sent,
                got,
                f"{flush}, {detail}, pull 32/request x{QUEUES} queues, client CPU prod/cons="
                f"{cpu_produce:.0%}/{cpu_consume:.0%}",
            )
        finally:
            for process in reversed(processes):
                process.terminate()
            for process in reversed(processes):
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()


if __name__ == "__main__":
    for selected in MODES:
        run(selected)
