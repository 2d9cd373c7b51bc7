"""What the Go, Node.js and v5 client tests share: the cache their builds live in, how a missing
toolchain is reported, building a Go client program, and one client run's events (each program prints
one JSON line per event on stdout, {"event": ...}; other lines are the client library's own log)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

RUN_MARGIN_S = 30.0
"""How much longer than its own timeout a client run may take before the test gives up on it."""
GO_BUILD_TIMEOUT_S = 600.0
"""Cold (modules from the proxy, a client compiled): 20-40 s here; ten minutes means it is stuck."""
GO_SOURCES = ("go.mod", "go.sum", "main.go")


def cache_root() -> Path:
    """`$SHOAL_CACHE_DIR`, else `~/.cache/shoal` (tools/get_k8s.py's too)."""
    configured = os.environ.get("SHOAL_CACHE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "shoal"


def unavailable(reason: str) -> None:
    """Skip with `reason`; under CI=true fail instead, since CI must run every client."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI=true: the client interop tests must run)")
    pytest.skip(reason)


def go_program(source: Path, name: str) -> Path:
    """`source`'s Go program (GO_SOURCES), built with `go build` into `<cache>/<name>-<sources hash>`
    unless already there, with Go's module and build caches in `<cache>/go` (tools/get_k8s.py's
    too), so a fresh clone on the same machine rebuilds in seconds. Modules come from the Go module
    proxy, pinned by go.sum. Without `go`: unavailable()."""
    go = shutil.which("go")
    if go is None:
        unavailable(f"go is not on PATH: {source} cannot be built")
    assert go is not None
    digest = hashlib.sha256()
    for file in GO_SOURCES:
        digest.update(file.encode() + b"\0" + (source / file).read_bytes())
    root = cache_root()
    directory = root / f"{name}-{digest.hexdigest()[:16]}"
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
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=GO_BUILD_TIMEOUT_S,
        check=False,
    )
    if built.returncode != 0:
        pytest.fail(f"go build of {source} failed (is the Go module proxy reachable?):\n{built.stderr[-3000:]}")
    partial.replace(binary)
    return binary


@dataclass(frozen=True)
class ClientRun:
    """The events one client run printed, and its exit status."""

    events: list[dict[str, Any]]
    returncode: int
    output: str
    """stderr, then the end of stdout: what to show when the run failed."""

    def of(self, event: str) -> list[dict[str, Any]]:
        return [line for line in self.events if line["event"] == event]

    def assert_ok(self) -> None:
        """The run exited 0 and reported no error."""
        assert self.returncode == 0 and not self.of("error"), (self.events, self.output[-3000:])


def run_client(
    command: list[str], *, cwd: Path | None = None, timeout_s: float, env: Mapping[str, str] | None = None
) -> ClientRun:
    """Run one client program to its end (at most `timeout_s` plus RUN_MARGIN_S) and read its events;
    `env` is added to this process's environment."""
    done = subprocess.run(
        command,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s + RUN_MARGIN_S,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )
    return ClientRun(_events(done.stdout), done.returncode, done.stderr + done.stdout[-3000:])


def _events(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects with an "event" key, one per line, in order."""
    events = []
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue  # a library's log line that only looks like JSON
        if isinstance(value, dict) and "event" in value:
            events.append(value)
    return events
