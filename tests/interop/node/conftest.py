"""ali-ons (a Node.js RocketMQ remoting client, from npm) against real Shoal processes.

client/ (package.json, package-lock.json pinning ali-ons 3.12.0, client.js) is installed with `npm ci`
once per hash of those files into `$SHOAL_CACHE_DIR/node-client-<hash>` (default ~/.cache/shoal; npm's
download cache beside it), so a fresh clone on the same machine reuses it. client.js prints one JSON
line per event ({"event": ...}) on stdout.

Without `node` and `npm` these tests skip with the reason, except under CI=true, where they fail.
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
SOURCE_FILES = ("package.json", "package-lock.json", "client.js")
INSTALL_TIMEOUT_S = 600.0
"""Cold (95 packages from the npm registry): about 5 s here; ten minutes means it is stuck."""


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


@pytest.fixture(scope="session")
def node_client() -> Callable[..., ClientRun]:
    """Run client.js with arguments, wait up to `timeout_s` (plus a margin), return its events."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        unavailable("node and npm are not both on PATH: the Node.js client cannot be installed")
    assert node is not None and npm is not None
    directory = _install(npm, cache_root())

    def run(*args: str, timeout_s: float) -> ClientRun:
        return run_client([node, "client.js", *args], cwd=directory, timeout_s=timeout_s)

    return run
