"""The operator process's settings, read from its environment (docs/operator-design.md §1.5)."""

from __future__ import annotations

import os

DEFAULT_HOST_ROOTS = ("/var/lib/shoal",)
"""The chart's default `hostRoots`: where storage.hostPath.root may lie when nothing is set."""


def watched_namespaces() -> list[str]:
    """SHOAL_WATCH_NAMESPACES, comma-separated; empty: the whole cluster."""
    return [n.strip() for n in os.environ.get("SHOAL_WATCH_NAMESPACES", "").split(",") if n.strip()]


def allowed_host_roots() -> tuple[str, ...]:
    """SHOAL_ALLOWED_HOSTPATH_ROOTS, colon-separated; unset: /var/lib/shoal (the chart's default)."""
    raw = os.environ.get("SHOAL_ALLOWED_HOSTPATH_ROOTS")
    if raw is None:
        return DEFAULT_HOST_ROOTS
    return tuple(root for root in raw.split(":") if root)
