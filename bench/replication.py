"""Replication benchmark: ASYNC_MASTER vs SYNC_MASTER in one run (issue 5).

    .venv/bin/python bench/replication.py [--messages N] [--latency-sends N] [--body-bytes B] [--rounds R]

For each role a NameServer, master and slave (real processes, ASYNC_FLUSH, free loopback ports,
data in a temp dir; both groups run at once, idle while the other is measured) and this client;
in each of ROUNDS rounds, alternating roles:
  1. produce N messages of B bytes with SEND_BATCH_MESSAGE (BATCH per request, IN_FLIGHT requests
     outstanding), sampling the master's replication lag (GET_BROKER_RUNTIME_INFO haLagBytes /
     haLagMs) every LAG_SAMPLE_S meanwhile; then the time until the slave holds everything, and
     the CPU each process spent per message. Two rates: acknowledged (what producers see) and
     replicated (messages / time until the slave held them all: ASYNC defers the slave's work)
  2. the same N as single sends with WINDOW in flight (no batching)
  3. latency of single synchronous sends, one at a time
Prints a line per role, round and phase, then the best rate of each role and the SYNC/ASYNC ratios.
Client, master and slave share this machine's CPUs (a slave dispatches every message as its master
does), so the ratio measures that as well as replication; rounds alternate so that background
load hits both roles.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from shoal.client import Admin, Message, MQClientError, Producer, SendStatus
from shoal.protocol import RequestCode
from shoal.remoting import RemotingClient, RemotingError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from listen_ports import free_broker_port, free_port

TOPIC = "BenchReplication"
QUEUES = 8
BATCH = 100
IN_FLIGHT = 8
WINDOW = 256
LAG_SAMPLE_S = 0.05
START_TIMEOUT_S = 60.0
CATCH_UP_TIMEOUT_S = 120.0


def wait_port(port: int, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"port {port} did not open")


@dataclass
class Servers:
    namesrv: str
    master: str
    slave: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
        for process in reversed(self.processes):
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def start(work: Path, role: str) -> Servers:
    namesrv_port = free_port()
    python = [sys.executable, "-m", "shoal.cli.main", "--log-level", "WARNING"]
    log = (work / "servers.log").open("ab")
    servers = Servers(f"127.0.0.1:{namesrv_port}", "", "")
    servers.processes.append(
        subprocess.Popen([*python, "namesrv", "--port", str(namesrv_port)], stdout=log, stderr=log)
    )
    wait_port(namesrv_port)
    master_ha = free_port()
    for name, broker_role, broker_id in (("master", role, 0), ("slave", "SLAVE", 1)):
        port = free_broker_port()
        conf = work / f"{name}.conf"
        conf.write_text(
            f"brokerIP1=127.0.0.1\nlistenPort={port}\nmetricsPort=-1\nnamesrvAddr={servers.namesrv}\n"
            f"storePathRootDir={work / name}\nbrokerRole={broker_role}\nbrokerId={broker_id}\n"
            f"haListenPort={master_ha if name == 'master' else free_port()}\nhaMasterAddress=127.0.0.1:{master_ha}\n"
        )
        servers.processes.append(subprocess.Popen([*python, "broker", "-c", str(conf)], stdout=log, stderr=log))
        wait_port(port)
        setattr(servers, name, f"127.0.0.1:{port}")
    return servers


async def runtime(client: RemotingClient, address: str) -> dict[str, str]:
    response = await client.invoke(address, RequestCode.GET_BROKER_RUNTIME_INFO, timeout_s=5.0)
    table: dict[str, str] = json.loads(bytes(response.body or b"{}"))["table"]
    return table


async def prepare(servers: Servers) -> None:
    """Topic created, slave connected (a SYNC_MASTER without one answers SLAVE_NOT_AVAILABLE)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    async with Admin(servers.namesrv) as admin:
        while True:
            try:
                await admin.create_topic(
                    TOPIC, cluster="DefaultCluster", read_queue_nums=QUEUES, write_queue_nums=QUEUES
                )
                break
            except MQClientError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
    client = RemotingClient()
    try:
        while (await runtime(client, servers.master)).get("haSlaveConnections") != "1":
            if time.monotonic() > deadline:
                raise SystemExit("the slave did not connect")
            await asyncio.sleep(0.1)
    finally:
        await client.close()


