"""rollout.py: the ordered roll, on plain facts."""

from __future__ import annotations

import dataclasses

from shoal.operator import limits, rollout, steps
from shoal.operator.spec import BrokerSpec
from tests.operator.conftest import OLD_REVISION as OLD
from tests.operator.conftest import facts, pod


def test_nothing_to_roll_when_every_pod_is_current(spec: BrokerSpec) -> None:
    """Goal: a current group is left alone. Method: three pods on the new revision."""
    assert rollout.plan_roll(spec, facts(pod(0), pod(1), pod(2)), 0).action == steps.NOTHING


def test_slaves_restart_first_lowest_ordinal_first(spec: BrokerSpec) -> None:
    """Goal: slaves go before the master, lowest ordinal first. Method: two sets of stale pods."""
    step = rollout.plan_roll(spec, facts(pod(0, revision=OLD), pod(1, revision=OLD), pod(2, revision=OLD)), 0)
    assert (step.action, step.pod) == (steps.DELETE_POD, "orders-g0-1")
    step = rollout.plan_roll(spec, facts(pod(0, revision=OLD), pod(1), pod(2, revision=OLD)), 0)
    assert (step.action, step.pod) == (steps.DELETE_POD, "orders-g0-2")


def test_one_pod_at_a_time(spec: BrokerSpec) -> None:
    """A restarted slave that is not ready yet holds the rest of the roll."""
    step = rollout.plan_roll(spec, facts(pod(0, revision=OLD), pod(1, ready=False), pod(2, revision=OLD)), 0)
    assert step.action == steps.WAIT and "orders-g0-1" in step.reason
    missing = rollout.plan_roll(spec, facts(pod(0, revision=OLD), pod(2, revision=OLD)), 0)
    assert missing.action == steps.WAIT and "orders-g0-1" in missing.reason


def test_master_last_and_only_when_slaves_are_in_sync(spec: BrokerSpec) -> None:
    """Goal: the master restarts only with slaves in sync. Method: a lagging, an unknown, a close slave."""
    behind = limits.ROLL_SLAVE_LAG_MAX_BYTES + 1
    step = rollout.plan_roll(spec, facts(pod(0, revision=OLD), pod(1), pod(2, lag=behind)), 0)
    assert step.action == steps.WAIT and f"{behind} bytes behind" in step.reason
    unknown = rollout.plan_roll(spec, facts(pod(0, revision=OLD), pod(1, lag=None), pod(2)), 0)
    assert unknown.action == steps.WAIT and "lag unknown" in unknown.reason
    ready = rollout.plan_roll(spec, facts(pod(0, revision=OLD), pod(1), pod(2, lag=limits.ROLL_SLAVE_LAG_MAX_BYTES)), 0)
    assert (ready.action, ready.pod) == (steps.DELETE_POD, "orders-g0-0")


def test_an_outdated_pod_that_is_not_ready_is_replaced_first(spec: BrokerSpec) -> None:
    """A crash-looping pod on a bad revision is what the new revision fixes; it serves nothing."""
    step = rollout.plan_roll(spec, facts(pod(0, revision=OLD, ready=False), pod(1, revision=OLD), pod(2)), 0)
    assert (step.action, step.pod) == (steps.DELETE_POD, "orders-g0-0")


def test_roll_follows_the_current_master_after_a_promotion(spec: BrokerSpec) -> None:
    """Ordinal 1 is master: ordinals 0 and 2 are slaves and go first, 1 goes last."""
    pods = (pod(0, revision=OLD), pod(1, revision=OLD), pod(2, revision=OLD))
    promoted = tuple(dataclasses.replace(p, ha_lag_bytes=None if p.ordinal == 1 else 0) for p in pods)
    first = rollout.plan_roll(spec, facts(*promoted, masters={0: 1}), 0)
    assert first.pod == "orders-g0-0"
    slave_zero = dataclasses.replace(pod(0), ha_lag_bytes=0)
    last = rollout.plan_roll(spec, facts(slave_zero, promoted[1], pod(2), masters={0: 1}), 0)
    assert (last.action, last.pod) == (steps.DELETE_POD, "orders-g0-1")


def test_forced_pods_restart_in_the_same_order(spec: BrokerSpec) -> None:
    """Goal: the manual-roll annotation restarts current pods too. Method: force a slave and the master."""
    current = facts(pod(0), pod(1), pod(2))
    assert rollout.plan_roll(spec, current, 0, {"orders-g0-0", "orders-g0-2"}).pod == "orders-g0-2"


def test_decide_roll_restarts_one_pod_per_group_and_notes_what_waits(spec: BrokerSpec) -> None:
    """Goal: one plan for every group. Method: group 0 restarts its master, group 1 waits for a pod."""
    two = dataclasses.replace(spec, groups=2)
    group_one = [dataclasses.replace(pod(n, revision=OLD), name=f"orders-g1-{n}", group=1) for n in (0, 2)]
    cluster = facts(pod(0, revision=OLD), pod(1), pod(2), *group_one)
    cluster = dataclasses.replace(cluster, groups={0: cluster.groups[0], 1: cluster.groups[0]})
    plan = rollout.decide_roll(rollout.RollFacts(two, cluster))
    assert plan.restarts == (rollout.PodRestart(0, "orders-g0-0", plan.restarts[0].reason, master=True),)
    assert plan.notes[0] == "restarting orders-g0-0"
    assert "orders-g1-1" in plan.notes[1]
    forced = rollout.decide_roll(rollout.RollFacts(spec, facts(pod(0), pod(1), pod(2)), {0: {"orders-g0-2"}}))
    assert [(r.pod, r.master) for r in forced.restarts] == [("orders-g0-2", False)]
    assert rollout.decide_roll(rollout.RollFacts(spec, facts(pod(0), pod(1), pod(2)))) == rollout.RollPlan()


def test_master_ordinals_read_back_from_status(spec: BrokerSpec) -> None:
    """Goal: the master role survives a restart. Method: parse a status's groups, junk included."""
    groups = [{"name": "orders-g0", "master": "orders-g0-2"}, {"name": "orders-g7", "master": "orders-g7-1"}, "junk"]
    assert rollout.master_ordinals(spec, groups) == {0: 2}
    assert rollout.master_ordinals(spec, None) == {}
    assert rollout.master_ordinals(spec, [{"name": "orders-g0", "master": "orders-g0-5"}]) == {}


def test_after_roll_records_a_restarted_master_for_failover(spec: BrokerSpec) -> None:
    """Goal: failover knows the roll restarted the master. Method: a plan restarting group 0's master."""
    now = "2026-01-01T12:00:00Z"
    plan = rollout.RollPlan((rollout.PodRestart(0, "orders-g0-0", "old", master=True),), ("restarting orders-g0-0",))
    cluster = rollout.after_roll(facts(pod(0), pod(1), pod(2)), plan, now)
    assert (cluster.master_restarted_at, cluster.master_unready_since) == ({0: now}, {0: now})
    assert cluster.roll_steps == ["restarting orders-g0-0"]
    earlier = facts(pod(0, ready=False), master_unready_since={0: "2026-01-01T11:00:00Z"})
    assert rollout.after_roll(earlier, plan, now).master_unready_since == {0: "2026-01-01T11:00:00Z"}
    assert rollout.after_roll(earlier, rollout.RollPlan(), now).master_restarted_at == {}
