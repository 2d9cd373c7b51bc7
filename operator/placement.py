"""Pure decision: which node holds each broker pod's hostPath store (docs/operator-design.md §5.1).

The choice is made once per pod and kept on its PersistentVolume (annotation
`shoal.io/storage-node`), so it is read back first; pods without a PV get a node among the
eligible ones (matching storage.hostPath.nodeSelector, not cordoned, and with no taint a broker
pod does not tolerate), preferring nodes that hold no other member of the same group, then nodes
without a PreferNoSchedule taint.

Broker pods carry no tolerations, so a NoSchedule or NoExecute taint (a kubeadm or kind
control-plane node's `node-role.kubernetes.io/control-plane`, say) rules a node out: a store
pinned there would leave its pod Pending for good ("untolerated taint").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shoal.operator import manifests
from shoal.operator.spec import BrokerSpec


def storage_nodes(
    spec: BrokerSpec, volumes: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]]
) -> dict[str, str]:
    """Pod name -> node of its hostPath volume, from the cluster's PVs and the candidate nodes."""
    if spec.storage.type != "HostPath":
        return {}
    chosen: dict[str, str] = {}
    for volume in volumes:
        meta = volume["metadata"]
        pod = f"{meta['labels'].get(manifests.LABEL_GROUP)}-{meta['labels'].get(manifests.LABEL_ORDINAL)}"
        node = (meta.get("annotations") or {}).get(manifests.ANNOTATION_STORAGE_NODE, "")
        if node:
            chosen[pod] = node
    eligible = [
        name
        for _, name in sorted(
            (_prefers_not(node), node["metadata"]["name"])
            for node in nodes
            if not (node.get("spec") or {}).get("unschedulable") and not _untolerated_taints(node)
        )
    ]
    for group in range(spec.groups):
        members = [manifests.pod_name(spec, group, ordinal) for ordinal in range(spec.replicas_per_group)]
        used = {chosen[pod] for pod in members if pod in chosen}
        for pod in members:
            if pod in chosen or not eligible:
                continue
            free = [node for node in eligible if node not in used] or eligible
            chosen[pod] = free[group % len(free)]
            used.add(chosen[pod])
    return chosen


BLOCKING_TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
"""Taint effects that keep a pod without a matching toleration off a node."""


def _untolerated_taints(node: Mapping[str, Any]) -> list[str]:
    """The node's taints that keep a broker pod (no tolerations) off it, as key:effect."""
    taints = (node.get("spec") or {}).get("taints") or []
    return [
        f"{taint.get('key', '')}:{taint.get('effect', '')}"
        for taint in taints
        if taint.get("effect") in BLOCKING_TAINT_EFFECTS
    ]


def _prefers_not(node: Mapping[str, Any]) -> bool:
    """Whether the node asks to be avoided (a PreferNoSchedule taint): chosen only after the others."""
    taints = (node.get("spec") or {}).get("taints") or []
    return any(taint.get("effect") == "PreferNoSchedule" for taint in taints)
