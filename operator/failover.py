"""Pure decision: whom to promote to master of a broker group, and when.

`Manual` (the default, RocketMQ 4 semantics): the operator never promotes by itself; the
annotation `shoal.io/promote: <pod>` asks it to promote that slave once. `Automatic` (only with
Sync replication, where every acknowledged message is on a slave): after the master pod has been
unready for `limits.FAILOVER_GRACE_S`, the ready slave holding the most CommitLog is promoted;
after the roll itself restarted the master, the wait is `ROLL_MASTER_RESTART_GRACE_S`, since
recovering a large store is not a failure. The broker itself refuses a slave that is behind the
acknowledged offset, and a returning old master is fenced by the epoch (docs/replication.md), so
a wrong guess here cannot lose acknowledged data.

Facts in (FailoverFacts), a FailoverPlan out; handlers.py sends PROMOTE_TO_MASTER for each
Promotion, rewrites the group's ConfigMap once the broker accepted, and clears the annotation.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from shoal.operator import limits, manifests
from shoal.operator.spec import BrokerSpec
from shoal.operator.status import ClusterFacts, seconds_since
from shoal.operator.steps import NOTHING, PROMOTE, WAIT, Step, group_members


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
    members = group_members(spec, facts, group)
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


@dataclass(frozen=True)
class FailoverFacts:
    """What one reconcile knows for failover."""

    spec: BrokerSpec
    cluster: ClusterFacts
    """With `master_unready_since` and `master_restarted_at` read back from the last status."""
    now: datetime.datetime
    requested: str = ""
    """The Broker's shoal.io/promote annotation ("" when absent)."""


@dataclass(frozen=True)
class Promotion:
    """Send PROMOTE_TO_MASTER to `pod`; on success `ordinal` becomes the group's master."""

    group: int
    pod: str
    ordinal: int
    reason: str
    requested: bool
    """Asked by the annotation (clear it once the broker accepted), else Automatic failover."""


@dataclass(frozen=True)
class FailoverPlan:
    promotions: tuple[Promotion, ...] = ()
    waiting: tuple[str, ...] = ()
    """Why a requested or Automatic failover waits, per group (for the log)."""
    request_done: bool = False
    """The annotation names a pod that already is its group's master: clear it."""


def decide_failover(facts: FailoverFacts) -> FailoverPlan:
    """One plan_failover step for every group of the spec."""
    spec, cluster = facts.spec, facts.cluster
    promotions, waiting, request_done = [], [], False
    for group in range(spec.groups):
        name = manifests.group_name(spec, group)
        since = cluster.master_unready_since.get(group)
        restarted = cluster.master_restarted_at.get(group)
        mine = facts.requested if facts.requested.startswith(name + "-") else ""
        step = plan_failover(
            spec,
            cluster,
            group,
            seconds_since(since, facts.now) if since else None,
            mine,
            seconds_since(restarted, facts.now) if restarted else None,
        )
        if step.action == WAIT and (mine or spec.failover == "Automatic"):
            waiting.append(f"failover of {name}: {step.reason}")
        elif step.action == NOTHING and mine:
            request_done = True
        elif step.action == PROMOTE:
            promotions.append(Promotion(group, step.pod, step.ordinal, step.reason, requested=bool(mine)))
    return FailoverPlan(tuple(promotions), tuple(waiting), request_done)
