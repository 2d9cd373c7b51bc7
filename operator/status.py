"""Pure status computation: observed facts about children in, the custom resource's status out.

handlers.py gathers facts (StatefulSets, pods, PVs, the broker's HA lag through the admin
protocol) into the dataclasses below and writes what `broker_status` returns. Conditions follow
the Kubernetes `metav1.Condition` shape; `lastTransitionTime` changes only when a condition's
status flips, and `observedGeneration` is written on every status, degraded ones included, so
`kubectl wait --for=condition=Ready` and GitOps health checks can trust it.

Broker conditions and their reasons:

    Ready              True  AllGroupsServing
                       False InvalidSpec | ReconciliationPaused | StorageUnavailable |
                             NameServerUnavailable | Creating | GroupWithoutMaster
    Progressing        True  Creating | Draining | RollingUpdate | ScalingUp     False UpToDate
    Degraded           True  NameServerNotReady | SlaveNotReady | SlaveOutOfSync
                       False AsExpected
    NameServerReady    True  Ready | External      False NotReady
    StorageReady       True  VolumesBound | Ephemeral
                       False PodSecurityForbidsHostPath | VolumesPending
    ReplicationInSync  True  AllSlavesInSync | NoSlaves
                       False SlaveNotReady | SlaveLagging     Unknown LagUnknown
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shoal.operator import limits, manifests
from shoal.operator.spec import BrokerSpec

CONDITION_TYPES = ("Ready", "Progressing", "Degraded", "NameServerReady", "StorageReady", "ReplicationInSync")
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
"""RFC 3339 in UTC, whole seconds: every time stamp the operator writes into a status."""


def timestamp(now: datetime.datetime) -> str:
    return now.astimezone(datetime.UTC).strftime(TIME_FORMAT)


def seconds_since(stamp: str, now: datetime.datetime) -> float:
    """Seconds from a status time stamp to `now`; 0 for a stamp in the future or unreadable."""
    try:
        then = datetime.datetime.strptime(stamp, TIME_FORMAT).replace(tzinfo=datetime.UTC)
    except ValueError:
        return 0.0
    return max((now - then).total_seconds(), 0.0)


@dataclass(frozen=True)
class StatefulSetFacts:
    replicas: int
    ready_replicas: int
    update_revision: str = ""


@dataclass(frozen=True)
class PodFacts:
    name: str
    group: int
    ordinal: int
    ready: bool
    node: str = ""
    revision: str = ""
    """controller-revision-hash label: compared with the StatefulSet's updateRevision."""
    ha_lag_bytes: int | None = None
    """A slave's distance behind its master, as the slave reports it; None: not known."""
    store_end: int | None = None
    """The broker's CommitLog max offset; None: not known (pod not ready or not answering)."""


@dataclass(frozen=True)
class ClusterFacts:
    name_server: StatefulSetFacts | None = None
    groups: Mapping[int, StatefulSetFacts] = field(default_factory=dict)
    pods: Sequence[PodFacts] = ()
    masters: Mapping[int, int] = field(default_factory=dict)
    """Group index -> ordinal holding the master role (default 0)."""
    master_unready_since: Mapping[int, str] = field(default_factory=dict)
    """Group index -> when its master was first seen unready (RFC 3339); absent: ready."""
    master_restarted_at: Mapping[int, str] = field(default_factory=dict)
    """Group index -> when the roll deleted its master (RFC 3339), kept while the master is unready."""
    surplus_groups: Sequence[int] = ()
    """Group indices at or beyond spec.groups whose StatefulSet still exists (to drain)."""
    draining: Sequence[str] = ()
    """Groups beyond spec.groups being drained before deletion, with where each stands."""
    roll_steps: Sequence[str] = ()
    """Where the ordered roll stands in each group that has outdated pods (rollout.plan_roll)."""
    volumes_bound: bool = True
    pod_security_forbids_host_path: bool = False
    paused: bool = False


