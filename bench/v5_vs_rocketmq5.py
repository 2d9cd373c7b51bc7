"""RocketMQ 5 clients' send/receive beside Apache RocketMQ 5.3.3's proxy, one run, the same client.

    .venv/bin/python bench/v5_vs_rocketmq5.py [--count 20000] [--warm 2000] [--body 1024]
        [--inflight 64] [--reps 2] [--json out.json]

The load is bench/java_v5/V5Load.java on the official RocketMQ 5 Java client (rocketmq-client-java
5.2.0, tests/interop/v5/java/pom.xml's jar): async sends with INFLIGHT outstanding, then a
SimpleConsumer receiving batches of 32 and acking each. The servers, each on a fresh store, never
at once, alternating order between repetitions:
  - Shoal: `shoal namesrv` + `shoal broker` with grpcServerPort (the gRPC port in the broker's
    process, as the operator runs it);
  - RocketMQ 5.3.3: NamesrvStartup + ProxyStartup in local mode (the broker inside the proxy's
    process), from Maven Central's jars (tests/interop/v5/rocketmq5.py).
Both: ASYNC_FLUSH, one broker, a topic of 8 queues created through the remoting admin API, 64 MiB
segments. Broker CPU is the server process's (Shoal's broker; RocketMQ's proxy with its broker) over
the timed phases, read from /proc. Every figure also as Shoal / RocketMQ.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
JAVA_SOURCES = Path(__file__).resolve().parent / "java_v5"
CLIENT_POM = REPO_ROOT / "tests" / "interop" / "v5" / "java" / "pom.xml"
CLIENT_JAR = "rocketmq-client-java-5.2.0.jar"
QUEUES = 8
LOAD_TIMEOUT_S = 900.0
LOAD_JVM_OPTIONS = ("-Xms256m", "-Xmx512m", "-XX:+UseParallelGC")
CLK_TCK = os.sysconf("SC_CLK_TCK")
METRICS = (
    ("sendPerS", "send msg/s (async)", True),
    ("sendP50Us", "send p50 us", False),
    ("sendP99Us", "send p99 us", False),
    ("receivePerS", "receive + ack msg/s", True),
    ("cpuUsPerMessage", "server CPU us / message (send + receive)", False),
)


def _load_vs_rocketmq() -> ModuleType:
    """bench/vs_rocketmq.py (its Shoal launcher, /proc readings, javac and module loader)."""
    name = "shoal_bench_vs_rocketmq"
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "bench" / "vs_rocketmq.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


vs = _load_vs_rocketmq()
rocketmq5 = vs._load_by_path("shoal_tests_rocketmq5", REPO_ROOT / "tests" / "interop" / "v5" / "rocketmq5.py")
get_rocketmq = vs.get_rocketmq


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def client_classpath() -> str:
    """The Java client's jars (fetched once) and V5Load compiled against them (once per source hash)."""
    directory = get_rocketmq.cache_root() / f"rocketmq-client-java-{get_rocketmq.pom_sha256(CLIENT_POM)[:16]}"
    lib = get_rocketmq.ensure_pom_jars(CLIENT_POM, directory, (CLIENT_JAR,), "rocketmq-client-java")
    classes = vs.compile_java(JAVA_SOURCES, lib, "bench-java-v5")
    return f"{classes}:{lib}/*"


def create_topic(namesrv_addr: str, topic: str) -> None:
    from shoal.client import Admin

    async def create() -> None:
        async with Admin(namesrv_addr) as admin:
            deadline = time.monotonic() + 60
            while True:
                try:
                    await admin.create_topic(
                        topic, cluster="DefaultCluster", read_queue_nums=QUEUES, write_queue_nums=QUEUES
                    )
                    return
                except Exception as failure:  # the broker may not be registered yet
                    if time.monotonic() > deadline:
                        raise SystemExit(f"cannot create {topic}: {failure}") from None
                    await asyncio.sleep(0.5)

    asyncio.run(create())


