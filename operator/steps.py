"""The vocabulary of the operator's per-group decisions: one `Step`, what to do next and why.

rollout.py (which pod to restart), failover.py (whom to promote) and drain.py (when a surplus
group goes) each answer with a Step per group; handlers.py carries it out and reconciles again,
so every decision sees the effect of the previous one.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def group_members(spec: BrokerSpec, facts: ClusterFacts, group: int) -> dict[int, PodFacts]:
    """Ordinal -> the observed pod, for the members the spec asks of `group`."""
    return {p.ordinal: p for p in facts.pods if p.group == group and p.ordinal < spec.replicas_per_group}
