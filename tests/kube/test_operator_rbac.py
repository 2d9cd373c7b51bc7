"""The operator as a real process (`python -m shoal.operator`) logged in with a token of the chart's
ServiceAccount, so the API server enforces exactly the chart's ClusterRole: a Broker from examples/
gets its children with no request refused, and a grant taken away shows up as a clear log line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from tests.kube.conftest import Helm
from tests.kube.control_plane import ControlPlane, write_kubeconfig

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "charts" / "shoal"
RELEASE = "rbac"
OPERATOR_NAMESPACE = "shoal-rbac"
BROKER_NAMESPACE = "orders"
TOKEN_DURATION = "2h"
RECONCILE_TIMEOUT_S = 90.0
POLL_INTERVAL_S = 0.5
STOP_TIMEOUT_S = 15.0
REFUSED = re.compile(r"\b403\b|[Ff]orbidden")
PRUNED = "Merge-patching finished with inconsistencies"
"""kopf's warning when the server did not keep what it patched (a status field the CRD does not declare)."""


@dataclass
class Operator:
    process: subprocess.Popen[bytes]
    log: Path
    cluster_role: str

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def _wait_for(what: str, probe: Any, operator: Operator) -> Any:
    deadline = time.monotonic() + RECONCILE_TIMEOUT_S
    while time.monotonic() < deadline:
        assert operator.process.poll() is None, f"the operator exited:\n{operator.output()[-4000:]}"
        found = probe()
        if found:
            return found
        time.sleep(POLL_INTERVAL_S)
    raise AssertionError(f"{what} not within {RECONCILE_TIMEOUT_S} s; operator log:\n{operator.output()[-4000:]}")


@pytest.fixture(scope="module")
def operator(shoal_crds: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    """The chart installed (its ServiceAccount and ClusterRole), and the operator run locally with that
    account's token: the same identity and grants its pod would have."""
    plane = shoal_crds
    home = tmp_path_factory.mktemp("operator")
    helm = Helm.for_cluster(plane, home / "helm", OPERATOR_NAMESPACE)
    helm("install", RELEASE, str(CHART), "--create-namespace", "--wait", "--timeout=180s")
    manifest = helm.manifest(RELEASE)
    (account,) = [o["metadata"]["name"] for o in manifest if o["kind"] == "ServiceAccount"]
    # The chart's main ClusterRole; its Secret grant is a ClusterRole of its own (`-secrets`).
    (role,) = [
        o["metadata"]["name"]
        for o in manifest
        if o["kind"] == "ClusterRole" and not o["metadata"]["name"].endswith("-secrets")
    ]
    token = plane.kubectl(
        "create", "token", account, "-n", OPERATOR_NAMESPACE, f"--duration={TOKEN_DURATION}"
    ).stdout.strip()
    assert plane.pki is not None
    kubeconfig = write_kubeconfig(
        home / "operator.kubeconfig", plane.server, plane.pki.ca_cert, account, {"token": token}
    )
    whoami = plane.kubectl("auth", "whoami", "-o", "json", kubeconfig=kubeconfig).stdout
    assert (
        json.loads(whoami)["status"]["userInfo"]["username"] == f"system:serviceaccount:{OPERATOR_NAMESPACE}:{account}"
    )
    plane.kubectl("create", "namespace", BROKER_NAMESPACE)
    log = home / "operator.log"
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "SHOAL_WATCH_NAMESPACES": "",
        "SHOAL_ALLOWED_HOSTPATH_ROOTS": "/var/lib/shoal",
        "SHOAL_LOG_LEVEL": "INFO",
    }
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "shoal.operator"], stdout=output, stderr=subprocess.STDOUT, env=env, cwd=home
        )
    try:
        yield Operator(process, log, role)
    finally:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        plane.kubectl("delete", "namespace", BROKER_NAMESPACE, "--wait=false", check=False)
        helm.uninstall_quietly(RELEASE)


def _names(plane: ControlPlane, kind: str, namespace: str | None = BROKER_NAMESPACE) -> list[str]:
    scope = ["-n", namespace] if namespace else []
    items = json.loads(plane.kubectl("get", kind, *scope, "-o", "json").stdout)["items"]
    return sorted(item["metadata"]["name"] for item in items)


