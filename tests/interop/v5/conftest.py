"""The official RocketMQ 5 clients (gRPC) against Shoal's proxy: the Python client
(rocketmq-python-client, PyPI), the Java client (rocketmq-client-java, Maven Central) and the Go
client (github.com/apache/rocketmq-clients/golang/v5, the Go module proxy).

The three programs (python/scenario.py, java/src/V5Scenario.java, go/main.go) take the same modes and
print the same JSON events, so every test in test_v5_clients.py runs once per client (the `v5_client`
fixture).

- Python: the client installs the package name `rocketmq`, like the C++ binding in the dev
  dependencies, so it lives in its own venv, created with this interpreter and
  `pip install -r python/requirements.txt` once per hash of python/ into
  `$SHOAL_CACHE_DIR/python-v5-client-<hash>` (default ~/.cache/shoal).
- Java: java/pom.xml's jars (the shaded rocketmq-client-java, one jar) are fetched with Maven by
  tools/get_rocketmq.py's `ensure_pom_jars` into `$SHOAL_CACHE_DIR/rocketmq-client-java-<pom hash>`,
  and java/src is compiled with javac beside them once per source hash.
- Go: go/main.go is built with `go build` once per hash of go/ into `$SHOAL_CACHE_DIR/go-v5-client-<hash>`
  (tests/interop/client_runs.py's `go_program`).

Without PyPI, without java/javac/mvn, or without go, these tests skip with the reason, except under CI=true,
where they fail.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import Cluster, load_tool
from tests.interop.client_runs import ClientRun, cache_root, go_program, run_client, unavailable
from tests.ports import free_broker_port, free_port

HERE = Path(__file__).resolve().parent
PYTHON_DIR = HERE / "python"
PYTHON_FILES = ("requirements.txt", "scenario.py")
JAVA_DIR = HERE / "java"
GO_DIR = HERE / "go"
JAVA_CLIENT_JAR = "rocketmq-client-java-5.2.0.jar"
INSTALL_TIMEOUT_S = 600.0
"""Cold: about 20 s for the Python venv (grpcio, protobuf, opentelemetry from PyPI) and 10 s for the
Java jar here; ten minutes means it is stuck."""

V5Client = Callable[..., ClientRun]
"""Run one scenario mode with its arguments (`timeout_s=`, optional `env=`: SHOAL_V5_ACCESS_KEY and
SHOAL_V5_SECRET_KEY sign its calls); the events it printed."""


def _digest(directory: Path, names: tuple[str, ...] | list[str]) -> str:
    digest = hashlib.sha256()
    for name in names:
        digest.update(str(name).encode() + b"\0" + (directory / name).read_bytes())
    return digest.hexdigest()[:16]


def _python_venv(root: Path) -> Path:
    """The client venv's python for these sources, created unless cached."""
    directory = root / f"python-v5-client-{_digest(PYTHON_DIR, PYTHON_FILES)}"
    python = directory / "bin" / "python"
    if (directory / ".installed").is_file():
        return python
    shutil.rmtree(directory, ignore_errors=True)  # a run that stopped halfway
    directory.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(directory)], check=True, timeout=INSTALL_TIMEOUT_S)
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "-r", str(PYTHON_DIR / "requirements.txt")],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )
    if installed.returncode != 0:
        shutil.rmtree(directory, ignore_errors=True)
        unavailable(f"pip could not install python/requirements.txt (is PyPI reachable?):\n{installed.stderr[-2000:]}")
    (directory / ".installed").write_text("")
    return python


