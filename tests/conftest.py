"""Shared fixtures: small store settings on real files, a bounded wait helper, real server processes."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import inspect
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest

from shoal.store import (
    CommitLogSettings,
    ConsumeQueueSettings,
    FlushDiskType,
    FlushSettings,
    IndexSettings,
    MessageStore,
    StoreSettings,
)
from tests.ports import free_broker_port, free_port  # tests import both from here too

SMALL_SEGMENT_BYTES = 64 * 1024


def small_settings(
    root: Path, *, flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH, **flush: object
) -> StoreSettings:
    """Settings with tiny files so tests roll segments, CQ files and index files quickly."""
    return StoreSettings(
        root_dir=root,
        commitlog=CommitLogSettings(segment_size_bytes=SMALL_SEGMENT_BYTES, message_body_size_max_bytes=16 * 1024),
        consume_queue=ConsumeQueueSettings(units_per_file=64),
        index=IndexSettings(hash_slots=64, entries=256),
        flush=FlushSettings(flush_disk_type=flush_disk_type, **flush),  # type: ignore[arg-type]
    )


WAIT_TIMEOUT_S = 10.0
WAIT_INTERVAL_S = 0.005


TOOLS_DIR = Path(__file__).resolve().parent.parent / "tools"


def load_tool(name: str) -> ModuleType:
    """tools/<name>.py as a module. tools/ is a folder of scripts, not a package; a tool may import another
    beside it (get_images imports get_k8s), so the folder goes on sys.path."""
    if str(TOOLS_DIR) not in sys.path:
        sys.path.insert(0, str(TOOLS_DIR))
    spec = importlib.util.spec_from_file_location(f"shoal_tools_{name}", TOOLS_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def wait_until(
    predicate: Callable[[], bool],
    timeout_s: float = WAIT_TIMEOUT_S,
    interval_s: float = WAIT_INTERVAL_S,
    *,
    what: str = "condition",
    explain: Callable[[], str] | None = None,
) -> None:
    """Poll `predicate` every `interval_s` until true; fail the test after `timeout_s`, naming `what` and
    adding what `explain` says about the state then (for waits long enough that a bare timeout tells nothing)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            state = f"\n{explain()}" if explain is not None else ""
            raise AssertionError(f"{what} not met within {timeout_s} s{state}")
        time.sleep(interval_s)


