"""crds/ against a real kube-apiserver: accepted as structural schemas, documented in `kubectl explain`,
every CEL rule enforced by the server with the message the operator's Python mirror repeats."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from shoal.operator.analysis.spec import analysis_spec_from
from shoal.operator.errors import InvalidSpecError
from shoal.operator.spec import broker_spec_from, topic_spec_from
from shoal.operator.stream.spec import stream_spec_from
from tests.kube.control_plane import ControlPlane

REPO_ROOT = Path(__file__).resolve().parents[2]
GROUP, VERSION = "shoal.io", "v1alpha1"
NAMESPACE = "cel-checks"
ALLOWED_HOST_ROOTS = ("/var/lib/shoal",)
CRDS = {
    "broker.yaml": "brokers",
    "topic.yaml": "topics",
    "storeanalysis.yaml": "storeanalyses",
    "streamanalysis.yaml": "streamanalyses",
}
EXAMPLES = {
    "broker.yaml": "cluster.yaml",
    "topic.yaml": "topic.yaml",
    "storeanalysis.yaml": "storeanalysis.yaml",
    "streamanalysis.yaml": "streamanalysis.yaml",
}
MIRRORS: dict[str, Callable[[Mapping[str, Any]], object]] = {
    "broker.yaml": lambda body: broker_spec_from(body, ALLOWED_HOST_ROOTS),
    "topic.yaml": topic_spec_from,
    "storeanalysis.yaml": analysis_spec_from,
    "streamanalysis.yaml": stream_spec_from,
}


def _load(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text())
    assert isinstance(document, dict)
    return document


def cel_rules(crd_file: str) -> set[tuple[str, str]]:
    """(field path, message) of every x-kubernetes-validations rule in crds/<crd_file>."""
    schema = _load(REPO_ROOT / "crds" / crd_file)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    found: set[tuple[str, str]] = set()

    def walk(node: dict[str, Any], path: str) -> None:
        for rule in node.get("x-kubernetes-validations", ()):
            found.add((path + rule.get("fieldPath", ""), rule["message"]))
        for name, child in node.get("properties", {}).items():
            walk(child, f"{path}.{name}" if path else name)

    walk(schema, "")
    return found


@dataclass(frozen=True)
class Violation:
    """A change to the crd's example that breaks one rule; `on_update` changes an existing object, which
    was created from the example after `setup`."""

    crd_file: str
    field: str
    message: str
    change: Callable[[dict[str, Any]], None]
    on_update: bool = False
    setup: Callable[[dict[str, Any]], None] | None = None
    what: str = ""

    @property
    def id(self) -> str:
        return f"{self.crd_file}:{self.field}:{self.what or ('update' if self.on_update else 'create')}"


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        node = body
        *parents, last = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return change


def _unset(path: str) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = body
        for key in parents:
            node = node[key]
        del node[last]

    return change


def _both(*changes: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        for one in changes:
            one(body)

    return change


IMMUTABLE = "field is immutable"
VIOLATIONS = (
    Violation("broker.yaml", "spec", "replication mode Sync requires replicasPerGroup >= 2",
              _set("spec.replicasPerGroup", 1)),
    Violation("broker.yaml", "spec.clusterName", IMMUTABLE, _set("spec.clusterName", "renamed"), on_update=True,
              setup=_set("spec.clusterName", "orders"), what="changed"),
    Violation("broker.yaml", "spec.clusterName", IMMUTABLE, _set("spec.clusterName", "renamed"), on_update=True,
              what="added"),
    Violation("broker.yaml", "spec.nameServer", "nameServer needs replicas >= 1 or at least one external address",
              _set("spec.nameServer", {"replicas": 0})),
    Violation("broker.yaml", "spec.replication", "failover Automatic requires replication mode Sync",
              _set("spec.replication", {"mode": "Async", "failover": "Automatic"})),
    Violation("broker.yaml", "spec.storage", "storage type HostPath requires storage.hostPath",
              _set("spec.storage", {"type": "HostPath"})),
    Violation("broker.yaml", "spec.storage", "storage type PersistentClaim requires storage.persistentClaim",
              _set("spec.storage", {"type": "PersistentClaim"})),
    Violation("broker.yaml", "spec.storage", "set at most one of storage.hostPath and storage.persistentClaim",
              _set("spec.storage.persistentClaim", {"storageClassName": "fast"})),
    Violation("broker.yaml", "spec.storage", IMMUTABLE,
              _set("spec.storage", {"type": "Ephemeral"}), on_update=True),
    Violation("broker.yaml", "spec.storage.hostPath.root", IMMUTABLE,
              _set("spec.storage.hostPath.root", "/var/lib/shoal/moved"), on_update=True),
    Violation("broker.yaml", "spec.config", "spec.config must not set operator-owned broker.conf keys",
              _set("spec.config.brokerRole", "SLAVE")),
    Violation("broker.yaml", "spec.config", "spec.config must not set operator-owned broker.conf keys",
              _set("spec.config", {"tls.server.mode": "disabled"}), what="tls prefix"),
    Violation("broker.yaml", "spec.tls", "tls needs exactly one of secretName and certificateName",
              _set("spec.tls", {"secretName": "a", "certificateName": "b"}), what="both"),
    Violation("broker.yaml", "spec.tls", "tls needs exactly one of secretName and certificateName",
              _set("spec.tls", {"mode": "Permissive"}), what="neither"),
    Violation("topic.yaml", "spec.clusterRef", IMMUTABLE, _set("spec.clusterRef", {"name": "other"}), on_update=True),
    Violation("topic.yaml", "spec.topicName", IMMUTABLE, _set("spec.topicName", "Renamed"), on_update=True,
              what="changed"),
    Violation("topic.yaml", "spec.topicName", IMMUTABLE, _unset("spec.topicName"), on_update=True, what="removed"),
    Violation("topic.yaml", "spec.topicName", "topicName is a reserved RocketMQ system topic",
              _set("spec.topicName", "%RETRY%orders")),
    Violation("storeanalysis.yaml", "spec.output",
              "analysis kind Export requires output.persistentVolumeClaim.claimName",
              _set("spec.analysis.kind", "Export")),
    Violation("storeanalysis.yaml", "spec.clusterRef", IMMUTABLE,
              _set("spec.clusterRef", {"name": "other"}), on_update=True),
    Violation("storeanalysis.yaml", "spec.analysis.window",
              "analysis.window applies only to kinds TopicStats and Export",
              _set("spec.analysis.kind", "ConsumerLag")),
    Violation("storeanalysis.yaml", "spec.spark.sparkConf", "spark.sparkConf must not set operator-owned keys",
              _set("spec.spark.sparkConf", {"spark.kubernetes.driver.volumes.x.mount.path": "/x"})),
    Violation("streamanalysis.yaml", "spec", "TopicArchive needs topics or topicPattern",
              _set("spec.job", "TopicArchive")),
    Violation("streamanalysis.yaml", "spec", "topics and topicPattern are exclusive",
              _both(_set("spec.topics", ["Orders"]), _set("spec.topicPattern", "Order.*")), what="both"),
    Violation("streamanalysis.yaml", "spec.clusterRef", IMMUTABLE,
              _set("spec.clusterRef", {"name": "other"}), on_update=True),
    Violation("streamanalysis.yaml", "spec.job", IMMUTABLE, _set("spec.job", "DlqArchive"), on_update=True),
    Violation("streamanalysis.yaml", "spec.sparkConf", "sparkConf must not set spark.master",
              _set("spec.sparkConf", {"spark.master": "local[1]"})),
)  # fmt: skip


@pytest.fixture(scope="module")
def api(shoal_crds: ControlPlane) -> Iterator[kubernetes.client.CustomObjectsApi]:
    client = kubernetes.config.new_client_from_config(config_file=str(shoal_crds.kubeconfig))  # type: ignore[no-untyped-call]
    shoal_crds.kubectl("create", "namespace", NAMESPACE)
    try:
        yield kubernetes.client.CustomObjectsApi(client)
    finally:
        # Wait until it is gone: an operator started later (test_operator_rbac) watches every namespace
        # and would try to reconcile the Brokers left here while the namespace terminates.
        shoal_crds.kubectl("delete", "namespace", NAMESPACE, "--timeout=120s")
        client.close()


def _example(crd_file: str, name: str) -> dict[str, Any]:
    body = copy.deepcopy(_load(REPO_ROOT / "examples" / EXAMPLES[crd_file]))
    body["metadata"] = {"name": name, "namespace": NAMESPACE}
    return body


def _create(api: kubernetes.client.CustomObjectsApi, crd_file: str, body: dict[str, Any], **kwargs: Any) -> Any:
    return api.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, CRDS[crd_file], body, **kwargs)


@pytest.mark.parametrize("crd_file", sorted(CRDS))
def test_crds_are_established_with_structural_schemas(shoal_crds: ControlPlane, crd_file: str) -> None:
    """`kubectl apply -f crds/` is accepted: Established and NamesAccepted, no NonStructuralSchema condition."""
    name = f"{CRDS[crd_file]}.{GROUP}"
    crd = json.loads(shoal_crds.kubectl("get", "crd", name, "-o", "json").stdout)
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions.get("Established") == "True", conditions
    assert conditions.get("NamesAccepted") == "True", conditions
    assert "NonStructuralSchema" not in conditions, crd["status"]["conditions"]
    assert crd["status"]["acceptedNames"]["kind"] == _load(REPO_ROOT / "crds" / crd_file)["spec"]["names"]["kind"]


@pytest.mark.parametrize("crd_file", sorted(CRDS))
def test_examples_are_accepted_and_defaulted(api: kubernetes.client.CustomObjectsApi, crd_file: str) -> None:
    """examples/ pass the server's schema and CEL rules (server dry run), and come back with defaults filled."""
    created = _create(api, crd_file, _example(crd_file, "example"), dry_run="All")
    assert created["metadata"]["name"] == "example"
    if crd_file == "broker.yaml":
        assert created["spec"]["podDisruptionBudget"] == {"maxUnavailable": 1}
        assert created["spec"]["retention"]["fileReservedHours"] == 48