def pom_lib(pom: Path, name: str, required: tuple[str, ...], root: Path | None = None) -> Path:
    """The jars of `pom` in `<cache>/<name>-<pom hash>/lib`, fetched with Maven on first use (a test
    that needs them skips with the reason when they cannot be had, and fails under CI=true)."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            unavailable(f"{tool} (JDK 8+) is not on PATH")
    get_rocketmq = load_tool("get_rocketmq")
    directory = (root or cache_root()) / f"{name}-{get_rocketmq.pom_sha256(pom)[:16]}"
    if get_rocketmq.cached_lib(directory, pom) is None and shutil.which("mvn") is None:
        unavailable(f"mvn is not on PATH and {name} is not cached")
    try:
        lib: Path = get_rocketmq.ensure_pom_jars(pom, directory, required, name)
    except get_rocketmq.GetRocketMQError as failure:
        unavailable(f"{name} could not be fetched: {failure}")
    return lib


def _java_classpath(root: Path) -> str:
    """The classpath of V5Scenario: the client's jars and the compiled program."""
    lib = pom_lib(JAVA_DIR / "pom.xml", "rocketmq-client-java", (JAVA_CLIENT_JAR,), root)
    directory = lib.parent
    sources = sorted(path.relative_to(JAVA_DIR) for path in (JAVA_DIR / "src").glob("*.java"))
    classes = directory / f"classes-{_digest(JAVA_DIR, [str(path) for path in sources])}"
    if not (classes / ".compiled").is_file():
        shutil.rmtree(classes, ignore_errors=True)
        classes.mkdir(parents=True)
        compiled = subprocess.run(
            ["javac", "-nowarn", "-encoding", "UTF-8", "-d", str(classes), "-cp", f"{lib}/*"]
            + [str(JAVA_DIR / path) for path in sources],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
        )
        assert compiled.returncode == 0, f"javac failed:\n{compiled.stdout}\n{compiled.stderr}"
        (classes / ".compiled").write_text("")
    return f"{classes}:{lib}/*"


@pytest.fixture(scope="session")
def python_v5() -> V5Client:
    python = _python_venv(cache_root())

    def run(*args: str, timeout_s: float, env: dict[str, str] | None = None) -> ClientRun:
        return run_client([str(python), str(PYTHON_DIR / "scenario.py"), *args], timeout_s=timeout_s, env=env)

    return run


@pytest.fixture(scope="session")
def java_v5() -> V5Client:
    classpath = _java_classpath(cache_root())

    def run(*args: str, timeout_s: float, env: dict[str, str] | None = None) -> ClientRun:
        return run_client(["java", "-cp", classpath, "V5Scenario", *args], timeout_s=timeout_s, env=env)

    return run


@pytest.fixture(scope="session")
def go_v5() -> V5Client:
    binary = go_program(GO_DIR, "go-v5-client")

    def run(*args: str, timeout_s: float, env: dict[str, str] | None = None) -> ClientRun:
        return run_client([str(binary), *args], timeout_s=timeout_s, env=env)

    return run


@pytest.fixture(params=["python", "java", "go"])
def v5_client(request: pytest.FixtureRequest) -> V5Client:
    """Each official v5 client in turn."""
    runner: V5Client = request.getfixturevalue(f"{request.param}_v5")
    return runner


MIXED_TOPICS = {"enableMixedMessageType": "true"}
"""broker.conf: topics may take `message.type=MIXED` (RocketMQ 5's proxy refuses a send whose type is
not its topic's; the scenarios send normal, FIFO, delayed and transactional messages to one topic)."""
MIXED_ATTRIBUTE = ("-a", "+message.type=MIXED")
"""`shoal admin topic-create` arguments for such a topic (mqadmin updateTopic takes the same -a)."""


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[Cluster]:
    """A NameServer, a Broker (transactions checked after 1 s; MIXED topics allowed, as the scenarios
    send every message type to one topic) and `shoal proxy`, as real processes."""
    running = Cluster(tmp_path, free_port(), free_broker_port(), free_port())
    running.start_namesrv()
    running.start_broker({**MIXED_TOPICS, "transactionTimeOut": "1000", "transactionCheckInterval": "1000"})
    running.start_proxy(free_port())
    yield running
    running.stop_all()
