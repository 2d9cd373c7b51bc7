"""reclaim.py: a group's volumes are released only when the Broker no longer keeps the group and none
of its pods remain."""

from __future__ import annotations

from typing import Any

from shoal.operator import manifests, reclaim


def _labelled(name: str, group: str | None) -> dict[str, Any]:
    labels = {} if group is None else {manifests.LABEL_GROUP: group}
    return {"metadata": {"name": name, "labels": labels}}


def test_pod_groups_name_every_group_with_a_pod() -> None:
    """Goal: terminating and running pods both hold their group back. Method: pods of two groups and a
    NameServer pod (no group label)."""
    pods = [_labelled("orders-g0-0", "orders-g0"), _labelled("orders-g1-1", "orders-g1"), _labelled("ns-0", None)]
    assert reclaim.broker_pod_groups(pods) == {"orders-g0", "orders-g1"}


def test_only_dropped_groups_without_pods_are_released() -> None:
    """Goal: a kept group, a dropped group whose pods still stop, and an unlabelled PV stay; a dropped
    group with no pod left is released. Method: four PVs, groups 0 kept, 1 stopping, 2 stopped."""
    volumes = [
        _labelled("pv-g0", "orders-g0"),
        _labelled("pv-g1", "orders-g1"),
        _labelled("pv-g2", "orders-g2"),
        _labelled("pv-other", None),
    ]
    released = reclaim.releasable_volumes(volumes, kept_groups={"orders-g0"}, groups_with_pods={"orders-g1"})
    assert [v["metadata"]["name"] for v in released] == ["pv-g2"]
    deleted = reclaim.releasable_volumes(volumes, kept_groups=(), groups_with_pods=())
    assert [v["metadata"]["name"] for v in deleted] == ["pv-g0", "pv-g1", "pv-g2"]


def test_the_waiting_note_names_the_groups() -> None:
    note = reclaim.waiting_note({"orders-g1", "orders-g0"})
    assert note.startswith("waiting for the pods of orders-g0, orders-g1 to stop") and "reclaimPolicy Delete" in note
