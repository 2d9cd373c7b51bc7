"""tools/container_engine.py: the daemon settings it writes and the runc wrapper's edits, on real files with the
real runc (the wrapper execs it; runc then fails on the dummy bundle, after the edit this checks)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import load_tool

CAP_SYS_RESOURCE_BIT = 24


def _tool() -> ModuleType:
    return load_tool("container_engine")


def _bounded() -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapBnd:"):
            return bool(int(line.split()[1], 16) & (1 << CAP_SYS_RESOURCE_BIT))
    return True


def test_daemon_settings_add_the_wrapper_as_default_runtime_and_keep_the_rest() -> None:
    tool = _tool()
    current = {"log-level": "warn", "runtimes": {"other": {"path": "/bin/other"}}}
    wanted = tool.daemon_settings(current)
    assert wanted["default-runtime"] == tool.RUNTIME_NAME
    assert wanted["runtimes"] == {"other": {"path": "/bin/other"}, tool.RUNTIME_NAME: {"path": str(tool.WRAPPER_PATH)}}
    assert wanted["log-level"] == "warn"
    assert tool.daemon_settings(wanted) == wanted, "a second run changes nothing"


def test_the_wrapper_drops_only_what_this_machine_cannot_grant(tmp_path: Path) -> None:
    """create --bundle: CAP_SYS_RESOURCE out of every set, a negative OOM score raised to 0, rlimits capped at
    the hard limit, where the bounding set lacks the capability; the config untouched where it has it."""
    runc = shutil.which("runc") or shutil.which("runc", path="/usr/sbin:/usr/bin")
    if runc is None:
        pytest.fail("runc is not installed: tools/container_engine.py installs docker.io, which brings it")
    tool = _tool()
    wrapper = tmp_path / "shoal-runc"
    wrapper.write_text(tool.WRAPPER_SOURCE)
    wrapper.chmod(0o755)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    caps = ["CAP_CHOWN", "CAP_SYS_RESOURCE", "CAP_NET_ADMIN"]
    config = {
        "process": {
            "capabilities": {key: list(caps) for key in ("bounding", "effective", "permitted")},
            "oomScoreAdj": -999,
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1 << 30, "soft": 1 << 30}],
        }
    }
    (bundle / "config.json").write_text(json.dumps(config))
    subprocess.run(
        [sys.executable, str(wrapper), "--root", str(tmp_path / "state"), "create", "--bundle", str(bundle), "t1"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    edited = json.loads((bundle / "config.json").read_text())["process"]
    if _bounded():
        assert edited == config["process"]
        return
    assert all(names == ["CAP_CHOWN", "CAP_NET_ADMIN"] for names in edited["capabilities"].values())
    assert edited["oomScoreAdj"] == 0
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert edited["rlimits"] == [{"type": "RLIMIT_NOFILE", "hard": hard, "soft": hard}]
