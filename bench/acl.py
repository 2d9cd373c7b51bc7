"""Produce throughput with the plain ACL off and on, in one run (issue 17: within 10 %).

    python bench/acl.py [--window-s 0.5] [--rounds 40] [--tasks 32] [--body-bytes 1024] [--control]
                        [--client python|java] [--json]

Starts two NameServer + Broker pairs (real `shoal` processes on 127.0.0.1): one with ACL off, one
with aclEnable=true (one account with PUB on the topic; its producer signs every request). Then
`rounds` short windows per mode, alternating between the two (the order flips every round), each
with `tasks` asyncio tasks sending synchronously one message at a time.

`--control` runs the same with ACL off on both sides (an A/A run): its ratio is the bench's own
bias between its two slots (three runs on 2026-11-27: 1.084, 1.004, 1.026 for the "on" slot).

`--client java` sends from the official RocketMQ 4.9.7 Java client instead (bench/java/AclLoad.java,
`tasks` threads, AclClientRPCHook on the "on" producer; jars from tools/get_rocketmq.py): a JIT client
whose signing costs little, so the ratio is the broker's check.

Reported per mode: the median messages per second, and the broker's and the client's CPU time per
message (from /proc and `time.process_time`). On a shared machine the rates swing with other
processes' load; CPU per message does not, and a broker on one event loop can send at most
1 / (its CPU per message): the CPU ratio off/on is the throughput ratio once the broker is the
bottleneck. Both sides pay for ACL: the client signs (HMAC-SHA1 over the header values and the
body), the broker checks (the same HMAC, the permission lookup).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from shoal.client import Admin, ClientSettings, Credentials, Message, Producer, ProducerSettings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from listen_ports import free_broker_port, free_port

ADMIN = Credentials("benchAdmin", "benchAdminSecret")
USER = Credentials("benchUser1", "benchUserSecret")
PLAIN_ACL = """\
accounts:
  - accessKey: benchAdmin
    secretKey: benchAdminSecret
    admin: true
  - accessKey: benchUser1
    secretKey: benchUserSecret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: ["AclBench=PUB|SUB"]
