"""Apache RocketMQ 4.9.7's own NameServer and Broker, started from the jars tools/get_rocketmq.py fetched.

    namesrv = RocketMQNamesrv(lib, root / "namesrv")           # NamesrvStartup -c namesrv.conf
    namesrv.start()
    broker = RocketMQBroker(lib, root / "broker", namesrv.addr, store_dir, {"flushDiskType": "SYNC_FLUSH"})
    broker.start()                                              # BrokerStartup -c broker.conf
    ...
    broker.stop()                                               # SIGTERM: shutdown hook, clean store
    broker.stop(signal.SIGKILL)                                 # a crash: abort file left behind

Both run on 127.0.0.1 on free ports. ROCKETMQ_HOME is the jar cache (`lib.parent`): BrokerStartup and
NamesrvStartup read `$ROCKETMQ_HOME/conf/logback_{broker,namesrv}.xml` and exit without it, so `ensure_logback`
writes one there that logs to the file named by the `shoal.rocketmq.logFile` system property (each process
logs into its own folder, never into ~/logs/rocketmqlogs).

Heap, sized for a 2-core, 24 GB machine shared with the tests (RocketMQ's runbroker.sh asks for 8 GB and
runserver.sh for 4 GB): broker `-Xms512m -Xmx512m -XX:MaxDirectMemorySize=512m`, NameServer
`-Xms128m -Xmx128m`; G1. On JDK 9+ the store needs `--add-opens`/`--add-exports` for java.nio and sun.nio.ch
(MappedFile casts to sun.nio.ch.DirectBuffer and calls jdk.internal.ref.Cleaner.clean reflectively: without
the export the shutdown hook dies and leaves the abort file, so every clean stop looks like a crash).

Ports: 4.9.7's BrokerStartup forces haListenPort = listenPort + 1 and opens the VIP channel on
listenPort - 2, so `free_broker_port` finds a port with both neighbours free. Paths: storePathCommitLog
does not follow storePathRootDir in MessageStoreConfig (its default is ~/store/commitlog), so both are set.

Replication: `settings` take brokerId, brokerRole (SYNC_MASTER, SLAVE); brokerIP2 is 127.0.0.1, the host of
the haServerAddr a master registers (BrokerConfig's default is a LAN address).

Used by tests/interop/java/test_store_exchange.py, test_replication_exchange.py and bench/vs_rocketmq.py; loaded
by file path (pytest's importlib mode; the benchmark keeps this one copy rather than a second launcher).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

BROKER_JVM_OPTIONS = (
    "-server",
    "-Xms512m",
    "-Xmx512m",
    "-XX:MaxDirectMemorySize=512m",
    "-XX:+UseG1GC",
    "-XX:-OmitStackTraceInFastThrow",
)
NAMESRV_JVM_OPTIONS = ("-server", "-Xms128m", "-Xmx128m", "-XX:+UseG1GC")
JDK9_OPENS = (
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",  # MappedFile.clean -> jdk.internal.ref.Cleaner.clean
)
START_TIMEOUT_S = 90.0
"""Cold JVM start plus recovery of a small store: about 3 to 6 s here; 90 s on a loaded machine."""
STOP_TIMEOUT_S = 60.0
"""BrokerController.shutdown flushes and unregisters; a few seconds. After this, SIGKILL."""
LOGBACK_XML = """<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by tests/interop/java/rocketmq_broker.py: NamesrvStartup/BrokerStartup read
     $ROCKETMQ_HOME/conf/logback_{namesrv,broker}.xml. Everything to the file in -Dshoal.rocketmq.logFile. -->
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>${shoal.rocketmq.logFile}</file>
    <append>true</append>
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level [%thread] %logger{32} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


def ensure_logback(rocketmq_home: Path) -> None:
    """conf/logback_namesrv.xml and conf/logback_broker.xml in ROCKETMQ_HOME (atomic: tests may run in parallel)."""
    conf = rocketmq_home / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    for name in ("logback_namesrv.xml", "logback_broker.xml"):
        path = conf / name
        if path.is_file() and path.read_text() == LOGBACK_XML:
            continue
        partial = conf / f"{name}.{os.getpid()}.tmp"
        partial.write_text(LOGBACK_XML)
        partial.replace(path)


