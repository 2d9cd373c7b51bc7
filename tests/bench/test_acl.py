"""bench/acl.py (issue 17's ACL cost bench) runs end to end: two real NameServer + Broker pairs, the ACL
one refusing nothing its signed producer sends (shoal.client, and the RocketMQ 4.9.7 Java client with
AclClientRPCHook), and the A/A control run with ACL off in both slots. make test runs this module beside
tests/interop/java (it needs RocketMQ's jars and a JVM for the Java case)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "acl.py"
QUICK = ["--rounds", "2", "--window-s", "0.3", "--tasks", "4", "--json"]
RUN_TIMEOUT_S = 300


@pytest.mark.parametrize(
    ("client", "control"), [("python", False), ("python", True), ("java", False)], ids=["acl", "control", "java-acl"]
)
def test_quick_run_reports_both_slots(client: str, control: bool) -> None:
    args = [sys.executable, str(BENCH), *QUICK, "--client", client, *(["--control"] if control else [])]
    done = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["control"] is control and result["client"] == client
    assert result["windows_per_mode"] == 2
    assert result["acl_off_msgs_per_s"] > 0 and result["acl_on_msgs_per_s"] > 0, result
    assert result["broker_cpu_us_per_msg_on"] > 0 and result["client_cpu_us_per_msg_on"] > 0, result
    assert result["broker_check_us_per_request"] > 0 and result["client_sign_us_per_request"] > 0, result
    assert result["paired_ratio"] > 0 and result["rate_ratio"] > 0, result
