"""observe.py: Kubernetes objects and broker answers into status facts, on plain dicts."""

from __future__ import annotations

from typing import Any

from shoal.client import HaStatus
from shoal.operator import manifests, observe
from shoal.operator.spec import BrokerSpec

NOW = "2026-01-01T12:00:00Z"


def pod(name: str, ready: bool = True, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    group = name.rsplit("-", 1)[0]
    return {
        "metadata": {
            "name": name,
            "labels": {manifests.LABEL_GROUP: group, "controller-revision-hash": "rev"},
            "annotations": annotations or {},
        },
        "spec": {"nodeName": "n0"},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def stateful_set(ready: int) -> dict[str, Any]:
    return {"spec": {"replicas": 3}, "status": {"readyReplicas": ready, "updateRevision": "rev"}}


def ha(role: str, lag_bytes: int, end: int) -> HaStatus:
    return HaStatus(role, 0, 1, end, end, lag_bytes, 0)


def test_pods_become_facts_with_their_brokers_replication_state(spec: BrokerSpec) -> None:
    """Goal: a slave's lag and every broker's CommitLog end reach the facts. Method: a master and a slave."""
    slave = observe.pod_facts(spec, pod("orders-g0-1"), ha("SLAVE", 12, 900))
    assert slave is not None and (slave.group, slave.ordinal, slave.ready) == (0, 1, True)
    assert (slave.ha_lag_bytes, slave.store_end, slave.revision) == (12, 900, "rev")
    master = observe.pod_facts(spec, pod("orders-g0-0"), ha("SYNC_MASTER", 12, 1000))
    assert master is not None and (master.ha_lag_bytes, master.store_end) == (None, 1000)
    assert observe.pod_facts(spec, pod("other-g0-0")) is None
    assert observe.group_index(spec, pod("orders-g11-0")) == 11


def test_a_master_unready_keeps_the_time_from_the_last_status(spec: BrokerSpec) -> None:
    """Goal: the failover grace survives an operator restart. Method: an unready master with and
    without a stamp in the previous status; a surplus group."""
    stateful_sets = {"orders-g0": stateful_set(2), "orders-g1": stateful_set(1), "orders-ns": stateful_set(3)}
    pods = [pod("orders-g0-0", ready=False), pod("orders-g0-1"), pod("orders-g1-0")]
    fresh = observe.cluster_facts(spec, observe.Observed(stateful_sets, pods, NOW))
    assert fresh.master_unready_since == {0: NOW}
    assert fresh.surplus_groups == [1] and [p.name for p in fresh.pods] == ["orders-g0-0", "orders-g0-1"]
    assert fresh.name_server is not None and fresh.name_server.ready_replicas == 3
    previous = [{"name": "orders-g0", "masterUnreadySince": "2026-01-01T11:00:00Z", "masterRestartedAt": "x"}]
    kept = observe.cluster_facts(spec, observe.Observed(stateful_sets, pods, NOW, previous_groups=previous))
    assert (kept.master_unready_since, kept.master_restarted_at) == ({0: "2026-01-01T11:00:00Z"}, {0: "x"})
    promoted = observe.cluster_facts(spec, observe.Observed(stateful_sets, pods, NOW, masters={0: 1}))
    assert promoted.master_unready_since == {}


def test_volumes_and_pod_security_in_the_storage_facts(spec: BrokerSpec) -> None:
    """Goal: StorageReady's inputs. Method: volumes for some pods only, a restricted namespace."""
    some = observe.Observed({}, [], NOW, storage_nodes={"orders-g0-0": "n0"}, pod_security_level="restricted")
    facts = observe.cluster_facts(spec, some)
    assert spec.storage.type == "HostPath"
    assert (facts.volumes_bound, facts.pod_security_forbids_host_path) == (False, True)
    every = {manifests.pod_name(spec, 0, n): "n0" for n in range(spec.replicas_per_group)}
    assert observe.cluster_facts(spec, observe.Observed({}, [], NOW, storage_nodes=every)).volumes_bound


def test_pods_annotated_for_a_manual_roll_by_group(spec: BrokerSpec) -> None:
    """Goal: the manual-roll annotation on pods is read per group. Method: two annotated pods, one not."""
    pods = [
        pod("orders-g0-0", annotations={"a": "true"}),
        pod("orders-g0-1"),
        pod("orders-g1-2", annotations={"a": "true"}),
    ]
    assert observe.annotated_pods(spec, pods, "a") == {0: {"orders-g0-0"}, 1: {"orders-g1-2"}}
