"""Golden-file tests of the manifest builders, plus the invariants the goldens must keep.

Regenerate the goldens with SHOAL_UPDATE_GOLDEN=1 after a deliberate change and review the diff.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from shoal.operator import manifests
from shoal.operator.spec import BrokerSpec, broker_spec_from
from tests.operator.conftest import check_golden

ALLOWED_ROOTS = ("/var/lib/shoal",)

GOLDEN_DIR = Path(__file__).parent / "golden"
KUBERNETES_VERSION = "1.30.0"
NODES = {"orders-g0-0": "worker-a", "orders-g0-1": "worker-b"}


def _example_spec(body: dict[str, Any]) -> BrokerSpec:
    return broker_spec_from(body, ALLOWED_ROOTS)


def _claim_spec(body: dict[str, Any]) -> BrokerSpec:
    body["spec"].update(
        groups=2,
        replicasPerGroup=3,
        replication={"mode": "Async"},
        flush="Sync",
        storage={"type": "PersistentClaim", "persistentClaim": {"storageClassName": "fast"}, "size": "50Gi"},
        nameServer={"replicas": 0, "external": ["ns-a.example:9876", "ns-b.example:9876"]},
        config={},
    )
    return broker_spec_from(body, ALLOWED_ROOTS)


def test_hostpath_cluster_matches_golden(cluster_body: dict[str, Any]) -> None:
    """examples/cluster.yaml with both pods' nodes chosen renders exactly the golden objects."""
    check_golden(GOLDEN_DIR / "cluster-hostpath.yaml", manifests.desired_state(_example_spec(cluster_body), NODES))


def test_claim_cluster_after_failover_matches_golden(cluster_body: dict[str, Any]) -> None:
    """Two PersistentClaim groups, external NameServers, group 1 promoted to ordinal 2: golden."""
    spec = _claim_spec(cluster_body)
    check_golden(GOLDEN_DIR / "cluster-claim-failover.yaml", manifests.desired_state(spec, masters={1: 2}))


def test_every_object_is_valid_kubernetes(cluster_body: dict[str, Any]) -> None:
    """Every generated object passes kubernetes-validate's strict schema (offline)."""
    objects = manifests.desired_state(_example_spec(cluster_body), NODES)
    objects += manifests.desired_state(_claim_spec(cluster_body), masters={1: 2})
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_brokers_reach_name_servers_by_dns(cluster_body: dict[str, Any]) -> None:
    """namesrvAddr lists the headless Service's pod DNS names, never an IP."""
    spec = _example_spec(cluster_body)
    conf = manifests.broker_conf(spec, 0)
    assert "namesrvAddr=orders-ns-0.orders-ns.mq.svc:9876;orders-ns-1.orders-ns.mq.svc:9876\n" in conf
    service = manifests.name_server_service(spec)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True


def test_ordinal_zero_is_master_until_a_promotion() -> None:
    """Ordinal 0 is the master; after promoting ordinal 2, ids stay unique and 0 is a slave."""
    spec = BrokerSpec(name="c", namespace="n", uid="u", cluster_name="c", image="i", replication_mode="Sync")
    assert [manifests.broker_role(spec, n) for n in range(3)] == ["SYNC_MASTER", "SLAVE", "SLAVE"]
    assert [manifests.broker_id(n) for n in range(3)] == [0, 1, 2]
    assert [manifests.broker_role(spec, n, 2) for n in range(3)] == ["SLAVE", "SLAVE", "SYNC_MASTER"]
    assert sorted(manifests.broker_id(n, 2) for n in range(3)) == [0, 1, 2]
    assert manifests.broker_id(2, 2) == 0


def test_group_stateful_set_is_parallel_on_delete_with_unique_selector(cluster_body: dict[str, Any]) -> None:
    """Each group's StatefulSet has its own selector, Parallel pods and operator-driven restarts."""
    spec = _claim_spec(cluster_body)
    selectors = []
    for group in range(spec.groups):
        sts = manifests.group_stateful_set(spec, group)
        assert sts["spec"]["podManagementPolicy"] == "Parallel"
        assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}
        assert "shoal.io/role" not in sts["spec"]["selector"]["matchLabels"]
        selectors.append(sts["spec"]["selector"]["matchLabels"])
    assert selectors[0] != selectors[1]


def test_hostpath_volume_is_per_pod_pinned_and_pre_bound(cluster_body: dict[str, Any]) -> None:
    """A pod's PV holds <root>/<ns>/<cluster>/<pod>, is bound to its claim and pinned to its node."""
    spec = _example_spec(cluster_body)
    pv = manifests.store_persistent_volume(spec, 0, 1, "worker-b")
    assert pv["spec"]["hostPath"]["path"] == "/var/lib/shoal/mq/orders/orders-g0-1"
    assert pv["spec"]["claimRef"]["name"] == "store-orders-g0-1"
    terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["worker-b"]}]}
    ]
    assert "ownerReferences" not in pv["metadata"]
    assert pv["metadata"]["labels"]["shoal.io/cluster-uid"] == spec.uid
    sts = manifests.group_stateful_set(spec, 0)
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["storageClassName"] == manifests.HOSTPATH_STORAGE_CLASS