def condition(
    kind: str,
    status: bool | None,
    reason: str,
    message: str,
    generation: int,
    now: str,
    previous: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """One condition; keeps the previous lastTransitionTime unless the status flips."""
    text = "Unknown" if status is None else ("True" if status else "False")
    since = now
    for old in previous:
        if old.get("type") == kind and old.get("status") == text and old.get("lastTransitionTime"):
            since = str(old["lastTransitionTime"])
    return {
        "type": kind,
        "status": text,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": since,
    }


def invalid_spec_status(
    generation: int, message: str, now: str, previous: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """Status of a Broker or Topic whose spec can never work (errors.InvalidSpecError)."""
    return {
        "observedGeneration": generation,
        "conditions": [
            condition("Ready", False, "InvalidSpec", message, generation, now, previous),
            condition("Progressing", False, "InvalidSpec", message, generation, now, previous),
        ],
    }


def _group_detail(spec: BrokerSpec, group: int, facts: ClusterFacts) -> dict[str, Any]:
    master = facts.masters.get(group, 0)
    by_ordinal = {p.ordinal: p for p in facts.pods if p.group == group}
    members = []
    for ordinal in range(spec.replicas_per_group):
        pod = by_ordinal.get(ordinal)
        role = "Master" if ordinal == master else "Slave"
        member: dict[str, Any] = {
            "pod": manifests.pod_name(spec, group, ordinal),
            "brokerId": manifests.broker_id(ordinal, master),
            "role": role,
            "ready": bool(pod and pod.ready),
            "node": pod.node if pod else "",
        }
        if pod is not None and role == "Slave" and pod.ha_lag_bytes is not None:
            member["haLagBytes"] = pod.ha_lag_bytes
        members.append(member)
    detail: dict[str, Any] = {
        "name": manifests.group_name(spec, group),
        "master": manifests.pod_name(spec, group, master),
        "members": members,
    }
    if group in facts.master_unready_since:
        detail["masterUnreadySince"] = facts.master_unready_since[group]
    if group in facts.master_restarted_at:
        detail["masterRestartedAt"] = facts.master_restarted_at[group]
    return detail


def _progress(spec: BrokerSpec, facts: ClusterFacts) -> tuple[bool, str, str]:
    pods_expected = spec.groups * spec.replicas_per_group
    pods_seen = [p for p in facts.pods if p.group < spec.groups and p.ordinal < spec.replicas_per_group]
    if facts.draining:
        return True, "Draining", "; ".join(facts.draining)
    if not facts.groups or not pods_seen:
        return True, "Creating", "waiting for broker pods"
    outdated = sorted(
        p.name
        for p in pods_seen
        if p.group in facts.groups
        and facts.groups[p.group].update_revision
        and p.revision != facts.groups[p.group].update_revision
    )
    if outdated or facts.roll_steps:
        # Before ScalingUp: a pod missing in the middle of a roll is the roll's doing.
        steps = "; ".join(facts.roll_steps)
        restart = f"pods to restart: {', '.join(outdated)}" if outdated else "pods restarted"
        return True, "RollingUpdate", f"{restart}; {steps}" if steps else restart
    missing = [g for g in range(spec.groups) if g not in facts.groups]
    if missing or len(pods_seen) < pods_expected:
        return True, "ScalingUp", f"{len(pods_seen)} of {pods_expected} broker pods exist"
    return False, "UpToDate", "every pod runs the current revision"


def _replication(spec: BrokerSpec, facts: ClusterFacts) -> tuple[bool | None, str, str]:
    if spec.replicas_per_group == 1:
        return True, "NoSlaves", "groups have no slaves"
    slaves = [
        p
        for p in facts.pods
        if p.group < spec.groups and p.ordinal < spec.replicas_per_group and p.ordinal != facts.masters.get(p.group, 0)
    ]
    expected = spec.groups * (spec.replicas_per_group - 1)
    not_ready = sorted(p.name for p in slaves if not p.ready)
    if not_ready or len(slaves) < expected:
        return False, "SlaveNotReady", f"slaves not ready: {', '.join(not_ready) or 'not created yet'}"
    lagging = sorted(
        f"{p.name} ({p.ha_lag_bytes} bytes)"
        for p in slaves
        if p.ha_lag_bytes is not None and p.ha_lag_bytes > limits.REPLICATION_IN_SYNC_LAG_MAX_BYTES
    )
    if lagging:
        return False, "SlaveLagging", f"slaves behind: {', '.join(lagging)}"
    if any(p.ha_lag_bytes is None for p in slaves):
        unknown = sorted(p.name for p in slaves if p.ha_lag_bytes is None)
        return None, "LagUnknown", f"replication lag not known (not connected to the master yet?): {', '.join(unknown)}"
    return True, "AllSlavesInSync", "every slave is within the lag limit"


def broker_status(
    spec: BrokerSpec,
    generation: int,
    facts: ClusterFacts,
    now: str,
    previous: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The Broker's status from observed facts; `now` is an RFC 3339 time, injected for tests."""
    groups = [_group_detail(spec, g, facts) for g in range(spec.groups)]

    if spec.name_server.replicas == 0:
        ns_ready, ns_reason, ns_message = True, "External", "external NameServers"
        ns_partial = False
    else:
        ready_count = facts.name_server.ready_replicas if facts.name_server else 0
        ns_ready = ready_count >= 1
        ns_reason = "Ready" if ns_ready else "NotReady"
        ns_message = f"{ready_count} of {spec.name_server.replicas} NameServers ready"
        ns_partial = ns_ready and ready_count < spec.name_server.replicas

    if spec.storage.type == "Ephemeral":
        storage_ready, storage_reason, storage_message = (
            True,
            "Ephemeral",
            "emptyDir store: data does not survive a pod",
        )
    elif facts.pod_security_forbids_host_path and spec.storage.type == "HostPath":
        storage_ready, storage_reason = False, "PodSecurityForbidsHostPath"
        storage_message = (
            f"namespace {spec.namespace} enforces a Pod Security level that forbids hostPath volumes; "
            "label it pod-security.kubernetes.io/enforce=baseline or use storage type PersistentClaim"
        )
    elif not facts.volumes_bound:
        storage_ready, storage_reason, storage_message = False, "VolumesPending", "store volumes are not bound yet"
    else:
        storage_ready, storage_reason, storage_message = True, "VolumesBound", "every store volume is bound"

    progressing, progress_reason, progress_message = _progress(spec, facts)
    replication, replication_reason, replication_message = _replication(spec, facts)

    masterless = [
        detail["name"]
        for index, detail in enumerate(groups)
        if not detail["members"][facts.masters.get(index, 0)]["ready"]
    ]
    if facts.paused:
        ready, ready_reason, ready_message = False, "ReconciliationPaused", "shoal.io/pause-reconciliation is set"
    elif not storage_ready:
        ready, ready_reason, ready_message = False, "StorageUnavailable", storage_message
    elif progress_reason == "Creating":
        ready, ready_reason, ready_message = False, "Creating", progress_message
    elif not ns_ready:
        ready, ready_reason, ready_message = False, "NameServerUnavailable", ns_message
    elif masterless:
        ready, ready_reason, ready_message = False, "GroupWithoutMaster", f"no serving master: {', '.join(masterless)}"
    else:
        ready, ready_reason, ready_message = True, "AllGroupsServing", "every group has a serving master"

    if ns_partial:
        degraded, degraded_reason, degraded_message = True, "NameServerNotReady", ns_message
    elif replication_reason == "SlaveNotReady" and not progressing:
        degraded, degraded_reason, degraded_message = True, "SlaveNotReady", replication_message
    elif replication_reason == "SlaveLagging":
        degraded, degraded_reason, degraded_message = True, "SlaveOutOfSync", replication_message
    else:
        degraded, degraded_reason, degraded_message = False, "AsExpected", "nothing below spec"

    def make(kind: str, value: bool | None, reason: str, message: str) -> dict[str, Any]:
        return condition(kind, value, reason, message, generation, now, previous)

    pods = [p for p in facts.pods if p.group < spec.groups and p.ordinal < spec.replicas_per_group]
    return {
        "observedGeneration": generation,
        "conditions": [
            make("Ready", ready, ready_reason, ready_message),
            make("Progressing", progressing, progress_reason, progress_message),
            make("Degraded", degraded, degraded_reason, degraded_message),
            make("NameServerReady", ns_ready, ns_reason, ns_message),
            make("StorageReady", storage_ready, storage_reason, storage_message),
            make("ReplicationInSync", replication, replication_reason, replication_message),
        ],
        "clusterName": spec.cluster_name,
        "nameServerAddresses": manifests.name_server_addresses(spec),
        "replicas": spec.groups * spec.replicas_per_group,
        "readyReplicas": sum(1 for p in pods if p.ready),
        "groups": groups,
    }


def topic_owner(candidates: Sequence[Mapping[str, Any]]) -> str:
    """Of several Topic objects naming one (cluster, topicName), the one that manages it: the
    oldest creationTimestamp, ties broken by namespace/name. Returns "namespace/name"; the others
    report Ready=False, reason ResourceConflict."""
    assert candidates, "at least the Topic being reconciled"

    def key(body: Mapping[str, Any]) -> tuple[str, str, str]:
        meta = body["metadata"]
        return (str(meta.get("creationTimestamp", "")), str(meta.get("namespace", "")), str(meta["name"]))

    oldest = min(candidates, key=key)["metadata"]
    return f"{oldest.get('namespace', '')}/{oldest['name']}"
