"""charts/shoal against a real cluster: `helm install`, `helm upgrade` with changed values and `helm uninstall`
succeed, and what the API server holds is what helm rendered. The three tests run in file order on one
release (install, upgrade, uninstall); KWOK plays the operator's pod, so `--wait` sees it Ready."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kube.conftest import Helm
from tests.kube.control_plane import ControlPlane

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "charts" / "shoal"
RELEASE = "shoal"
NAMESPACE = "shoal-system"
HELM_TIMEOUT_S = 180
"""Each step is a few seconds here; --wait gives up after this."""
CRD_NAMES = ("brokers.shoal.io", "topics.shoal.io", "storeanalyses.shoal.io")
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "StorageClass", "CustomResourceDefinition"}


@pytest.fixture(scope="module")
def helm(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    helm = Helm.for_cluster(control_plane, tmp_path_factory.mktemp("helm-home"), NAMESPACE)
    yield helm
    helm.uninstall_quietly(RELEASE)


def contained(rendered: Any, live: Any, path: str = "") -> list[str]:
    """Where `rendered` is not part of `live`. The server adds defaults and metadata and drops only empty
    values (an env var's `value: ""` is omitted), never a field that carries something."""
    if isinstance(rendered, dict):
        if not isinstance(live, dict):
            return [f"{path}: {live!r} is not a mapping"]
        return [
            problem
            for key, value in rendered.items()
            if key in live or value not in ("", None, [], {})
            for problem in (contained(value, live[key], f"{path}.{key}") if key in live else [f"{path}.{key}: missing"])
        ]
    if isinstance(rendered, list):
        if not isinstance(live, list) or len(live) != len(rendered):
            return [f"{path}: {live!r} differs from {rendered!r}"]
        return [problem for i, item in enumerate(rendered) for problem in contained(item, live[i], f"{path}[{i}]")]
    return [] if rendered == live else [f"{path}: {live!r} != {rendered!r}"]


def _live(plane: ControlPlane, obj: dict[str, Any]) -> dict[str, Any] | None:
    kind, name = obj["kind"], obj["metadata"]["name"]
    scope = [] if kind in CLUSTER_SCOPED else ["--namespace", obj["metadata"].get("namespace", NAMESPACE)]
    result = plane.kubectl("get", kind, name, *scope, "-o", "json", "--ignore-not-found", check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if result.stdout.strip() else None


def _check_live_as_rendered(plane: ControlPlane, manifest: list[dict[str, Any]]) -> None:
    for obj in manifest:
        live = _live(plane, obj)
        assert live is not None, f"{obj['kind']}/{obj['metadata']['name']} was rendered but is not on the server"
        problems = contained({k: v for k, v in obj.items() if k != "metadata"}, live)
        problems += contained(obj["metadata"].get("labels", {}), live["metadata"].get("labels", {}), "labels")
        assert not problems, f"{obj['kind']}/{obj['metadata']['name']}: {problems}"


def _operator_pod(plane: ControlPlane) -> dict[str, Any]:
    pods = json.loads(
        plane.kubectl("get", "pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=shoal", "-o", "json").stdout
    )["items"]
    running = [p for p in pods if "deletionTimestamp" not in p["metadata"]]
    assert len(running) == 1, [p["metadata"]["name"] for p in pods]
    pod: dict[str, Any] = running[0]
    return pod


def test_install_creates_what_helm_renders(control_plane: ControlPlane, helm: Helm) -> None:
    """`helm install --wait` succeeds; every rendered object is on the server as rendered, the CRDs are
    Established, and the operator pod is scheduled onto a KWOK node and Ready with the chart's account."""
    helm("install", RELEASE, str(CHART), "--create-namespace", "--wait", f"--timeout={HELM_TIMEOUT_S}s")
    manifest = helm.manifest(RELEASE)
    assert {obj["kind"] for obj in manifest} == {
        "ServiceAccount", "StorageClass", "ClusterRole", "ClusterRoleBinding", "Deployment", "NetworkPolicy"
    }  # fmt: skip
    _check_live_as_rendered(control_plane, manifest)
    control_plane.kubectl("wait", "--for=condition=Established", "crd", *CRD_NAMES, "--timeout=60s")
    pod = _operator_pod(control_plane)
    assert pod["spec"]["nodeName"] in control_plane.node_names
    (account,) = [obj["metadata"]["name"] for obj in manifest if obj["kind"] == "ServiceAccount"]
    assert pod["spec"]["serviceAccountName"] == account
    assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"] == "True"


def test_upgrade_applies_changed_values(control_plane: ControlPlane, helm: Helm) -> None:
    """`helm upgrade` with other values rolls the operator pod with the new env and drops the StorageClass."""
    before = _operator_pod(control_plane)["metadata"]["name"]
    for namespace in ("team-a", "team-b"):  # watched namespaces get the Secret Role: they must exist
        control_plane.kubectl("create", "namespace", namespace, check=False)
    helm(
        "upgrade", RELEASE, str(CHART), "--wait", f"--timeout={HELM_TIMEOUT_S}s",
        "--set", "logLevel=debug", "--set", "watchNamespaces={team-a,team-b}", "--set", "storageClass.create=false",
    )  # fmt: skip
    manifest = helm.manifest(RELEASE)
    assert "StorageClass" not in {obj["kind"] for obj in manifest}
    _check_live_as_rendered(control_plane, manifest)
    assert _live(control_plane, {"kind": "StorageClass", "metadata": {"name": "shoal-hostpath"}}) is None
    pod = _operator_pod(control_plane)
    assert pod["metadata"]["name"] != before
    (container,) = pod["spec"]["containers"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["SHOAL_LOG_LEVEL"] == "debug" and env["SHOAL_WATCH_NAMESPACES"] == "team-a,team-b"
    history = json.loads(helm("history", RELEASE, "-o", "json"))
    assert [(entry["revision"], entry["status"]) for entry in history] == [(1, "superseded"), (2, "deployed")]


def test_uninstall_removes_the_release_but_keeps_the_crds(control_plane: ControlPlane, helm: Helm) -> None:
    """`helm uninstall --wait` deletes every object of the release; the CRDs (chart crds/) stay, as helm documents."""
    manifest = helm.manifest(RELEASE)
    helm("uninstall", RELEASE, "--wait", f"--timeout={HELM_TIMEOUT_S}s")
    for obj in manifest:
        assert _live(control_plane, obj) is None, f"{obj['kind']}/{obj['metadata']['name']} survived uninstall"
    control_plane.kubectl("get", "crd", *CRD_NAMES)
