"""The chart's and the operator's security settings against a real API server: Pod Security admission
(`restricted`) admits the operator pod and the pods of a Broker with ACL, TLS and claim-free storage;
the NetworkPolicies and Secret mounts are accepted as rendered; the operator, logged in with the chart's
ServiceAccount, reads the Broker's Secrets with exactly the chart's namespace-scoped grant."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kube.conftest import Helm
from tests.kube.control_plane import ControlPlane, write_kubeconfig
from tests.kube.test_operator_rbac import REFUSED, STOP_TIMEOUT_S, Operator, _wait_for
from tests.tls_certs import make_tls_files

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "charts" / "shoal"
RELEASE = "secure"
OPERATOR_NAMESPACE = "shoal-secure"
BROKER_NAMESPACE = "secure-brokers"
RESTRICTED = "pod-security.kubernetes.io/enforce=restricted"
BROKER_IMAGE = "registry.invalid/shoal:restricted"
"""Not the process runner's image: KWOK plays these pods, only admission matters here."""


def _restricted_namespace(plane: ControlPlane, name: str) -> None:
    plane.kubectl("create", "namespace", name)
    plane.kubectl("label", "namespace", name, RESTRICTED, "pod-security.kubernetes.io/enforce-version=latest")


def _get(plane: ControlPlane, kind: str, name: str, namespace: str) -> dict[str, Any]:
    result = plane.kubectl("get", kind, name, "-n", namespace, "-o", "json", "--ignore-not-found")
    found: dict[str, Any] = json.loads(result.stdout) if result.stdout.strip() else {}
    return found


def _secret(name: str, data: dict[str, str], kind: str = "Opaque") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": kind,
        "metadata": {"name": name, "namespace": BROKER_NAMESPACE},
        "data": {key: base64.b64encode(value.encode()).decode() for key, value in data.items()},
    }


@pytest.fixture(scope="module")
def secure_release(shoal_crds: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    """The chart installed into a `restricted` namespace, watching one `restricted` Broker namespace,
    with NetworkPolicies on and the operator's credentials from a Secret."""
    plane = shoal_crds
    _restricted_namespace(plane, OPERATOR_NAMESPACE)
    _restricted_namespace(plane, BROKER_NAMESPACE)
    plane.kubectl(
        "create", "secret", "generic", "operator-acl", "-n", OPERATOR_NAMESPACE,
        "--from-literal=accessKey=shoal-operator", "--from-literal=secretKey=operator-secret-1",
    )  # fmt: skip
    helm = Helm.for_cluster(plane, tmp_path_factory.mktemp("helm"), OPERATOR_NAMESPACE)
    helm(
        "install", RELEASE, str(CHART), "--wait", "--timeout=180s",
        "--set", f"watchNamespaces={{{BROKER_NAMESPACE}}}",
        "--set", "operatorCredentials.secretName=operator-acl",
        "--set", "storageClass.create=false",  # cluster-scoped: another test's release may hold it
    )  # fmt: skip
    try:
        yield helm
    finally:
        helm.uninstall_quietly(RELEASE)
        # Gone before the next module: a cluster-wide operator started later would meet its objects while
        # the namespace terminates (403 on every create).
        plane.kubectl("delete", "namespace", BROKER_NAMESPACE, OPERATOR_NAMESPACE, "--timeout=120s", check=False)


def test_operator_pod_is_admitted_as_restricted_with_its_network_policy(
    shoal_crds: ControlPlane, secure_release: Helm
) -> None:
    """Goal: the chart's securityContext passes Pod Security `restricted`. Method: `helm install --wait`
    into a restricted namespace succeeded (fixture); the operator pod exists, is Ready and mounts the
    credentials Secret read-only; the NetworkPolicy is on the server as rendered."""
    plane = shoal_crds
    pods = json.loads(
        plane.kubectl("get", "pods", "-n", OPERATOR_NAMESPACE, "-l", "app.kubernetes.io/component=operator",
                      "-o", "json").stdout
    )["items"]  # fmt: skip
    (pod,) = [p for p in pods if "deletionTimestamp" not in p["metadata"]]
    assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"] == "True"
    (container,) = pod["spec"]["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "operator-credentials", "mountPath": "/etc/shoal/operator-credentials", "readOnly": True} in [
        {k: m[k] for k in ("name", "mountPath", "readOnly") if k in m} for m in container["volumeMounts"]
    ]
    policy = _get(plane, "networkpolicy", f"{RELEASE}-operator", OPERATOR_NAMESPACE)
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert sorted(p["port"] for p in policy["spec"]["ingress"][0]["ports"]) == [8080, 8082]
    role = _get(plane, "role", f"{RELEASE}-operator-secrets", BROKER_NAMESPACE)
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]