async def async_wait_until(
    predicate: Callable[[], bool | Awaitable[bool]],
    timeout_s: float = WAIT_TIMEOUT_S,
    interval_s: float = WAIT_INTERVAL_S,
    *,
    what: str = "condition",
) -> None:
    """`wait_until` on the running event loop: `predicate` may be plain or async."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout_s} s")
        await asyncio.sleep(interval_s)


@pytest.fixture
def store_settings(tmp_path: Path) -> StoreSettings:
    return small_settings(tmp_path / "store")


@pytest.fixture
def store(store_settings: StoreSettings) -> Iterator[MessageStore]:
    """An open, started store on small segments; shut down after the test."""
    opened = MessageStore(store_settings)
    opened.open()
    opened.start()
    yield opened
    opened.shutdown()


@pytest.fixture(name="wait_until")
def wait_until_fixture() -> Callable[..., None]:
    return wait_until


@pytest.fixture(name="async_wait_until")
def async_wait_until_fixture() -> Callable[..., Awaitable[None]]:
    return async_wait_until


@pytest.fixture(name="small_settings")
def small_settings_fixture() -> Callable[..., StoreSettings]:
    return small_settings


# --- real NameServer + Broker processes ---

PROCESS_START_TIMEOUT_S = 30.0
PROCESS_STOP_TIMEOUT_S = 30.0


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log_path: Path, ready_line: str) -> None:
    """Until the port accepts connections and the process logged `ready_line` (start() returned)."""
    deadline = time.monotonic() + PROCESS_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"process exited with {process.returncode}:\n{log_path.read_text()[-4000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            if ready_line in log_path.read_text(errors="replace"):
                return
        time.sleep(0.05)
    raise AssertionError(
        f"port {port} not listening after {PROCESS_START_TIMEOUT_S} s:\n{log_path.read_text()[-4000:]}"
    )


RETENTION_EVERY_SEGMENT_CONF = {
    "flushDiskType": "ASYNC_FLUSH",
    "mappedFileSizeCommitLog": str(64 * 1024),
    "maxMessageSize": str(16 * 1024),
    "fileReservedTime": "0",
    "deleteWhen": ";".join(f"{hour:02d}" for hour in range(24)),
    "cleanResourceInterval": "200",
}
"""broker.conf for retention that deletes every CommitLog segment but the newest, at any hour:
64 KiB segments, fileReservedTime=0, deleteWhen every hour, a cleaning round every 200 ms."""


@dataclass
class Cluster:
    """A NameServer and a Broker running as real processes on 127.0.0.1."""

    root: Path
    namesrv_port: int
    broker_port: int
    metrics_port: int
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)
    starts: int = 0
    proxy_port: int = 0
    broker_cgroups: list[Path] = field(default_factory=list)
    """cgroup directories the next broker process joins before it runs (tests/cgroups.py)."""

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def store_dir(self) -> Path:
        return self.root / "store"

    def start_namesrv(self) -> None:
        self._spawn(
            "namesrv",
            ["namesrv", "--host", "127.0.0.1", "--port", str(self.namesrv_port)],
            self.namesrv_port,
            "NameServer listening",
        )

    def start_broker(self, conf: dict[str, str] | None = None, *options: str) -> None:
        settings = {
            "brokerIP1": "127.0.0.1",
            "listenHost": "127.0.0.1",
            "metricsHost": "127.0.0.1",
            "listenPort": str(self.broker_port),
            "metricsPort": str(self.metrics_port),
            "haListenPort": str(free_port()),  # not listenPort + 1: that port may belong to someone else
            "namesrvAddr": self.namesrv_addr,
            "storePathRootDir": str(self.store_dir),
            "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
            # A 22 MB IndexFile, not RocketMQ's 420 MB: it is allocated on disk when the broker starts,
            # and the stores of module-scoped clusters and failed tests stay until the session ends.
            "maxIndexNum": "100000",
            **(conf or {}),
        }
        path = self.root / "broker.conf"
        path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        self._spawn(
            "broker",
            ["broker", "-c", str(path), *options],
            self.broker_port,
            f"listening on port {self.broker_port}",
            cgroups=list(self.broker_cgroups),
        )

    def start_proxy(self, port: int, *options: str) -> None:
        """`shoal proxy` (gRPC, RocketMQ 5 clients) in front of this NameServer's brokers."""
        self.proxy_port = port
        self._spawn(
            "proxy",
            ["proxy", "-n", self.namesrv_addr, "--host", "127.0.0.1", "--port", str(port), *options],
            port,
            f"gRPC proxy listening on port {port}",
        )

    @property
    def proxy_addr(self) -> str:
        return f"127.0.0.1:{self.proxy_port}"

    def _spawn(self, name: str, args: list[str], port: int, ready_line: str, cgroups: list[Path] | None = None) -> None:
        self.starts += 1  # a fresh log per start: a restart must not see the previous ready line
        log_path = self.root / f"{name}-{self.starts}.log"
        log_file = log_path.open("ab")

        command = [sys.executable, "-m", "shoal.cli.main", *args]
        if cgroups:  # a shell joins the groups, then execs the broker: the limits hold from its first byte
            joins = "; ".join(f"echo $$ > '{group / 'cgroup.procs'}'" for group in cgroups)
            command = ["/bin/sh", "-c", f'{joins}; exec "$@"', "sh", *command]
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)
        log_file.close()
        self.processes[name] = process
        self.logs[name] = log_path
        _wait_for_port(port, process, log_path, ready_line)

    def stop(self, name: str, sig: int = signal.SIGTERM) -> int:
        """Stop one process; returns its exit code (SIGKILL after the timeout)."""
        process = self.processes.pop(name)
        if process.poll() is None:
            process.send_signal(sig)
        try:
            return process.wait(PROCESS_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError(f"{name} did not stop within {PROCESS_STOP_TIMEOUT_S} s") from None

    def alive(self, name: str) -> bool:
        return self.processes[name].poll() is None

    def log(self, name: str) -> str:
        return self.logs[name].read_text(errors="replace")

    def stop_all(self) -> None:
        for name in ("proxy", "broker", "namesrv"):
            if name in self.processes:
                self.stop(name)

    def discard_store(self) -> None:
        """Remove the stopped broker's store (its logs stay): for clusters a whole module shares,
        whose folders pytest keeps until the session ends."""
        shutil.rmtree(self.store_dir, ignore_errors=True)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A fresh NameServer + Broker (ASYNC_FLUSH, 64 MiB segments) in real processes."""
    running = Cluster(tmp_path, free_port(), free_broker_port(), free_port())
    running.start_namesrv()
    running.start_broker()
    yield running
    running.stop_all()


@pytest.fixture
def cluster_factory(tmp_path: Path) -> Iterator[Callable[[dict[str, str]], Cluster]]:
    """Start a NameServer + Broker with extra broker.conf keys; everything is stopped after the test."""
    started: list[Cluster] = []

    def start(conf: dict[str, str]) -> Cluster:
        root = tmp_path / f"cluster{len(started)}"
        root.mkdir()
        running = Cluster(root, free_port(), free_broker_port(), free_port())
        started.append(running)
        running.start_namesrv()
        running.start_broker(conf)
        return running

    yield start
    for running in started:
        running.stop_all()


os.environ.setdefault("PYTHONUNBUFFERED", "1")