def run_load(classpath: str, endpoint: str, topic: str, args: argparse.Namespace, server_pid: int) -> dict[str, Any]:
    command = ["java", *LOAD_JVM_OPTIONS, "-cp", classpath, "V5Load", endpoint, topic, f"G_{topic}"]
    command += [str(args.count), str(args.warm), str(args.body), str(args.inflight)]
    cpu_before = vs.cpu_seconds(server_pid)
    done = subprocess.run(command, capture_output=True, text=True, timeout=LOAD_TIMEOUT_S, check=False)
    cpu = vs.cpu_seconds(server_pid) - cpu_before
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(
            f"V5Load against {endpoint} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
        )
    result: dict[str, Any] = json.loads(lines[-1])
    if result["acked"] != result["sent"]:
        raise SystemExit(f"V5Load against {endpoint}: acked {result['acked']} of {result['sent']}")
    # Both phases, warm-up included (the receive phase reads it back): CPU per message handled.
    result["cpuUsPerMessage"] = round(cpu * 1e6 / (2 * result["sent"]), 1)
    return result


def shoal_run(root: Path, classpath: str, args: argparse.Namespace, topic: str) -> dict[str, Any]:
    system = vs.ShoalSystem(root)
    system.start_namesrv()
    grpc_port = vs.free_port()
    settings = {
        "flushDiskType": "ASYNC_FLUSH",
        "grpcServerPort": str(grpc_port),
        "mappedFileSizeCommitLog": str(rocketmq5.SEGMENT_BYTES),
    }
    broker = system.start_broker("broker-a", root / "broker", settings)
    try:
        create_topic(system.namesrv_addr, topic)
        return run_load(classpath, f"127.0.0.1:{grpc_port}", topic, args, broker.pid)
    finally:
        broker.stop()
        system.stop_namesrv()


def rocketmq_run(root: Path, lib: Path, classpath: str, args: argparse.Namespace, topic: str) -> dict[str, Any]:
    ports = rocketmq5.Ports(vs.free_port(), vs.free_broker_port(), vs.free_port(), vs.free_port())
    server = rocketmq5.RocketMQ5(lib, root, ports)
    server.start()
    try:
        create_topic(server.namesrv_addr, topic)
        return run_load(classpath, server.grpc_addr, topic, args, server.pid("proxy"))
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=20_000, help="timed messages per phase")
    parser.add_argument("--warm", type=int, default=2_000, help="untimed sends first (JVMs warm up)")
    parser.add_argument("--body", type=int, default=1024, help="body bytes")
    parser.add_argument("--inflight", type=int, default=64, help="async sends outstanding")
    parser.add_argument("--reps", type=int, default=2, help="repetitions (medians reported)")
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    args = parser.parse_args(argv)
    log("fetching and compiling the load (rocketmq-client-java) and RocketMQ 5.3.3's jars ...")
    classpath = client_classpath()
    lib = rocketmq5.ensure_lib(get_rocketmq.cache_root())
    runs: dict[str, list[dict[str, Any]]] = {"shoal": [], "rocketmq": []}
    with tempfile.TemporaryDirectory(prefix="shoal-v5-bench-") as scratch:
        for rep in range(args.reps):
            order = ("shoal", "rocketmq") if rep % 2 == 0 else ("rocketmq", "shoal")
            for name in order:
                root = Path(scratch) / f"{name}-{rep}"
                topic = f"V5Bench_{rep}"
                what = f"{args.count} messages, {args.body} B, {args.inflight} in flight"
                log(f"rep {rep + 1}/{args.reps}: {name} ({what}) ...")
                started = time.monotonic()
                result = (
                    shoal_run(root, classpath, args, topic)
                    if name == "shoal"
                    else rocketmq_run(root, lib, classpath, args, topic)
                )
                result["loadAverage"] = round(os.getloadavg()[0], 2)
                runs[name].append(result)
                log(f"  {name}: {json.dumps(result)} ({time.monotonic() - started:.0f} s)")
                shutil.rmtree(root, ignore_errors=True)
    heading = f"figure (median of {args.reps}; {args.count} x {args.body} B, Java client 5.2.0)"
    print(f"| {heading} | Shoal | RocketMQ 5.3.3 | Shoal / RocketMQ |")
    print("|---|---|---|---|")
    for key, label, higher_better in METRICS:
        shoal = statistics.median(run[key] for run in runs["shoal"])
        rocketmq = statistics.median(run[key] for run in runs["rocketmq"])
        ratio = shoal / rocketmq if rocketmq else float("nan")
        better = "higher is better" if higher_better else "lower is better"
        print(f"| {label} ({better}) | {shoal:,.1f} | {rocketmq:,.1f} | {ratio:.2f}x |")
    if args.json is not None:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
