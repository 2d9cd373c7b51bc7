"""bench/broker_cpu.py (issue 27's per-request CPU bench) runs end to end against real brokers: the
Shoal side of a run (the ceiling server lives in ../shared/bench, outside the repository) and the
one-against-two broker processes run. Small counts and 64 MiB segments: a smoke run, not a measurement."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[2] / "bench" / "broker_cpu.py"
QUICK = ["--n", "3000", "--warm", "300", "--runs", "1", "--rounds", "2", "--conf", "mappedFileSizeCommitLog=67108864"]
RUN_TIMEOUT_S = 300


def _run(*extra: str) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCH), *QUICK, *extra],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_a_run_reports_the_brokers_cpu_per_send_and_its_threads() -> None:
    out = _run("--shoal-only")
    match = re.search(r"shoal ASYNC_FLUSH ([\d.]+) us/send \(([\d,]+)/s\)", out)
    assert match, out
    assert float(match.group(1)) > 0 and int(match.group(2).replace(",", "")) > 0
    assert re.search(r"shoal threads: \d+ \S+ [\d.]+ us/send", out), out


def test_the_scale_run_compares_one_broker_process_with_two() -> None:
    out = _run("--scale")
    match = re.search(r"one broker ([\d,]+) sends/s \| two brokers ([\d,]+) sends/s \| ([\d.]+)x", out)
    assert match, out
    assert int(match.group(1).replace(",", "")) > 0 and int(match.group(2).replace(",", "")) > 0
