"""The RocketMQ Go client (github.com/apache/rocketmq-client-go/v2) against real Shoal processes.

client/main.go is built with `go build` once per source hash into `$SHOAL_CACHE_DIR/go-client-<hash>`
(default ~/.cache/shoal), with Go's module and build caches beside tools/get_k8s.py's, so a fresh clone
on the same machine rebuilds in seconds. The module comes from the Go module proxy (pinned by
client/go.sum). The program prints one JSON line per event ({"event": ...}) on stdout.

Without `go` these tests skip with the reason, except under CI=true, where they fail.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.interop.client_runs import ClientRun, go_program, run_client

CLIENT_DIR = Path(__file__).resolve().parent / "client"


@pytest.fixture(scope="session")
def go_client() -> Callable[..., ClientRun]:
    """Run the Go client with arguments, wait up to `timeout_s` (plus a margin), return its events."""
    binary = go_program(CLIENT_DIR, "go-client")

    def run(*args: str, timeout_s: float) -> ClientRun:
        return run_client([str(binary), *args], timeout_s=timeout_s)

    return run
