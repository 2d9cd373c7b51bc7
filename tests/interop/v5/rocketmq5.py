"""Apache RocketMQ 5.3.3 itself, from Maven Central's jars: its NameServer and its proxy in local
mode (the broker runs inside the proxy's process, as `mqbroker --enable-proxy` does), so the v5
clients can be pointed at RocketMQ 5 and at Shoal alike.

    lib = ensure_lib(cache_root)                    # rocketmq5/pom.xml's jars, fetched once
    server = RocketMQ5(lib, root, ports, {"enableMixedMessageType": "true"})
    server.start()                                  # NamesrvStartup, then ProxyStartup -pm local
    server.grpc_addr, server.namesrv_addr, server.broker_addr
    server.stop()

Each process logs under `root` (`-Duser.home`: RocketMQ 5 logs to ~/logs/rocketmqlogs). Heap sized
for a 2-core machine shared with the tests. Used by tests/interop/v5/test_beside_rocketmq5.py and
bench/v5_vs_rocketmq5.py (loaded by file path there, so this module imports nothing of tests/).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
POM = HERE / "rocketmq5" / "pom.xml"
REQUIRED_JARS = ("rocketmq-proxy-5.3.3.jar", "rocketmq-broker-5.3.3.jar", "rocketmq-namesrv-5.3.3.jar")
JVM_OPTIONS = ("-server", "-XX:+UseG1GC", "-XX:-OmitStackTraceInFastThrow")
NAMESRV_HEAP = ("-Xms128m", "-Xmx128m")
PROXY_HEAP = ("-Xms512m", "-Xmx512m", "-XX:MaxDirectMemorySize=512m")
JDK9_OPENS = (
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
)
START_TIMEOUT_S = 120.0
"""The proxy with its broker: about 10-15 s here from a cold JVM; more on a loaded machine."""
STOP_TIMEOUT_S = 60.0
SEGMENT_BYTES = 64 * 1024 * 1024
"""CommitLog segments for a test or benchmark store (RocketMQ's 1 GiB default fills the disk)."""


def _get_rocketmq() -> ModuleType:
    path = HERE.parents[2] / "tools" / "get_rocketmq.py"
    spec = importlib.util.spec_from_file_location("shoal_get_rocketmq", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LIB_NAME = "rocketmq5-server"
"""The cache folder's name before the pom's hash (tests/interop/v5/conftest.py's pom_lib names it alike)."""


def lib_directory(cache_root: Path) -> Path:
    return cache_root / f"{LIB_NAME}-{_get_rocketmq().pom_sha256(POM)[:16]}"


def ensure_lib(cache_root: Path) -> Path:
    """The folder of RocketMQ 5.3.3's server jars (fetched with Maven on first use); raises the
    tool's GetRocketMQError when they cannot be fetched."""
    lib: Path = _get_rocketmq().ensure_pom_jars(POM, lib_directory(cache_root), REQUIRED_JARS, LIB_NAME)
    return lib


def wait_port(port: int, process: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise RuntimeError(
                f"exited with {process.returncode} before port {port} answered:\n{log.read_text()[-3000:]}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"port {port} did not answer within {timeout_s} s:\n{log.read_text()[-3000:]}"
                ) from None
            time.sleep(0.2)


@dataclass(frozen=True)
class Ports:
    namesrv: int
    broker: int
    """listenPort; RocketMQ also opens listenPort - 2 (VIP) and listenPort + 1 (HA)."""
    grpc: int
    proxy_remoting: int


@dataclass
class RocketMQ5:
    lib: Path
    root: Path
    ports: Ports
    broker_settings: dict[str, str] = field(default_factory=dict)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.ports.namesrv}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.ports.broker}"

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.ports.grpc}"

    def _spawn(self, name: str, main: str, heap: tuple[str, ...], args: list[str]) -> subprocess.Popen[bytes]:
        folder = self.root / name
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / "stdout.log"
        command = [
            "java",
            *JVM_OPTIONS,
            *heap,
            *JDK9_OPENS,
            f"-Duser.home={folder}",
            "-cp",
            f"{self.lib}/*",
            main,
            *args,
        ]
        env = {**os.environ, "ROCKETMQ_HOME": str(folder)}
        with log.open("wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=folder)
        self.processes[name] = process
        return process

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        namesrv_conf = self.root / "namesrv.conf"
        namesrv_conf.write_text(f"listenPort={self.ports.namesrv}\n")
        namesrv = self._spawn(
            "namesrv", "org.apache.rocketmq.namesrv.NamesrvStartup", NAMESRV_HEAP, ["-c", str(namesrv_conf)]
        )
        wait_port(self.ports.namesrv, namesrv, self.root / "namesrv" / "stdout.log", START_TIMEOUT_S)
        store = self.root / "store"
        broker = {
            "brokerClusterName": "DefaultCluster",
            "brokerName": "broker-a",
            "brokerId": "0",
            "brokerRole": "ASYNC_MASTER",
            "flushDiskType": "ASYNC_FLUSH",
            "namesrvAddr": self.namesrv_addr,
            "listenPort": str(self.ports.broker),
            "brokerIP1": "127.0.0.1",
            "storePathRootDir": str(store),
            "storePathCommitLog": str(store / "commitlog"),
            "mappedFileSizeCommitLog": str(SEGMENT_BYTES),
            **self.broker_settings,
        }
        broker_conf = self.root / "broker.conf"
        broker_conf.write_text("".join(f"{key}={value}\n" for key, value in broker.items()))
        proxy_conf = self.root / "rmq-proxy.json"
        proxy = {
            "rocketMQClusterName": "DefaultCluster",
            "namesrvAddr": self.namesrv_addr,
            "grpcServerPort": self.ports.grpc,
            "remotingListenPort": self.ports.proxy_remoting,
        }
        proxy_conf.write_text(json.dumps(proxy) + "\n")
        process = self._spawn(
            "proxy",
            "org.apache.rocketmq.proxy.ProxyStartup",
            PROXY_HEAP,
            ["-pm", "local", "-bc", str(broker_conf), "-pc", str(proxy_conf)],
        )
        log = self.root / "proxy" / "stdout.log"
        wait_port(self.ports.grpc, process, log, START_TIMEOUT_S)
        wait_port(self.ports.broker, process, log, START_TIMEOUT_S)
        asyncio.run(self._registered(process, log))

    async def _registered(self, process: subprocess.Popen[bytes], log: Path) -> None:
        """Until the NameServer lists the broker in DefaultCluster (admin tools look it up there)."""
        from shoal.client import Admin

        deadline = time.monotonic() + START_TIMEOUT_S
        async with Admin(self.namesrv_addr) as admin:
            while True:
                with contextlib.suppress(Exception):  # not answering yet
                    if "broker-a" in (await admin.cluster_info()).cluster_addr_table.get("DefaultCluster", ()):
                        return
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the broker never registered with {self.namesrv_addr}:\n{log.read_text()[-3000:]}"
                    )
                await asyncio.sleep(0.2)

    def pid(self, name: str) -> int:
        return self.processes[name].pid

    def stop(self) -> None:
        for name in ("proxy", "namesrv"):
            process = self.processes.pop(name, None)
            if process is None or process.poll() is not None:
                continue
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