@pytest.fixture(scope="module")
def operator(
    shoal_crds: ControlPlane, secure_release: Helm, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    """The operator run locally with the chart's ServiceAccount token and the rendered Deployment's env."""
    plane = shoal_crds
    home = tmp_path_factory.mktemp("operator")
    manifest = secure_release.manifest(RELEASE)
    (account,) = [o["metadata"]["name"] for o in manifest if o["kind"] == "ServiceAccount"]
    (deployment,) = [o for o in manifest if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    rendered = {item["name"]: item["value"] for item in container["env"] if "value" in item}
    token = plane.kubectl("create", "token", account, "-n", OPERATOR_NAMESPACE, "--duration=2h").stdout.strip()
    assert plane.pki is not None
    kubeconfig = write_kubeconfig(home / "kubeconfig", plane.server, plane.pki.ca_cert, account, {"token": token})
    credentials = home / "operator-credentials"
    credentials.mkdir()
    (credentials / "accessKey").write_text("shoal-operator")
    (credentials / "secretKey").write_text("operator-secret-1")
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "SHOAL_WATCH_NAMESPACES": rendered["SHOAL_WATCH_NAMESPACES"],
        "SHOAL_ALLOWED_HOSTPATH_ROOTS": rendered["SHOAL_ALLOWED_HOSTPATH_ROOTS"],
        "SHOAL_NETWORK_POLICY": rendered["SHOAL_NETWORK_POLICY"],
        "SHOAL_ADMIN_CREDENTIALS_DIR": str(credentials),
        "POD_NAMESPACE": OPERATOR_NAMESPACE,
        "SHOAL_LOG_LEVEL": "INFO",
    }
    log = home / "operator.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "shoal.operator"], stdout=output, stderr=subprocess.STDOUT, env=env, cwd=home
        )
    try:
        yield Operator(process, log, "")
    finally:
        # While the operator runs: it releases the Brokers' finalizers, so the namespace can go.
        plane.kubectl("delete", "brokers", "--all", "-n", BROKER_NAMESPACE, "--timeout=60s", check=False)
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_secure_broker_pods_are_admitted_and_fenced(
    shoal_crds: ControlPlane, operator: Operator, tmp_path: Path
) -> None:
    """Goal: a Broker with ACL, TLS and Ephemeral storage runs under `restricted` with its NetworkPolicies.
    Method: create its Secrets and the Broker in the restricted namespace; the operator (chart grants only)
    creates the StatefulSets, whose pods the API server admits (a refused pod never appears), mounting
    both Secrets read-only; the NetworkPolicies fence the HA port to the cluster's brokers; no 403."""
    plane = shoal_crds
    acl = _secret(
        "orders-acl",
        {"plain_acl.yml": "accounts: []\n", "brokerAccessKey": "orders-broker", "brokerSecretKey": "broker-secret-1"},
    )
    certificates = make_tls_files(tmp_path / "certs")
    tls = _secret(
        "orders-tls",
        {
            "tls.crt": certificates.server_cert.read_text(),
            "tls.key": certificates.server_key.read_text(),
            "ca.crt": certificates.ca.read_text(),
        },
        "kubernetes.io/tls",
    )
    body = yaml.safe_load((REPO_ROOT / "examples" / "cluster.yaml").read_text())
    body["metadata"] = {"name": "orders", "namespace": BROKER_NAMESPACE}
    body["spec"].update(
        image=BROKER_IMAGE,
        storage={"type": "Ephemeral", "size": "1Gi"},
        acl={"secretName": "orders-acl"},
        tls={"secretName": "orders-tls"},
    )
    documents = [acl, tls, body]
    plane.kubectl("apply", "-f", "-", input_text=yaml.safe_dump_all(documents))

    def pods() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(
            plane.kubectl("get", "pods", "-n", BROKER_NAMESPACE, "-o", "json").stdout
        )["items"]
        names = {p["metadata"]["name"] for p in items}
        wanted = {"orders-ns-0", "orders-ns-1", "orders-g0-0", "orders-g0-1"}
        return items if wanted <= names else []

    admitted = _wait_for("the Broker's pods admitted under restricted", pods, operator)
    broker = next(p for p in admitted if p["metadata"]["name"] == "orders-g0-0")
    volumes = {v["name"]: v for v in broker["spec"]["volumes"]}
    assert volumes["acl"]["secret"]["secretName"] == "orders-acl"
    assert volumes["tls"]["secret"]["secretName"] == "orders-tls"
    assert broker["metadata"]["annotations"]["shoal.io/secrets-hash"]
    (init,) = broker["spec"]["initContainers"]
    assert init["securityContext"]["runAsNonRoot"] is True
    policy = _wait_for(
        "the brokers' NetworkPolicy",
        lambda: _get(plane, "networkpolicy", "orders-brokers", BROKER_NAMESPACE),
        operator,
    )
    rules = {tuple(p["port"] for p in rule["ports"]): rule for rule in policy["spec"]["ingress"]}
    assert rules[(10912,)]["from"] == [
        {"podSelector": {"matchLabels": {
            "app.kubernetes.io/name": "shoal", "app.kubernetes.io/instance": "orders",
            "app.kubernetes.io/component": "broker",
        }}}
    ]  # fmt: skip
    assert _get(plane, "networkpolicy", "orders-ns", BROKER_NAMESPACE)
    refused = [line for line in operator.output().splitlines() if REFUSED.search(line)]
    assert not refused, refused


