"""reclaimPolicy Delete: which hostPath volumes may be released, and when.

A released volume loses its directory to a cleanup Job. A broker still running on that directory
would write its JSON tables back while it shuts down (a table write makes its parent directories),
so part of the store would come back after the Job. The operator therefore stops a group's pods
first (it deletes the StatefulSet) and releases the group's volumes only once a later look finds
none of its pods left: on scale-down from the reconcile, on Broker deletion from the delete handler
(which keeps the finalizer and retries until then).

Pure functions over API objects; handlers.py does the I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from shoal.operator import manifests

__all__ = ["broker_pod_groups", "releasable_volumes", "waiting_note"]


def _group_label(body: Mapping[str, Any]) -> str:
    return str((body["metadata"].get("labels") or {}).get(manifests.LABEL_GROUP, ""))


def broker_pod_groups(pods: Iterable[Mapping[str, Any]]) -> set[str]:
    """The groups (StatefulSet names) that still have a pod, terminating ones included."""
    return {group for pod in pods if (group := _group_label(pod))}


def releasable_volumes(
    volumes: Sequence[Mapping[str, Any]], *, kept_groups: Collection[str], groups_with_pods: Collection[str]
) -> list[Mapping[str, Any]]:
    """Volumes of groups the Broker no longer has (not in `kept_groups`) none of whose pods remain."""
    return [
        volume
        for volume in volumes
        if (group := _group_label(volume)) and group not in kept_groups and group not in groups_with_pods
    ]


def waiting_note(groups_with_pods: Collection[str]) -> str:
    """Why the delete handler has not released the volumes yet."""
    return (
        f"waiting for the pods of {', '.join(sorted(groups_with_pods))} to stop before removing their "
        "store directories (reclaimPolicy Delete)"
    )
