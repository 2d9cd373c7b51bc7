"""Fixtures for the operator's pure parts: sample Broker bodies and the repository root."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
ALLOWED_ROOTS = ("/var/lib/shoal",)


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


# The StoreAnalysis scheduler's timer period is read when analysis.handlers is imported; the KMock
# tests (analysis/test_handlers.py) move an injected clock and need ticks well under a second.
os.environ.setdefault("SHOAL_ANALYSIS_TICK_S", "0.2")
