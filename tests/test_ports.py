"""tests/ports.py: picks made at once by separate processes never overlap and stay below the ephemeral range."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import ports

PICKS_PER_PROCESS = 150
PROCESS_COUNT = 3

PICKER = f"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("ports", {str(Path(ports.__file__))!r})
ports = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ports)
picks = []
for _ in range({PICKS_PER_PROCESS}):
    port = ports.free_broker_port()
    picks += [port - 2, port, port + 1]
print(json.dumps(picks))
"""


def test_pickers_in_separate_processes_claim_disjoint_ports_below_the_ephemeral_range() -> None:
    pickers = [
        subprocess.Popen([sys.executable, "-c", PICKER], stdout=subprocess.PIPE, text=True)
        for _ in range(PROCESS_COUNT)
    ]
    picks: list[int] = []
    for picker in pickers:
        out, _ = picker.communicate(timeout=120)
        assert picker.returncode == 0
        picks += json.loads(out)

    assert len(picks) == PROCESS_COUNT * PICKS_PER_PROCESS * 3
    assert len(set(picks)) == len(picks), "two pickers got the same port"
    assert all(ports.PICK_LOW_PORT - 2 <= port < ports._ephemeral_low() for port in picks)
    assert all((ports.CLAIMS_DIR / str(port)).exists() for port in picks)


def test_a_stale_claim_is_taken_again_and_a_live_one_is_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "CLAIMS_DIR", tmp_path)
    assert ports.claim(25_000)
    assert not ports.claim(25_000)
    stale = time.time() - ports.CLAIM_TTL_S - 1
    os.utime(tmp_path / "25000", (stale, stale))
    assert ports.claim(25_000)
    assert not ports.claim(25_000)
