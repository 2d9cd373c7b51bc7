"""Pure decision: when a group removed by a scale-down (index >= spec.groups) may be deleted.

The operator wipes the group's write permission on the NameServers, then deletes the group's
StatefulSet, Service, PDB and ConfigMap once no consumer group has anything left to consume on
it; `shoal.io/skip-drain-check: "true"` deletes at once. Its PVs follow the reclaim policy once its
pods have stopped (reclaim.py).

handlers.py asks each surplus group's master (drain_targets) for the consumer lag, then
plan_drain decides from those facts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from shoal.operator import manifests
from shoal.operator.spec import BrokerSpec
from shoal.operator.steps import DELETE_GROUP, WAIT, Step


@dataclass(frozen=True)
class DrainTarget:
    """A surplus group and where to ask about it."""

    group: int
    name: str
    """brokerName, `<cluster>-g<i>`."""
    master_address: str
    """A broker of the group that reports the master role; "" when none does."""


def drain_targets(
    spec: BrokerSpec,
    surplus_groups: Sequence[int],
    pod_groups: Mapping[str, int],
    masters: Sequence[str],
    addresses: Mapping[str, str],
) -> list[DrainTarget]:
    """`pod_groups`: pod name -> group index; `masters`: pods whose broker answered as master, in
    pod order; `addresses`: pod name -> remoting address ("" before the pod has an IP)."""
    targets = []
    for group in surplus_groups:
        found = [addresses.get(pod, "") for pod in masters if pod_groups.get(pod) == group]
        targets.append(DrainTarget(group, manifests.group_name(spec, group), found[0] if found else ""))
    return targets


@dataclass(frozen=True)
class DrainFacts:
    name: str
    """The surplus group's brokerName."""
    consumer_lag: int | None
    """Messages not consumed yet on the group, after its write permission was wiped; None: its
    master did not answer (or no broker of it is master)."""
    skip_check: bool = False
    """The Broker's shoal.io/skip-drain-check annotation is "true"."""


def plan_drain(facts: DrainFacts) -> Step:
    """DELETE_GROUP once nothing is left to consume (lag 0), or at once with the annotation."""
    if facts.skip_check:
        return Step(DELETE_GROUP, f"{facts.name}: drain check skipped by annotation")
    if facts.consumer_lag is None:
        return Step(WAIT, f"{facts.name}: draining, its master does not answer")
    if facts.consumer_lag > 0:
        return Step(WAIT, f"{facts.name}: draining, {facts.consumer_lag} messages not consumed yet")
    return Step(DELETE_GROUP, f"{facts.name}: drained (write permission removed, every consumer caught up)")