async def sample_lag(address: str, stop: asyncio.Event, samples: list[tuple[int, int]]) -> None:
    client = RemotingClient()
    try:
        while not stop.is_set():
            try:
                table = await runtime(client, address)
                samples.append((int(table.get("haLagBytes", "-1")), int(table.get("haLagMs", "-1"))))
            except (RemotingError, ValueError):
                pass
            await asyncio.sleep(LAG_SAMPLE_S)
    finally:
        await client.close()


async def produce(
    servers: Servers, count: int, body: bytes, batch: int, in_flight: int
) -> tuple[float, int, list[tuple[int, int]]]:
    """(seconds, messages acknowledged SEND_OK, lag samples) for `count` messages."""
    async with Producer("PID_bench_replication", servers.namesrv) as producer:
        await producer.send(Message(TOPIC, body))
        requests = (count + batch - 1) // batch
        issued = 0
        acked = 0
        samples: list[tuple[int, int]] = []
        stop = asyncio.Event()
        sampler = asyncio.create_task(sample_lag(servers.master, stop, samples))
        started = time.perf_counter()

        async def worker() -> None:
            nonlocal issued, acked
            while issued < requests:
                issued += 1
                if batch > 1:
                    result = await producer.send_batch([Message(TOPIC, body) for _ in range(batch)], timeout_s=10.0)
                else:
                    result = await producer.send(Message(TOPIC, body), timeout_s=10.0)
                if result.status is SendStatus.SEND_OK:
                    acked += batch

        await asyncio.gather(*(worker() for _ in range(in_flight)))
        elapsed = time.perf_counter() - started
        stop.set()
        await sampler
        return elapsed, acked, samples


async def catch_up_s(servers: Servers) -> float:
    """Seconds until the slave's CommitLog ends where the master's does."""
    client = RemotingClient()
    started = time.perf_counter()
    try:
        while time.perf_counter() - started < CATCH_UP_TIMEOUT_S:
            master, slave = await runtime(client, servers.master), await runtime(client, servers.slave)
            if master["commitLogMaxOffset"] == slave["commitLogMaxOffset"]:
                return time.perf_counter() - started
            await asyncio.sleep(0.01)
        return float("inf")
    finally:
        await client.close()


async def latency_us(servers: Servers, count: int, body: bytes) -> list[float]:
    async with Producer("PID_bench_latency", servers.namesrv) as producer:
        await producer.send(Message(TOPIC, body))
        samples = []
        for _ in range(count):
            begin = time.perf_counter_ns()
            await producer.send(Message(TOPIC, body))
            samples.append((time.perf_counter_ns() - begin) / 1000)
        return samples


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


def cpu_s(process: subprocess.Popen[bytes]) -> float:
    """User + system CPU seconds the process used so far (Linux /proc)."""
    fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _lag_text(lag: list[tuple[int, int]]) -> str:
    lag_bytes = [sample[0] for sample in lag if sample[0] >= 0] or [0]
    lag_ms = [sample[1] for sample in lag if sample[1] >= 0] or [0]
    return (
        f"lag p50/max {statistics.median(lag_bytes) / 1024:.0f}/{max(lag_bytes) / 1024:.0f} KiB, "
        f"{statistics.median(lag_ms):.0f}/{max(lag_ms):.0f} ms"
    )


