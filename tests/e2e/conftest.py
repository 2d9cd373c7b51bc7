"""Registers the `e2e` marker. tests/e2e/test_kind.py needs the kind cluster of run-kind.sh, which runs it (inside
the cluster) itself: without SHOAL_E2E_KUBECONFIG a plain pytest run does not collect it, rather than report
it skipped. `make test` runs run-kind.sh beside the rest (the Makefile's kind-e2e target)."""

from __future__ import annotations

import os

import pytest

E2E_ENV = "SHOAL_E2E_KUBECONFIG"
CLUSTER_MODULES = ("test_kind.py", "test_kind_outside.py")

collect_ignore = [] if os.environ.get(E2E_ENV) else list(CLUSTER_MODULES)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"e2e: needs the kind cluster of tests/e2e/run-kind.sh (not collected unless {E2E_ENV} is set)"
    )
