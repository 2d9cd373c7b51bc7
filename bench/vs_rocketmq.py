"""Shoal beside Apache RocketMQ 4.9.7, driven by the same client on both (issue 16).

    .venv/bin/python bench/vs_rocketmq.py [--quick] [--client java|python|cpp] [--reps 3] [--json out.json]
        [--markdown table.md] [--profile out.txt]

The load generator is bench/java/Load.java on the official RocketMQ 4.9.7 client (jars from
tools/get_rocketmq.py; compiled with javac into $SHOAL_CACHE_DIR/bench-java/<hash>). For each
repetition, each configuration and each broker (Shoal: `shoal namesrv` + `shoal broker`; RocketMQ:
NamesrvStartup + BrokerStartup through tests/interop/java/rocketmq_broker.py, the one launcher), a
fresh store, then one Load run that, for each send mode (sync from THREADS threads, async with
INFLIGHT outstanding, batches of BATCH), creates a topic, subscribes a live push consumer, sends
warm-up messages untimed, then COUNT timed messages of BODY bytes of random data, waits for the
live consumer and drains the topic with a second group. Meanwhile the master broker's CPU time and
RSS are read from /proc. Configurations: ASYNC_FLUSH, SYNC_FLUSH (both ASYNC_MASTER, no slave), and
ASYNC_FLUSH with a slave under an ASYNC_MASTER and under a SYNC_MASTER (the load starts once the slave's
HA connection is up). Cold start is the time from launching the broker (its
NameServer up) to the first SEND_OK seen by a Java producer already polling; recovery is the same
after a SIGKILL on a CommitLog filled with --recovery-mb of messages (once per broker). Medians of
the repetitions; every figure also as Shoal/RocketMQ. Brokers alternate order between repetitions,
and the two never run at once. --client python runs the same phases on shoal.client (bench/py_load.py),
--client cpp on the C++ client, PyPI rocketmq 0.4.4 (bench/cpp_load.py: sync and async only, CPP_BATCH).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
JAVA_SOURCES = Path(__file__).resolve().parent / "java"
PY_LOAD = Path(__file__).resolve().parent / "py_load.py"
CPP_LOAD = Path(__file__).resolve().parent / "cpp_load.py"
CLIENTS = ("java", "python", "cpp")
LOAD_JVM_OPTIONS = ("-Xms256m", "-Xmx512m", "-XX:+UseParallelGC")
CONFIGS: dict[str, dict[str, str]] = {
    "ASYNC_FLUSH": {"flushDiskType": "ASYNC_FLUSH", "brokerRole": "ASYNC_MASTER"},
    "SYNC_FLUSH": {"flushDiskType": "SYNC_FLUSH", "brokerRole": "ASYNC_MASTER"},
    "ASYNC_MASTER+slave": {"flushDiskType": "ASYNC_FLUSH", "brokerRole": "ASYNC_MASTER"},
    "SYNC_MASTER+slave": {"flushDiskType": "ASYNC_FLUSH", "brokerRole": "SYNC_MASTER"},
}
MODES = ("sync", "async", "batch")
CLIENT_MODES = {"java": MODES, "python": MODES, "cpp": ("sync", "async")}
CPP_BATCH = (
    'no batch mode with --client cpp: rocketmq-client-cpp 1.2.3 flags a batch with batch="1" in the '
    "SEND_MESSAGE header, which RocketMQ 4.9.7 reads with Boolean.parseBoolean as false and stores the whole "
    'encoded batch as one message (Shoal accepts "1"), so the two brokers would not store the same thing'
)
SYSTEMS = ("shoal", "rocketmq")
QUEUES = 8
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
LOAD_TIMEOUT_S = 900.0
RSS_SAMPLE_S = 0.25
TCP_ESTABLISHED = "01"
RECORD_BYTES_MIN = 1100
RECOVERY_MB = 1024
"""A 1 KB body's CommitLog record is at least this long (header, topic, properties): fill count = MB / this."""
CLK_TCK = os.sysconf("SC_CLK_TCK")
METRICS: tuple[tuple[str, str, bool], ...] = (
    # key, label, higher is better
    ("produceRate", "produce msg/s", True),
    ("consumeRate", "consume msg/s (drain)", True),
    ("sendP50Ms", "send p50 ms", False),
    ("sendP99Ms", "send p99 ms", False),
    ("sendP999Ms", "send p999 ms", False),
    ("e2eP50Ms", "end-to-end p50 ms", False),
    ("e2eP99Ms", "end-to-end p99 ms", False),
)
BROKER_METRICS: tuple[tuple[str, str], ...] = (
    ("rssMaxMb", "broker RSS peak MB"),
    ("rssAnonMaxMb", "broker RSS anon peak MB"),
    ("cpuSecondsPerMillion", "broker CPU s / 1M msgs"),
)


