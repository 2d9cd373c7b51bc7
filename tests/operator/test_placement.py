"""placement.py: the node of each pod's hostPath store, chosen once and read back."""

from __future__ import annotations

import dataclasses
from typing import Any

from shoal.operator import manifests, placement
from shoal.operator.spec import BrokerSpec


def node(name: str, cordoned: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"unschedulable": cordoned}}


def volume(pod: str, node_name: str) -> dict[str, Any]:
    group, ordinal = pod.rsplit("-", 1)
    return {
        "metadata": {
            "labels": {manifests.LABEL_GROUP: group, manifests.LABEL_ORDINAL: ordinal},
            "annotations": {manifests.ANNOTATION_STORAGE_NODE: node_name},
        }
    }


def test_members_of_a_group_spread_across_nodes_and_cordoned_nodes_are_skipped(spec: BrokerSpec) -> None:
    """Goal: one group's replicas land on different nodes. Method: three free nodes, one cordoned."""
    chosen = placement.storage_nodes(spec, [], [node("n0"), node("n1"), node("n2"), node("n3", cordoned=True)])
    assert sorted(chosen) == ["orders-g0-0", "orders-g0-1", "orders-g0-2"]
    assert set(chosen.values()) == {"n0", "n1", "n2"}


def test_a_choice_on_a_volume_is_kept(spec: BrokerSpec) -> None:
    """Goal: a pod never moves away from its data. Method: a PV names a cordoned node."""
    chosen = placement.storage_nodes(spec, [volume("orders-g0-1", "n3")], [node("n0"), node("n3", cordoned=True)])
    assert chosen["orders-g0-1"] == "n3"
    assert placement.storage_nodes(spec, [], []) == {}, "no eligible node: nothing chosen"


def test_other_storage_types_need_no_node(spec: BrokerSpec) -> None:
    """Goal: only HostPath storage is placed. Method: an Ephemeral store with nodes around."""
    ephemeral = dataclasses.replace(spec, storage=dataclasses.replace(spec.storage, type="Ephemeral"))
    assert placement.storage_nodes(ephemeral, [], [node("n0")]) == {}


def tainted(name: str, key: str, effect: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"taints": [{"key": key, "effect": effect}]}}


def test_nodes_whose_taints_a_broker_pod_does_not_tolerate_are_never_chosen(spec: BrokerSpec) -> None:
    """Goal: a store is never pinned to a node its pod cannot run on (a 3-node kind or kubeadm
    cluster's tainted control plane left a broker Pending for good). Method: the control plane
    tainted NoSchedule (sorted first, so it was the first choice), a node tainted NoExecute, two
    workers: every replica lands on a worker."""
    nodes = [
        tainted("a-control-plane", "node-role.kubernetes.io/control-plane", "NoSchedule"),
        tainted("b-draining", "example.com/maintenance", "NoExecute"),
        node("worker-1"),
        node("worker-2"),
    ]
    chosen = placement.storage_nodes(spec, [], nodes)
    assert sorted(chosen) == ["orders-g0-0", "orders-g0-1", "orders-g0-2"]
    assert set(chosen.values()) == {"worker-1", "worker-2"}
    only_tainted = placement.storage_nodes(spec, [], nodes[:2])
    assert only_tainted == {}, "no node a broker pod tolerates: nothing chosen (the pods wait, nothing is pinned)"


def test_a_prefer_no_schedule_node_is_chosen_after_the_others(spec: BrokerSpec) -> None:
    """Goal: PreferNoSchedule is honoured as a preference, not a ban. Method: one such node among
    three: the three replicas take the two plain nodes first, and the third the preferred-not one
    (spreading wins over the preference)."""
    nodes = [tainted("a-soft", "example.com/soft", "PreferNoSchedule"), node("n1"), node("n2")]
    chosen = placement.storage_nodes(spec, [], nodes)
    assert [chosen[f"orders-g0-{ordinal}"] for ordinal in range(2)] == ["n1", "n2"]
    assert chosen["orders-g0-2"] == "a-soft"
