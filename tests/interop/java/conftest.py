"""The official Apache RocketMQ 4.9.7 Java client against real Shoal processes.

Jars come from tools/get_rocketmq.py (Maven Central, cached outside the clone). The Java programs in
src/ are compiled here with javac, once per source hash, into pytest's cache folder. Each program
prints JSON lines ({"event": ..., ...}) on stdout; `JavaRunner.run` waits for one to exit,
`JavaRunner.spawn` starts a long-running one (a push consumer) that stops when its stdin closes.

A missing java/javac/mvn skips these tests with the reason, except under CI=true, where it fails.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

JAVA_DIR = Path(__file__).resolve().parent
SOURCE_DIR = JAVA_DIR / "src"
REPO_ROOT = JAVA_DIR.parents[2]
COMPILE_TIMEOUT_S = 300.0
RUN_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
JVM_OPTIONS = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")
FLUSH_DISK_TYPES = ("ASYNC_FLUSH", "SYNC_FLUSH")


def _load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("shoal_tools_get_rocketmq", REPO_ROOT / "tools" / "get_rocketmq.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _root_conftest() -> ModuleType:
    """tests/conftest.py as pytest loaded it (Cluster, free_port): importlib mode gives it no fixed name."""
    path = (REPO_ROOT / "tests" / "conftest.py").resolve()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve() == path:
            return module
    raise AssertionError(f"{path} is not loaded")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI=true: the interop tests must run)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def rocketmq_lib() -> Path:
    """The folder of RocketMQ 4.9.7's jars (fetched with Maven on first use)."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            _unavailable(f"{tool} (JDK 8+) is not on PATH")
    get_rocketmq = _load_tool()
    if get_rocketmq.cached_lib(get_rocketmq.rocketmq_dir()) is None and shutil.which("mvn") is None:
        _unavailable("mvn is not on PATH and RocketMQ's jars are not cached (tools/get_rocketmq.py)")
    lib: Path = get_rocketmq.ensure_jars()
    return lib