def test_broker_defaults_fill_an_empty_spec(api: kubernetes.client.CustomObjectsApi) -> None:
    """A Broker with only an image gets every nested default from the server, as the operator's parser assumes."""
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Broker", "metadata": {"name": "minimal"},
            "spec": {"image": "shoal:0.1.0"}}  # fmt: skip
    created = _create(api, "broker.yaml", body, dry_run="All")
    spec = created["spec"]
    assert spec["nameServer"] == {"replicas": 2}
    assert spec["replication"] == {"mode": "Async", "failover": "Manual"}
    assert spec["storage"]["type"] == "HostPath" and spec["storage"]["hostPath"]["root"] == "/var/lib/shoal"
    as_sent = {**body, "metadata": created["metadata"]}
    assert broker_spec_from(created, ALLOWED_HOST_ROOTS) == broker_spec_from(as_sent, ALLOWED_HOST_ROOTS), (
        "the operator's Python defaults differ from the server's"
    )


def test_explain_shows_the_field_docs(shoal_crds: ControlPlane) -> None:
    """`kubectl explain <kind>.spec` prints the spec's description and lists every field with its own."""
    for crd_file, plural in CRDS.items():
        output = shoal_crds.kubectl("explain", f"{plural}.spec").stdout
        schema = _load(REPO_ROOT / "crds" / crd_file)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        _check_explained(output, schema["properties"]["spec"])


