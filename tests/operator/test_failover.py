"""failover.py: whom to promote and when, on plain facts and an injected time."""

from __future__ import annotations

import dataclasses
import datetime

from shoal.operator import failover, limits, status, steps
from shoal.operator.spec import BrokerSpec
from tests.operator.conftest import facts, pod

NOW = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)


def ago(seconds: float) -> str:
    return status.timestamp(NOW - datetime.timedelta(seconds=seconds))


def test_manual_failover_promotes_only_the_named_ready_slave(spec: BrokerSpec) -> None:
    """Goal: the annotation promotes a ready slave once. Method: name a ready, an unready, the master, a stranger."""
    current = facts(pod(0), pod(1), pod(2, ready=False))
    step = failover.plan_failover(spec, current, 0, None, "orders-g0-1")
    assert (step.action, step.ordinal) == (steps.PROMOTE, 1)
    assert failover.plan_failover(spec, current, 0, None, "orders-g0-2").action == steps.WAIT
    assert failover.plan_failover(spec, current, 0, None, "orders-g0-0").action == steps.NOTHING
    assert failover.plan_failover(spec, current, 0, None, "orders-g0-9").action == steps.WAIT
    manual = dataclasses.replace(spec, failover="Manual")
    assert failover.plan_failover(manual, current, 0, 3600.0).action == steps.NOTHING


def test_automatic_failover_waits_the_grace_then_picks_the_longest_slave(spec: BrokerSpec) -> None:
    """Goal: Automatic promotes the slave with the most CommitLog after the grace. Method: before and after it."""
    auto = dataclasses.replace(spec, failover="Automatic")
    current = facts(pod(0, ready=False, end=None), pod(1, end=500), pod(2, end=900))
    early = failover.plan_failover(auto, current, 0, limits.FAILOVER_GRACE_S - 1)
    assert early.action == steps.WAIT
    step = failover.plan_failover(auto, current, 0, limits.FAILOVER_GRACE_S)
    assert (step.action, step.pod) == (steps.PROMOTE, "orders-g0-2")
    assert failover.plan_failover(auto, current, 0, None).action == steps.NOTHING
    silent = facts(pod(0, ready=False), pod(1, end=None), pod(2, ready=False))
    assert failover.plan_failover(auto, silent, 0, 600.0).action == steps.WAIT


def test_automatic_failover_gives_a_master_restarted_by_the_roll_a_longer_grace(spec: BrokerSpec) -> None:
    """A planned restart of a master recovering a large store is not a failure."""
    auto = dataclasses.replace(spec, failover="Automatic")
    current = facts(pod(0, ready=False, end=None), pod(1, end=500), pod(2, end=900))
    planned = failover.plan_failover(auto, current, 0, 120.0, master_restart_s=120.0)
    assert planned.action == steps.WAIT and "restarted by the roll" in planned.reason
    late = failover.plan_failover(auto, current, 0, 700.0, master_restart_s=limits.ROLL_MASTER_RESTART_GRACE_S)
    assert (late.action, late.pod) == (steps.PROMOTE, "orders-g0-2")


def test_decide_failover_reads_the_time_the_master_went_unready_from_the_status(spec: BrokerSpec) -> None:
    """Goal: the grace counts from the stamp kept in the status. Method: stamps before and after the grace."""
    auto = dataclasses.replace(spec, failover="Automatic")
    pods = (pod(0, ready=False, end=None), pod(1, end=500), pod(2, end=900))
    early = facts(*pods, master_unready_since={0: ago(limits.FAILOVER_GRACE_S - 5)})
    plan = failover.decide_failover(failover.FailoverFacts(auto, early, NOW))
    assert plan.promotions == () and "failover of orders-g0" in plan.waiting[0]
    late = facts(*pods, master_unready_since={0: ago(limits.FAILOVER_GRACE_S)})
    plan = failover.decide_failover(failover.FailoverFacts(auto, late, NOW))
    (promotion,) = plan.promotions
    assert (promotion.group, promotion.pod, promotion.ordinal, promotion.requested) == (0, "orders-g0-2", 2, False)
    restarted = facts(*pods, master_unready_since={0: ago(120)}, master_restarted_at={0: ago(120)})
    assert failover.decide_failover(failover.FailoverFacts(auto, restarted, NOW)).promotions == ()
    assert failover.decide_failover(failover.FailoverFacts(auto, facts(*pods), NOW)) == failover.FailoverPlan()


def test_decide_failover_answers_the_annotation_of_its_group_only(spec: BrokerSpec) -> None:
    """Goal: shoal.io/promote acts once, in the group it names. Method: a slave, the master, another group."""
    current = facts(pod(0), pod(1), pod(2))
    plan = failover.decide_failover(failover.FailoverFacts(spec, current, NOW, requested="orders-g0-1"))
    assert [(p.pod, p.requested) for p in plan.promotions] == [("orders-g0-1", True)]
    assert not plan.request_done
    done = failover.decide_failover(failover.FailoverFacts(spec, current, NOW, requested="orders-g0-0"))
    assert (done.promotions, done.request_done) == ((), True)
    elsewhere = failover.decide_failover(failover.FailoverFacts(spec, current, NOW, requested="orders-g1-1"))
    assert elsewhere == failover.FailoverPlan()
    unready = facts(pod(0), pod(1, ready=False), pod(2))
    waits = failover.decide_failover(failover.FailoverFacts(spec, unready, NOW, requested="orders-g0-1"))
    assert waits.promotions == () and "not ready" in waits.waiting[0]


def test_seconds_since_a_status_stamp() -> None:
    """Goal: unreadable or future stamps never count as time passed. Method: three stamps."""
    assert status.seconds_since(ago(42), NOW) == 42.0
    assert status.seconds_since(ago(-42), NOW) == 0.0
    assert status.seconds_since("yesterday", NOW) == 0.0
