"""The RocketMQ Go client (github.com/apache/rocketmq-client-go/v2) against real Shoal processes.

client/main.go is built with `go build` once per source hash into `$SHOAL_CACHE_DIR/go-client-<hash>`
(default ~/.cache/shoal), with Go's module and build caches beside tools/get_k8s.py's, so a fresh clone
on the same machine rebuilds in seconds. The module comes from the Go module proxy (pinned by
client/go.sum). The program prints one JSON line per event ({"event": ...}) on stdout.

Without `go` these tests skip with the reason, except under CI=true, where they fail.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CLIENT_DIR = Path(__file__).resolve().parent / "client"
SOURCE_FILES = ("go.mod", "go.sum", "main.go")
BUILD_TIMEOUT_S = 600.0
"""Cold (modules from the proxy, the client compiled): about 30 s here; ten minutes means it is stuck."""
RUN_MARGIN_S = 30.0
"""How much longer than its own timeout a client run may take before the test gives up on it."""


def _cache_root() -> Path:
    configured = os.environ.get("SHOAL_CACHE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "shoal"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI=true: the Go client tests must run)")
    pytest.skip(reason)


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


@dataclass(frozen=True)
class GoRun:
    """The events one client run printed, and its exit status."""

    events: list[dict[str, Any]]
    returncode: int
    stderr: str

    def of(self, event: str) -> list[dict[str, Any]]:
        return [line for line in self.events if line["event"] == event]


@pytest.fixture(scope="session")
def go_client() -> Callable[..., GoRun]:
    """Run the Go client with arguments, wait up to `timeout_s` (plus a margin), return its events."""
    go = shutil.which("go")
    if go is None:
        _unavailable("go is not on PATH: the RocketMQ Go client cannot be built")
    assert go is not None
    binary = _build(go, _cache_root())

    def run(*args: str, timeout_s: float) -> GoRun:
        done = subprocess.run(
            [str(binary), *args], capture_output=True, text=True, timeout=timeout_s + RUN_MARGIN_S, check=False
        )
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        return GoRun(events, done.returncode, done.stderr)

    return run