def _apply_example(plane: ControlPlane, example: str, name: str) -> dict[str, Any]:
    body = yaml.safe_load((REPO_ROOT / "examples" / example).read_text())
    body["metadata"] = {"name": name, "namespace": BROKER_NAMESPACE}
    plane.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(body))
    return cast("dict[str, Any]", body)


def test_broker_children_are_created_with_only_the_charts_grants(shoal_crds: ControlPlane, operator: Operator) -> None:
    """examples/cluster.yaml becomes StatefulSets, Services, ConfigMaps, a PDB and hostPath PVs pinned to
    KWOK nodes, and status with conditions, while the server refuses none of the operator's requests."""
    plane = shoal_crds
    _apply_example(plane, "cluster.yaml", "orders")
    statefulsets = _wait_for(
        "the Broker's StatefulSets",
        lambda: len(_names(plane, "statefulsets")) >= 2 and _names(plane, "statefulsets"),
        operator,
    )
    assert any("ns" in name for name in statefulsets), statefulsets
    assert _names(plane, "services")
    assert _names(plane, "configmaps")
    assert _names(plane, "poddisruptionbudgets")
    volumes = _wait_for("hostPath PersistentVolumes", lambda: _names(plane, "persistentvolumes", None), operator)
    for name in volumes:
        volume = json.loads(plane.kubectl("get", "pv", name, "-o", "json").stdout)
        terms = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        pinned = {value for term in terms for expression in term["matchExpressions"] for value in expression["values"]}
        assert pinned <= set(plane.node_names), (name, pinned)

    def conditions() -> list[dict[str, Any]]:
        broker = json.loads(plane.kubectl("get", "broker", "orders", "-n", BROKER_NAMESPACE, "-o", "json").stdout)
        found: list[dict[str, Any]] = broker.get("status", {}).get("conditions", [])
        return found

    assert _wait_for("Broker status conditions", conditions, operator)
    refused = [line for line in operator.output().splitlines() if REFUSED.search(line)]
    assert not refused, refused


def _objects(plane: ControlPlane, kind: str, namespace: str | None = BROKER_NAMESPACE) -> list[dict[str, Any]]:
    scope = ["-n", namespace] if namespace else []
    items: list[dict[str, Any]] = json.loads(plane.kubectl("get", kind, *scope, "-o", "json").stdout)["items"]
    return items


def test_broker_pods_are_scheduled_next_to_their_volumes(shoal_crds: ControlPlane, operator: Operator) -> None:
    """The StatefulSet controller makes the pods, the PV binder binds each data claim to the PV the operator
    pre-bound, the scheduler puts each broker pod on its PV's node, and KWOK runs every pod."""
    plane = shoal_crds
    replicas = sum(s["spec"]["replicas"] for s in _objects(plane, "statefulsets"))

    def running() -> list[dict[str, Any]]:
        pods = [p for p in _objects(plane, "pods") if p["metadata"]["name"].startswith("orders-")]
        ok = len(pods) == replicas and all(p["status"].get("phase") == "Running" for p in pods)
        return pods if ok else []

    pods = _wait_for(f"{replicas} Running pods of the Broker", running, operator)
    assert {ip["ip"].split(".")[0] for p in pods for ip in p["status"]["podIPs"]} == {"127"}
    pinned = {}
    for volume in _objects(plane, "persistentvolumes", None):
        if volume["spec"]["claimRef"]["namespace"] != BROKER_NAMESPACE:
            continue  # another module's (PVs are cluster-scoped; reclaimPolicy Retain keeps them)
        claim = volume["spec"]["claimRef"]["name"]
        terms = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        (pinned[claim],) = {v for t in terms for e in t["matchExpressions"] for v in e["values"]}
    claims = {c["metadata"]["name"]: c for c in _objects(plane, "persistentvolumeclaims")}
    assert set(claims) == set(pinned), (sorted(claims), sorted(pinned))
    assert all(c["status"]["phase"] == "Bound" for c in claims.values()), claims
    with_data = 0
    for pod in pods:
        for volume in pod["spec"]["volumes"]:
            claim = volume.get("persistentVolumeClaim", {}).get("claimName")
            if claim is not None:
                with_data += 1
                assert pod["spec"]["nodeName"] == pinned[claim], (pod["metadata"]["name"], claim)
    assert with_data == len(pinned) > 0


