"""Spec parsing: defaults, the CEL rules repeated in Python, and the hostPath root allow-list."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.operator.errors import HostPathNotAllowedError, InvalidSpecError
from shoal.operator.spec import CEL_MESSAGES, broker_spec_from, check_host_root, topic_spec_from

ROOTS = ("/var/lib/shoal",)


def _broker(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "orders", "namespace": "mq", "uid": "u"}, "spec": {"image": "shoal:1", **spec}}


def test_defaults_match_the_crd() -> None:
    """A minimal spec gets the CRD's defaults: one group of two, Async, Manual, hostPath Retain."""
    spec = broker_spec_from(_broker(), ROOTS)
    assert (spec.groups, spec.replicas_per_group, spec.replication_mode, spec.failover) == (1, 2, "Async", "Manual")
    assert (spec.storage.type, spec.storage.host_root, spec.storage.reclaim_policy) == (
        "HostPath",
        "/var/lib/shoal",
        "Retain",
    )
    assert spec.cluster_name == "orders"
    assert spec.grpc_enabled is True
    assert broker_spec_from(_broker(grpc={"enabled": False}), ROOTS).grpc_enabled is False


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"replication": {"mode": "Async", "failover": "Automatic"}}, CEL_MESSAGES["failover"]),
        ({"replication": {"mode": "Sync"}, "replicasPerGroup": 1}, CEL_MESSAGES["sync_slaves"]),
        ({"config": {"brokerRole": "SLAVE"}}, CEL_MESSAGES["owned_keys"]),
        ({"config": {"namesrvAddr": "1.2.3.4:9876"}}, CEL_MESSAGES["owned_keys"]),
        ({"nameServer": {"replicas": 0}}, CEL_MESSAGES["name_server"]),
        ({"storage": {"type": "PersistentClaim"}}, CEL_MESSAGES["persistent_claim"]),
        ({"storage": {"type": "HostPath", "hostPath": {}, "persistentClaim": {}}}, CEL_MESSAGES["one_storage"]),
        ({"groups": 17}, "spec.groups"),
        ({"flush": "Sometimes"}, "spec.flush"),
        ({"config": {"grpcServerPort": "9000"}}, CEL_MESSAGES["owned_keys"]),
        ({"grpc": {"enabled": "yes"}}, "spec.grpc.enabled"),
    ],
)
def test_invalid_broker_specs_are_rejected(spec: dict[str, Any], message: str) -> None:
    """Each rule the CRD enforces is also enforced here, with the same message."""
    with pytest.raises(InvalidSpecError, match=message):
        broker_spec_from(_broker(**spec), ROOTS)


@pytest.mark.parametrize("root", ["/etc", "/var/lib/shoalx", "/var/lib/shoal/../../etc", "var/lib/shoal", "/"])
def test_host_roots_outside_the_allow_list_are_refused(root: str) -> None:
    """Only normalised absolute paths at or under an allowed root pass."""
    with pytest.raises(InvalidSpecError):
        check_host_root(root, ROOTS)


def test_host_root_under_an_allowed_root_passes_and_none_configured_refuses() -> None:
    """A subdirectory of an allowed root passes; with no allow-list every hostPath is refused."""
    assert check_host_root("/var/lib/shoal/fast", ROOTS) == "/var/lib/shoal/fast"
    with pytest.raises(HostPathNotAllowedError, match="none configured"):
        broker_spec_from(_broker(), ())


@pytest.mark.parametrize("name", ["TBW102", "%RETRY%group", "%DLQ%group", "RMQ_SYS_TRACE_TOPIC", "SCHEDULE_TOPIC_XXXX"])
def test_reserved_topics_are_refused(name: str) -> None:
    """System topics can never be managed by a Topic object."""
    with pytest.raises(InvalidSpecError, match=CEL_MESSAGES["reserved_topic"]):
        topic_spec_from({"metadata": {"name": "t"}, "spec": {"clusterRef": {"name": "c"}, "topicName": name}})


def test_topic_name_defaults_to_metadata_name() -> None:
    """Without spec.topicName the object's name is the topic's."""
    topic = topic_spec_from({"metadata": {"name": "order-events"}, "spec": {"clusterRef": {"name": "orders"}}})
    assert (topic.topic_name, topic.read_queue_nums, topic.permission) == ("order-events", 8, "ReadWrite")