def _load_by_path(name: str, path: Path) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


# One launcher for RocketMQ's servers, shared with tests/interop/java (loaded by path there too).
launcher = _load_by_path("shoal_tests_rocketmq_broker", REPO_ROOT / "tests" / "interop" / "java" / "rocketmq_broker.py")
# Its port pickers too (tests/ports.py: below the ephemeral range, claimed across processes).
free_port = launcher.free_port
free_broker_port = launcher.free_broker_port
get_rocketmq = _load_by_path("shoal_tools_get_rocketmq", REPO_ROOT / "tools" / "get_rocketmq.py")


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def compile_load(lib: Path) -> Path:
    """bench/java/*.java compiled once per source hash into the cache folder (outside the repo)."""
    return compile_java(JAVA_SOURCES, lib, "bench-java")


def compile_java(source_dir: Path, lib: Path, cache_name: str) -> Path:
    """`source_dir`/*.java compiled against `lib` once per source hash into `<cache>/<cache_name>/<hash>`."""
    sources = sorted(source_dir.glob("*.java"))
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    classes: Path = get_rocketmq.cache_root() / cache_name / digest.hexdigest()[:16]
    if (classes / ".compiled").is_file():
        return classes
    partial = classes.with_name(classes.name + f".{os.getpid()}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    command = ["javac", "-nowarn", "-encoding", "UTF-8", "-d", str(partial), "-cp", f"{lib}/*", *map(str, sources)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"javac failed:\n{result.stdout}\n{result.stderr}")
    (partial / ".compiled").write_text("")
    shutil.rmtree(classes, ignore_errors=True)
    partial.rename(classes)
    return classes


# -- /proc readings of a broker process ---------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, RssAnon) in MB: RSS counts the mapped CommitLog pages the process touched, RssAnon does not."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "RssAnon"):
            values[key] = int(rest.split()[0]) / 1024
    return values.get("VmRSS", 0.0), values.get("RssAnon", 0.0)


@dataclass
class Sampler:
    """Peak RSS of `pid` and the machine's 1-minute load average, sampled in a thread."""

    pid: int
    rss: float = 0.0
    anon: float = 0.0
    loads: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(OSError):
                rss, anon = rss_mb(self.pid)
                self.rss, self.anon = max(self.rss, rss), max(self.anon, anon)
            self.loads.append(os.getloadavg()[0])
            self.stop.wait(RSS_SAMPLE_S)

    @contextlib.contextmanager
    def running(self) -> Iterator[Sampler]:
        thread = threading.Thread(target=self.run, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.stop.set()
            thread.join()


# -- the two systems ------------------------------------------------------------------------------------


@dataclass
class Broker:
    """A started master or slave: its pid, address, HA listening port and a stop function."""

    pid: int
    addr: str
    stopper: Any
    ha_port: int = 0

    def stop(self, sig: int = signal.SIGTERM) -> None:
        self.stopper(sig)


def _stop_process(process: subprocess.Popen[bytes], sig: int) -> None:
    if process.poll() is None:
        process.send_signal(sig)
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _wait_line(path: Path, line: str, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while line not in path.read_text(errors="replace"):
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode}:\n{path.read_text(errors='replace')[-3000:]}")
        if time.monotonic() > deadline:
            process.kill()
            raise SystemExit(f"{what}: {line!r} not seen in {START_TIMEOUT_S} s")
        time.sleep(0.02)


@dataclass
class ShoalSystem:
    """`shoal namesrv` and `shoal broker` processes of this checkout (the broker under pyinstrument if asked)."""

    root: Path
    profile_to: Path | None = None
    name: str = "shoal"
    namesrv_addr: str = ""
    namesrv: subprocess.Popen[bytes] | None = None

    def _spawn(self, args: list[str], log_path: Path, ready: str, profile: bool = False) -> subprocess.Popen[bytes]:
        prefix = [sys.executable]
        if profile and self.profile_to is not None:
            prefix += ["-m", "pyinstrument", "-r", "session", "-o", str(self.profile_to)]
        with log_path.open("ab") as out:
            process = subprocess.Popen([*prefix, "-m", "shoal.cli.main", *args], stdout=out, stderr=subprocess.STDOUT)
        _wait_line(log_path, ready, process, f"shoal {args[0]}")
        return process

    def start_namesrv(self) -> None:
        port = free_port()
        self.root.mkdir(parents=True, exist_ok=True)
        self.namesrv = self._spawn(
            ["namesrv", "--host", "127.0.0.1", "--port", str(port)], self.root / "namesrv.log", "NameServer listening"
        )
        self.namesrv_addr = f"127.0.0.1:{port}"

    def stop_namesrv(self) -> None:
        if self.namesrv is not None:
            _stop_process(self.namesrv, signal.SIGTERM)
            self.namesrv = None

    def start_broker(
        self, name: str, directory: Path, settings: dict[str, str], *, slave: bool = False, profile: bool = False
    ) -> Broker:
        directory.mkdir(parents=True, exist_ok=True)
        port = free_broker_port()  # the broker binds port - 2 too (its VIP channel)
        conf = {
            "brokerClusterName": "DefaultCluster",
            "brokerName": name,
            "brokerId": "1" if slave else "0",
            "brokerIP1": "127.0.0.1",
            "listenHost": "127.0.0.1",
            "listenPort": str(port),
            "haListenPort": str(free_port()),
            "metricsHost": "127.0.0.1",
            "metricsPort": str(free_port()),
            "namesrvAddr": self.namesrv_addr,
            "storePathRootDir": str(directory / "store"),
            "autoCreateTopicEnable": "true",
            **settings,
            **({"brokerRole": "SLAVE"} if slave else {}),
        }
        path = directory / "broker.conf"
        path.write_text("".join(f"{key}={value}\n" for key, value in conf.items()))
        process = self._spawn(
            ["broker", "-c", str(path)], directory / "broker.log", f"listening on port {port}", profile=profile
        )
        ha_port = int(conf["haListenPort"])
        return Broker(process.pid, f"127.0.0.1:{port}", lambda sig: _stop_process(process, sig), ha_port)


@dataclass
class RocketMQSystem:
    """RocketMQ 4.9.7's NamesrvStartup and BrokerStartup (tests/interop/java/rocketmq_broker.py)."""

    root: Path
    lib: Path
    name: str = "rocketmq"
    namesrv_addr: str = ""
    namesrv: Any = None

    def start_namesrv(self) -> None:
        self.namesrv = launcher.RocketMQNamesrv(self.lib, self.root / "namesrv")
        self.namesrv.start()
        self.namesrv_addr = self.namesrv.addr

    def stop_namesrv(self) -> None:
        if self.namesrv is not None:
            self.namesrv.stop()
            self.namesrv = None

    def start_broker(
        self, name: str, directory: Path, settings: dict[str, str], *, slave: bool = False, profile: bool = False
    ) -> Broker:
        del profile  # the JVM is not profiled here
        extra = {"brokerName": name, **settings}
        if slave:
            extra.update(brokerId="1", brokerRole="SLAVE")
        broker = launcher.RocketMQBroker(
            self.lib, directory, namesrv_addr=self.namesrv_addr, store_dir=directory / "store", settings=extra
        )
        broker.start()
        assert broker.process is not None
        # 4.9.7's BrokerStartup sets haListenPort = listenPort + 1 (rocketmq_broker.py).
        return Broker(broker.process.pid, broker.addr, broker.stop, broker.port + 1)


System = ShoalSystem | RocketMQSystem


# -- the Java load generator ------------------------------------------------------------------------


@dataclass
class Java:
    """Runs the load generator: bench/java/Load.java, or its twins bench/py_load.py (shoal.client) and
    bench/cpp_load.py (the C++ client)."""

    lib: Path
    classes: Path
    log_dir: Path
    client: str = "java"

    def command(self, args: dict[str, object]) -> list[str]:
        if self.client in ("python", "cpp"):
            # The C++ client's batches are not batches to RocketMQ (CPP_BATCH): shoal.client fills the
            # CommitLog for the recovery figure; the probe timing the restart is the C++ client's.
            script = CPP_LOAD if self.client == "cpp" and args.get("role") != "fill" else PY_LOAD
            return [sys.executable, str(script), *(f"{key}={value}" for key, value in args.items())]
        properties = {
            "rocketmq.client.logRoot": str(self.log_dir),
            "rocketmq.client.logLevel": "WARN",
            "rocketmq.client.localOffsetStoreDir": str(self.log_dir / "offsets"),
        }
        return [
            "java",
            *LOAD_JVM_OPTIONS,
            *(f"-D{key}={value}" for key, value in properties.items()),
            "-cp",
            f"{self.classes}{os.pathsep}{self.lib}/*",
            "Load",
            *(f"{key}={value}" for key, value in args.items()),
        ]

    def spawn(self, args: dict[str, object]) -> subprocess.Popen[str]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        stderr = (self.log_dir / "load-stderr.log").open("a")
        # The C++ client logs to $HOME/logs/rocketmq-cpp: kept with the other client logs.
        env = {**os.environ, "HOME": str(self.log_dir)} if self.client == "cpp" else None
        process = subprocess.Popen(self.command(args), stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
        stderr.close()
        return process

    def events(self, process: subprocess.Popen[str], until: str | None = None) -> list[dict[str, Any]]:
        """JSON lines until the process exits (or until an `until` event); an "error" event ends the benchmark."""
        assert process.stdout is not None
        seen: list[dict[str, Any]] = []
        for line in process.stdout:
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            seen.append(event)
            if event["event"] == "error":
                process.kill()
                raise SystemExit(f"load generator: {event}; client log in {self.log_dir}")
            if event["event"] == until:
                return seen
        if process.wait(LOAD_TIMEOUT_S) != 0:
            raise SystemExit(f"load generator exited with {process.returncode}; see {self.log_dir}")
        return seen


# -- the measurements ---------------------------------------------------------------------------------------


def timed_start(
    java: Java, system: System, name: str, directory: Path, settings: dict[str, str], topic: str
) -> tuple[Broker, float]:
    """Start the broker while a Java producer polls `topic`; seconds from launch to its first SEND_OK."""
    probe = java.spawn({"role": "probe", "namesrv": system.namesrv_addr, "topic": topic})
    java.events(probe, until="ready")
    launched = time.time()
    broker = system.start_broker(name, directory, settings)
    try:
        accepted = [event for event in java.events(probe) if event["event"] == "accepted"]
    except SystemExit:
        broker.stop()
        raise
    if not accepted:
        broker.stop()
        raise SystemExit(f"{system.name}: the probe saw no SEND_OK")
    return broker, accepted[0]["t_ms"] / 1000 - launched


def ha_connected(port: int) -> bool:
    """An ESTABLISHED TCP connection with local port `port` (the master's end of a slave's HA link)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):  # the JVM accepts on a dual-stack socket
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                if state == TCP_ESTABLISHED and int(local.rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def wait_ha_connected(port: int, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ha_connected(port):
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: no slave connected to HA port {port} in {START_TIMEOUT_S} s")
        time.sleep(0.1)


def segment(args: argparse.Namespace) -> dict[str, str]:
    return {"mappedFileSizeCommitLog": str(args.segment_mb * 1024 * 1024)}


def run_config(
    java: Java, system: System, config: str, rep: int, args: argparse.Namespace, work: Path, *, profile: bool
) -> dict[str, Any]:
    """One configuration on one broker, on a fresh store: the Load run's results plus /proc readings."""
    directory = work / f"{system.name}-{config.replace('+', '-')}-r{rep}"
    name = f"bench-{config.split('+', maxsplit=1)[0].lower().replace('_', '-')}-r{rep}"
    settings = {**CONFIGS[config], "brokerName": name, **segment(args)}
    started: list[Broker] = []
    try:
        if config == "ASYNC_FLUSH" and not profile:
            master, cold_s = timed_start(java, system, name, directory / "master", settings, f"BenchProbe_r{rep}")
        else:
            master = system.start_broker(name, directory / "master", settings, profile=profile)
            cold_s = None
        started.append(master)
        if config.endswith("+slave"):
            started.append(system.start_broker(name, directory / "slave", settings, slave=True))
            wait_ha_connected(master.ha_port, f"{system.name} {config}")
        if settings["brokerRole"] == "SYNC_MASTER":
            # A SYNC_MASTER answers SLAVE_NOT_AVAILABLE until its slave reports (RocketMQ's HAClient: 5 s in).
            probe = java.spawn({"role": "probe", "namesrv": system.namesrv_addr, "topic": f"BenchSlaveUp_r{rep}"})
            java.events(probe)
        cpu_before = cpu_seconds(master.pid)
        load_args = {
            "role": "load",
            "namesrv": system.namesrv_addr,
            "broker": master.addr,
            "topic": f"Bench_{config.split('+', maxsplit=1)[0]}_r{rep}",
            "modes": ",".join(args.modes),
            "queues": QUEUES,
            "count": args.count,
            "batchCount": args.batch_count,
            "warm": args.warm,
            "threads": args.threads,
            "inflight": args.inflight,
            "batchSize": args.batch_size,
            "bodySize": args.body_bytes,
        }
        with Sampler(master.pid).running() as sampler:
            events = java.events(java.spawn(load_args))
        cpu = cpu_seconds(master.pid) - cpu_before
    finally:
        for broker in reversed(started):
            broker.stop()
        shutil.rmtree(directory, ignore_errors=True)
    results = {event["mode"]: event for event in events if event["event"] == "result"}
    for mode, result in results.items():
        # A send the client saw fail is counted in the table, not fatal (RocketMQ once failed 1 of 5,000 sync
        # sends under load); a message the broker acknowledged and no consumer got is.
        expected = args.warm + (args.batch_count if mode == "batch" else args.count)
        delivered = min(result["liveReceived"], result["drainReceived"]) + result["failures"]
        if delivered < expected:
            raise SystemExit(f"{system.name} {config} {mode}: incomplete run {result}")
        if result["failures"]:
            print(f"  {system.name} {config} {mode}: {result['failures']} sends failed at the client", flush=True)
    stored = sum(result["sent"] for result in results.values()) + args.warm * len(results)
    return {
        "modes": results,
        "rssMaxMb": sampler.rss,
        "rssAnonMaxMb": sampler.anon,
        "cpuSeconds": cpu,
        "cpuSecondsPerMillion": cpu / stored * 1e6,
        "coldStartS": cold_s,
        "loadAvg": statistics.mean(sampler.loads) if sampler.loads else os.getloadavg()[0],
    }


def recovery(java: Java, system: System, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Fill a CommitLog with --recovery-mb of 1 KB messages, SIGKILL the broker, time the restart to a SEND_OK."""
    directory = work / f"{system.name}-recovery"
    name = "bench-recovery"
    settings = {**CONFIGS["ASYNC_FLUSH"], "brokerName": name, **segment(args)}
    count = args.recovery_mb * 1024 * 1024 // RECORD_BYTES_MIN
    started: list[Broker] = []  # stopped on the way out, also when the fill or the probe fails
    try:
        broker = system.start_broker(name, directory, settings)
        started.append(broker)
        fill = java.spawn(
            {
                "role": "fill",
                "namesrv": system.namesrv_addr,
                "broker": broker.addr,
                "topic": "BenchFill",
                "count": count,
            }
        )
        filled = next(event for event in java.events(fill) if event["event"] == "filled")
        if filled["failures"]:
            raise SystemExit(f"{system.name}: {filled['failures']} fill sends failed")
        commitlog = directory / "store" / "commitlog"
        broker.stop(signal.SIGKILL)
        broker, recovery_s = timed_start(java, system, name, directory, settings, "BenchFill")
        started.append(broker)
        return {
            "messages": count,
            "fillSeconds": filled["seconds"],
            "recoveryS": recovery_s,
            "commitlog": str(commitlog),
        }
    finally:
        for running in started:
            running.stop()
        shutil.rmtree(directory, ignore_errors=True)


# -- the report ------------------------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def summarize(
    runs: list[dict[str, Any]], recoveries: dict[str, dict[str, Any]], args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Rows of (configuration, mode, metric, shoal, rocketmq, ratio), medians over the repetitions."""
    rows: list[dict[str, Any]] = []

    def add(config: str, mode: str, label: str, values: dict[str, list[float]], higher_better: bool) -> None:
        shoal, rocketmq = median(values["shoal"]), median(values["rocketmq"])
        rows.append(
            {
                "config": config,
                "mode": mode,
                "metric": label,
                "shoal": shoal,
                "rocketmq": rocketmq,
                "ratio": shoal / rocketmq if rocketmq else float("nan"),
                "higherIsBetter": higher_better,
                "samples": len(values["shoal"]),
            }
        )

    for config in args.configs:
        of = [run for run in runs if run["config"] == config]
        for mode in args.modes:
            for key, label, higher in METRICS:
                values = {s: [run["result"]["modes"][mode][key] for run in of if run["system"] == s] for s in SYSTEMS}
                add(config, mode, label, values, higher)
        for key, label in BROKER_METRICS:
            values = {s: [run["result"][key] for run in of if run["system"] == s] for s in SYSTEMS}
            add(config, "all", label, values, False)
    cold = {
        s: [
            run["result"]["coldStartS"]
            for run in runs
            if run["system"] == s and run["result"]["coldStartS"] is not None
        ]
        for s in SYSTEMS
    }
    if all(cold.values()):
        add("empty store", "-", "cold start to first SEND_OK s", cold, False)
    if recoveries:
        values = {s: [recoveries[s]["recoveryS"]] for s in SYSTEMS}
        add(f"{args.recovery_mb} MB CommitLog", "-", "restart after SIGKILL to first SEND_OK s", values, False)
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| configuration | send mode | figure | Shoal | RocketMQ 4.9.7 | Shoal/RocketMQ |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        fmt = "{:,.0f}" if abs(row["shoal"]) >= 100 or abs(row["rocketmq"]) >= 100 else "{:,.2f}"
        better = "higher" if row["higherIsBetter"] else "lower"
        ratio = f"{row['ratio']:.2f}x" if row["rocketmq"] else "n/a (RocketMQ 0)"
        lines.append(
            f"| {row['config']} | {row['mode']} | {row['metric']} ({better} is better) | {fmt.format(row['shoal'])} "
            f"| {fmt.format(row['rocketmq'])} | {ratio} |"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Shoal vs Apache RocketMQ 4.9.7 with the same client (--client): throughput, latency, RSS, CPU, "
        "cold start and recovery; medians of --reps runs and Shoal/RocketMQ ratios (defaults, on the project's "
        "2-core VM under load: about 13 min with the Java client, 9 with shoal.client, 11 with the C++ client).",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny counts, 1 repetition, 16 MB recovery")
    parser.add_argument("--reps", type=int, default=3, help="repetitions (medians over them)")
    parser.add_argument("--count", type=int, default=5_000, help="timed messages per sync / async run")
    parser.add_argument("--batch-count", type=int, default=20_000, help="timed messages per batch run")
    parser.add_argument("--warm", type=int, default=1_000, help="untimed warm-up messages per mode")
    parser.add_argument("--threads", type=int, default=8, help="producer threads")
    parser.add_argument("--inflight", type=int, default=256, help="async sends outstanding")
    parser.add_argument("--batch-size", type=int, default=32, help="messages per batch send")
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument(
        "--recovery-mb",
        type=int,
        help="CommitLog size for the recovery figure (0: skip; default 1024 with the Java client, 0 with the "
        "others: it is the broker's figure, and skipping it keeps a run of all three clients near 25 min)",
    )
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"comma list of {', '.join(CONFIGS)}")
    parser.add_argument(
        "--modes", help="comma list of sync, async, batch (default: all three; with --client cpp: sync, async)"
    )
    parser.add_argument(
        "--segment-mb", type=int, default=1024, help="mappedFileSizeCommitLog of both brokers in MB (--quick: 64)"
    )
    parser.add_argument(
        "--client",
        choices=CLIENTS,
        default="java",
        help="the load generator: the RocketMQ 4.9.7 Java client (bench/java/Load.java), shoal.client "
        "(bench/py_load.py) or the C++ client, PyPI rocketmq 0.4.4 (bench/cpp_load.py); same phases; cold start "
        "and recovery are probed with it too",
    )
    parser.add_argument("--json", type=Path, help="write every run and the summary rows here")
    parser.add_argument(
        "--markdown", type=Path, help="write the table and its run line here too (for docs/performance.md)"
    )
    parser.add_argument("--work-dir", type=Path, help="stores and logs (default: a temporary folder, removed)")
    parser.add_argument(
        "--profile",
        type=Path,
        help="instead of the comparison: one ASYNC_FLUSH Load run against a Shoal broker under pyinstrument; "
        "its text report goes to this file",
    )
    args = parser.parse_args(argv)
    if args.recovery_mb is None:
        args.recovery_mb = RECOVERY_MB if args.client == "java" else 0
    if args.quick:
        args.reps, args.count, args.batch_count, args.warm = 1, 300, 640, 50
        args.recovery_mb = min(args.recovery_mb, 16)  # --recovery-mb 0 still skips it
        args.segment_mb = 64
    args.configs = [config for config in args.configs.split(",") if config]
    args.modes = [mode for mode in (args.modes or ",".join(CLIENT_MODES[args.client])).split(",") if mode]
    if args.client == "cpp" and "batch" in args.modes:
        parser.error(CPP_BATCH)
    unknown = [c for c in args.configs if c not in CONFIGS] + [m for m in args.modes if m not in MODES]
    if unknown:
        parser.error(f"unknown configuration or mode: {', '.join(unknown)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not on PATH (JDK 8+ needed)")
    lib = get_rocketmq.ensure_jars()
    classes = compile_load(lib)
    with contextlib.ExitStack() as stack:
        work = args.work_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="shoal-vs-rocketmq-")))
        work.mkdir(parents=True, exist_ok=True)
        java = Java(lib, classes, work / "client-logs", args.client)
        if args.profile:
            return profile(java, args, work)
        loads = [os.getloadavg()[0]]
        runs: list[dict[str, Any]] = []
        recoveries: dict[str, dict[str, Any]] = {}
        started = time.monotonic()
        for rep in range(args.reps):
            order = SYSTEMS if rep % 2 == 0 else tuple(reversed(SYSTEMS))
            for system_name in order:
                system = make_system(system_name, work / f"r{rep}" / system_name, lib)
                system.start_namesrv()
                try:
                    for config in args.configs:
                        log(f"rep {rep + 1}/{args.reps} {system_name} {config} ...")
                        result = run_config(java, system, config, rep, args, work, profile=False)
                        runs.append({"rep": rep, "system": system_name, "config": config, "result": result})
                        loads.append(result["loadAvg"])
                        for mode, figures in result["modes"].items():
                            log(f"  {mode:5} {describe(figures)}")
                        log(
                            f"  broker RSS {result['rssMaxMb']:.0f} MB (anon {result['rssAnonMaxMb']:.0f}), "
                            f"CPU {result['cpuSecondsPerMillion']:.1f} s/1M msgs, cold start {result['coldStartS']}"
                        )
                    if rep == args.reps - 1 and args.recovery_mb > 0:
                        log(f"{system_name}: recovery after SIGKILL on {args.recovery_mb} MB ...")
                        recoveries[system_name] = recovery(java, system, args, work)
                        log(f"  {recoveries[system_name]}")
                finally:
                    system.stop_namesrv()
        rows = summarize(runs, recoveries, args)
        table = markdown(rows)
        meta = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "seconds": round(time.monotonic() - started),
            "cpus": os.cpu_count(),
            "loadAvgMean": statistics.mean(loads),
            "loadAvgMax": max(loads),
            "args": {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items()},
        }
        if args.json:
            args.json.write_text(
                json.dumps({"meta": meta, "runs": runs, "recoveries": recoveries, "rows": rows}, indent=1)
            )
        failed = {
            name: sum(m["failures"] for run in runs if run["system"] == name for m in run["result"]["modes"].values())
            for name in SYSTEMS
        }
        footer = (
            f"client: {args.client}; {meta['date']}, {meta['seconds']} s, {meta['cpus']} CPUs, "
            f"1-min load average during the runs: mean {meta['loadAvgMean']:.2f}, max {meta['loadAvgMax']:.2f}; "
            f"sends the client saw fail, all runs: {', '.join(f'{n} {failed[n]}' for n in SYSTEMS)}"
        )
        if args.markdown:
            args.markdown.write_text(f"{table}\n\n{footer}\n")
        print(f"{table}\n\n{footer}")
    return 0


def describe(figures: dict[str, Any]) -> str:
    line = (
        f"produce {figures['produceRate']:9,.0f}/s consume {figures['consumeRate']:9,.0f}/s "
        f"send p50/p99/p999 {figures['sendP50Ms']:.2f}/{figures['sendP99Ms']:.2f}/{figures['sendP999Ms']:.2f} ms "
        f"e2e p50/p99 {figures['e2eP50Ms']:.0f}/{figures['e2eP99Ms']:.0f} ms"
    )
    started = figures.get("drainQueueFirstMs")  # Load.java's: when each queue first delivered in the drain
    if started:
        # About 1,000 ms: some queues' first pulls were refused SUBSCRIPTION_NOT_LATEST and retried a second later.
        line += f" drain queues started within {max(started.values()) - min(started.values())} ms"
    return line


def make_system(name: str, root: Path, lib: Path, profile_to: Path | None = None) -> System:
    if name == "shoal":
        return ShoalSystem(root, profile_to)
    return RocketMQSystem(root, lib)


def profile(java: Java, args: argparse.Namespace, work: Path) -> int:
    """One ASYNC_FLUSH Load run against a Shoal broker under pyinstrument (its report written at SIGTERM)."""
    if importlib.util.find_spec("pyinstrument") is None:
        raise SystemExit("--profile needs pyinstrument: .venv/bin/pip install pyinstrument (not a project dependency)")
    session = work / "broker.pyisession"
    system = ShoalSystem(work / "profile", session)
    system.start_namesrv()
    try:
        result = run_config(java, system, "ASYNC_FLUSH", 0, args, work, profile=True)
    finally:
        system.stop_namesrv()
    reports = []
    for options in (["-p", "flat=true"], ["-p", "processor_options.filter_threshold=0.01"]):
        command = [sys.executable, "-m", "pyinstrument", "--load", str(session), "-r", "text", "--unicode", *options]
        reports.append(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    args.profile.write_text("\n".join(reports))
    for mode, figures in result["modes"].items():
        print(f"{mode:5} {describe(figures)}")
    print(f"pyinstrument report (flat, then the call tree): {args.profile}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