def _check_explained(output: str, spec: dict[str, Any]) -> None:
    assert " ".join(spec["description"].split()) in " ".join(output.split())
    for name, field in spec["properties"].items():
        assert f"\n  {name}\t<" in output, name
        if "description" in field:
            assert " ".join(field["description"].split()) in " ".join(output.split()), name


def test_every_cel_rule_has_a_violation_case() -> None:
    """VIOLATIONS covers each (field, message) of every CEL rule in crds/, so a new rule needs a case here."""
    covered = {(v.crd_file, v.field, v.message) for v in VIOLATIONS}
    declared = {(crd_file, path, message) for crd_file in CRDS for path, message in cel_rules(crd_file)}
    assert declared == covered


@pytest.mark.parametrize("violation", VIOLATIONS, ids=lambda v: v.id)
def test_cel_rule_rejects_its_violation(api: kubernetes.client.CustomObjectsApi, violation: Violation) -> None:
    """The API server itself rejects the change with 422, the rule's field and message; where the operator
    mirrors the rule in Python (every rule but the immutability ones), it says the same."""
    name = f"v{abs(hash(violation.id)) % 10**8}"
    body = _example(violation.crd_file, name)
    if violation.on_update:
        if violation.setup is not None:
            violation.setup(body)
        body = _create(api, violation.crd_file, body)
    violation.change(body)
    with pytest.raises(ApiException) as caught:
        if violation.on_update:
            api.replace_namespaced_custom_object(
                GROUP, VERSION, NAMESPACE, CRDS[violation.crd_file], name, body, dry_run="All"
            )
        else:
            _create(api, violation.crd_file, body, dry_run="All")
    assert caught.value.status == 422, caught.value.body
    causes = json.loads(caught.value.body or "")["details"]["causes"]
    assert {"field": violation.field, "message": violation.message} in [
        {"field": c.get("field"), "message": c["message"].rsplit(": ", 1)[-1]} for c in causes
    ], causes
    if not violation.on_update:
        with pytest.raises(InvalidSpecError) as mirrored:
            MIRRORS[violation.crd_file](body)
        assert (mirrored.value.field, mirrored.value.message) == (violation.field, violation.message)
