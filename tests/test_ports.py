"""tests/ports.py: picks made at once by separate processes never overlap and stay below the ephemeral range."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shoal.broker.config import METRICS_PORT_OFFSET
from tests import ports

PICKS_PER_PROCESS = 150
PROCESS_COUNT = 3
PICKER_TIMEOUT_S = 120.0
NARROW_RANGE_PORTS = 12

PICKER = f"""
import importlib.util, json, pathlib, sys
spec = importlib.util.spec_from_file_location("ports", {str(Path(ports.__file__))!r})
ports = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ports)
ports.CLAIMS_DIR = pathlib.Path(sys.argv[1])
picks = []
for _ in range({PICKS_PER_PROCESS}):
    port = ports.free_broker_port()
    picks += [port - 2, port, port + 1, port + {METRICS_PORT_OFFSET}]
print(json.dumps(picks))
"""


def test_pickers_in_separate_processes_claim_disjoint_ports_below_the_ephemeral_range(tmp_path: Path) -> None:
    """Goal: broker picks by processes running at once are disjoint, every port of each four lies in
    [PICK_LOW_PORT, ephemeral low), and no claim is left but the picks. Method: three processes pick
    150 broker ports each against one claims folder of this test's own (the machine's stays untouched)."""
    pickers = [
        subprocess.Popen([sys.executable, "-c", PICKER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        for _ in range(PROCESS_COUNT)
    ]
    picks: list[int] = []
    for picker in pickers:
        out, _ = picker.communicate(timeout=PICKER_TIMEOUT_S)
        assert picker.returncode == 0
        picks += json.loads(out)

    assert len(picks) == PROCESS_COUNT * PICKS_PER_PROCESS * 4
    assert len(set(picks)) == len(picks), "two pickers got the same port"
    outside = [port for port in picks if not ports.PICK_LOW_PORT <= port < ports._ephemeral_low()]
    assert not outside, f"picked outside [{ports.PICK_LOW_PORT}, {ports._ephemeral_low()}): {outside}"
    assert {int(path.name) for path in tmp_path.iterdir() if path.name.isdigit()} == set(picks)


def test_broker_port_fours_stay_inside_the_range_up_to_its_edges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: a broker port drawn next to either end of the range never puts listenPort - 2 below it,
    nor listenPort + 1 (the pick a busy machine's many redraws once made) or the metrics port
    (listenPort + 100, a CI failure) on an ephemeral port. Method: a range of METRICS_PORT_OFFSET +
    12 ports, every port bindable; pick until the range is used up."""
    monkeypatch.setattr(ports, "CLAIMS_DIR", tmp_path)
    monkeypatch.setattr(ports, "bindable", lambda port: True)
    high = ports.PICK_LOW_PORT + METRICS_PORT_OFFSET + NARROW_RANGE_PORTS
    monkeypatch.setattr(ports, "_ephemeral_low", lambda: high)
    picks: list[int] = []
    with pytest.raises(AssertionError, match="no free port"):
        while True:
            port = ports.free_broker_port()
            picks += [port - 2, port, port + 1, port + METRICS_PORT_OFFSET]
    assert picks and len(set(picks)) == len(picks)
    assert all(ports.PICK_LOW_PORT <= port < high for port in picks), picks
    assert {int(path.name) for path in tmp_path.iterdir() if path.name.isdigit()} == set(picks)


def test_a_stale_claim_is_taken_again_and_a_live_one_is_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Goal: a claim older than CLAIM_TTL_S is taken over, a fresh one is not. Method: claim, age the file, claim."""
    monkeypatch.setattr(ports, "CLAIMS_DIR", tmp_path)
    assert ports.claim(25_000)
    assert not ports.claim(25_000)
    stale = time.time() - ports.CLAIM_TTL_S - 1
    os.utime(tmp_path / "25000", (stale, stale))
    assert ports.claim(25_000)
    assert not ports.claim(25_000)
