"""ali-ons (a Node.js RocketMQ remoting client, from npm) against real Shoal processes.

client/ (package.json, package-lock.json pinning ali-ons 3.12.0, client.js) is installed with `npm ci`
once per hash of those files into `$SHOAL_CACHE_DIR/node-client-<hash>` (default ~/.cache/shoal; npm's
download cache beside it), so a fresh clone on the same machine reuses it. client.js prints one JSON
line per event ({"event": ...}) on stdout.

Without `node` and `npm` these tests skip with the reason, except under CI=true, where they fail.
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
SOURCE_FILES = ("package.json", "package-lock.json", "client.js")
INSTALL_TIMEOUT_S = 600.0
"""Cold (95 packages from the npm registry): about 10 s here; ten minutes means it is stuck."""
RUN_MARGIN_S = 30.0
"""How much longer than its own timeout a client run may take before the test gives up on it."""


def _cache_root() -> Path:
    configured = os.environ.get("SHOAL_CACHE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "shoal"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI=true: the Node.js client tests must run)")
    pytest.skip(reason)


def _install(npm: str, root: Path) -> Path:
    """A folder holding client.js and its node_modules for these sources, installed unless cached."""
    digest = hashlib.sha256()
    for name in SOURCE_FILES:
        digest.update(name.encode() + b"\0" + (CLIENT_DIR / name).read_bytes())
    directory = root / f"node-client-{digest.hexdigest()[:16]}"
    if (directory / ".installed").is_file():
        return directory
    partial = root / f"{directory.name}.{os.getpid()}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for name in SOURCE_FILES:
        shutil.copy2(CLIENT_DIR / name, partial / name)
    installed = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--cache", str(root / "npm")],
        cwd=partial,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )
    if installed.returncode != 0:
        pytest.fail(f"npm ci of {CLIENT_DIR} failed (is the npm registry reachable?):\n{installed.stderr[-3000:]}")
    (partial / ".installed").write_text("")
    shutil.rmtree(directory, ignore_errors=True)
    partial.rename(directory)
    return directory


@dataclass(frozen=True)
class NodeRun:
    """The events one client run printed, and its exit status."""

    events: list[dict[str, Any]]
    returncode: int
    stderr: str

    def of(self, event: str) -> list[dict[str, Any]]:
        return [line for line in self.events if line["event"] == event]


@pytest.fixture(scope="session")
def node_client() -> Callable[..., NodeRun]:
    """Run client.js with arguments, wait up to `timeout_s` (plus a margin), return its events."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        _unavailable("node and npm are not both on PATH: the Node.js client cannot be installed")
    assert node is not None and npm is not None
    directory = _install(npm, _cache_root())

    def run(*args: str, timeout_s: float) -> NodeRun:
        done = subprocess.run(
            [node, "client.js", *args],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=timeout_s + RUN_MARGIN_S,
            check=False,
        )
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"event"')]
        return NodeRun(events, done.returncode, done.stderr + done.stdout[-3000:])

    return run