@pytest.fixture(scope="session")
def java_classes(rocketmq_lib: Path, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """src/*.java compiled with javac into pytest's cache (else the session's tmp), keyed by a hash."""
    sources = sorted(SOURCE_DIR.glob("*.java"))
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    digest.update("\n".join(sorted(path.name for path in rocketmq_lib.glob("*.jar"))).encode())
    pytest_cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    if pytest_cache is not None:
        cache = Path(pytest_cache.mkdir("shoal-java-classes"))
    else:
        cache = tmp_path_factory.mktemp("shoal-java-classes")
    classes = cache / digest.hexdigest()[:16]
    if (classes / ".compiled").is_file():
        return classes
    # a folder of its own: two pytest runs compiling at once must not share (or delete) one
    partial = Path(tempfile.mkdtemp(dir=cache, prefix=f"{classes.name}.partial."))
    command = ["javac", "-nowarn", "-encoding", "UTF-8", "-d", str(partial), "-cp", f"{rocketmq_lib}/*"]
    result = subprocess.run(
        [*command, *map(str, sources)], capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False
    )
    assert result.returncode == 0, f"javac failed:\n{result.stdout}\n{result.stderr}"
    (partial / ".compiled").write_text("")
    if (classes / ".compiled").is_file():  # another run finished first: keep its complete folder
        shutil.rmtree(partial, ignore_errors=True)
        return classes
    shutil.rmtree(classes, ignore_errors=True)  # an incomplete folder an interrupted run left
    partial.rename(classes)
    return classes


@dataclass
class JavaResult:
    returncode: int
    events: list[dict[str, Any]]
    stderr: str

    def of(self, event: str) -> list[dict[str, Any]]:
        return [line for line in self.events if line["event"] == event]


@dataclass
class JavaProcess:
    """A running Java program; its JSON lines collect in `events` as they arrive."""

    name: str
    process: subprocess.Popen[str]
    log_path: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    reader: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        self.reader = threading.Thread(target=self._read, name=f"read-{self.name}", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        with self.process.stdout:
            for line in self.process.stdout:
                if line.startswith("{"):
                    with self.lock:
                        self.events.append(json.loads(line))

    def of(self, event: str) -> list[dict[str, Any]]:
        with self.lock:
            return [line for line in self.events if line["event"] == event]

    def wait_for(self, predicate: Callable[[JavaProcess], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate(self):
            if self.process.poll() is not None and not predicate(self):
                raise AssertionError(f"{self.name} exited ({self.process.returncode}) before {what}:\n{self.stderr()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: {what} not seen within {timeout_s} s; stderr:\n{self.stderr()}")
            time.sleep(0.05)

    def stderr(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def send_line(self, line: str) -> None:
        """Write one line to the program's stdin (programs that read commands there)."""
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def stop(self) -> int:
        """Close stdin (the program shuts its client down) and wait."""
        assert self.process.stdin is not None
        if not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            return self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not stop within {STOP_TIMEOUT_S} s") from None
        finally:
            self.reader.join(STOP_TIMEOUT_S)

    def kill(self) -> None:
        """SIGKILL: the client gets no chance to unregister (a crashed consumer)."""
        self.process.kill()
        self.process.wait()
        self.reader.join(STOP_TIMEOUT_S)
        assert self.process.stdin is not None
        self.process.stdin.close()


@dataclass
class JavaRunner:
    """Runs the compiled programs with RocketMQ's jars on the classpath; client logs go to `log_dir`."""

    lib: Path
    classes: Path
    log_dir: Path
    serialize_type: str = "JSON"
    started: list[JavaProcess] = field(default_factory=list)

    def command(self, main: str, args: dict[str, object], properties: dict[str, str] | None) -> list[str]:
        system = {
            "rocketmq.client.logRoot": str(self.log_dir),
            "rocketmq.client.logLevel": "INFO",
            "rocketmq.client.localOffsetStoreDir": str(self.log_dir / "offsets"),
            "rocketmq.serialize.type": self.serialize_type,
            **(properties or {}),
        }
        return [
            "java",
            *JVM_OPTIONS,
            *(f"-D{key}={value}" for key, value in system.items()),
            "-cp",
            f"{self.classes}{os.pathsep}{self.lib}/*",
            "Launch",  # src/Launch.java: ends the JVM when `main` returns, not after Netty's 2 s quiet period
            main,
            *(f"{key}={value}" for key, value in args.items()),
        ]

    def run(
        self,
        main: str,
        args: dict[str, object],
        *,
        properties: dict[str, str] | None = None,
        timeout_s: float = RUN_TIMEOUT_S,
    ) -> JavaResult:
        """Run `main` to completion; its JSON lines parsed. Fails the test on a timeout."""
        try:
            result = subprocess.run(
                self.command(main, args, properties),
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as expired:
            raise AssertionError(f"{main} {args} did not finish within {timeout_s} s:\n{expired.stdout!s}") from None
        events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        return JavaResult(result.returncode, events, result.stderr)

    def mqadmin(self, *args: str, timeout_s: float = RUN_TIMEOUT_S) -> str:
        """`mqadmin <args>` (MQAdminStartup, ROCKETMQ_HOME = the jar cache); its stdout and stderr together.

        MQAdminStartup exits 0 even when a command fails (it prints the exception), so read the output. It runs
        in the log folder: consumerStatus writes each client's report into `./<timestamp>/`."""
        command = self.command("org.apache.rocketmq.tools.command.MQAdminStartup", {}, None)
        env = {**os.environ, "ROCKETMQ_HOME": str(self.lib.parent)}
        try:
            result = subprocess.run(
                [*command, *args],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.log_dir,
            )
        except subprocess.TimeoutExpired as expired:
            raise AssertionError(f"mqadmin {args} did not finish within {timeout_s} s:\n{expired.stdout!s}") from None
        return result.stdout + result.stderr

    def spawn(self, main: str, args: dict[str, object], *, properties: dict[str, str] | None = None) -> JavaProcess:
        """Start `main` in the background; stopped (stdin closed) at teardown if still running."""
        name = f"{main}-{len(self.started)}"
        log_path = self.log_dir / f"{name}.stderr"
        with log_path.open("w") as log:
            process = subprocess.Popen(
                self.command(main, args, properties),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        running = JavaProcess(name, process, log_path)
        self.started.append(running)
        return running

    def stop_all(self) -> None:
        for running in self.started:
            try:
                running.stop()
            except AssertionError:
                running.kill()


@pytest.fixture
def java(java_classes: Path, rocketmq_lib: Path, tmp_path: Path) -> Iterator[JavaRunner]:
    """Run Java programs (JSON headers); every spawned one is stopped after the test."""
    log_dir = tmp_path / "java"
    log_dir.mkdir()
    runner = JavaRunner(rocketmq_lib, java_classes, log_dir)
    yield runner
    runner.stop_all()


def start_shoal(root: Path, flush_disk_type: str, extra_conf: dict[str, str] | None = None) -> Any:
    """A shoal NameServer + Broker (tests/conftest.py's Cluster) in `root`; `extra_conf` adds or overrides keys."""
    root_conftest = _root_conftest()
    free_port = root_conftest.free_port
    running = root_conftest.Cluster(root, free_port(), root_conftest.free_broker_port(), free_port())
    running.start_namesrv()
    conf = {
        "flushDiskType": flush_disk_type,
        "brokerName": "broker-a",
        # transaction check-back within seconds, not a minute (RocketMQ's defaults: 6 s and 60 s)
        "transactionTimeOut": "1000",
        "transactionCheckInterval": "1000",
        "enablePropertyFilter": "true",  # SQL92 subscriptions (test_filter.py); RocketMQ's default is false
        **(extra_conf or {}),
    }
    try:
        running.start_broker(conf=conf)
    except BaseException:
        running.stop_all()
        raise
    return running


@pytest.fixture(scope="module", params=FLUSH_DISK_TYPES)
def shoal(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A shoal NameServer + Broker per flush type, shared by a module's tests."""
    flush_disk_type = request.param
    running = start_shoal(tmp_path_factory.mktemp(f"shoal-{flush_disk_type.lower()}"), flush_disk_type)
    yield running
    running.stop_all()
    running.discard_store()


@pytest.fixture(scope="module")
def shoal_with(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[dict[str, str]], Any]]:
    """Start more ASYNC_FLUSH clusters with broker.conf keys added or overridden; all stopped after the module."""
    started: list[Any] = []

    def start(extra_conf: dict[str, str]) -> Any:
        running = start_shoal(tmp_path_factory.mktemp("shoal-with"), "ASYNC_FLUSH", extra_conf)
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop_all()
        running.discard_store()


@pytest.fixture(scope="module")
def shoal_async_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One ASYNC_FLUSH cluster per module, for tests the flush type cannot change (mqadmin)."""
    running = start_shoal(tmp_path_factory.mktemp("shoal-async-only"), "ASYNC_FLUSH")
    yield running
    running.stop_all()
    running.discard_store()


_TOPIC_COUNTER = iter(range(1_000_000))


@pytest.fixture
def unique(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Names no other test uses (topics and groups are shared within a module's cluster)."""
    base = "".join(ch if ch.isalnum() else "_" for ch in request.node.name)[:60]

    def make(prefix: str) -> str:
        return f"{prefix}_{base}_{next(_TOPIC_COUNTER)}"

    return make
