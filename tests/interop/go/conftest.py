"""The RocketMQ Go client (github.com/apache/rocketmq-client-go/v2) against real Shoal processes.

client/main.go is built with `go build` once per source hash into `$SHOAL_CACHE_DIR/go-client-<hash>`
(default ~/.cache/shoal), with Go's module and build caches beside tools/get_k8s.py's, so a fresh clone
on the same machine rebuilds in seconds. The module comes from the Go module proxy (pinned by
client/go.sum). The program prints one JSON line per event ({"event": ...}) on stdout.

Without `go` these tests skip with the reason, except under CI=true, where they fail.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.interop.client_runs import ClientRun, cache_root, run_client, unavailable

CLIENT_DIR = Path(__file__).resolve().parent / "client"
SOURCE_FILES = ("go.mod", "go.sum", "main.go")
BUILD_TIMEOUT_S = 600.0
"""Cold (modules from the proxy, the client compiled): about 30 s here; ten minutes means it is stuck."""


def _sources_sha256() -> str:
    digest = hashlib.sha256()
    for name in SOURCE_FILES:
        digest.update(name.encode() + b"\0" + (CLIENT_DIR / name).read_bytes())
    return digest.hexdigest()


def _build(go: str, root: Path) -> Path:
    """The client binary for these sources, built unless already cached."""
    directory = root / f"go-client-{_sources_sha256()[:16]}"
    binary = directory / "client"
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f"client.{os.getpid()}.partial"
    env = {
        **os.environ,
        "GOMODCACHE": str(root / "go" / "mod"),
        "GOCACHE": str(root / "go" / "build"),
        "GOFLAGS": "-modcacherw",  # read-only module folders would make the cache undeletable
    }
    built = subprocess.run(
        [go, "build", "-o", str(partial), "."],
        cwd=CLIENT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    if built.returncode != 0:
        pytest.fail(f"go build of {CLIENT_DIR} failed (is the Go module proxy reachable?):\n{built.stderr[-3000:]}")
    partial.replace(binary)
    return binary


@pytest.fixture(scope="session")
def go_client() -> Callable[..., ClientRun]:
    """Run the Go client with arguments, wait up to `timeout_s` (plus a margin), return its events."""
    go = shutil.which("go")
    if go is None:
        unavailable("go is not on PATH: the RocketMQ Go client cannot be built")
    assert go is not None
    binary = _build(go, cache_root())

    def run(*args: str, timeout_s: float) -> ClientRun:
        return run_client([str(binary), *args], timeout_s=timeout_s)

    return run
