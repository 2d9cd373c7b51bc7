"""operator/secrets.py and the ACL/TLS parts of manifests.py: which Secrets a Broker mounts, where,
what broker.conf says about them, the hash that rolls pods, and the NetworkPolicies."""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from shoal.operator import manifests, rollout, secrets
from shoal.operator.errors import InvalidSpecError, NotReadyError
from shoal.operator.settings import NetworkPolicySettings
from shoal.operator.spec import AclSpec, BrokerSpec, broker_spec_from
from shoal.operator.status import ClusterFacts, StatefulSetFacts
from shoal.operator.steps import DELETE_POD
from tests.operator.conftest import ALLOWED_ROOTS, REPO_ROOT, check_golden
from tests.operator.conftest import pod as pod_facts
from tests.operator.test_handlers import sample_ca_pem

GOLDEN = Path(__file__).parent / "golden" / "cluster-secure.yaml"
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")
NODES = {"orders-g0-0": "worker-a", "orders-g0-1": "worker-b"}
POLICY = NetworkPolicySettings(
    enabled=True,
    clients=({"namespaceSelector": {"matchLabels": {"team": "orders"}}},),
    metrics=({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}},),
    operator_namespace="shoal-system",
)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secure_body() -> dict[str, Any]:
    """The Broker of examples/secure/cluster-secure.yaml as the API server hands it over."""
    documents = list(yaml.safe_load_all((REPO_ROOT / "examples" / "secure" / "cluster-secure.yaml").read_text()))
    (body,) = [d for d in documents if d["kind"] == "Broker"]
    body["metadata"].update(namespace="mq", uid="0f7c5d2e-1111-4222-8333-944455556666", generation=1)
    return dict(body)


def secure_spec(**spec_changes: Any) -> BrokerSpec:
    body = secure_body()
    body["spec"].update(spec_changes)
    return broker_spec_from(body, ALLOWED_ROOTS)


def acl_secret(acl: str = "accounts: []\n") -> dict[str, Any]:
    data = {"plain_acl.yml": b64(acl), "brokerAccessKey": b64("broker"), "brokerSecretKey": b64("broker-secret")}
    return {"metadata": {"name": "orders-acl"}, "data": data}


def tls_secret(key: str = "KEY-1") -> dict[str, Any]:
    return {
        "metadata": {"name": "orders-tls"},
        "data": {"tls.crt": b64("CRT"), "tls.key": b64(key), "ca.crt": base64.b64encode(sample_ca_pem()).decode()},
    }


def mounted(spec: BrokerSpec, **found: dict[str, Any] | None) -> secrets.MountedSecrets:
    defaults: dict[str, dict[str, Any] | None] = {"orders-acl": acl_secret(), "orders-tls": tls_secret()}
    return secrets.mounted_secrets(spec, "orders-tls", {**defaults, **found})


# ---------------------------------------------------------------- spec


def test_secure_example_parses_into_acl_and_tls_specs() -> None:
    """examples/secure/cluster-secure.yaml: ACL from Secret orders-acl (default key), TLS via a Certificate."""
    spec = secure_spec()
    assert spec.acl == AclSpec(secret_name="orders-acl", key="plain_acl.yml")
    assert spec.tls is not None and (spec.tls.certificate_name, spec.tls.secret_name, spec.tls.mode) == (
        "orders-tls",
        "",
        "Enforcing",
    )


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"tls": {"secretName": "a", "certificateName": "b"}}, "spec.tls"),
        ({"tls": {"mode": "Enforcing"}}, "spec.tls"),
        ({"tls": {"secretName": "a", "mode": "Strict"}}, "spec.tls.mode"),
        ({"acl": {"secretName": "Bad_Name"}}, "spec.acl.secretName"),
        ({"acl": {"secretName": "ok", "key": "a/b"}}, "spec.acl.key"),
        ({"acl": {}}, "spec.acl.secretName"),
        ({"config": {"aclEnable": "false"}}, "spec.config"),
        ({"config": {"tls.server.mode": "disabled"}}, "spec.config"),
        ({"config": {"secretKey": "x"}}, "spec.config"),
    ],
)
def test_bad_acl_and_tls_specs_are_invalid(change: dict[str, Any], field: str) -> None:
    """Both TLS sources, neither, an unknown mode, bad names, and ACL/TLS keys in spec.config are refused."""
    with pytest.raises(InvalidSpecError) as raised:
        secure_spec(**change)
    assert raised.value.field == field


