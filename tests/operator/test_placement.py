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