def test_status_written_by_the_operator_is_kept_by_the_server(shoal_crds: ControlPlane, operator: Operator) -> None:
    """Broker, Topic, StoreAnalysis and StreamAnalysis status patches come back as sent: every field the
    operator writes is declared in the CRD, so the server prunes nothing (KMock keeps anything, so only this
    can show it). The StreamAnalysis' StatefulSet and Service are made with only the chart's grants."""
    plane = shoal_crds
    _apply_example(plane, "topic.yaml", "order-events")
    _apply_example(plane, "storeanalysis.yaml", "nightly")
    _apply_example(plane, "streamanalysis.yaml", "flow")
    for kind, name in (("topic", "order-events"), ("storeanalysis", "nightly"), ("streamanalysis", "flow")):

        def status(kind: str = kind, name: str = name) -> dict[str, Any]:
            body = json.loads(plane.kubectl("get", kind, name, "-n", BROKER_NAMESPACE, "-o", "json").stdout)
            found: dict[str, Any] = body.get("status", {})
            return found if found.get("conditions") else {}

        assert _wait_for(f"{kind} status conditions", status, operator)
    owned = _wait_for(
        "the StreamAnalysis' StatefulSet and Service",
        lambda: "flow-stream" in _names(plane, "statefulsets") and "flow-stream" in _names(plane, "services"),
        operator,
    )
    assert owned
    pruned = [line for line in operator.output().splitlines() if PRUNED in line]
    assert not pruned, pruned
    # Gone again, through the garbage collector: the Broker tests after this one own every StatefulSet.
    plane.kubectl("delete", "streamanalysis", "flow", "-n", BROKER_NAMESPACE, f"--timeout={int(RECONCILE_TIMEOUT_S)}s")
    assert _wait_for(
        "the StreamAnalysis' children to go",
        lambda: "flow-stream" not in _names(plane, "statefulsets") + _names(plane, "services"),
        operator,
    )


def test_deleting_the_broker_lets_the_garbage_collector_remove_its_children(
    shoal_crds: ControlPlane, operator: Operator
) -> None:
    """`kubectl delete broker` returns once the operator has released its finalizer, and the real garbage
    collector then removes the StatefulSets, pods, Services, ConfigMaps and PDB through owner references."""
    plane = shoal_crds
    owned = ("statefulsets", "pods", "services", "configmaps", "poddisruptionbudgets")
    before = {kind: [n for n in _names(plane, kind) if n.startswith("orders-")] for kind in owned}
    assert all(before.values()), before
    for stateful_set in _objects(plane, "statefulsets"):
        owners = [(o["kind"], o["name"]) for o in stateful_set["metadata"].get("ownerReferences", [])]
        assert owners == [("Broker", "orders")], (stateful_set["metadata"]["name"], owners)
    plane.kubectl("delete", "broker", "orders", "-n", BROKER_NAMESPACE, f"--timeout={int(RECONCILE_TIMEOUT_S)}s")

    def gone() -> bool:
        return not any(n.startswith("orders-") for kind in owned for n in _names(plane, kind))

    _wait_for("the garbage collector to remove the Broker's children", gone, operator)


def test_a_removed_grant_is_reported_in_the_log(shoal_crds: ControlPlane, operator: Operator) -> None:
    """Without the PodDisruptionBudget grant the server refuses that request and the operator logs which
    request and why: 403 Forbidden, the resource, the object and the operator's account."""
    plane = shoal_crds
    role = json.loads(plane.kubectl("get", "clusterrole", operator.cluster_role, "-o", "json").stdout)
    kept = [rule for rule in role["rules"] if "poddisruptionbudgets" not in rule.get("resources", [])]
    assert len(kept) == len(role["rules"]) - 1
    patch = json.dumps([{"op": "replace", "path": "/rules", "value": kept}])
    plane.kubectl("patch", "clusterrole", operator.cluster_role, "--type=json", "-p", patch)
    _apply_example(plane, "cluster.yaml", "payments")

    def refusal() -> list[str]:
        return [
            line for line in operator.output().splitlines()
            if REFUSED.search(line) and "poddisruptionbudgets" in line
        ]  # fmt: skip

    lines = _wait_for("a log line about the refused PodDisruptionBudget request", refusal, operator)
    assert any("payments-ns" in line and f":{RELEASE}-operator" in line for line in lines), lines
