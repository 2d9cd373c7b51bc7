"""The operator process's settings, read from its environment (docs/operator-design.md §1.5)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


ADMIN_CREDENTIALS_DIR_DEFAULT = "/etc/shoal/operator-credentials"
"""Where the chart mounts the operatorCredentials Secret (keys accessKey and secretKey)."""


def admin_credentials() -> tuple[str, str] | None:
    """The operator's ACL account from $SHOAL_ADMIN_CREDENTIALS_DIR/{accessKey,secretKey}; None when
    the directory is absent (brokers without ACL). Read on every use, so a rotated Secret (the
    kubelet swaps the mounted files) takes effect without restarting the operator."""
    directory = Path(os.environ.get("SHOAL_ADMIN_CREDENTIALS_DIR", ADMIN_CREDENTIALS_DIR_DEFAULT))
    if not directory.is_dir():
        return None
    access_key = (directory / "accessKey").read_text().strip()
    secret_key = (directory / "secretKey").read_text().strip()
    if not access_key or not secret_key:
        raise ValueError(f"{directory}: accessKey and secretKey must both be non-empty")
    return access_key, secret_key


@dataclass(frozen=True)
class NetworkPolicySettings:
    """The NetworkPolicies the operator gives every Broker (chart value networkPolicy)."""

    enabled: bool = False
    clients: tuple[Mapping[str, Any], ...] = ()
    """NetworkPolicyPeers that may reach the client ports (10911, 10909, gRPC 8081) and the NameServers;
    empty: every source."""
    metrics: tuple[Mapping[str, Any], ...] = ()
    """NetworkPolicyPeers that may scrape the metrics port; empty: none but the operator."""
    operator_namespace: str = ""
    """The operator's own namespace: its pod always reaches the remoting and metrics ports."""


def network_policy() -> NetworkPolicySettings:
    """SHOAL_NETWORK_POLICY, JSON {"enabled", "clients", "metrics"} as the chart renders it, and
    POD_NAMESPACE; unset: no NetworkPolicies (an operator run outside the chart)."""
    raw = os.environ.get("SHOAL_NETWORK_POLICY", "")
    if not raw:
        return NetworkPolicySettings()
    parsed = json.loads(raw)
    if not isinstance(parsed, dict):
        raise ValueError("SHOAL_NETWORK_POLICY must be a JSON object")
    return NetworkPolicySettings(
        enabled=bool(parsed.get("enabled", False)),
        clients=tuple(parsed.get("clients") or ()),
        metrics=tuple(parsed.get("metrics") or ()),
        operator_namespace=os.environ.get("POD_NAMESPACE", ""),
    )