"""
TOPIC = "AclBench"
START_TIMEOUT_S = 30.0
WARMUP_S = 1.0
PREALLOCATION_TIMEOUT_S = 120.0
"""The first append makes the broker zero-fill the next 1 GiB CommitLog segment in the background
(warmMapedFileEnable's default with ASYNC_FLUSH): seconds of disk writes and kernel CPU, once per GiB in
service but inside the windows of a short bench, so the bench waits for it before measuring."""


def _spawn(args: list[str], log: Path, ready: str) -> subprocess.Popen[bytes]:
    with log.open("wb") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", "shoal.cli.main", *args], stdout=handle, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while ready not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"{args[0]} did not start:\n{log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.05)
    return process


@contextlib.contextmanager
def cluster(root: Path, acl: bool) -> Iterator[tuple[str, str, int]]:
    """(namesrv address, broker address, broker pid) of a fresh NameServer + Broker, ACL on or off."""
    namesrv_port, broker_port = free_port(), free_broker_port()
    acl_file = root / "plain_acl.yml"
    acl_file.write_text(PLAIN_ACL)
    conf = {
        "brokerIP1": "127.0.0.1",
        "listenHost": "127.0.0.1",
        "listenPort": str(broker_port),
        "fastListenPort": "0",
        "haListenPort": str(free_port()),
        "metricsPort": "-1",
        "namesrvAddr": f"127.0.0.1:{namesrv_port}",
        "storePathRootDir": str(root / "store"),
        "autoCreateTopicEnable": "false",
    }
    if acl:
        conf |= {"aclEnable": "true", "plainAclFile": str(acl_file)}
    conf_path = root / "broker.conf"
    conf_path.write_text("".join(f"{key}={value}\n" for key, value in conf.items()))
    processes = [
        _spawn(
            ["namesrv", "--host", "127.0.0.1", "--port", str(namesrv_port)],
            root / "namesrv.log",
            "NameServer listening",
        )
    ]
    try:
        processes.append(
            _spawn(["broker", "-c", str(conf_path)], root / "broker.log", f"listening on port {broker_port}")
        )
        yield f"127.0.0.1:{namesrv_port}", f"127.0.0.1:{broker_port}", processes[-1].pid
    finally:
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()


def wait_for_preallocation(commitlog_dirs: list[Path], timeout_s: float = PREALLOCATION_TIMEOUT_S) -> None:
    """Block until each CommitLog holds its next segment, allocated (none half-written, `.tmp`)."""
    deadline = time.monotonic() + timeout_s
    print("waiting for the brokers to preallocate their next CommitLog segment ...", file=sys.stderr)
    while True:
        pending = [directory for directory in commitlog_dirs if not _next_segment_ready(directory)]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"no next CommitLog segment within {timeout_s:.0f} s in {pending}")
        time.sleep(0.2)


def _next_segment_ready(commitlog_dir: Path) -> bool:
    names = [path.name for path in commitlog_dir.iterdir()]
    return len(names) >= 2 and not any(name.endswith(".tmp") for name in names)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` (Linux /proc; 0.0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _create_topic(namesrv: str, broker: str, acl: bool) -> None:
    async with Admin(namesrv, client_settings=ClientSettings(credentials=ADMIN if acl else None)) as admin:
        await admin.create_topic(TOPIC, broker_addr=broker, read_queue_nums=8, write_queue_nums=8)


async def _producer(namesrv: str, broker: str, acl: bool) -> Producer:
    await _create_topic(namesrv, broker, acl)
    settings = ClientSettings(credentials=USER if acl else None, client_ip="127.0.0.1")
    producer = Producer(f"AclBenchProducer{int(acl)}", namesrv, client_settings=settings, settings=ProducerSettings())
    await producer.start()
    return producer


async def window(producer: Producer, tasks: int, body: bytes, duration_s: float) -> tuple[float, int]:
    """(messages per second, messages) of `tasks` synchronous senders over `duration_s`."""
    sent = 0
    stop_at = time.monotonic() + duration_s

    async def sender() -> None:
        nonlocal sent
        while time.monotonic() < stop_at:
            await producer.send(Message(TOPIC, body))
            sent += 1

    started = time.monotonic()
    await asyncio.gather(*(sender() for _ in range(tasks)))
    return sent / (time.monotonic() - started), sent


async def measure(
    addresses: dict[bool, tuple[str, str, int]], args: argparse.Namespace, commitlog_dirs: list[Path]
) -> dict[str, Any]:
    """Short windows alternating between the two clusters (the order flips every round), so load
    from other processes on a shared machine falls on both modes alike."""
    producers = {acl: await _producer(*addresses[acl][:2], acl and not args.control) for acl in (False, True)}
    body = os.urandom(args.body_bytes)
    rates: dict[bool, list[float]] = {False: [], True: []}
    sent = {False: 0, True: 0}
    broker_cpu = {False: 0.0, True: 0.0}
    client_cpu = {False: 0.0, True: 0.0}
    try:
        for acl in (False, True):
            await window(producers[acl], args.tasks, body, WARMUP_S)
        await asyncio.to_thread(wait_for_preallocation, commitlog_dirs)
        for round_index in range(args.rounds):
            for acl in (False, True) if round_index % 2 == 0 else (True, False):
                pid = addresses[acl][2]
                broker_before, client_before = cpu_s(pid), time.process_time()
                rate, count = await window(producers[acl], args.tasks, body, args.window_s)
                broker_cpu[acl] += cpu_s(pid) - broker_before
                client_cpu[acl] += time.process_time() - client_before
                rates[acl].append(rate)
                sent[acl] += count
    finally:
        for producer in producers.values():
            await producer.shutdown()
    return {
        "rates": rates,
        "broker_us_per_msg": {acl: broker_cpu[acl] / max(sent[acl], 1) * 1e6 for acl in (False, True)},
        "client_us_per_msg": {acl: client_cpu[acl] / max(sent[acl], 1) * 1e6 for acl in (False, True)},
    }


JAVA_WARMUP_MS = 4_000
"""Per cluster before measuring: the JIT compiles the client's send path."""
JAVA_START_TIMEOUT_S = 60.0


def _java_command(args: argparse.Namespace, addresses: dict[bool, tuple[str, str, int]], log_dir: Path) -> list[str]:
    vs_rocketmq = _load_by_path("shoal_bench_vs_rocketmq", Path(__file__).with_name("vs_rocketmq.py"))
    lib = vs_rocketmq.get_rocketmq.ensure_jars()
    classes = vs_rocketmq.compile_load(lib)
    load_args = {
        "namesrvOff": addresses[False][0],
        "namesrvOn": addresses[True][0],
        "topic": TOPIC,
        "threads": args.tasks,
        "bodyBytes": args.body_bytes,
        "accessKey": USER.access_key,
        "secretKey": USER.secret_key,
        "control": str(args.control).lower(),
    }
    return [
        "java",
        *vs_rocketmq.LOAD_JVM_OPTIONS,
        f"-Drocketmq.client.logRoot={log_dir}",
        "-Drocketmq.client.logLevel=WARN",
        "-cp",
        f"{classes}{os.pathsep}{lib}/*",
        "AclLoad",
        *(f"{key}={value}" for key, value in load_args.items()),
    ]


def _load_by_path(name: str, path: Path) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def measure_java(
    addresses: dict[bool, tuple[str, str, int]], args: argparse.Namespace, commitlog_dirs: list[Path], log_dir: Path
) -> dict[str, Any]:
    """As `measure`, with the Java client (AclLoad.java) sending: windows on its stdin, counts on its stdout."""
    for acl in (False, True):
        asyncio.run(_create_topic(*addresses[acl][:2], acl and not args.control))
    process = subprocess.Popen(
        _java_command(args, addresses, log_dir),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=(log_dir / "java-stderr.log").open("w"),
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    def event(expected: str) -> dict[str, Any]:
        for line in stdout:
            if line.startswith("{"):
                found: dict[str, Any] = json.loads(line)
                if found.get("event") == "error":
                    raise SystemExit(f"the Java client failed a send: {found}")
                if found.get("event") == expected:
                    return found
        raise SystemExit(f"the Java client exited; see {log_dir / 'java-stderr.log'}")

    def run(acl: bool, window_ms: int) -> tuple[float, int]:
        stdin.write(f"{'on' if acl else 'off'} {window_ms}\n")
        stdin.flush()
        done = event("window")
        return done["sent"] / (done["ms"] / 1000), int(done["sent"])

    rates: dict[bool, list[float]] = {False: [], True: []}
    sent = {False: 0, True: 0}
    broker_cpu = {False: 0.0, True: 0.0}
    client_cpu = {False: 0.0, True: 0.0}
    try:
        event("ready")
        for acl in (False, True):
            run(acl, JAVA_WARMUP_MS)
        wait_for_preallocation(commitlog_dirs)
        for round_index in range(args.rounds):
            for acl in (False, True) if round_index % 2 == 0 else (True, False):
                pid = addresses[acl][2]
                broker_before, client_before = cpu_s(pid), cpu_s(process.pid)
                rate, count = run(acl, int(args.window_s * 1000))
                broker_cpu[acl] += cpu_s(pid) - broker_before
                client_cpu[acl] += cpu_s(process.pid) - client_before
                rates[acl].append(rate)
                sent[acl] += count
        stdin.write("quit\n")
        stdin.flush()
        process.wait(JAVA_START_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return {
        "rates": rates,
        "broker_us_per_msg": {acl: broker_cpu[acl] / max(sent[acl], 1) * 1e6 for acl in (False, True)},
        "client_us_per_msg": {acl: client_cpu[acl] / max(sent[acl], 1) * 1e6 for acl in (False, True)},
    }


def paired_ratio(off: list[float], on: list[float]) -> float:
    """The median of each round's on/off rate ratio. The machine's speed drifts over seconds (other
    tenants of the VM: 9k and 14k msg/s phases in one A/A run); the two windows of a round are
    adjacent, so their ratio cancels most of that, where a ratio of the two modes' medians compares
    windows from different phases (the A/A run above: 0.77 and 0.98 in two runs)."""
    ratios = [on_rate / off_rate for off_rate, on_rate in zip(off, on, strict=True) if off_rate > 0]
    return statistics.median(ratios) if ratios else 0.0


def check_cost_us(body_bytes: int, repeat: int = 20_000) -> tuple[float, float]:
    """(broker check, client signing) in microseconds for one SEND_MESSAGE_V2 with the headers a
    producer sends: the ACL's own cost, without the machine's noise."""
    from shoal.acl import AccessValidator, parse_plain_acl
    from shoal.protocol import RequestCode, make_request

    validator = AccessValidator(parse_plain_acl(PLAIN_ACL))
    fields = {
        "a": "AclBenchProducer",
        "b": TOPIC,
        "c": "TBW102",
        "d": "4",
        "e": "3",
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": "UNIQ_KEY\x017F0000010000000000000000000000\x02WAIT\x01true",
        "j": "0",
        "k": "false",
        "m": "false",
    }
    body = os.urandom(body_bytes)
    request = make_request(RequestCode.SEND_MESSAGE_V2, opaque=1, ext_fields=fields, body=body)
    USER.sign(request.ext_fields, body)
    assert validator.refusal("127.0.0.1", request) is None
    started = time.perf_counter()
    for _ in range(repeat):
        validator.refusal("127.0.0.1", request)
    check = (time.perf_counter() - started) / repeat * 1e6
    started = time.perf_counter()
    for _ in range(repeat):
        USER.sign(dict(fields), body)
    return check, (time.perf_counter() - started) / repeat * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--window-s", type=float, default=0.5, help="length of one measured window")
    parser.add_argument("--rounds", type=int, default=40, help="windows per mode (one round: one window of each)")
    parser.add_argument("--tasks", type=int, default=32)
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument(
        "--control", action="store_true", help="ACL off in both slots: measures the bench's bias between its slots"
    )
    parser.add_argument(
        "--client",
        choices=("python", "java"),
        default="python",
        help="the load: shoal.client (default) or the RocketMQ 4.9.7 Java client (bench/java/AclLoad.java)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON line instead of text")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="shoal-acl-bench-") as temp:
        (Path(temp) / "off").mkdir()
        (Path(temp) / "on").mkdir()
        with cluster(Path(temp) / "off", False) as off, cluster(Path(temp) / "on", not args.control) as on:
            commitlog_dirs = [Path(temp) / mode / "store" / "commitlog" for mode in ("off", "on")]
            if args.client == "java":
                measured = measure_java({False: off, True: on}, args, commitlog_dirs, Path(temp))
            else:
                measured = asyncio.run(measure({False: off, True: on}, args, commitlog_dirs))
    rates = measured["rates"]
    median = {acl: statistics.median(values) for acl, values in rates.items()}
    paired = paired_ratio(rates[False], rates[True])
    broker_us, client_us = measured["broker_us_per_msg"], measured["client_us_per_msg"]
    result = {
        "acl_off_msgs_per_s": round(median[False]),
        "acl_on_msgs_per_s": round(median[True]),
        "paired_ratio": round(paired, 3),
        "rate_ratio": round(median[True] / median[False], 3) if median[False] else 0.0,
        "broker_cpu_us_per_msg_off": round(broker_us[False], 1),
        "broker_cpu_us_per_msg_on": round(broker_us[True], 1),
        "broker_cpu_ratio_off_on": round(broker_us[False] / broker_us[True], 3) if broker_us[True] else 0.0,
        "client_cpu_us_per_msg_off": round(client_us[False], 1),
        "client_cpu_us_per_msg_on": round(client_us[True], 1),
        "windows_per_mode": args.rounds,
        "control": args.control,
        "client": args.client,
    }
    check_us, sign_us = check_cost_us(args.body_bytes)
    result |= {"broker_check_us_per_request": round(check_us, 2), "client_sign_us_per_request": round(sign_us, 2)}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"client: {'the RocketMQ 4.9.7 Java client' if args.client == 'java' else 'shoal.client'}")
        if args.control:
            print("control run: ACL off in both slots; 'on' below names the second slot")
        for acl in (False, True):
            print(f"ACL {'on ' if acl else 'off'}: msg/s per window " + " ".join(f"{rate:.0f}" for rate in rates[acl]))
        print(
            f"on/off = {result['paired_ratio']} (median of the {args.rounds} rounds' on/off); "
            f"medians: ACL off {median[False]:.0f} msg/s, ACL on {median[True]:.0f} msg/s "
            f"(ratio {result['rate_ratio']})"
        )
        print(
            f"broker CPU per message: off {broker_us[False]:.1f} us, on {broker_us[True]:.1f} us "
            f"(throughput bound on/off = {result['broker_cpu_ratio_off_on']}); "
            f"client CPU per message: off {client_us[False]:.1f} us, on {client_us[True]:.1f} us"
        )
        print(f"in-process: the broker's check {check_us:.2f} us per request, the client's signing {sign_us:.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