def test_pods_without_a_node_get_no_volume_yet(cluster_body: dict[str, Any]) -> None:
    """Only pods whose node has been chosen get a PV."""
    objects = manifests.desired_state(_example_spec(cluster_body), {"orders-g0-0": "worker-a"})
    volumes = [o["metadata"]["name"] for o in objects if o["kind"] == "PersistentVolume"]
    assert volumes == ["shoal-mq-orders-g0-0"]


def test_broker_runs_non_root_and_only_init_step_is_root(cluster_body: dict[str, Any]) -> None:
    """The broker container is non-root; the init step is root with just the three file capabilities."""
    pod = manifests.group_stateful_set(_example_spec(cluster_body), 0)["spec"]["template"]["spec"]
    broker = pod["containers"][0]["securityContext"]
    assert broker["runAsNonRoot"] is True and broker["runAsUser"] == manifests.BROKER_UID
    init = pod["initContainers"][0]
    assert init["args"] == ["prepare-store"]
    assert init["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "FOWNER", "DAC_OVERRIDE"]}
    assert {"name": "SHOAL_CLUSTER_UID", "value": "0f7c5d2e-1111-4222-8333-944455556666"} in init["env"]


def test_namespaced_children_are_owned_and_labelled(cluster_body: dict[str, Any]) -> None:
    """Every namespaced child carries the Broker's controller ownerReference and the cluster label."""
    spec = _example_spec(cluster_body)
    for obj in manifests.desired_state(spec, NODES):
        assert obj["metadata"]["labels"]["shoal.io/cluster"] == "orders"
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "shoal-operator"
        if obj["kind"] != "PersistentVolume":
            assert obj["metadata"]["namespace"] == "mq"
            assert obj["metadata"]["ownerReferences"] == [manifests.owner_reference(spec)]


def test_config_change_changes_pod_template_but_role_change_does_not(cluster_body: dict[str, Any]) -> None:
    """A broker.conf change alters the template (a roll); a promotion only rewrites the ConfigMap."""
    spec = _example_spec(cluster_body)
    before = manifests.group_stateful_set(spec, 0)
    cluster_body["spec"]["config"]["slaveReadEnable"] = "false"
    after = manifests.group_stateful_set(_example_spec(cluster_body), 0)
    assert before["spec"]["template"] != after["spec"]["template"]
    cm0 = manifests.group_config_map(spec, 0)
    cm1 = manifests.group_config_map(spec, 0, master_ordinal=1)
    assert cm0["data"]["broker.conf"] == cm1["data"]["broker.conf"]
    assert cm1["data"]["broker-1.conf"] == "brokerId=0\nbrokerRole=SYNC_MASTER\n"


@pytest.mark.parametrize("kind", ["Ephemeral", "PersistentClaim"])
def test_non_hostpath_storage_makes_no_persistent_volumes(cluster_body: dict[str, Any], kind: str) -> None:
    """Only HostPath storage creates PVs."""
    storage: dict[str, Any] = {"type": kind}
    if kind == "PersistentClaim":
        storage["persistentClaim"] = {}
    cluster_body["spec"]["storage"] = storage
    objects = manifests.desired_state(broker_spec_from(cluster_body, ()), NODES)
    assert not [o for o in objects if o["kind"] == "PersistentVolume"]
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True}


@pytest.mark.parametrize("storage", ["PersistentClaim", "Ephemeral"])
def test_claim_and_ephemeral_pods_meet_the_restricted_profile(cluster_body: dict[str, Any], storage: str) -> None:
    """Goal: without hostPath every pod passes Pod Security `restricted` (tests/kube/test_security.py has
    the API server's word). Method: every container of the NameServer and broker pods is non-root, drops
    every capability, cannot escalate, with seccomp RuntimeDefault for the pod; HostPath keeps its one
    root step, prepare-store, with CHOWN/FOWNER/DAC_OVERRIDE only."""
    cluster_body["spec"]["storage"] = {
        "type": storage,
        **({"persistentClaim": {}} if storage == "PersistentClaim" else {}),
    }
    spec = _example_spec(cluster_body)
    for obj in manifests.desired_state(spec):
        if obj["kind"] != "StatefulSet":
            continue
        pod = obj["spec"]["template"]["spec"]
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in pod.get("initContainers", []) + pod["containers"]:
            context = container["securityContext"]
            assert RESTRICTED_CONTAINER.items() <= context.items(), (obj["metadata"]["name"], container["name"])
            assert context["runAsUser"] == manifests.BROKER_UID and context["readOnlyRootFilesystem"] is True
    host = _example_spec(
        copy.deepcopy(cluster_body)
        | {"spec": {**cluster_body["spec"], "storage": {"type": "HostPath", "hostPath": {}}}}
    )
    (prepare,) = manifests.group_stateful_set(host, 0)["spec"]["template"]["spec"]["initContainers"]
    assert prepare["securityContext"]["runAsUser"] == 0
    assert prepare["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "FOWNER", "DAC_OVERRIDE"]}
