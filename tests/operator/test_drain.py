"""drain.py: when a group removed by a scale-down is deleted, on plain facts."""

from __future__ import annotations

from shoal.operator import drain, steps
from shoal.operator.spec import BrokerSpec


def test_drain_deletes_only_when_consumers_caught_up() -> None:
    """Goal: no message left unconsumed is deleted. Method: lag 15, unknown, 0, and the skip annotation."""
    assert drain.plan_drain(drain.DrainFacts("orders-g1", 15)).action == steps.WAIT
    assert drain.plan_drain(drain.DrainFacts("orders-g1", None)).action == steps.WAIT
    assert drain.plan_drain(drain.DrainFacts("orders-g1", 0)).action == steps.DELETE_GROUP
    skipped = drain.plan_drain(drain.DrainFacts("orders-g1", None, skip_check=True))
    assert skipped.action == steps.DELETE_GROUP and "skipped" in skipped.reason


def test_drain_targets_ask_the_broker_that_reports_the_master_role(spec: BrokerSpec) -> None:
    """Goal: each surplus group is asked at its current master. Method: group 1's master is ordinal 1;
    group 2 has no master."""
    pod_groups = {"orders-g0-0": 0, "orders-g1-0": 1, "orders-g1-1": 1, "orders-g2-0": 2}
    masters = ["orders-g0-0", "orders-g1-1"]
    addresses = {"orders-g0-0": "10.0.0.1:10911", "orders-g1-1": "10.0.0.3:10911"}
    targets = drain.drain_targets(spec, [1, 2], pod_groups, masters, addresses)
    assert targets == [
        drain.DrainTarget(1, "orders-g1", "10.0.0.3:10911"),
        drain.DrainTarget(2, "orders-g2", ""),
    ]