# ---------------------------------------------------------------- Secrets


def test_certificate_names_the_tls_secret() -> None:
    """certificateName resolves through the Certificate's spec.secretName; missing or empty waits."""
    spec = secure_spec()
    assert secrets.tls_secret_name(spec, {"spec": {"secretName": "orders-tls"}}) == "orders-tls"
    with pytest.raises(NotReadyError, match=r"Certificate mq/orders-tls .* does not exist"):
        secrets.tls_secret_name(spec, None)
    with pytest.raises(NotReadyError, match=r"no spec\.secretName"):
        secrets.tls_secret_name(spec, {"spec": {}})
    direct = secure_spec(tls={"secretName": "direct"})
    assert secrets.tls_secret_name(direct, None) == "direct"
    assert secrets.secret_names(direct, "direct") == ["orders-acl", "direct"]


@pytest.mark.parametrize(
    ("found", "complaint"),
    [
        ({"orders-acl": None}, "Secret mq/orders-acl does not exist"),
        ({"orders-tls": None}, "Secret mq/orders-tls does not exist"),
        (
            {"orders-tls": {"data": {"tls.crt": b64("C"), "tls.key": b64("K")}}},
            "orders-tls has no (or an empty) ca.crt",
        ),
        (
            {"orders-acl": {"data": {"plain_acl.yml": b64("x")}}},
            "has no (or an empty) brokerAccessKey, brokerSecretKey",
        ),
        ({"orders-tls": {"data": {"tls.crt": "x", "tls.key": "y", "ca.crt": "not base64!"}}}, "ca.crt is not base64"),
        ({"orders-tls": {"data": {"tls.crt": "x", "tls.key": "y", "ca.crt": b64("CA")}}}, "holds no PEM certificate"),
    ],
)
def test_missing_secret_or_key_is_named(found: dict[str, Any], complaint: str) -> None:
    """A missing Secret, key or undecodable CA is a NotReadyError that says which."""
    with pytest.raises(NotReadyError) as raised:
        mounted(secure_spec(), **found)
    assert complaint in str(raised.value)


def test_hash_follows_the_mounted_keys_only() -> None:
    """A new ACL file or certificate key changes the hash; a key the pods do not mount does not."""
    spec = secure_spec()
    first = mounted(spec)
    assert first.tls_secret == "orders-tls" and first.ca_pem == sample_ca_pem() and len(first.digest) == 16
    assert mounted(spec).digest == first.digest
    assert mounted(spec, **{"orders-acl": acl_secret("accounts: [x]\n")}).digest != first.digest
    assert mounted(spec, **{"orders-tls": tls_secret("KEY-2")}).digest != first.digest
    extra = tls_secret()
    extra["data"]["unrelated"] = b64("noise")
    assert mounted(spec, **{"orders-tls": extra}).digest == first.digest
    plain = dataclasses.replace(spec, acl=None, tls=None)
    assert secrets.mounted_secrets(plain, "", {}) == secrets.MountedSecrets()


# ---------------------------------------------------------------- manifests


