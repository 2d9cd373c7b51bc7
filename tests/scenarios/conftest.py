"""Real Shoal processes for scenario tests: a NameServer and a Broker per flush mode.

    def test_x(cluster):            # ASYNC_FLUSH broker (the embedded default config)
        cluster.namesrv_addr        # "127.0.0.1:<port>"

    @pytest.mark.parametrize("flush_disk_type", ["ASYNC_FLUSH", "SYNC_FLUSH"])
    def test_y(cluster): ...        # the same test against both brokers

Both processes bind 127.0.0.1:0 and report their port on stderr, so no port is guessed. One
cluster per flush mode is started on first use and kept for the module (a broker start maps a
1 GiB CommitLog segment); tests isolate themselves by topic and group names. Each test checks
that both processes are still alive afterwards; module teardown sends SIGTERM and asserts a clean
exit (status 0, broker `abort` marker removed), SIGKILLing on timeout.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCENARIOS_SCRIPT = Path(__file__).with_name("cpp_client_scenarios.py")
PROCESS_START_TIMEOUT_S = 20.0
REGISTRATION_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 20.0
POLL_INTERVAL_S = 0.02
LOG_TAIL_BYTES = 6_000
NAMESRV_READY = re.compile(rb"NameServer listening on port (\d+)")
BROKER_READY = re.compile(rb"Broker \S+ listening on port (\d+)")
SHORT_DELAY_LEVELS = "100ms 200ms 300ms 400ms 500ms 600ms 700ms 800ms 900ms 1s 1s 1s 1s 1s 1s 1s 1s 1s"
"""Retries wait level 3 + reconsumeTimes: 300 ms, 400 ms, ... instead of 10 s, 30 s, ... (spec §10.3)."""


def load_scenarios() -> ModuleType:
    """cpp_client_scenarios.py as a module (it is a script, not a test module), for `route_of`."""
    spec = importlib.util.spec_from_file_location("cpp_client_scenarios", SCENARIOS_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


scenarios = load_scenarios()


def log_tail(path: Path, size_bytes: int = LOG_TAIL_BYTES) -> str:
    if not path.exists():
        return f"<{path.name}: missing>"
    data = path.read_bytes()
    return data[-size_bytes:].decode("utf-8", "replace")


@dataclass
class Cluster:
    """A running NameServer + Broker pair; logs are files under `directory`."""

    flush_disk_type: str
    directory: Path
    namesrv: subprocess.Popen[bytes] | None = None
    broker: subprocess.Popen[bytes] | None = None
    namesrv_port: int = 0
    broker_port: int = 0
    _log_handles: list[Any] = field(default_factory=list)

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def store_dir(self) -> Path:
        return self.directory / "store"

    @property
    def namesrv_log(self) -> Path:
        return self.directory / "namesrv.log"

    @property
    def broker_log(self) -> Path:
        return self.directory / "broker.log"

    def logs(self) -> str:
        return (
            f"--- namesrv.log (tail) ---\n{log_tail(self.namesrv_log)}\n"
            f"--- broker.log (tail) ---\n{log_tail(self.broker_log)}"
        )

    def route(self, topic: str) -> dict[str, Any] | None:
        """The NameServer's TopicRouteData for `topic`, or None (raw GET_ROUTEINFO_BY_TOPIC)."""
        route: dict[str, Any] | None = scenarios.route_of(self.namesrv_addr, topic)
        return route

    def assert_running(self) -> None:
        for name, process in (("namesrv", self.namesrv), ("broker", self.broker)):
            assert process is not None and process.poll() is None, (
                f"{name} exited with {process and process.returncode}\n{self.logs()}"
            )

    # --- lifecycle ---
    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        namesrv_conf = self.directory / "namesrv.conf"
        namesrv_conf.write_text("listenHost=127.0.0.1\n")
        broker_conf = self.directory / "broker.conf"
        broker_conf.write_text(
            f"flushDiskType={self.flush_disk_type}\nlistenHost=127.0.0.1\nbrokerIP1=127.0.0.1\nmetricsPort=-1\n"
            f"messageDelayLevel={SHORT_DELAY_LEVELS}\n"
            "mappedFileSizeCommitLog=67108864\n"  # 64 MiB segments: tests need no 1 GiB allocations
        )
        self.namesrv = self._spawn(["namesrv", "-c", str(namesrv_conf), "--port", "0"], self.namesrv_log)
        self.namesrv_port = self._wait_for_port(self.namesrv, self.namesrv_log, NAMESRV_READY)
        self.broker = self._spawn(
            [
                "broker",
                "-c",
                str(broker_conf),
                "-n",
                self.namesrv_addr,
                "--port",
                "0",
                "--store-dir",
                str(self.store_dir),
            ],
            self.broker_log,
        )
        self.broker_port = self._wait_for_port(self.broker, self.broker_log, BROKER_READY)
        self._wait(self._registered, REGISTRATION_TIMEOUT_S, "the broker to register TBW102 with the NameServer")

    def _spawn(self, arguments: list[str], log_path: Path) -> subprocess.Popen[bytes]:
        handle = log_path.open("wb")
        self._log_handles.append(handle)
        return subprocess.Popen(
            [sys.executable, "-m", "shoal.cli.main", *arguments],
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            cwd=self.directory,
        )

    def _wait_for_port(self, process: subprocess.Popen[bytes], log_path: Path, ready: re.Pattern[bytes]) -> int:
        found: list[int] = []

        def listening() -> bool:
            match = ready.search(log_path.read_bytes())
            if match:
                found.append(int(match.group(1)))
            return bool(match)

        self._wait(listening, PROCESS_START_TIMEOUT_S, f"{log_path.stem} to listen", process)
        return found[0]

    def _registered(self) -> bool:
        route = self.route("TBW102")
        if route is None:
            return False
        return any(self.broker_addr in data.get("brokerAddrs", {}).values() for data in route["brokerDatas"])

    def _wait(
        self,
        predicate: Callable[[], bool],
        timeout_s: float,
        what: str,
        process: subprocess.Popen[bytes] | None = None,
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if process is not None and process.poll() is not None:
                raise AssertionError(f"exited with {process.returncode} while waiting for {what}\n{self.logs()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout_s} s waiting for {what}\n{self.logs()}")
            time.sleep(POLL_INTERVAL_S)

    def stop(self) -> list[str]:
        """SIGTERM the broker, then the NameServer (the broker unregisters on the way out); SIGKILL
        on timeout. Returns the problems found: unclean exits and a left-behind `abort` marker."""
        problems = []
        for name, process in (("broker", self.broker), ("namesrv", self.namesrv)):
            if process is None:
                continue
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                problems.append(f"{name} ignored SIGTERM for {STOP_TIMEOUT_S} s and was killed")
                continue
            if process.returncode != 0:
                problems.append(f"{name} exited with {process.returncode}")
        if self.broker is not None and (self.store_dir / "abort").exists():
            problems.append("the broker left its abort marker: the next start would run abnormal recovery")
        for handle in self._log_handles:
            handle.close()
        return problems


class ClusterPool:
    """Clusters by flush mode, started on first use, stopped together."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.clusters: dict[str, Cluster] = {}

    def get(self, flush_disk_type: str) -> Cluster:
        cluster = self.clusters.get(flush_disk_type)
        if cluster is None:
            cluster = Cluster(flush_disk_type, self.root / flush_disk_type.lower())
            try:
                cluster.start()
            except BaseException:
                cluster.stop()
                raise
            self.clusters[flush_disk_type] = cluster
        return cluster

    def stop_all(self) -> list[str]:
        problems: list[str] = []
        for name, cluster in self.clusters.items():
            problems.extend(f"{name}: {problem}\n{cluster.logs()}" for problem in cluster.stop())
        return problems


# --- a tiny disk ---


def run_command(*command: str) -> subprocess.CompletedProcess[bytes]:
    """Run a system command (mount, umount) without raising; its output captured."""
    return subprocess.run(command, capture_output=True, timeout=30, check=False)


@contextlib.contextmanager
def mounted_tmpfs(mount_point: Path, size_bytes: int) -> Iterator[Path]:
    """A tmpfs of `size_bytes` at `mount_point` (a real small disk), unmounted afterwards; a skip
    naming the reason when this process cannot mount one (root is needed; CI has it)."""
    if os.geteuid() != 0:
        pytest.skip(reason=f"a real {size_bytes}-byte volume needs root to mount a tmpfs")
    mount_point.mkdir()
    mounted = run_command("mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(mount_point))
    if mounted.returncode != 0:
        pytest.skip(reason=f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        if run_command("umount", str(mount_point)).returncode != 0:
            run_command("umount", "-l", str(mount_point))


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, or a skip when this process cannot mount one."""
    with mounted_tmpfs(tmp_path / "tiny", 2 * 1024 * 1024) as mount_point:
        yield mount_point


@pytest.fixture(scope="module")
def cluster_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterPool]:
    pool = ClusterPool(tmp_path_factory.mktemp("clusters"))
    try:
        yield pool
    finally:
        problems = pool.stop_all()
    assert not problems, "\n".join(problems)


@pytest.fixture
def flush_disk_type() -> str:
    """The broker's flushDiskType; override with `@pytest.mark.parametrize("flush_disk_type", [...])`."""
    return "ASYNC_FLUSH"


@pytest.fixture
def cluster(cluster_pool: ClusterPool, flush_disk_type: str) -> Iterator[Cluster]:
    """A running NameServer + Broker (shared by the module's tests of the same flush mode)."""
    running = cluster_pool.get(flush_disk_type)
    yield running
    running.assert_running()
