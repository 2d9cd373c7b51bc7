"""What the Go and Node.js client tests share: the cache their builds live in, how a missing toolchain
is reported, and one client run's events (each program prints one JSON line per event on stdout,
{"event": ...}; other lines are the client library's own log)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

RUN_MARGIN_S = 30.0
"""How much longer than its own timeout a client run may take before the test gives up on it."""


def cache_root() -> Path:
    """`$SHOAL_CACHE_DIR`, else `~/.cache/shoal` (tools/get_k8s.py's too)."""
    configured = os.environ.get("SHOAL_CACHE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "shoal"


def unavailable(reason: str) -> None:
    """Skip with `reason`; under CI=true fail instead, since CI must run every client."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI=true: the client interop tests must run)")
    pytest.skip(reason)


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