def _by_kind(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def secure_objects(digest: str = "0123456789abcdef") -> list[dict[str, Any]]:
    return manifests.desired_state(secure_spec(), NODES, None, "orders-tls", digest, POLICY)


def test_secure_cluster_matches_golden() -> None:
    """examples/secure/cluster-secure.yaml with its Secrets resolved and NetworkPolicies on: golden objects."""
    check_golden(GOLDEN, secure_objects())


@pytest.mark.parametrize("kube_version", KUBERNETES_VERSIONS)
def test_secure_objects_are_valid_kubernetes(kube_version: str) -> None:
    """Every object of the secure cluster, NetworkPolicies included, passes strict validation."""
    for obj in secure_objects():
        kubernetes_validate.validate(obj, kube_version, strict=True)


def test_brokers_mount_acl_and_tls_read_only_and_point_broker_conf_at_them() -> None:
    """Broker pods mount plain_acl.yml, their own keys and the TLS files read-only (0440, fsGroup
    10001); broker.conf switches ACL and TLS on with RocketMQ's keys and those paths."""
    objects = secure_objects()
    pod = _by_kind(objects, "StatefulSet", "orders-g0")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["acl"]["secret"] == {
        "secretName": "orders-acl",
        "defaultMode": 0o440,
        "items": [
            {"key": "plain_acl.yml", "path": "plain_acl.yml"},
            {"key": "brokerAccessKey", "path": "accessKey"},
            {"key": "brokerSecretKey", "path": "secretKey"},
        ],
    }
    assert volumes["tls"]["secret"]["secretName"] == "orders-tls"
    assert [i["key"] for i in volumes["tls"]["secret"]["items"]] == ["tls.crt", "tls.key", "ca.crt"]
    assert pod["securityContext"]["fsGroup"] == manifests.BROKER_UID
    (broker,) = pod["containers"]
    mounts = {m["name"]: m for m in broker["volumeMounts"]}
    assert mounts["acl"] == {"name": "acl", "mountPath": "/etc/shoal/acl", "readOnly": True}
    assert mounts["tls"] == {"name": "tls", "mountPath": "/etc/shoal/tls", "readOnly": True}
    assert {"name": "SHOAL_ACL_DIR", "value": "/etc/shoal/acl"} in broker["env"]
    conf = _by_kind(objects, "ConfigMap", "orders-g0-config")["data"]["broker.conf"]
    for line in (
        "aclEnable=true",
        "plainAclFile=/etc/shoal/acl/plain_acl.yml",
        "tls.server.mode=enforcing",
        "tls.server.certPath=/etc/shoal/tls/tls.crt",
        "tls.server.keyPath=/etc/shoal/tls/tls.key",
        "tls.server.trustCertPath=/etc/shoal/tls/ca.crt",
        "tls.enable=true",
        "tls.ha.enable=true",
        "tls.client.authServer=true",
        "tls.client.trustCertPath=/etc/shoal/tls/ca.crt",
    ):
        assert f"\n{line}\n" in conf, line
    assert "secretKey" not in conf and "broker-secret" not in str(objects), "no secret in any manifest"


def test_name_servers_get_tls_and_the_acl_file_but_not_the_broker_keys() -> None:
    """NameServers run with namesrv.conf (ACL and TLS keys) and mount plain_acl.yml and the TLS files."""
    objects = secure_objects()
    conf = _by_kind(objects, "ConfigMap", "orders-ns-config")["data"]["namesrv.conf"]
    assert "aclEnable=true\n" in conf and "tls.server.mode=enforcing\n" in conf
    pod = _by_kind(objects, "StatefulSet", "orders-ns")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == ["namesrv", "-c", "/etc/shoal/config/namesrv.conf"]
    acl = next(v for v in pod["volumes"] if v["name"] == "acl")
    assert acl["secret"]["items"] == [{"key": "plain_acl.yml", "path": "plain_acl.yml"}]
    assert {m["name"] for m in container["volumeMounts"]} == {"tmp", "acl", "tls", "config"}


def test_permissive_mode_and_plain_clusters() -> None:
    """mode Permissive renders tls.server.mode=permissive; without acl/tls nothing changes."""
    spec = secure_spec(tls={"secretName": "orders-tls", "mode": "Permissive"}, acl=None)
    conf = manifests.broker_conf(spec, 0)
    assert "tls.server.mode=permissive\n" in conf and "aclEnable" not in conf
    plain = dataclasses.replace(spec, tls=None)
    objects = manifests.desired_state(plain, NODES)
    stateful_set = _by_kind(objects, "StatefulSet", "orders-g0")
    assert manifests.ANNOTATION_SECRETS_HASH not in stateful_set["spec"]["template"]["metadata"]["annotations"]
    assert not [o for o in objects if o["metadata"]["name"] == "orders-ns-config"]


def test_a_changed_secret_rolls_the_group_slave_first() -> None:
    """Goal: a renewed certificate restarts the brokers, slaves first. Method: the pod templates of two
    digests differ only in the secrets-hash annotation; with the StatefulSet on the new revision and
    both pods on the old one, the roll deletes the slave (ordinal 1) first, then the master."""
    old, new = secure_objects("aaaa000000000000"), secure_objects("bbbb000000000000")
    old_template = _by_kind(old, "StatefulSet", "orders-g0")["spec"]["template"]
    new_template = _by_kind(new, "StatefulSet", "orders-g0")["spec"]["template"]
    assert old_template != new_template
    assert new_template["metadata"]["annotations"][manifests.ANNOTATION_SECRETS_HASH] == "bbbb000000000000"
    assert {**old_template, "metadata": {}} == {**new_template, "metadata": {}}
    spec = secure_spec()
    facts = ClusterFacts(
        groups={0: StatefulSetFacts(replicas=2, ready_replicas=2, update_revision="rev-new")},
        pods=(pod_facts(0, revision="rev-old"), pod_facts(1, revision="rev-old")),
    )
    step = rollout.plan_roll(spec, facts, 0)
    assert (step.action, step.pod) == (DELETE_POD, "orders-g0-1")
    facts = dataclasses.replace(facts, pods=(pod_facts(0, revision="rev-old"), pod_facts(1, revision="rev-new")))
    step = rollout.plan_roll(spec, facts, 0)
    assert (step.action, step.pod) == (DELETE_POD, "orders-g0-0")


# ---------------------------------------------------------------- NetworkPolicies


def test_network_policies_fence_each_port() -> None:
    """Client ports (remoting, VIP, gRPC) and NameServers from the configured peers plus the operator and the cluster's
    brokers; HA only from the cluster's brokers; metrics from the metrics namespaces and the operator."""
    objects = secure_objects()
    brokers = _by_kind(objects, "NetworkPolicy", "orders-brokers")["spec"]
    own = {"podSelector": {"matchLabels": manifests.selector_labels(secure_spec(), "broker")}}
    operator = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "shoal-system"}},
        "podSelector": {"matchLabels": manifests.OPERATOR_POD_LABELS},
    }
    rules = {tuple(p["port"] for p in rule["ports"]): rule.get("from") for rule in brokers["ingress"]}
    assert rules[(10911, 10909, 8081)] == [*POLICY.clients, operator, own]
    assert rules[(10912,)] == [own]
    assert rules[(11011,)] == [*POLICY.metrics, operator]
    assert brokers["policyTypes"] == ["Ingress"]
    name_servers = _by_kind(objects, "NetworkPolicy", "orders-ns")["spec"]
    (rule,) = name_servers["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 9876}] and rule["from"] == [*POLICY.clients, operator, own]


def test_network_policies_open_clients_to_everyone_when_no_peers_are_given() -> None:
    """clients empty: the client ports have no `from` (any source); HA stays fenced; disabled: none."""
    objects = manifests.network_policies(secure_spec(), dataclasses.replace(POLICY, clients=()))
    rules = {tuple(p["port"] for p in rule["ports"]): rule for rule in objects[0]["spec"]["ingress"]}
    assert "from" not in rules[(10911, 10909, 8081)]
    assert "from" in rules[(10912,)]
    assert manifests.network_policies(secure_spec(), NetworkPolicySettings()) == []


def test_grpc_disabled_leaves_no_grpc_port_anywhere() -> None:
    """spec.grpc.enabled false: no grpcServerPort key, no container or Service port, no policy port."""
    spec = dataclasses.replace(secure_spec(), grpc_enabled=False)
    assert "grpcServerPort" not in manifests.broker_conf(spec, 0)
    assert "grpcServerPort=8081" in manifests.broker_conf(secure_spec(), 0)
    ports = [port["port"] for port in manifests.group_service(spec, 0)["spec"]["ports"]]
    assert manifests.GRPC_PORT not in ports
    (policy, *_) = manifests.network_policies(spec, POLICY)
    assert all(manifests.GRPC_PORT not in [p["port"] for p in rule["ports"]] for rule in policy["spec"]["ingress"])