def test_a_host_path_broker_is_refused_by_restricted_admission(shoal_crds: ControlPlane, operator: Operator) -> None:
    """The control for the test above: the same namespace refuses what `restricted` forbids. Method: a
    HostPath Broker gets its StatefulSets, but the API server refuses every pod (FailedCreate, `violates
    PodSecurity`) for the one thing hostPath storage needs, the root prepare-store step that chowns the
    directory (the hostPath itself hides behind a PersistentVolume), and the Broker says why."""
    plane = shoal_crds
    body = yaml.safe_load((REPO_ROOT / "examples" / "cluster.yaml").read_text())
    body["metadata"] = {"name": "payments", "namespace": BROKER_NAMESPACE}
    body["spec"]["image"] = BROKER_IMAGE
    plane.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(body))
    try:
        _expect_refusal(plane, operator)
    finally:  # its hostPath PVs are cluster-scoped (reclaimPolicy Retain): other tests list every PV
        plane.kubectl("delete", "broker", "payments", "-n", BROKER_NAMESPACE, "--timeout=60s", check=False)
        plane.kubectl("delete", "statefulset", "--all", "-n", BROKER_NAMESPACE, check=False)
        plane.kubectl("delete", "pvc", "--all", "-n", BROKER_NAMESPACE, "--timeout=60s", check=False)
        plane.kubectl("delete", "pv", "-l", f"shoal.io/namespace={BROKER_NAMESPACE}", "--timeout=60s", check=False)


def _expect_refusal(plane: ControlPlane, operator: Operator) -> None:
    def refusals() -> list[str]:
        events = json.loads(plane.kubectl("get", "events", "-n", BROKER_NAMESPACE, "-o", "json").stdout)["items"]
        return [
            e["message"]
            for e in events
            if e["involvedObject"]["name"] == "payments-g0" and e["reason"] == "FailedCreate"
        ]

    messages = _wait_for("the StatefulSet's FailedCreate event", refusals, operator)
    assert any(
        "violates PodSecurity" in m and 'container "prepare-store" must not set runAsUser=0' in m for m in messages
    )
    names = json.loads(plane.kubectl("get", "pods", "-n", BROKER_NAMESPACE, "-o", "json").stdout)["items"]
    assert not [p for p in names if p["metadata"]["name"].startswith("payments-g0")]

    def storage_reason() -> str:
        conditions = _get(plane, "broker", "payments", BROKER_NAMESPACE).get("status", {}).get("conditions", [])
        return next((str(c["reason"]) for c in conditions if c["type"] == "StorageReady"), "")

    assert _wait_for("StorageReady=False", lambda: storage_reason() == "PodSecurityForbidsHostPath", operator)


@pytest.mark.parametrize(("level", "admitted"), [("baseline", True), ("restricted", False)])
def test_host_path_broker_pods_need_baseline_not_privileged(
    shoal_crds: ControlPlane, level: str, admitted: bool
) -> None:
    """Goal: the least Pod Security level a hostPath Broker needs. Method: a pod from the operator's
    StatefulSet template (its store claim bound to a hostPath PV, which Pod Security never sees; the
    prepare-store step as root with CHOWN, FOWNER and DAC_OVERRIDE, all in baseline's list) created with
    a server dry run in a namespace enforcing `level`: baseline admits it, restricted refuses it."""
    from shoal.operator import manifests
    from shoal.operator.spec import broker_spec_from

    plane = shoal_crds
    namespace = f"psa-{level}"
    plane.kubectl("create", "namespace", namespace)
    plane.kubectl("label", "namespace", namespace, f"pod-security.kubernetes.io/enforce={level}")
    plane.kubectl("create", "serviceaccount", "default", "-n", namespace, check=False)  # before its controller
    try:
        body = yaml.safe_load((REPO_ROOT / "examples" / "cluster.yaml").read_text())
        body["metadata"] = {"name": "orders", "namespace": namespace, "uid": "u-1"}
        spec = broker_spec_from(body, ("/var/lib/shoal",))
        template = manifests.group_stateful_set(spec, 0)["spec"]["template"]
        pod_spec = dict(template["spec"])
        pod_spec["volumes"] = [*pod_spec["volumes"], {"name": "store", "persistentVolumeClaim": {"claimName": "x"}}]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "orders-g0-0", "namespace": namespace, "labels": template["metadata"]["labels"]},
            "spec": pod_spec,
        }
        result = plane.kubectl("create", "--dry-run=server", "-f", "-", input_text=json.dumps(pod), check=False)
        assert (result.returncode == 0) is admitted, result.stderr
        if not admitted:
            assert "violates PodSecurity" in result.stderr and "runAsUser=0" in result.stderr
    finally:
        plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
