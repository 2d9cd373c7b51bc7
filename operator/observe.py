"""Pure observation: Kubernetes objects and the brokers' answers in, status.ClusterFacts out.

handlers.py reads StatefulSets, pods and the namespace through kube.py and asks each ready broker
for its replication state (admin protocol); everything it concludes from them is here, so it is
tested on plain dicts. State that must survive an operator restart (which ordinal is master,
since when a master is unready, when the roll restarted it) is read back from the last status.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shoal.client import HaStatus
from shoal.operator import limits, manifests
from shoal.operator.spec import BrokerSpec
from shoal.operator.status import ClusterFacts, PodFacts, StatefulSetFacts

POD_SECURITY_LEVELS_WITHOUT_HOST_PATH = ("restricted",)
"""Pod Security Admission levels that refuse a hostPath Broker's pods. Not for the hostPath itself
(it sits behind a PersistentVolume, which Pod Security does not look at) but for prepare-store, the
root step with CHOWN/FOWNER/DAC_OVERRIDE that hands the directory to the broker: baseline allows
it, restricted does not (tests/kube/test_security.py asks a real API server)."""


def pod_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def group_index(spec: BrokerSpec, pod: Mapping[str, Any]) -> int | None:
    """The group a pod belongs to, including groups beyond spec.groups (being drained)."""
    label = str((pod["metadata"].get("labels") or {}).get(manifests.LABEL_GROUP, ""))
    prefix = f"{spec.name}-g"
    suffix = label[len(prefix) :] if label.startswith(prefix) else ""
    return int(suffix) if suffix.isdigit() else None


def stateful_set_facts(body: Mapping[str, Any]) -> StatefulSetFacts:
    observed = body.get("status") or {}
    return StatefulSetFacts(
        replicas=int((body.get("spec") or {}).get("replicas") or 0),
        ready_replicas=int(observed.get("readyReplicas") or 0),
        update_revision=str(observed.get("updateRevision") or ""),
    )


def pod_facts(spec: BrokerSpec, pod: Mapping[str, Any], ha: HaStatus | None = None) -> PodFacts | None:
    meta = pod["metadata"]
    group = group_index(spec, pod)
    ordinal_text = str(meta["name"]).rsplit("-", 1)[-1]
    if group is None or not ordinal_text.isdigit():
        return None
    return PodFacts(
        name=str(meta["name"]),
        group=group,
        ordinal=int(ordinal_text),
        ready=pod_ready(pod),
        node=str((pod.get("spec") or {}).get("nodeName") or ""),
        revision=str((meta.get("labels") or {}).get("controller-revision-hash", "")),
        ha_lag_bytes=None if ha is None or ha.is_master or ha.lag_bytes < 0 else ha.lag_bytes,
        store_end=None if ha is None or ha.commitlog_max_offset < 0 else ha.commitlog_max_offset,
    )


def annotated_pods(spec: BrokerSpec, pods: Sequence[Mapping[str, Any]], annotation: str) -> dict[int, set[str]]:
    """Group index -> names of its pods whose `annotation` is "true"."""
    found: dict[int, set[str]] = {}
    for pod in pods:
        group = group_index(spec, pod)
        if group is not None and (pod["metadata"].get("annotations") or {}).get(annotation) == "true":
            found.setdefault(group, set()).add(str(pod["metadata"]["name"]))
    return found


def _previous_stamps(previous_groups: object, key: str) -> dict[str, str]:
    """Group name -> the time stamp `key` of the last status's `groups[]`."""
    if not isinstance(previous_groups, list):
        return {}
    return {
        str(detail.get("name")): str(detail[key])
        for detail in previous_groups
        if isinstance(detail, Mapping) and detail.get(key)
    }


@dataclass(frozen=True)
class Observed:
    """What handlers.py read for one reconcile of a Broker."""

    stateful_sets: Mapping[str, Mapping[str, Any]]
    """The cluster's StatefulSets by name."""
    pods: Sequence[Mapping[str, Any]]
    """The cluster's broker pods (of any group, surplus ones included)."""
    now: str
    """status.timestamp of this reconcile."""
    ha: Mapping[str, HaStatus | None] = field(default_factory=dict)
    """Pod name -> its broker's replication state; None or absent: not known."""
    masters: Mapping[int, int] = field(default_factory=dict)
    """Group index -> master ordinal, from the last status (rollout.master_ordinals)."""
    previous_groups: object = None
    """The last status's `groups`, as found (anything, for an object edited by hand)."""
    storage_nodes: Mapping[str, str] = field(default_factory=dict)
    """Pod name -> node of its hostPath volume (placement.storage_nodes)."""
    pod_security_level: str = ""
    """The namespace's enforced Pod Security level; "" unknown or not asked."""
    paused: bool = False


def cluster_facts(spec: BrokerSpec, observed: Observed) -> ClusterFacts:
    """The facts status.broker_status and the decisions (rollout, failover, drain) work on."""
    stateful_sets = observed.stateful_sets
    name_server = stateful_sets.get(manifests.name_server_name(spec))
    groups = {
        g: stateful_set_facts(stateful_sets[manifests.group_name(spec, g)])
        for g in range(spec.groups)
        if manifests.group_name(spec, g) in stateful_sets
    }
    pods = [
        facts
        for pod in observed.pods
        if (facts := pod_facts(spec, pod, observed.ha.get(str(pod["metadata"]["name"])))) is not None
        and facts.group < spec.groups
    ]
    previous_since = _previous_stamps(observed.previous_groups, "masterUnreadySince")
    previous_restart = _previous_stamps(observed.previous_groups, "masterRestartedAt")
    unready_since, restarted_at = {}, {}
    for group in range(spec.groups):
        master = next((p for p in pods if p.group == group and p.ordinal == observed.masters.get(group, 0)), None)
        if group in groups and (master is None or not master.ready):
            name = manifests.group_name(spec, group)
            unready_since[group] = previous_since.get(name, observed.now)
            if name in previous_restart:
                restarted_at[group] = previous_restart[name]
    host_path = spec.storage.type == "HostPath"
    expected_pods = [manifests.pod_name(spec, g, n) for g in range(spec.groups) for n in range(spec.replicas_per_group)]
    return ClusterFacts(
        name_server=stateful_set_facts(name_server) if name_server else None,
        groups=groups,
        pods=pods,
        masters=dict(observed.masters),
        master_unready_since=unready_since,
        master_restarted_at=restarted_at,
        surplus_groups=[
            g for g in range(spec.groups, limits.GROUPS_MAX) if manifests.group_name(spec, g) in stateful_sets
        ],
        volumes_bound=not host_path or all(pod in observed.storage_nodes for pod in expected_pods),
        pod_security_forbids_host_path=host_path
        and observed.pod_security_level in POD_SECURITY_LEVELS_WITHOUT_HOST_PATH,
        paused=observed.paused,
    )
