"""Pure decision: the ordered roll of a broker group's pods, one pod per group at a time.

Observed facts in (status.ClusterFacts, with each broker's replication state), steps out
(steps.Step); handlers.py carries them out and reconciles again, so each decision sees the effect
of the previous one. Nothing here does I/O, so every rule is tested on plain values. Failover is
failover.py, the scale-down drain drain.py.

Roll (the group StatefulSets use `OnDelete`: a pod runs its old revision until the operator
deletes it). One pod per group at a time, and only when every other member is ready:

1. an outdated pod that is not ready is replaced first (it serves nothing; a fixed image or
   config is what it needs);
2. then outdated slaves, lowest ordinal first;
3. the master last, and only once every slave runs the new revision, is ready and reports a
   replication lag of at most `limits.ROLL_SLAVE_LAG_MAX_BYTES`: a master restarted while its
   slaves are behind would leave the group without an up-to-date copy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from shoal.operator import limits, manifests
from shoal.operator.spec import BrokerSpec
from shoal.operator.status import ClusterFacts, PodFacts
from shoal.operator.steps import DELETE_POD, NOTHING, WAIT, Step, group_members


def plan_roll(spec: BrokerSpec, facts: ClusterFacts, group: int, forced: Collection[str] = ()) -> Step:
    """The next pod of `group` to restart, a reason to wait, or nothing to do.

    `forced` names pods to restart even on the current revision (the manual-rolling-update
    annotation)."""
    stateful_set = facts.groups.get(group)
    if stateful_set is None:
        return Step(NOTHING, "the group's StatefulSet does not exist yet")
    members = group_members(spec, facts, group)
    revision = stateful_set.update_revision

    def outdated(pod: PodFacts) -> bool:
        return pod.name in forced or bool(revision and pod.revision and pod.revision != revision)

    master = facts.masters.get(group, 0)
    stale = sorted((p for p in members.values() if outdated(p)), key=lambda p: (p.ordinal == master, p.ordinal))
    if not stale:
        return Step(NOTHING, "every pod runs the current revision")
    for pod in stale:
        if not pod.ready:
            return Step(DELETE_POD, f"{pod.name} is outdated and not ready", pod.name, pod.ordinal)
    missing = [manifests.pod_name(spec, group, n) for n in range(spec.replicas_per_group) if n not in members]
    unready = sorted(p.name for p in members.values() if not p.ready)
    if missing or unready:
        return Step(WAIT, f"waiting for {', '.join(missing + unready)} to be ready before the next restart")
    slaves = [p for p in stale if p.ordinal != master]
    if slaves:
        pod = slaves[0]
        return Step(DELETE_POD, f"{pod.name} (slave) runs an old revision; slaves restart first", pod.name, pod.ordinal)
    pod = stale[0]
    behind = [
        p
        for p in members.values()
        if p.ordinal != master and (p.ha_lag_bytes is None or p.ha_lag_bytes > limits.ROLL_SLAVE_LAG_MAX_BYTES)
    ]
    if behind:
        detail = ", ".join(
            f"{p.name} ({'lag unknown' if p.ha_lag_bytes is None else f'{p.ha_lag_bytes} bytes behind'})"
            for p in sorted(behind, key=lambda p: p.ordinal)
        )
        return Step(WAIT, f"master {pod.name} waits for its slaves to be in sync: {detail}")
    return Step(DELETE_POD, f"{pod.name} (master) runs an old revision; its slaves are in sync", pod.name, pod.ordinal)


def master_ordinals(spec: BrokerSpec, observed_groups: object) -> dict[int, int]:
    """Group index -> master ordinal, read back from a previous status's `groups[].master`."""
    result: dict[int, int] = {}
    if not isinstance(observed_groups, list):
        return result
    names = {manifests.group_name(spec, g): g for g in range(spec.groups)}
    for detail in observed_groups:
        if not isinstance(detail, Mapping):
            continue
        group = names.get(str(detail.get("name", "")))
        ordinal_text = str(detail.get("master", "")).rsplit("-", 1)[-1]
        if group is not None and ordinal_text.isdigit() and int(ordinal_text) < spec.replicas_per_group:
            result[group] = int(ordinal_text)
    return result


@dataclass(frozen=True)
class RollFacts:
    """What one reconcile knows for the roll: the cluster, and the pods asked to restart anyway."""

    spec: BrokerSpec
    cluster: ClusterFacts
    forced: Mapping[int, Collection[str]] = field(default_factory=dict)
    """Group index -> its pods carrying the manual-rolling-update annotation."""


@dataclass(frozen=True)
class PodRestart:
    """Delete `pod` of `group` (OnDelete: the StatefulSet recreates it on the new revision)."""

    group: int
    pod: str
    reason: str
    master: bool
    """The pod holds the group's master role: failover gives it a longer grace."""


@dataclass(frozen=True)
class RollPlan:
    restarts: tuple[PodRestart, ...] = ()
    notes: tuple[str, ...] = ()
    """Where the roll stands in each group that has something to do (for status.roll_steps)."""


def decide_roll(facts: RollFacts) -> RollPlan:
    """One plan_roll step for every group of the spec."""
    restarts, notes = [], []
    for group in range(facts.spec.groups):
        step = plan_roll(facts.spec, facts.cluster, group, facts.forced.get(group, ()))
        if step.action == DELETE_POD:
            master = step.ordinal == facts.cluster.masters.get(group, 0)
            restarts.append(PodRestart(group, step.pod, step.reason, master))
            notes.append(f"restarting {step.pod}")
        elif step.action == WAIT:
            notes.append(step.reason)
    return RollPlan(tuple(restarts), tuple(notes))


def after_roll(cluster: ClusterFacts, plan: RollPlan, now: str) -> ClusterFacts:
    """The facts once `plan` is carried out at `now`: where the roll stands, and the masters it
    restarted, which failover then waits for with ROLL_MASTER_RESTART_GRACE_S."""
    restarted = dict.fromkeys((r.group for r in plan.restarts if r.master), now)
    return dataclasses.replace(
        cluster,
        roll_steps=list(plan.notes),
        master_restarted_at={**cluster.master_restarted_at, **restarted},
        master_unready_since={**restarted, **cluster.master_unready_since},
    )