def _load_ports() -> ModuleType:
    """tests/ports.py by path: the benchmark loads this file outside pytest, where `tests` is no package."""
    path = Path(__file__).resolve().parents[2] / "ports.py"
    spec = importlib.util.spec_from_file_location("shoal_tests_ports", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_PORTS = _load_ports()
free_port: Callable[[], int] = _PORTS.free_port
free_broker_port: Callable[[], int] = _PORTS.free_broker_port
"""listenPort with listenPort - 2 (VIP channel) and listenPort + 1 (HA) free and claimed too."""


@dataclass
class JavaServer:
    """One RocketMQ server JVM; `log_path` gets its stdout/stderr, `rocketmq_log` its logback output."""

    lib: Path
    root: Path
    main: str = ""
    jvm_options: tuple[str, ...] = ()
    ready_line: str = ""
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    log_path: Path = field(init=False)
    rocketmq_log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.log_path = self.root / "stdout.log"
        self.rocketmq_log = self.root / "rocketmq.log"

    def conf(self) -> dict[str, str]:
        raise NotImplementedError

    def start(self) -> float:
        """Write the conf file, start the JVM, wait for the ready line; returns the seconds it took."""
        assert self.process is None or self.process.poll() is not None, f"{self.main} is running"
        rocketmq_home = self.lib.parent
        ensure_logback(rocketmq_home)
        conf_path = self.root / "server.conf"
        conf_path.write_text("".join(f"{key}={value}\n" for key, value in self.conf().items()))
        self.starts += 1
        marker = f"--- start {self.starts} ---\n"
        with self.log_path.open("a") as log:
            log.write(marker)
        command = [
            "java",
            *self.jvm_options,
            *JDK9_OPENS,
            f"-Dshoal.rocketmq.logFile={self.rocketmq_log}",
            f"-Duser.home={self.root}",  # anything RocketMQ still puts under ~ stays in the test's folder
            "-cp",
            f"{self.lib}/*",
            self.main,
            "-c",
            str(conf_path),
        ]
        env = {**os.environ, "ROCKETMQ_HOME": str(rocketmq_home)}
        started = time.monotonic()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = started + START_TIMEOUT_S
        while True:
            text = self.log_path.read_text(errors="replace")
            if self.ready_line in text[text.rindex(marker) :]:
                return time.monotonic() - started
            if self.process.poll() is not None:
                raise AssertionError(f"{self.main} exited with {self.process.returncode}:\n{self.tail()}")
            if time.monotonic() > deadline:
                self.stop(signal.SIGKILL)
                raise AssertionError(
                    f"{self.main}: {self.ready_line!r} not seen in {START_TIMEOUT_S} s:\n{self.tail()}"
                )
            time.sleep(0.1)

    def tail(self) -> str:
        text = self.log_path.read_text(errors="replace")[-3000:]
        if self.rocketmq_log.is_file():
            text += "\n--- rocketmq.log ---\n" + self.rocketmq_log.read_text(errors="replace")[-3000:]
        return text

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        """SIGTERM (the JVM's shutdown hook shuts the server down cleanly) or SIGKILL; the exit code."""
        process = self.process
        if process is None:
            return None
        self.process = None
        if process.poll() is None:
            process.send_signal(sig)
        try:
            return process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError(f"{self.main} did not stop within {STOP_TIMEOUT_S} s after {sig}") from None


@dataclass
class RocketMQNamesrv(JavaServer):
    """org.apache.rocketmq.namesrv.NamesrvStartup on a free port."""

    port: int = field(default_factory=free_port)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.main = "org.apache.rocketmq.namesrv.NamesrvStartup"
        self.jvm_options = NAMESRV_JVM_OPTIONS
        self.ready_line = "The Name Server boot success"

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def conf(self) -> dict[str, str]:
        return {
            "listenPort": str(self.port),
            "kvConfigPath": str(self.root / "kvConfig.json"),
            "configStorePath": str(self.root / "namesrv.properties"),
        }


@dataclass
class RocketMQBroker(JavaServer):
    """org.apache.rocketmq.broker.BrokerStartup -c broker.conf on `store_dir`; `settings` override the defaults."""

    namesrv_addr: str = ""
    store_dir: Path = Path()
    settings: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_broker_port)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.main = "org.apache.rocketmq.broker.BrokerStartup"
        self.jvm_options = BROKER_JVM_OPTIONS
        self.ready_line = "boot success"  # "The broker[broker-a, 127.0.0.1:port] boot success. serializeType=..."

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def conf(self) -> dict[str, str]:
        return {
            "brokerClusterName": "DefaultCluster",
            "brokerName": "broker-a",
            "brokerId": "0",
            "brokerIP1": "127.0.0.1",
            "brokerIP2": "127.0.0.1",  # the HA address a master registers (haServerAddr); default: a LAN address
            "listenPort": str(self.port),
            "namesrvAddr": self.namesrv_addr,
            "storePathRootDir": str(self.store_dir),
            "storePathCommitLog": str(self.store_dir / "commitlog"),
            "autoCreateTopicEnable": "true",
            "deleteWhen": "04",
            "fileReservedTime": "48",
            **self.settings,
        }
