"""Registers the `e2e` marker: tests that need a real Kubernetes cluster made by run-kind.sh."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "e2e: needs the kind cluster of tests/e2e/run-kind.sh (skipped unless SHOAL_E2E_KUBECONFIG is set)"
    )
