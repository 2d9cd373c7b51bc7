"""Pure decision: which node holds each broker pod's hostPath store (docs/operator-design.md §5.1).

The choice is made once per pod and kept on its PersistentVolume (annotation
`shoal.io/storage-node`), so it is read back first; pods without a PV get a node among the
eligible ones (matching storage.hostPath.nodeSelector, not cordoned), preferring nodes that hold
no other member of the same group.
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
    eligible = sorted(node["metadata"]["name"] for node in nodes if not (node.get("spec") or {}).get("unschedulable"))
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
