"""The C++ client (PyPI `rocketmq` 0.4.4, rocketmq-client-cpp 1.2.3) with `set_session_credentials`
against a broker with aclEnable: good keys send and consume; a wrong secret and an unknown key fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.acl.conftest import ADMIN, USER
from tests.conftest import Cluster

rocketmq = pytest.importorskip("rocketmq.client", reason="the C++ client wheel exists for Linux x86_64 only")

SCRIPT = Path(__file__).with_name("cpp_acl_client.py")
RUN_TIMEOUT_S = 60.0


def run(cluster: Cluster, home: Path, scenario: str, args: dict[str, Any]) -> dict[str, Any]:
    home.mkdir(exist_ok=True)
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), scenario, cluster.namesrv_addr, json.dumps(args)],
        capture_output=True,
        timeout=RUN_TIMEOUT_S,
        env={**os.environ, "HOME": str(home)},
        check=False,
    )
    lines = [line for line in completed.stdout.decode().splitlines() if line.startswith("RESULT ")]
    assert completed.returncode == 0 and lines, completed.stderr.decode()[-3000:]
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return result


def test_cpp_client_with_session_credentials(acl_cluster_factory: Callable[..., Cluster], tmp_path: Path) -> None:
    """Good keys: SEND_OK and the push consumer receives; wrong secret / unknown key: every send fails
    and a push consumer with a wrong secret receives nothing."""
    cluster = acl_cluster_factory()
    import asyncio

    from shoal.client import Admin, ClientSettings

    async def create() -> None:
        async with Admin(cluster.namesrv_addr, client_settings=ClientSettings(credentials=ADMIN)) as admin:
            await admin.create_topic("AclTopic", broker_addr=cluster.broker_addr, read_queue_nums=2, write_queue_nums=2)

    asyncio.run(create())
    good = {"access_key": USER.access_key, "secret_key": USER.secret_key}
    sent = run(
        cluster, tmp_path / "home", "produce", {"topic": "AclTopic", "group": "CppAclProducer", "count": 3, **good}
    )
    assert sent == {"sent": [0, 0, 0], "errors": []}
    for keys in (
        {"access_key": USER.access_key, "secret_key": "wrongSecret"},
        {"access_key": "unknownKey", "secret_key": "x"},
    ):
        refused = run(
            cluster, tmp_path / "home", "produce", {"topic": "AclTopic", "group": "CppAclProducer", "count": 1, **keys}
        )
        assert refused["sent"] == [] and len(refused["errors"]) == 1, refused
    pushed = run(
        cluster,
        tmp_path / "home",
        "push",
        {"topic": "AclTopic", "group": "CppAclConsumer", "expect": 3, "timeout_s": 30, **good},
    )
    assert pushed["received"] == ["cpp-acl-0", "cpp-acl-1", "cpp-acl-2"]
    wrong = {"access_key": USER.access_key, "secret_key": "wrongSecret"}
    refused_push = run(
        cluster,
        tmp_path / "home",
        "push",
        {"topic": "AclTopic", "group": "CppAclOther", "expect": 1, "timeout_s": 4, **wrong},
    )
    assert refused_push["received"] == []
    assert "Check signature failed for accessKey=shoalUser1" in cluster.log("broker")
    assert "No acl config for unknownKey" in cluster.log("broker")
