"""Pure decisions about a broker group's pods: the ordered roll, failover and scale-down drain.

Observed facts in (status.ClusterFacts, with each broker's replication state), one step out;
handlers.py carries the step out and reconciles again, so each decision sees the effect of the
previous one. Nothing here does I/O, so every rule is tested on plain values.

Roll (the group StatefulSets use `OnDelete`: a pod runs its old revision until the operator
deletes it). One pod per group at a time, and only when every other member is ready:

1. an outdated pod that is not ready is replaced first (it serves nothing; a fixed image or
   config is what it needs);
2. then outdated slaves, lowest ordinal first;
3. the master last, and only once every slave runs the new revision, is ready and reports a
   replication lag of at most `limits.ROLL_SLAVE_LAG_MAX_BYTES`: a master restarted while its
   slaves are behind would leave the group without an up-to-date copy.

Failover. `Manual` (the default, RocketMQ 4 semantics): the operator never promotes by itself;
the annotation `shoal.io/promote: <pod>` asks it to promote that slave once. `Automatic` (only
with Sync replication, where every acknowledged message is on a slave): after the master pod has
been unready for `limits.FAILOVER_GRACE_S`, the ready slave holding the most CommitLog is
promoted; after the roll itself restarted the master, the wait is `ROLL_MASTER_RESTART_GRACE_S`,
since recovering a large store is not a failure. The broker itself refuses a slave that is
behind the acknowledged offset, and a returning old master is fenced by the epoch
(docs/replication.md), so a wrong guess here cannot lose acknowledged data.

Drain (groups scaled down): the group's write permission is wiped on the NameServers, then the
group is deleted once no consumer group has anything left to consume on it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from shoal.operator import limits, manifests
from shoal.operator.spec import BrokerSpec
from shoal.operator.status import ClusterFacts, PodFacts

WAIT = "wait"
NOTHING = "nothing"
DELETE_POD = "delete-pod"
PROMOTE = "promote"
DELETE_GROUP = "delete-group"


@dataclass(frozen=True)
class Step:
    """What to do next for one group: `action` on `pod`, and why (for logs and conditions)."""

    action: str
    reason: str = ""
    pod: str = ""
    ordinal: int = -1


def _members(spec: BrokerSpec, facts: ClusterFacts, group: int) -> dict[int, PodFacts]:
    return {p.ordinal: p for p in facts.pods if p.group == group and p.ordinal < spec.replicas_per_group}


def plan_roll(spec: BrokerSpec, facts: ClusterFacts, group: int, forced: Collection[str] = ()) -> Step:
    """The next pod of `group` to restart, a reason to wait, or nothing to do.

    `forced` names pods to restart even on the current revision (the manual-rolling-update
    annotation)."""
    stateful_set = facts.groups.get(group)
    if stateful_set is None:
        return Step(NOTHING, "the group's StatefulSet does not exist yet")
    members = _members(spec, facts, group)
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


def plan_failover(
    spec: BrokerSpec,
    facts: ClusterFacts,
    group: int,
    master_unready_s: float | None,
    requested: str = "",
    master_restart_s: float | None = None,
) -> Step:
    """Whether to promote a slave of `group` now.

    `master_unready_s`: how long the master pod has been unready (None: it is ready).
    `requested`: the pod named by the shoal.io/promote annotation, if it names one of this group.
    `master_restart_s`: how long ago the roll itself deleted the master (None: it did not).
    """
    members = _members(spec, facts, group)
    master = facts.masters.get(group, 0)
    if requested:
        target = next((p for p in members.values() if p.name == requested), None)
        if target is None:
            return Step(WAIT, f"{requested} is not a running member of {manifests.group_name(spec, group)}")
        if target.ordinal == master:
            return Step(NOTHING, f"{requested} is already the master")
        if not target.ready:
            return Step(WAIT, f"{requested} is not ready; promotion waits")
        return Step(PROMOTE, f"promotion of {requested} requested", target.name, target.ordinal)
    if spec.failover != "Automatic" or master_unready_s is None:
        return Step(NOTHING)
    if master_restart_s is not None and master_restart_s < limits.ROLL_MASTER_RESTART_GRACE_S:
        return Step(
            WAIT,
            f"master restarted by the roll {master_restart_s:.0f} s ago; failover waits "
            f"{limits.ROLL_MASTER_RESTART_GRACE_S:.0f} s for a planned restart",
        )
    if master_unready_s < limits.FAILOVER_GRACE_S:
        return Step(WAIT, f"master unready for {master_unready_s:.0f} s of a {limits.FAILOVER_GRACE_S:.0f} s grace")
    candidates = [p for p in members.values() if p.ordinal != master and p.ready and p.store_end is not None]
    if not candidates:
        return Step(WAIT, "the master is down and no ready slave reports its CommitLog end")
    best = max(candidates, key=lambda p: (p.store_end or 0, -p.ordinal))
    return Step(
        PROMOTE,
        f"master unready for {master_unready_s:.0f} s; {best.name} holds the most CommitLog ({best.store_end})",
        best.name,
        best.ordinal,
    )


def plan_drain(group_name: str, consumer_lag: int | None, skip_check: bool) -> Step:
    """A surplus group (index >= spec.groups) after its write permission was wiped: delete it
    once nothing is left to consume (`consumer_lag` 0), or at once with the skip annotation."""
    if skip_check:
        return Step(DELETE_GROUP, f"{group_name}: drain check skipped by annotation")
    if consumer_lag is None:
        return Step(WAIT, f"{group_name}: draining, its master does not answer")
    if consumer_lag > 0:
        return Step(WAIT, f"{group_name}: draining, {consumer_lag} messages not consumed yet")
    return Step(DELETE_GROUP, f"{group_name}: drained (write permission removed, every consumer caught up)")


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
