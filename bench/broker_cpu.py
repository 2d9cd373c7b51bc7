#!/usr/bin/env python3
"""Broker CPU per pipelined single send: Shoal beside `python_ceiling.py`'s server, in one run.

Issue 27's per-request target: Shoal's broker process must spend at most 3x the CPU per
pipelined single send that the minimal ceiling broker spends. Both servers get the same load:
BENCH_N 1 KiB messages, one per request, WINDOW requests in flight on one connection, from a
raw-socket client whose frames are encoded before the clock starts (so the client is never what
limits the rate, and each server is measured on the bytes a real client sends: for Shoal, the
SEND_MESSAGE_V2 frame with the JSON header the Java client writes).

CPU is read from /proc/<pid>/task/*/schedstat (nanoseconds on a CPU, every thread of the server
process) before and after each timed phase, and per thread for Shoal (the event-loop thread and the rest). A warm-up
of WARM sends runs first on both, and each server is left to go idle before the clock starts
(its warm-up's bytes flushed). The CPU is read FLUSHED_WAIT_S after the last answer, so each
server pays for flushing the timed phase's bytes to disk (its ASYNC_FLUSH thread's fdatasync),
not only for writing them to the page cache: read at the last answer, a 0.4 s ceiling run left
most of its bytes for a flush the clock never saw, while Shoal's longer run paid for most of its own.

In a run both servers are up at once and each takes ROUNDS timed phases of n/ROUNDS sends, the two
servers' phases alternating (which goes first flips every round). The run's ratio is Shoal's CPU over
the ceiling's, each summed over its phases; the ratio of each pair of phases is printed too. Phases
seconds apart see the same machine: with one phase per server, started a minute apart, the
ceiling's own figure moved 4.7-10.7 us per send between runs on this VM, and the ratio with it.

  .venv/bin/python bench/broker_cpu.py                     # 60,000 sends, 6 rounds, ASYNC_FLUSH, 2 runs
  .venv/bin/python bench/broker_cpu.py --n 100000 --runs 1 --flush SYNC_FLUSH
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from shoal.client import Admin, MQClientError
from shoal.protocol import RemotingCommand, RequestCode, encode_frame_bytes
from shoal.protocol.headers import SendMessageRequestHeaderV2

HERE = Path(__file__).resolve().parent
CEILING = Path(os.environ.get("SHOAL_CEILING", HERE.parent.parent / "shared" / "bench" / "python_ceiling.py"))
CLK_TCK = os.sysconf("SC_CLK_TCK")
TOPIC = "CpuBenchTopic"
QUEUES = 8
SIZE = 1024
_LENGTH = struct.Struct(">i")
CEILING_FRAME = struct.Struct("<IBI")  # python_ceiling.py: frame_len, op, count
CEILING_ACK_BYTES = 17  # python_ceiling.py's ACK struct "<IBqI"
SETTLED_CPU_S = 0.03
"""At most this much CPU in half a second counts as idle."""
SETTLED_DIRTY_BYTES = 64 << 20
"""Below this much dirty page cache the disk counts as caught up."""
FLUSHED_WAIT_S = 1.5
"""Longer than both servers' asynchronous flush intervals (the ceiling's 200 ms, Shoal's
flushIntervalCommitLog of 500 ms) with a margin: by then each has flushed what it was sent."""


def cpu_s(pid: int, tid: int | None = None) -> float:
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    fields = Path(path).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def run_time_s(pid: int) -> float:
    """CPU time of every live thread of `pid`, from the scheduler's nanosecond counts
    (/proc/<pid>/task/*/schedstat). /proc/<pid>/stat counts in 10 ms ticks, which is 10-15 % of a
    ceiling phase of 10,000 sends; the servers' threads live as long as they do."""
    total_ns = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total_ns += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total_ns / 1e9


def thread_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds per thread of `pid`, keyed by 'tid name'."""
    result: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            result[f"{task.name} {name}"] = cpu_s(pid, int(task.name))
        except (FileNotFoundError, ProcessLookupError):
            continue
    return result


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(port: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def pump(sock: socket.socket, frames: list[bytes], window: int, response_size: int | None) -> int:
    """Send `frames` keeping at most `window` unanswered; return the answered count. Responses are
    counted by their length prefix (`response_size` None) or as fixed-size records."""
    sent = answered = 0
    buffer = bytearray()
    total = len(frames)
    chunk = max(1, window // 8)
    while answered < total:
        if sent < total and sent - answered + chunk <= window:
            end = min(total, sent + chunk)
            sock.sendall(b"".join(frames[sent:end]))
            sent = end
            continue
        data = sock.recv(1 << 20)
        if not data:
            raise ConnectionError("server closed the connection")
        buffer += data
        position = 0
        while True:
            if response_size is not None:
                if len(buffer) - position < response_size:
                    break
                position += response_size
            else:
                if len(buffer) - position < 4:
                    break
                (length,) = _LENGTH.unpack_from(buffer, position)
                if len(buffer) - position - 4 < length:
                    break
                position += 4 + length
            answered += 1
        del buffer[:position]
    return answered


@dataclass
class Measurement:
    sends: int
    wall_s: float
    cpu_s: float
    threads: dict[str, float]

    @property
    def us_per_send(self) -> float:
        return self.cpu_s / self.sends * 1e6


class Server:
    """One server under the benchmark's load: its process, a connected socket, how it answers."""

    def __init__(self, name: str, pid: int, sock: socket.socket, response_size: int | None) -> None:
        self.name = name
        self.pid = pid
        self.sock = sock
        self.response_size = response_size

    def phase(self, frames: list[bytes], window: int, *, per_thread: bool = False) -> Measurement:
        """One timed phase of `frames`, after the server has gone idle; CPU read FLUSHED_WAIT_S after
        the last answer (so the phase's flush is paid inside it)."""
        settle(self.pid)
        threads_before = thread_cpu_s(self.pid) if per_thread else {}
        before, started = run_time_s(self.pid), time.perf_counter()
        try:
            answered = pump(self.sock, frames, window, self.response_size)
        except OSError as error:  # python_ceiling.py's server exits 600 s after it started
            raise SystemExit(f"the {self.name} server closed the connection ({error}): see its output above") from None
        wall = time.perf_counter() - started
        time.sleep(FLUSHED_WAIT_S)
        after = run_time_s(self.pid)
        threads_after = thread_cpu_s(self.pid) if threads_before else {}
        threads = {
            name: threads_after[name] - threads_before.get(name, 0.0)
            for name in threads_after
            if threads_after[name] - threads_before.get(name, 0.0) > 0
        }
        return Measurement(answered, wall, after - before, threads)


def ceiling_frames(count: int) -> list[bytes]:
    payload = os.urandom(SIZE)
    frame = CEILING_FRAME.pack(CEILING_FRAME.size - 4 + 4 + SIZE, 1, 1) + struct.pack("<I", SIZE) + payload
    return [frame] * count


@contextlib.contextmanager
def ceiling_server(n: int, warm: int, window: int, work: Path) -> Iterator[Server]:
    """python_ceiling.py's server, warmed by `warm` sends, with room for `n` more."""
    port_file = work / "port"
    store_bytes = (n + warm) * (SIZE + 200) + (64 << 20)
    server = subprocess.Popen(
        [sys.executable, str(CEILING), "--serve", str(work), "async", str(port_file), str(store_bytes)],
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        port = int(port_file.read_text())
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pump(sock, ceiling_frames(warm), window, CEILING_ACK_BYTES)
            yield Server("ceiling", server.pid, sock, CEILING_ACK_BYTES)
    finally:
        stop(server)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def send_frames(count: int, first_opaque: int) -> list[bytes]:
    """SEND_MESSAGE_V2 frames as the Java client writes them (JSON header, letters a..n)."""
    payload = os.urandom(SIZE)
    frames = []
    for index in range(count):
        unique = uuid.uuid4().hex.upper()
        header = SendMessageRequestHeaderV2(
            producer_group="PID_cpu_bench",
            topic=TOPIC,
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=index % QUEUES,
            sys_flag=0,
            born_timestamp_ms=int(time.time() * 1000),
            flag=0,
            properties=f"UNIQ_KEY\x01{unique}\x02WAIT\x01true\x02",
            reconsume_times=0,
            unit_mode=False,
            batch=False,
        )
        command = RemotingCommand(
            code=RequestCode.SEND_MESSAGE_V2,
            opaque=first_opaque + index,
            ext_fields=header.to_ext_fields(),
            body=payload,
        )
        frames.append(encode_frame_bytes(command))
    return frames


async def create_topic(namesrv: str) -> None:
    admin = Admin(namesrv)
    await admin.start()
    deadline = time.monotonic() + 60
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


def dirty_bytes() -> int:
    """Bytes of the page cache waiting for, or in, writeback (system-wide, /proc/meminfo)."""
    fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    return sum(int(fields[name].split()[0]) * 1024 for name in ("Dirty", "Writeback"))


def settle(pid: int, timeout_s: float = 60.0) -> None:
    """Wait until the server is idle after the warm-up, its CPU quiet and the page cache written
    back. Shoal zero-fills the next CommitLog segment in the background (ASYNC_FLUSH's warming,
    1 GiB once per GiB appended): the fill waits on the disk, not the CPU, and a timed phase that
    overlaps its writeback pays for it in every fdatasync and page fault (measured: 5 us more per
    send on the flush thread and 7 on the event loop's, where 0.35 us is the amortised cost)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = cpu_s(pid)
        time.sleep(0.5)
        if cpu_s(pid) - before < SETTLED_CPU_S and dirty_bytes() < SETTLED_DIRTY_BYTES:
            return


def start_profiler(pid: int, profile: str) -> subprocess.Popen[bytes] | None:
    """py-spy sampling the broker during the timed phase (`--profile`: collapsed stacks to a file)."""
    if not profile:
        return None
    profiler = subprocess.Popen(
        ["py-spy", "record", "-p", str(pid), "-r", "400", "-f", "raw", "-o", profile, "--threads"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)  # py-spy attaches before the clock starts
    return profiler


def start_brokers(
    count: int, flush: str, work: Path, extra_conf: str, log: IO[bytes]
) -> tuple[list[subprocess.Popen[bytes]], list[int], str]:
    """A NameServer and `count` brokers (broker groups broker-0, broker-1, ...), each with its
    own store and port; returns the processes (NameServer first), the broker ports, the NameServer."""
    namesrv_port = free_port()
    python = [sys.executable, "-m", "shoal.cli.main", "--log-level", "WARNING"]
    processes = [subprocess.Popen([*python, "namesrv", "--port", str(namesrv_port)], stdout=log, stderr=log)]
    wait_port(namesrv_port, 30)
    ports = []
    for index in range(count):
        port = free_port()
        conf = work / f"broker-{index}.conf"
        conf.write_text(
            f"brokerName=broker-{index}\nbrokerIP1=127.0.0.1\nlistenPort={port}\nmetricsPort=-1\n"
            f"namesrvAddr=127.0.0.1:{namesrv_port}\nstorePathRootDir={work / f'store-{index}'}\n"
            f"flushDiskType={flush}\n" + extra_conf.replace(";", "\n") + "\n"
        )
        processes.append(subprocess.Popen([*python, "broker", "-c", str(conf)], stdout=log, stderr=log))
        ports.append(port)
    for port in ports:
        if not wait_port(port, 60):
            raise SystemExit(f"a broker did not start: {(work / 'servers.log').read_text()[-2000:]}")
    return processes, ports, f"127.0.0.1:{namesrv_port}"


@contextlib.contextmanager
def shoal_server(warm: int, window: int, flush: str, work: Path, extra_conf: str) -> Iterator[Server]:
    """A NameServer and a Shoal broker with the bench topic, warmed by `warm` sends."""
    with (work / "servers.log").open("ab") as log:
        processes, (broker_port,), namesrv = start_brokers(1, flush, work, extra_conf, log)
        try:
            asyncio.run(create_topic(namesrv))
            with socket.create_connection(("127.0.0.1", broker_port)) as sock:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                pump(sock, send_frames(warm, 1), window, None)
                yield Server("shoal", processes[1].pid, sock, None)
        finally:
            for process in reversed(processes):
                stop(process)


@dataclass
class Run:
    """One run: `rounds` pairs of phases, the two servers' in alternating order."""

    ceiling: list[Measurement]
    shoal: list[Measurement]

    @staticmethod
    def total(phases: list[Measurement]) -> Measurement:
        threads: dict[str, float] = {}
        for phase in phases:
            for name, seconds in phase.threads.items():
                threads[name] = threads.get(name, 0.0) + seconds
        return Measurement(
            sum(p.sends for p in phases), sum(p.wall_s for p in phases), sum(p.cpu_s for p in phases), threads
        )

    def round_ratios(self) -> list[float]:
        return [s.us_per_send / c.us_per_send for c, s in zip(self.ceiling, self.shoal, strict=True)]


def measure_run(args: argparse.Namespace, work: Path) -> Run:
    """Both servers up at once; `args.rounds` rounds of n/rounds sends each, alternating which goes
    first. Paired phases seconds apart see the same machine: on this VM the ceiling's own figure
    moved 4.7-10.7 us per send between runs minutes apart, and so did the ratio of two runs."""
    per_round = max(1, args.n // args.rounds)
    shoal_frames = send_frames(per_round * args.rounds, args.warm + 1)
    ceiling_phase_frames = ceiling_frames(per_round)
    run = Run([], [])
    (work / "ceiling").mkdir()
    (work / "shoal").mkdir()
    with contextlib.ExitStack() as stack:
        if not args.shoal_only:
            ceiling = stack.enter_context(
                ceiling_server(per_round * args.rounds, args.warm, args.window, work / "ceiling")
            )
        shoal = stack.enter_context(shoal_server(args.warm, args.window, args.flush, work / "shoal", args.conf))
        profiler = start_profiler(shoal.pid, args.profile)
        try:
            for index in range(args.rounds):
                frames = shoal_frames[index * per_round : (index + 1) * per_round]
                order = ("ceiling", "shoal") if index % 2 == 0 else ("shoal", "ceiling")
                for name in order:
                    if name == "shoal":
                        run.shoal.append(shoal.phase(frames, args.window, per_thread=True))
                    elif not args.shoal_only:
                        run.ceiling.append(ceiling.phase(ceiling_phase_frames, args.window))
                    else:
                        run.ceiling.append(Measurement(1, 1.0, 1e-6, {}))
        finally:
            if profiler is not None:
                profiler.send_signal(2)
                profiler.wait(60)
    return run


def drive(port: int, n: int, warm: int, window: int) -> None:
    """`--drive`: one client process against one broker; prints 'DRIVEN <sends> <start> <end>'
    (wall clock, so a parent can tell how long several drivers ran together)."""
    warm_frames = send_frames(warm, 1)
    frames = send_frames(n, warm + 1)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pump(sock, warm_frames, window, None)
        print("WARM", flush=True)
        sys.stdin.readline()  # the parent starts every driver's timed phase at once
        started = time.time()
        answered = pump(sock, frames, window, None)
        print(f"DRIVEN {answered} {started} {time.time()}", flush=True)


def run_scale(count: int, n: int, warm: int, window: int, flush: str, work: Path, extra_conf: str) -> float:
    """Sends per second of `count` broker processes together, each driven by its own client
    process with n sends (the brokers share the machine's cores)."""
    with (work / "servers.log").open("ab") as log:
        processes, ports, namesrv = start_brokers(count, flush, work, extra_conf, log)
        drivers: list[subprocess.Popen[str]] = []
        try:
            asyncio.run(create_topic(namesrv))
            for port in ports:
                drivers.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            __file__,
                            "--drive",
                            str(port),
                            "--n",
                            str(n),
                            "--warm",
                            str(warm),
                            "--window",
                            str(window),
                        ],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                )
            for driver in drivers:
                assert driver.stdout is not None and driver.stdout.readline().strip() == "WARM"
            for process in processes[1:]:
                settle(process.pid)
            for driver in drivers:
                assert driver.stdin is not None
                driver.stdin.write("go\n")
                driver.stdin.flush()
            results = []
            for driver in drivers:
                assert driver.stdout is not None
                _, sent, began, ended = driver.stdout.readline().split()
                results.append((int(sent), float(began), float(ended)))
                driver.wait(60)
        finally:
            for driver in drivers:
                if driver.poll() is None:
                    driver.kill()
                    driver.wait(10)
            for process in reversed(processes):
                stop(process)
    total = sum(sent for sent, _, _ in results)
    return total / (max(ended for _, _, ended in results) - min(began for _, began, _ in results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=60_000, help="timed sends per server (default 60,000)")
    parser.add_argument("--warm", type=int, default=5_000, help="untimed sends first (default 5,000)")
    parser.add_argument("--window", type=int, default=256, help="requests in flight (default 256)")
    parser.add_argument("--runs", type=int, default=2, help="runs, each measuring both servers (default 2)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=6,
        help="phases per server in a run, the two servers' alternating, n/rounds sends each (default 6)",
    )
    parser.add_argument("--flush", default="ASYNC_FLUSH", help="Shoal's flushDiskType (default ASYNC_FLUSH)")
    parser.add_argument("--conf", default="", help="extra broker.conf lines for Shoal, ';'-separated")
    parser.add_argument("--profile", default="", help="py-spy collapsed stacks of Shoal's timed phase to this file")
    parser.add_argument("--shoal-only", action="store_true", help="skip the ceiling server")
    parser.add_argument(
        "--scale",
        action="store_true",
        help="instead: sends/s of one broker process, then of two side by side (two broker groups on this "
        "machine, each driven by its own client process): what a second core gives",
    )
    parser.add_argument("--drive", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive:
        drive(args.drive, args.n, args.warm, args.window)
        return
    if args.scale:
        for run in range(1, args.runs + 1):
            rates = []
            for count in (1, 2):
                with tempfile.TemporaryDirectory(prefix="shoal-cpu-") as tmp:
                    rates.append(run_scale(count, args.n, args.warm, args.window, args.flush, Path(tmp), args.conf))
            print(
                f"SCALE {run} load={os.getloadavg()[0]:.2f} | one broker {rates[0]:,.0f} sends/s | two brokers "
                f"{rates[1]:,.0f} sends/s | {rates[1] / rates[0]:.2f}x",
                flush=True,
            )
        return
    if args.rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    if not args.shoal_only and not CEILING.exists():
        raise SystemExit(f"no {CEILING}: set SHOAL_CEILING to python_ceiling.py, or pass --shoal-only")
    for run in range(1, args.runs + 1):
        load = os.getloadavg()[0]
        with tempfile.TemporaryDirectory(prefix="shoal-cpu-") as tmp:
            measured = measure_run(args, Path(tmp))
        ceiling, shoal = Run.total(measured.ceiling), Run.total(measured.shoal)
        ratio = shoal.us_per_send / ceiling.us_per_send
        print(
            f"RUN {run} load={load:.2f} window={args.window} n={shoal.sends} rounds={args.rounds} | ceiling "
            f"{ceiling.us_per_send:.1f} us/send ({ceiling.sends / ceiling.wall_s:,.0f}/s) | shoal {args.flush} "
            f"{shoal.us_per_send:.1f} us/send ({shoal.sends / shoal.wall_s:,.0f}/s) | ratio {ratio:.2f}x "
            f"(target <= 3.00x)",
            flush=True,
        )
        if not args.shoal_only:
            ratios = measured.round_ratios()
            print(
                "  rounds (ceiling / shoal us per send, ratio): "
                + ", ".join(
                    f"{c.us_per_send:.1f} / {s.us_per_send:.1f} {r:.2f}x"
                    for c, s, r in zip(measured.ceiling, measured.shoal, ratios, strict=True)
                )
                + f" | median ratio {statistics.median(ratios):.2f}x",
                flush=True,
            )
        busiest = sorted(shoal.threads.items(), key=lambda item: -item[1])[:4]
        print(
            "  shoal threads: "
            + ", ".join(f"{name} {seconds / shoal.sends * 1e6:.1f} us/send" for name, seconds in busiest),
            flush=True,
        )


if __name__ == "__main__":
    main()
