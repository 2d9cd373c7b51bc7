"""rollout.py: the ordered roll, failover and drain decisions, on plain facts."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from shoal.operator import limits, rollout
from shoal.operator.spec import BrokerSpec, broker_spec_from
from shoal.operator.status import ClusterFacts, PodFacts, StatefulSetFacts
from tests.operator.conftest import ALLOWED_ROOTS

NEW, OLD = "rev-new", "rev-old"


@pytest.fixture
def spec(cluster_body: dict[str, Any]) -> BrokerSpec:
    """examples/cluster.yaml: groups of one master and replicasPerGroup - 1 slaves, Sync."""
    parsed = broker_spec_from(cluster_body, ALLOWED_ROOTS)
    return dataclasses.replace(parsed, groups=1, replicas_per_group=3, replication_mode="Sync")


def pod(
    ordinal: int, *, revision: str = NEW, ready: bool = True, lag: int | None = 0, end: int | None = 100
) -> PodFacts:
    return PodFacts(
        name=f"orders-g0-{ordinal}",
        group=0,
        ordinal=ordinal,
        ready=ready,
        revision=revision,
        ha_lag_bytes=None if ordinal == 0 else lag,
        store_end=end,
    )


def facts(*pods: PodFacts, masters: dict[int, int] | None = None) -> ClusterFacts:
    return ClusterFacts(
        groups={0: StatefulSetFacts(replicas=3, ready_replicas=3, update_revision=NEW)},
        pods=pods,
        masters=masters or {},
    )


def test_nothing_to_roll_when_every_pod_is_current(spec: BrokerSpec) -> None:
    assert rollout.plan_roll(spec, facts(pod(0), pod(1), pod(2)), 0).action == rollout.NOTHING


def test_slaves_restart_first_lowest_ordinal_first(spec: BrokerSpec) -> None:
    step = rollout.plan_roll(spec, facts(pod(0, revision=OLD), pod(1, revision=OLD), pod(2, revision=OLD)), 0)
    assert (step.action, step.pod) == (rollout.DELETE_POD, "orders-g0-1")
    step = rollout.plan_roll(spec, facts(pod(0, revision=OLD), pod(1), pod(2, revision=OLD)), 0)
    assert (step.action, step.pod) == (rollout.DELETE_POD, "orders-g0-2")


def test_one_pod_at_a_time(spec: BrokerSpec) -> None:
    """A restarted slave that is not ready yet holds the rest of the roll."""
    step = rollout.plan_roll(spec, facts(pod(0, revision=OLD), pod(1, ready=False), pod(2, revision=OLD)), 0)
    assert step.action == rollout.WAIT and "orders-g0-1" in step.reason
    missing = rollout.plan_roll(spec, facts(pod(0, revision=OLD), pod(2, revision=OLD)), 0)
    assert missing.action == rollout.WAIT and "orders-g0-1" in missing.reason


def test_master_last_and_only_when_slaves_are_in_sync(spec: BrokerSpec) -> None:
    behind = limits.ROLL_SLAVE_LAG_MAX_BYTES + 1
    step = rollout.plan_roll(spec, facts(pod(0, revision=OLD), pod(1), pod(2, lag=behind)), 0)
    assert step.action == rollout.WAIT and f"{behind} bytes behind" in step.reason
    unknown = rollout.plan_roll(spec, facts(pod(0, revision=OLD), pod(1, lag=None), pod(2)), 0)
    assert unknown.action == rollout.WAIT and "lag unknown" in unknown.reason
    ready = rollout.plan_roll(spec, facts(pod(0, revision=OLD), pod(1), pod(2, lag=limits.ROLL_SLAVE_LAG_MAX_BYTES)), 0)
    assert (ready.action, ready.pod) == (rollout.DELETE_POD, "orders-g0-0")


def test_an_outdated_pod_that_is_not_ready_is_replaced_first(spec: BrokerSpec) -> None:
    """A crash-looping pod on a bad revision is what the new revision fixes; it serves nothing."""
    step = rollout.plan_roll(spec, facts(pod(0, revision=OLD, ready=False), pod(1, revision=OLD), pod(2)), 0)
    assert (step.action, step.pod) == (rollout.DELETE_POD, "orders-g0-0")


def test_roll_follows_the_current_master_after_a_promotion(spec: BrokerSpec) -> None:
    """Ordinal 1 is master: ordinals 0 and 2 are slaves and go first, 1 goes last."""
    pods = (pod(0, revision=OLD), pod(1, revision=OLD), pod(2, revision=OLD))
    pods = tuple(dataclasses.replace(p, ha_lag_bytes=None if p.ordinal == 1 else 0) for p in pods)
    first = rollout.plan_roll(spec, facts(*pods, masters={0: 1}), 0)
    assert first.pod == "orders-g0-0"
    slave_zero = dataclasses.replace(pod(0), ha_lag_bytes=0)
    last = rollout.plan_roll(spec, facts(slave_zero, pods[1], pod(2), masters={0: 1}), 0)
    assert (last.action, last.pod) == (rollout.DELETE_POD, "orders-g0-1")


def test_forced_pods_restart_in_the_same_order(spec: BrokerSpec) -> None:
    current = facts(pod(0), pod(1), pod(2))
    assert rollout.plan_roll(spec, current, 0, {"orders-g0-0", "orders-g0-2"}).pod == "orders-g0-2"


def test_manual_failover_promotes_only_the_named_ready_slave(spec: BrokerSpec) -> None:
    current = facts(pod(0), pod(1), pod(2, ready=False))
    step = rollout.plan_failover(spec, current, 0, None, "orders-g0-1")
    assert (step.action, step.ordinal) == (rollout.PROMOTE, 1)
    assert rollout.plan_failover(spec, current, 0, None, "orders-g0-2").action == rollout.WAIT
    assert rollout.plan_failover(spec, current, 0, None, "orders-g0-0").action == rollout.NOTHING
    assert rollout.plan_failover(spec, current, 0, None, "orders-g0-9").action == rollout.WAIT
    manual = dataclasses.replace(spec, failover="Manual")
    assert rollout.plan_failover(manual, current, 0, 3600.0).action == rollout.NOTHING


def test_automatic_failover_waits_the_grace_then_picks_the_longest_slave(spec: BrokerSpec) -> None:
    auto = dataclasses.replace(spec, failover="Automatic")
    current = facts(pod(0, ready=False, end=None), pod(1, end=500), pod(2, end=900))
    early = rollout.plan_failover(auto, current, 0, limits.FAILOVER_GRACE_S - 1)
    assert early.action == rollout.WAIT
    step = rollout.plan_failover(auto, current, 0, limits.FAILOVER_GRACE_S)
    assert (step.action, step.pod) == (rollout.PROMOTE, "orders-g0-2")
    assert rollout.plan_failover(auto, current, 0, None).action == rollout.NOTHING
    silent = facts(pod(0, ready=False), pod(1, end=None), pod(2, ready=False))
    assert rollout.plan_failover(auto, silent, 0, 600.0).action == rollout.WAIT


def test_drain_deletes_only_when_consumers_caught_up() -> None:
    assert rollout.plan_drain("orders-g1", 15, False).action == rollout.WAIT
    assert rollout.plan_drain("orders-g1", None, False).action == rollout.WAIT
    assert rollout.plan_drain("orders-g1", 0, False).action == rollout.DELETE_GROUP
    assert rollout.plan_drain("orders-g1", None, True).action == rollout.DELETE_GROUP


def test_master_ordinals_read_back_from_status(spec: BrokerSpec) -> None:
    groups = [{"name": "orders-g0", "master": "orders-g0-2"}, {"name": "orders-g7", "master": "orders-g7-1"}, "junk"]
    assert rollout.master_ordinals(spec, groups) == {0: 2}
    assert rollout.master_ordinals(spec, None) == {}
    assert rollout.master_ordinals(spec, [{"name": "orders-g0", "master": "orders-g0-5"}]) == {}


def test_automatic_failover_gives_a_master_restarted_by_the_roll_a_longer_grace(spec: BrokerSpec) -> None:
    """A planned restart of a master recovering a large store is not a failure."""
    auto = dataclasses.replace(spec, failover="Automatic")
    current = facts(pod(0, ready=False, end=None), pod(1, end=500), pod(2, end=900))
    planned = rollout.plan_failover(auto, current, 0, 120.0, master_restart_s=120.0)
    assert planned.action == rollout.WAIT and "restarted by the roll" in planned.reason
    late = rollout.plan_failover(auto, current, 0, 700.0, master_restart_s=limits.ROLL_MASTER_RESTART_GRACE_S)
    assert (late.action, late.pod) == (rollout.PROMOTE, "orders-g0-2")
