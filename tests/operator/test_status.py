"""Status computation from observed facts: conditions, reasons, transitions and group detail."""

from __future__ import annotations

from typing import Any

from shoal.operator import limits
from shoal.operator.spec import BrokerSpec
from shoal.operator.status import ClusterFacts, PodFacts, StatefulSetFacts, broker_status, topic_owner

SPEC = BrokerSpec(name="orders", namespace="mq", uid="u", cluster_name="orders", image="shoal:1", replicas_per_group=2)
T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:05:00Z"


def _healthy(lag: int | None = 0, revision: str = "r1", **changes: Any) -> ClusterFacts:
    pods = [
        PodFacts("orders-g0-0", 0, 0, ready=True, node="a", revision=revision),
        PodFacts("orders-g0-1", 0, 1, ready=True, node="b", revision=revision, ha_lag_bytes=lag),
    ]
    facts: dict[str, Any] = {
        "name_server": StatefulSetFacts(2, 2),
        "groups": {0: StatefulSetFacts(2, 2, update_revision="r1")},
        "pods": pods,
    }
    facts.update(changes)
    return ClusterFacts(**facts)


def _conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_healthy_cluster_is_ready_and_in_sync() -> None:
    """All pods ready, on the current revision, slave caught up: Ready and nothing else raised."""
    status = broker_status(SPEC, 3, _healthy(), T0)
    assert status["observedGeneration"] == 3
    assert _conditions(status) == {
        "Ready": ("True", "AllGroupsServing"),
        "Progressing": ("False", "UpToDate"),
        "Degraded": ("False", "AsExpected"),
        "NameServerReady": ("True", "Ready"),
        "StorageReady": ("True", "VolumesBound"),
        "ReplicationInSync": ("True", "AllSlavesInSync"),
    }
    assert status["groups"][0]["master"] == "orders-g0-0"
    assert status["groups"][0]["members"][1] == {
        "pod": "orders-g0-1",
        "brokerId": 1,
        "role": "Slave",
        "ready": True,
        "node": "b",
        "haLagBytes": 0,
    }
    assert status["readyReplicas"] == 2
    assert all(c["observedGeneration"] == 3 for c in status["conditions"])


def test_no_pods_yet_is_creating() -> None:
    """Before any pod exists: Ready=False Creating, Progressing=True Creating."""
    status = broker_status(SPEC, 1, ClusterFacts(), T0)
    assert _conditions(status)["Ready"] == ("False", "Creating")
    assert _conditions(status)["Progressing"] == ("True", "Creating")


def test_outdated_pod_is_a_rolling_update() -> None:
    """A pod on an older revision makes Progressing=True RollingUpdate naming it."""
    status = broker_status(SPEC, 2, _healthy(revision="r0"), T0)
    progressing = next(c for c in status["conditions"] if c["type"] == "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("True", "RollingUpdate")
    assert "orders-g0-0" in progressing["message"]


def test_master_down_is_group_without_master() -> None:
    """A group whose master pod is not ready makes Ready=False GroupWithoutMaster."""
    facts = _healthy()
    pods = [PodFacts("orders-g0-0", 0, 0, ready=False, revision="r1"), facts.pods[1]]
    status = broker_status(SPEC, 2, _healthy(pods=pods), T0)
    assert _conditions(status)["Ready"] == ("False", "GroupWithoutMaster")


def test_promoted_slave_serves_the_group() -> None:
    """After a promotion to ordinal 1, ordinal 0 down only degrades the cluster."""
    pods = [
        PodFacts("orders-g0-0", 0, 0, ready=False, revision="r1"),
        PodFacts("orders-g0-1", 0, 1, ready=True, revision="r1"),
    ]
    status = broker_status(SPEC, 2, _healthy(pods=pods, masters={0: 1}), T0)
    conditions = _conditions(status)
    assert conditions["Ready"] == ("True", "AllGroupsServing")
    assert conditions["Degraded"] == ("True", "SlaveNotReady")
    assert conditions["ReplicationInSync"] == ("False", "SlaveNotReady")
    assert status["groups"][0]["master"] == "orders-g0-1"
    assert status["groups"][0]["members"][1]["brokerId"] == 0


def test_lagging_slave_is_out_of_sync() -> None:
    """A slave beyond the lag limit: ReplicationInSync=False SlaveLagging and Degraded."""
    status = broker_status(SPEC, 2, _healthy(lag=limits.REPLICATION_IN_SYNC_LAG_MAX_BYTES + 1), T0)
    assert _conditions(status)["ReplicationInSync"] == ("False", "SlaveLagging")
    assert _conditions(status)["Degraded"] == ("True", "SlaveOutOfSync")
    assert _conditions(status)["Ready"] == ("True", "AllGroupsServing")


def test_unknown_lag_is_unknown() -> None:
    """No lag reported yet: ReplicationInSync=Unknown."""
    assert _conditions(broker_status(SPEC, 2, _healthy(lag=None), T0))["ReplicationInSync"] == ("Unknown", "LagUnknown")


def test_pod_security_forbidding_host_path_is_reported() -> None:
    """A namespace whose Pod Security forbids hostPath: StorageReady=False with a fix-it message."""
    status = broker_status(SPEC, 2, _healthy(pod_security_forbids_host_path=True), T0)
    conditions = _conditions(status)
    assert conditions["StorageReady"] == ("False", "PodSecurityForbidsHostPath")
    assert conditions["Ready"] == ("False", "StorageUnavailable")
    storage = next(c for c in status["conditions"] if c["type"] == "StorageReady")
    assert "pod-security.kubernetes.io/enforce=baseline" in storage["message"]


def test_name_servers_down_and_partial() -> None:
    """No NameServer ready: Ready=False; one of two: Ready but Degraded."""
    down = broker_status(SPEC, 2, _healthy(name_server=StatefulSetFacts(2, 0)), T0)
    assert _conditions(down)["Ready"] == ("False", "NameServerUnavailable")
    partial = broker_status(SPEC, 2, _healthy(name_server=StatefulSetFacts(2, 1)), T0)
    assert _conditions(partial)["Ready"] == ("True", "AllGroupsServing")
    assert _conditions(partial)["Degraded"] == ("True", "NameServerNotReady")


def test_last_transition_time_moves_only_on_flip() -> None:
    """An unchanged condition keeps its lastTransitionTime; a flipped one takes the new time."""
    first = broker_status(SPEC, 2, _healthy(), T0)
    same = broker_status(SPEC, 3, _healthy(), T1, first["conditions"])
    assert {c["lastTransitionTime"] for c in same["conditions"]} == {T0}
    flipped = broker_status(SPEC, 3, _healthy(revision="r0"), T1, first["conditions"])
    times = {c["type"]: c["lastTransitionTime"] for c in flipped["conditions"]}
    assert times["Progressing"] == T1
    assert times["Ready"] == T0


def test_paused_reconciliation_is_not_ready() -> None:
    """The pause annotation shows as Ready=False ReconciliationPaused."""
    assert _conditions(broker_status(SPEC, 2, _healthy(paused=True), T0))["Ready"] == ("False", "ReconciliationPaused")


def test_oldest_topic_wins_a_conflict() -> None:
    """Of two Topic objects for one topic, the older creationTimestamp manages it."""
    newer = {"metadata": {"name": "a", "namespace": "mq", "creationTimestamp": "2026-01-02T00:00:00Z"}}
    older = {"metadata": {"name": "b", "namespace": "mq", "creationTimestamp": "2026-01-01T00:00:00Z"}}
    assert topic_owner([newer, older]) == "mq/b"