def measure(role: str, servers: Servers, args: argparse.Namespace, body: bytes) -> dict[str, float]:
    """One round of the three phases on an already running group."""
    count = args.messages // args.rounds
    master, slave = servers.processes[1], servers.processes[2]
    cpu_before = cpu_s(master), cpu_s(slave), time.process_time()
    seconds, acked, lag = asyncio.run(produce(servers, count, body, BATCH, IN_FLIGHT))
    caught_up_s = asyncio.run(catch_up_s(servers))
    cpu_used = [
        after - before
        for after, before in zip((cpu_s(master), cpu_s(slave), time.process_time()), cpu_before, strict=True)
    ]
    batch_rate = acked / seconds
    replicated_rate = acked / (seconds + caught_up_s)
    per_message_us = "/".join(f"{used / count * 1e6:.0f}" for used in cpu_used)
    print(
        f"{role:12s} batch {BATCH}x{IN_FLIGHT}: {batch_rate:7.0f} msgs/s ({acked}/{count} SEND_OK); "
        f"{_lag_text(lag)}; slave caught up {caught_up_s * 1000:.0f} ms after the last ack; "
        f"CPU us/msg master/slave/client {per_message_us}",
        flush=True,
    )
    seconds, acked, _lag = asyncio.run(produce(servers, count // 4, body, 1, WINDOW))
    single_rate = acked / seconds
    samples = asyncio.run(latency_us(servers, args.latency_sends // args.rounds, body))
    print(
        f"{role:12s} single sends, {WINDOW} in flight: {single_rate:7.0f} msgs/s; one at a time: "
        f"p50 {_percentile(samples, 0.5):.0f} us, p99 {_percentile(samples, 0.99):.0f} us",
        flush=True,
    )
    return {
        "batch": batch_rate,
        "replicated": replicated_rate,
        "single": single_rate,
        "p50": _percentile(samples, 0.5),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=300_000, help="messages per role, over all rounds")
    parser.add_argument("--latency-sends", type=int, default=3_000)
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3, help="the roles alternate, so background load hits both")
    args = parser.parse_args()
    body = os.urandom(args.body_bytes)
    roles = ("ASYNC_MASTER", "SYNC_MASTER")
    results: dict[str, list[dict[str, float]]] = {role: [] for role in roles}
    with tempfile.TemporaryDirectory(prefix="shoal-bench-ha-") as tmp:
        groups: dict[str, Servers] = {}
        try:
            for role in roles:
                work = Path(tmp) / role
                work.mkdir()
                groups[role] = start(work, role)
                asyncio.run(prepare(groups[role]))
            for _ in range(args.rounds):
                for role in roles:
                    results[role].append(measure(role, groups[role], args, body))
        finally:
            for servers in groups.values():
                servers.stop()
    keys = ("batch", "replicated", "single")
    best = {role: {key: max(r[key] for r in rounds) for key in keys} for role, rounds in results.items()}
    ratios = [s["batch"] / a["batch"] for a, s in zip(results["ASYNC_MASTER"], results["SYNC_MASTER"], strict=True)]
    p50 = {role: statistics.median(r["p50"] for r in rounds) for role, rounds in results.items()}
    asynchronous, synchronous = best["ASYNC_MASTER"]["batch"], best["SYNC_MASTER"]["batch"]
    print(
        f"SUMMARY replication: best batch throughput ASYNC {asynchronous:.0f} / SYNC {synchronous:.0f} msgs/s "
        f"(ratio {synchronous / asynchronous:.2f}; "
        f"per round {', '.join(f'{ratio:.2f}' for ratio in ratios)}); single sends ratio "
        f"{best['SYNC_MASTER']['single'] / best['ASYNC_MASTER']['single']:.2f}; "
        f"until both copies hold everything: ASYNC {best['ASYNC_MASTER']['replicated']:.0f} / "
        f"SYNC {best['SYNC_MASTER']['replicated']:.0f} msgs/s "
        f"(ratio {best['SYNC_MASTER']['replicated'] / best['ASYNC_MASTER']['replicated']:.2f}); "
        f"one-at-a-time send p50 {p50['ASYNC_MASTER']:.0f} -> {p50['SYNC_MASTER']:.0f} us"
    )


if __name__ == "__main__":
    main()
