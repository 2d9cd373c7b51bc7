"""Fixtures for the operator's pure parts: sample Broker bodies, the repository root, and the
observed facts of one group that the decisions (rollout, failover, drain) are tested on."""

from __future__ import annotations

import copy
import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.operator.spec import BrokerSpec, broker_spec_from
from shoal.operator.status import ClusterFacts, PodFacts, StatefulSetFacts

REPO_ROOT = Path(__file__).resolve().parents[2]
ALLOWED_ROOTS = ("/var/lib/shoal",)


def check_golden(path: Path, objects: list[dict[str, Any]]) -> None:
    """`objects` as YAML equal `path`; SHOAL_UPDATE_GOLDEN=1 rewrites the file instead."""
    text = yaml.safe_dump_all(objects, sort_keys=True, default_flow_style=False)
    if os.environ.get("SHOAL_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with SHOAL_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{path.name} differs from the golden file (SHOAL_UPDATE_GOLDEN=1 to accept)"


def load_yaml(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text())
    assert isinstance(document, dict)
    return document


@pytest.fixture
def cluster_body() -> dict[str, Any]:
    """examples/cluster.yaml as the API server would hand it over (namespace, uid, generation)."""
    body = copy.deepcopy(load_yaml(REPO_ROOT / "examples" / "cluster.yaml"))
    body["metadata"].update(namespace="mq", uid="0f7c5d2e-1111-4222-8333-944455556666", generation=3)
    return body


NEW_REVISION, OLD_REVISION = "rev-new", "rev-old"


@pytest.fixture
def spec(cluster_body: dict[str, Any]) -> BrokerSpec:
    """examples/cluster.yaml as one group of a master and two slaves, Sync replication."""
    parsed = broker_spec_from(cluster_body, ALLOWED_ROOTS)
    return dataclasses.replace(parsed, groups=1, replicas_per_group=3, replication_mode="Sync")


def pod(
    ordinal: int, *, revision: str = NEW_REVISION, ready: bool = True, lag: int | None = 0, end: int | None = 100
) -> PodFacts:
    """Member `ordinal` of group 0 (`orders-g0-<ordinal>`); ordinal 0 reports no lag (master)."""
    return PodFacts(
        name=f"orders-g0-{ordinal}",
        group=0,
        ordinal=ordinal,
        ready=ready,
        revision=revision,
        ha_lag_bytes=None if ordinal == 0 else lag,
        store_end=end,
    )


def facts(*pods: PodFacts, masters: dict[int, int] | None = None, **changes: Any) -> ClusterFacts:
    """Group 0's StatefulSet on NEW_REVISION with these pods."""
    return ClusterFacts(
        groups={0: StatefulSetFacts(replicas=3, ready_replicas=3, update_revision=NEW_REVISION)},
        pods=pods,
        masters=masters or {},
        **changes,
    )


# The StoreAnalysis scheduler's timer period is read when analysis.handlers is imported; the KMock
# tests (analysis/test_handlers.py) move an injected clock and need ticks well under a second.
os.environ.setdefault("SHOAL_ANALYSIS_TICK_S", "0.2")
# The same for the StreamAnalysis timer, which reads each query's pod and progress.
os.environ.setdefault("SHOAL_STREAM_TICK_S", "0.2")
