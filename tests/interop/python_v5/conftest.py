"""The official RocketMQ 5 Python client (rocketmq-python-client, PyPI) against Shoal's gRPC proxy.

The client installs the package name `rocketmq`, like the C++ binding in the dev dependencies, so it
lives in its own venv: created with this interpreter and `pip install -r client/requirements.txt`
once per hash of client/ into `$SHOAL_CACHE_DIR/python-v5-client-<hash>` (default ~/.cache/shoal),
reused by a fresh clone on the same machine. client/scenario.py prints one JSON line per event.

Without PyPI these tests skip with the reason, except under CI=true, where they fail.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import Cluster
from tests.interop.client_runs import ClientRun, cache_root, run_client, unavailable
from tests.ports import free_broker_port, free_port

CLIENT_DIR = Path(__file__).resolve().parent / "client"
SOURCE_FILES = ("requirements.txt", "scenario.py")
INSTALL_TIMEOUT_S = 600.0
"""Cold (grpcio, protobuf, opentelemetry from PyPI): about 20 s here; ten minutes means it is stuck."""


def _venv(root: Path) -> Path:
    """The client venv's python for these sources, created unless cached."""
    digest = hashlib.sha256()
    for name in SOURCE_FILES:
        digest.update(name.encode() + b"\0" + (CLIENT_DIR / name).read_bytes())
    directory = root / f"python-v5-client-{digest.hexdigest()[:16]}"
    python = directory / "bin" / "python"
    if (directory / ".installed").is_file():
        return python
    shutil.rmtree(directory, ignore_errors=True)  # a run that stopped halfway
    directory.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(directory)], check=True, timeout=INSTALL_TIMEOUT_S)
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "-r", str(CLIENT_DIR / "requirements.txt")],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )
    if installed.returncode != 0:
        shutil.rmtree(directory, ignore_errors=True)
        unavailable(f"pip could not install client/requirements.txt (is PyPI reachable?):\n{installed.stderr[-2000:]}")
    (directory / ".installed").write_text("")
    return python


@pytest.fixture(scope="session")
def python_v5() -> Callable[..., ClientRun]:
    """Run client/scenario.py with arguments in the client's venv; its events."""
    python = _venv(cache_root())

    def run(*args: str, timeout_s: float) -> ClientRun:
        return run_client([str(python), str(CLIENT_DIR / "scenario.py"), *args], timeout_s=timeout_s)

    return run


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[Cluster]:
    """A NameServer, a Broker and `shoal proxy` in front of them, as real processes."""
    running = Cluster(tmp_path, free_port(), free_broker_port(), free_port())
    running.start_namesrv()
    running.start_broker()
    running.start_proxy(free_port())
    yield running
    running.stop_all()
