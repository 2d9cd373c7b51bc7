"""bench/vs_rocketmq.py --quick end to end: both brokers, every configuration and send mode, a figure in every row;
and once each with --client python (shoal.client) and --client cpp (PyPI rocketmq 0.4.4) as the load generator.

Real processes: Shoal's namesrv and broker, RocketMQ 4.9.7's NamesrvStartup and BrokerStartup, and the Java load
generator (bench/java/Load.java). Needs java, javac and RocketMQ's jars (tools/get_rocketmq.py): without them it
skips with the reason, except under CI=true, where it fails (the same for the C++ client's package).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "bench" / "vs_rocketmq.py"
QUICK_TIMEOUT_S = 1200.0
"""A hang guard, not a speed bound. A quick run (four configurations, both brokers, recovery) took
183 s on a quiet machine and about 190 s with the 1-minute load average near 7 (16 JVM and broker
starts), but more than 420 s on a fresh machine while the Kubernetes binaries built beside it
(2026-11-30: Shoal's ASYNC_FLUSH sync send at 328 msgs/s, a fifth of its rate)."""
CONFIGS = ("ASYNC_FLUSH", "SYNC_FLUSH", "ASYNC_MASTER+slave", "SYNC_MASTER+slave")
MODES = ("sync", "async", "batch")
PEER_FAILED_SENDS_MAX_FRACTION = 0.25
"""RocketMQ's sends the client may see fail in one mode: a loaded machine times some out, a broken run fails most."""
MODE_METRICS = 7
BROKER_METRICS = 3

pytestmark = pytest.mark.slow


def _missing(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI=true: it must run)")
    pytest.skip(reason)


def _require_java() -> None:
    missing = [tool for tool in ("java", "javac") if shutil.which(tool) is None]
    if missing:
        _missing(f"{', '.join(missing)} not on PATH: the benchmark drives the RocketMQ Java client")


def run_quick(tmp_path: Path, *extra: str) -> tuple[dict[str, Any], str]:
    """bench/vs_rocketmq.py --quick with `extra` arguments: its JSON report and its stdout."""
    _require_java()
    out = tmp_path / "result.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(out), "--work-dir", str(tmp_path / "work"), *extra],
        capture_output=True,
        text=True,
        timeout=QUICK_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-5000:]}"
    return json.loads(out.read_text()), result.stdout


def check_rows(
    report: dict[str, Any], stdout: str, configs: tuple[str, ...], recovery: bool, modes: tuple[str, ...] = MODES
) -> None:
    rows = report["rows"]
    expected = len(configs) * (len(modes) * MODE_METRICS + BROKER_METRICS) + 1 + recovery  # + cold start
    assert len(rows) == expected
    assert {(row["config"], row["mode"]) for row in rows if row["mode"] in MODES} == {
        (config, mode) for config in configs for mode in modes
    }
    for row in rows:
        for key in ("shoal", "rocketmq"):  # a latency in whole ms may be 0
            assert isinstance(row[key], float) and math.isfinite(row[key]) and row[key] >= 0, row
        if row["rocketmq"] > 0:
            assert row["ratio"] == pytest.approx(row["shoal"] / row["rocketmq"])
        if row["metric"].startswith(("produce", "consume", "broker", "cold", "restart")):
            assert row["shoal"] > 0 and row["rocketmq"] > 0, row
    metrics = {row["metric"] for row in rows}
    assert "cold start to first SEND_OK s" in metrics
    assert ("restart after SIGKILL to first SEND_OK s" in metrics) == recovery
    # Shoal: every send acknowledged, every message at the live consumer and the draining group.
    # RocketMQ is the peer, not the system under test: on a loaded CI machine its SYNC_MASTER once
    # let 8 of 300 async sends time out at the client. The bench counts those in its table; every
    # message RocketMQ acknowledged must still reach both consumers, and most sends must succeed.
    warm = report["meta"]["args"]["warm"]
    for run in report["runs"]:
        for figures in run["result"]["modes"].values():
            if run["system"] == "shoal":
                assert figures["failures"] == 0 and figures["liveDone"] and figures["drained"], figures
            else:
                acknowledged = figures["sent"] + warm - figures["failures"]
                assert figures["failures"] <= figures["sent"] * PEER_FAILED_SENDS_MAX_FRACTION, figures
                assert min(figures["liveReceived"], figures["drainReceived"]) >= acknowledged, figures
    # The printed markdown table has the same rows.
    table = [line for line in stdout.splitlines() if line.startswith("| ")]
    assert len(table) == expected + 1  # header


def test_quick_run_fills_every_row(tmp_path: Path) -> None:
    """The Java client against both brokers: every configuration, send mode, cold start and recovery."""
    report, stdout = run_quick(tmp_path)
    check_rows(report, stdout, CONFIGS, recovery=True)


def test_python_client_drives_both_brokers(tmp_path: Path) -> None:
    """--client python (bench/py_load.py on shoal.client): the same phases and figures, one configuration."""
    report, stdout = run_quick(tmp_path, "--client", "python", "--configs", "ASYNC_FLUSH", "--recovery-mb", "0")
    assert report["meta"]["args"]["client"] == "python"
    assert "client: python" in stdout
    check_rows(report, stdout, ("ASYNC_FLUSH",), recovery=False)


def test_cpp_client_drives_both_brokers(tmp_path: Path) -> None:
    """--client cpp (bench/cpp_load.py on PyPI rocketmq 0.4.4): sync and async sends, cold start and recovery
    probed by the C++ client, the table also written by --markdown."""
    if importlib.util.find_spec("rocketmq") is None:
        _missing("PyPI rocketmq 0.4.4 (the C++ client) is not installed: it exists for Linux x86_64 only")
    table = tmp_path / "table.md"
    report, stdout = run_quick(
        tmp_path, "--client", "cpp", "--configs", "ASYNC_FLUSH", "--recovery-mb", "16", "--markdown", str(table)
    )
    assert report["meta"]["args"]["client"] == "cpp"
    check_rows(report, stdout, ("ASYNC_FLUSH",), recovery=True, modes=("sync", "async"))
    # Sends the client failed locally and the load generator repeated stay few (see cpp_load.send).
    for run in report["runs"]:
        for figures in run["result"]["modes"].values():
            assert 0 <= figures["clientRetries"] <= figures["sent"] // 20, (run["system"], figures)
    written = table.read_text()
    assert written.startswith("| configuration |") and "client: cpp" in written
    assert [line for line in written.splitlines() if line.startswith("| ")] == [
        line for line in stdout.splitlines() if line.startswith("| ")
    ]


def test_cpp_client_refuses_batches(tmp_path: Path) -> None:
    """--client cpp with batch sends is refused up front, with the reason (RocketMQ would store each batch whole)."""
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--client", "cpp", "--modes", "sync,batch"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "no batch mode with --client cpp" in result.stderr and "Boolean.parseBoolean" in result.stderr
