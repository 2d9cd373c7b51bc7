"""Client CPU per message: what `shoal.client` spends in Python per send and per consumed record.

    .venv/bin/python bench/client_cpu.py [--messages N] [--rounds R] [--profile send|consume]

Starts a real NameServer and Broker (ASYNC_FLUSH, temp dir), then alternates rounds of
pipelined single sends (256 in flight on one connection, as `peer_shoal.py` does) and pull
drains (32 per request, 8 queues). Reports this process's CPU time per message
(`time.process_time`), which the other processes on a shared machine disturb far less than
wall-clock throughput; medians over the rounds. `--profile` runs one extra round under cProfile and
prints the 25 functions with the most self time.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shoal.client import Admin, Message, MQClientError, Producer, PullConsumer
from shoal.client.pull import PullStatus

sys.path.insert(0, str(Path(__file__).resolve().parent))
from listen_ports import free_broker_port, free_port

TOPIC = "CpuBenchTopic"
QUEUES = 8
WINDOW = 256
PULL_BATCH = 32
PAYLOAD = os.urandom(1024)


def wait_port(port: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def start_cluster(work: Path) -> tuple[list[subprocess.Popen[bytes]], str]:
    namesrv_port, broker_port = free_port(), free_broker_port()
    conf = work / "broker.conf"
    conf.write_text(
        f"brokerIP1=127.0.0.1\nlistenPort={broker_port}\nmetricsPort=-1\nnamesrvAddr=127.0.0.1:{namesrv_port}\n"
        f"storePathRootDir={work / 'store'}\nflushDiskType=ASYNC_FLUSH\n"
    )
    log = (work / "servers.log").open("ab")
    python = [sys.executable, "-m", "shoal.cli.main", "--log-level", "WARNING"]
    processes = [subprocess.Popen([*python, "namesrv", "--port", str(namesrv_port)], stdout=log, stderr=log)]
    wait_port(namesrv_port, 30)
    processes.append(subprocess.Popen([*python, "broker", "-c", str(conf)], stdout=log, stderr=log))
    if not wait_port(broker_port, 60):
        raise SystemExit(f"broker did not start: {(work / 'servers.log').read_text()[-2000:]}")
    return processes, f"127.0.0.1:{namesrv_port}"


async def create_topic(namesrv: str) -> None:
    admin = Admin(namesrv)
    await admin.start()
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                await admin.create_topic(
                    TOPIC, cluster="DefaultCluster", read_queue_nums=QUEUES, write_queue_nums=QUEUES
                )
                return
            except MQClientError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
    finally:
        await admin.shutdown()


async def send_round(producer: Producer, count: int) -> tuple[float, float]:
    """(CPU seconds of this process, wall seconds) for `count` pipelined single sends."""
    remaining = count

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await producer.send(Message(TOPIC, PAYLOAD))

    started, began = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(WINDOW)))
    return time.process_time() - started, time.perf_counter() - began


async def consume_round(namesrv: str, group: str, expected: int) -> tuple[float, float, int]:
    """(CPU seconds of this process, wall seconds, records) pulling `expected` records from the
    start of every queue."""
    consumer = PullConsumer(group, namesrv)
    await consumer.start()
    queues = await consumer.fetch_message_queues(TOPIC)
    got = 0

    async def drain(mq: object) -> None:
        nonlocal got
        offset = 0
        while got < expected:
            result = await consumer.pull(mq, "*", offset, PULL_BATCH)  # type: ignore[arg-type]
            if result.status is not PullStatus.FOUND:
                return
            got += len(result.messages)
            offset = result.next_begin_offset

    started, began = time.process_time(), time.perf_counter()
    await asyncio.gather(*(drain(mq) for mq in queues))
    cpu_s, wall_s = time.process_time() - started, time.perf_counter() - began
    await consumer.shutdown()
    return cpu_s, wall_s, got


async def main(args: argparse.Namespace, namesrv: str) -> None:
    await create_topic(namesrv)
    producer = Producer("PID_cpu", namesrv)
    await producer.start()
    await producer.send(Message(TOPIC, PAYLOAD))
    send_us: list[float] = []
    consume_us: list[float] = []
    total = 1
    for round_index in range(args.rounds):
        send_cpu_s, send_wall_s = await send_round(producer, args.messages)
        send_us.append(send_cpu_s / args.messages * 1e6)
        total += args.messages
        cpu_s, wall_s, got = await consume_round(namesrv, f"CID_cpu_{round_index}", total)
        consume_us.append(cpu_s / got * 1e6)
        print(
            f"round {round_index}: send {send_us[-1]:.1f} us/msg ({args.messages / send_wall_s:,.0f} msgs/s), "
            f"consume {consume_us[-1]:.2f} us/record ({got / wall_s:,.0f} records/s, {got})"
        )
    if args.profile:
        profiler = cProfile.Profile()  # deterministic CPU accounting: self time per function
        profiler.enable()
        if args.profile == "send":
            await send_round(producer, args.messages)
        else:
            await consume_round(namesrv, "CID_cpu_profile", total)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    await producer.shutdown()
    print(
        f"SUMMARY client_cpu send={statistics.median(send_us):.1f}us/msg "
        f"consume={statistics.median(consume_us):.2f}us/record rounds={args.rounds} n={args.messages}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", choices=("send", "consume"))
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio", help="the client's event loop")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shoal-cpu-") as tmp:
        processes, namesrv_address = start_cluster(Path(tmp))
        try:
            if arguments.loop == "uvloop":
                import uvloop

                uvloop.run(main(arguments, namesrv_address))
            else:
                asyncio.run(main(arguments, namesrv_address))
        finally:
            for process in reversed(processes):
                process.terminate()
            for process in processes:
                process.wait(30)
