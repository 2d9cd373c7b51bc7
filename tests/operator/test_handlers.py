"""Handler tests: the real kopf operator against KMock's in-memory Kubernetes API.

Recipe and gotchas: ../shared/docs/tooling.md §1. kopf runs in the test's event loop; the
handlers' sync kubernetes client reaches KMock through a kubeconfig written per test.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import re
import tempfile
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import kmock as km
import kopf
import kubernetes
import pytest
import yaml

from tests.operator.conftest import REPO_ROOT, load_yaml
from tests.tls_certs import make_tls_files

NAMESPACE = "mq"
UID = "0f7c5d2e-1111-4222-8333-944455556666"
BROKERS = "shoal.io/v1alpha1/brokers"
TOPICS = "shoal.io/v1alpha1/topics"
WAIT_TIMEOUT_S = 8.0


@pytest.fixture(autouse=True)
def _handlers_registered() -> None:
    """Import the handlers once so kopf's default registry holds them."""
    import shoal.operator.handlers  # noqa: F401


def point_kubernetes_client_at(kmock: km.KubernetesEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Write a kubeconfig for KMock and make both kopf and the kubernetes client read it (the
    client reads $KUBECONFIG at import: gotcha 1), with the chart's default hostPath root."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kmock", "cluster": {"server": str(kmock.url)}}],
        "users": [{"name": "kmock", "user": {"token": "test"}}],
        "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "kmock"}}],
        "current-context": "kmock",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.setattr(kubernetes.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(path))
    monkeypatch.setenv("SHOAL_ALLOWED_HOSTPATH_ROOTS", "/var/lib/shoal")


@pytest.fixture
def kube_api(kmock: km.KubernetesEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> km.KubernetesEmulator:
    """KMock with the built-in and Shoal resources, and a kubeconfig pointing at it (gotcha 1, 2)."""
    with warnings.catch_warnings():  # kmock 0.8 uses importlib.resources.read_binary (deprecated)
        warnings.simplefilter("ignore", DeprecationWarning)
        kmock.resources.load_bundled()
    kmock.resources[BROKERS] = km.ResourceInfo(
        kind="Broker", namespaced=True, verbs={"list", "watch", "get", "patch", "create"}, subresources={"status"}
    )
    kmock.resources[TOPICS] = km.ResourceInfo(
        kind="Topic", namespaced=True, verbs={"list", "watch", "get", "patch", "create"}, subresources={"status"}
    )
    point_kubernetes_client_at(kmock, tmp_path, monkeypatch)
    return kmock


async def wait_until(predicate: Callable[[], bool], timeout_s: float = WAIT_TIMEOUT_S) -> None:
    """The one bounded wait: poll `predicate` until true or fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


def get_object(api: km.KubernetesEmulator, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
    """The latest version of an object, or None (gotcha 6: index with strings, never `in`)."""
    try:
        return dict(api.objects[resource, namespace, name])
    except (KeyError, LookupError):
        return None


def watching(api: km.KubernetesEmulator, resource: str) -> bool:
    return len(list(api[km.action.WATCH, km.resource(resource)])) > 0


@contextlib.asynccontextmanager
async def running_operator(
    api: km.KubernetesEmulator, watched: tuple[str, ...] = (BROKERS, TOPICS)
) -> AsyncIterator[None]:
    """kopf in this loop until the block ends; waits for its watches of `watched` before yielding.

    On exit it also waits for kopf's handler threads. Stopping kopf cancels the tasks that await
    sync handlers, not their threads: a thread still calling KMock while KMock shuts down can
    connect after the server closed its connections, and that connection is left to the garbage
    collector, whose ResourceWarning then fails a later test (CI of stop 43)."""
    stop = asyncio.Event()
    settings = kopf.OperatorSettings()
    task = asyncio.create_task(kopf.operator(clusterwide=True, standalone=True, stop_flag=stop, settings=settings))
    try:
        await wait_until(lambda: all(watching(api, resource) for resource in watched))
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=10)
        await asyncio.wait_for(asyncio.to_thread(settings.execution.executor.shutdown, wait=True), timeout=10)


async def post(api: km.KubernetesEmulator, path: str, body: dict[str, Any]) -> None:
    response = await api.post(path, json=body, headers={"Connection": "close"})  # gotcha 4
    assert response.status < 300, await response.text()
    response.close()


async def patch_object(api: km.KubernetesEmulator, path: str, body: dict[str, Any]) -> None:
    response = await api.patch(
        path, json=body, headers={"Connection": "close", "Content-Type": "application/merge-patch+json"}
    )
    assert response.status < 300, await response.text()
    response.close()


def broker_body(**spec_changes: Any) -> dict[str, Any]:
    body = copy.deepcopy(load_yaml(REPO_ROOT / "examples" / "cluster.yaml"))
    body["metadata"].update(
        namespace=NAMESPACE, uid=UID, generation=1, resourceVersion="1"
    )  # kopf json-patches finalizers with a resourceVersion test
    body["spec"].update(spec_changes)
    return body


async def seed_cluster(api: km.KubernetesEmulator, node_count: int = 2) -> None:
    """Nodes for the hostPath volumes, stored directly (KMock 0.8 cannot route /api/v1/namespaces)."""
    for index in range(node_count):
        name = f"node-{index}"
        api.objects["v1/nodes", None, name] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def broker_status(api: km.KubernetesEmulator, name: str = "orders") -> dict[str, Any]:
    body = get_object(api, BROKERS, NAMESPACE, name) or {}
    return dict(body.get("status") or {})


def condition_of(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status.get("conditions", []) if c["type"] == kind)


BROKER_PATH = f"/apis/shoal.io/v1alpha1/namespaces/{NAMESPACE}/brokers"
CHILDREN = [
    ("v1/services", NAMESPACE, "orders-ns"),
    ("apps/v1/statefulsets", NAMESPACE, "orders-ns"),
    ("policy/v1/poddisruptionbudgets", NAMESPACE, "orders-ns"),
    ("v1/configmaps", NAMESPACE, "orders-g0-config"),
    ("v1/services", NAMESPACE, "orders-g0"),
    ("apps/v1/statefulsets", NAMESPACE, "orders-g0"),
    ("policy/v1/poddisruptionbudgets", NAMESPACE, "orders-g0"),
    ("v1/persistentvolumes", None, "shoal-mq-orders-g0-0"),
    ("v1/persistentvolumes", None, "shoal-mq-orders-g0-1"),
]


def resource_path(resource: km.resource) -> str:
    return "/".join(part for part in (resource.group, resource.version, resource.plural) if part)


def writes(api: km.KubernetesEmulator, action: km.action) -> list[tuple[str, str | None]]:
    """(group/version/plural, name) of the requests of `action` on anything but Shoal's own CRs."""
    return [
        (resource_path(r.resource), r.name or ((r.data or {}).get("metadata") or {}).get("name"))
        for r in api[action]
        if r.resource and r.resource.group != "shoal.io"
    ]


def seed_broker_pods(api: km.KubernetesEmulator, status: dict[str, Any] | None = None) -> list[str]:
    """The two pods of group orders-g0 stored directly, as the StatefulSet controller would make them."""
    names = [f"orders-g0-{ordinal}" for ordinal in (0, 1)]
    for name in names:
        labels = {"shoal.io/cluster": "orders", "shoal.io/group": "orders-g0"}
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        }
        if status is not None:
            pod["status"] = status
        api.objects["v1/pods", NAMESPACE, name] = pod
    return names


@contextlib.asynccontextmanager
async def operator_with_broker(api: km.KubernetesEmulator, body: dict[str, Any] | None = None) -> AsyncIterator[None]:
    """Two nodes, the operator running, and a Broker (examples/cluster.yaml unless `body`) whose
    first status has been written."""
    await seed_cluster(api)
    async with running_operator(api):
        await post(api, BROKER_PATH, body or broker_body())
        await wait_until(lambda: "conditions" in broker_status(api))
        yield


async def reconcile_one_broker(api: km.KubernetesEmulator, body: dict[str, Any] | None = None) -> None:
    """operator_with_broker, stopped again once the Broker has its first status."""
    async with operator_with_broker(api, body):
        pass


@pytest.mark.asyncio
async def test_create_broker_creates_children_and_sets_status(kube_api: km.KubernetesEmulator) -> None:
    """A new Broker gets every child and a status with observedGeneration and conditions."""
    await reconcile_one_broker(kube_api)
    for resource, namespace, name in CHILDREN:
        assert get_object(kube_api, resource, namespace, name) is not None, (resource, name)
    status = broker_status(kube_api)
    assert status["observedGeneration"] == 1
    assert condition_of(status, "Ready")["status"] == "False"
    assert condition_of(status, "Ready")["reason"] == "Creating"
    assert condition_of(status, "StorageReady")["status"] == "True"
    volumes = [get_object(kube_api, "v1/persistentvolumes", None, f"shoal-mq-orders-g0-{n}") for n in (0, 1)]
    nodes = {v["metadata"]["annotations"]["shoal.io/storage-node"] for v in volumes if v}
    assert nodes == {"node-0", "node-1"}, "a group's members are spread across nodes"
    stateful_set = get_object(kube_api, "apps/v1/statefulsets", NAMESPACE, "orders-g0") or {}
    assert stateful_set["metadata"]["ownerReferences"][0]["uid"] == UID


@pytest.mark.asyncio
async def test_update_image_and_config_patches_children(kube_api: km.KubernetesEmulator) -> None:
    """Changing the image and a config key patches the StatefulSet and the ConfigMap."""
    async with operator_with_broker(kube_api):
        change = {
            "metadata": {"generation": 2},
            "spec": {"image": "shoal:0.2.0", "config": {"autoCreateTopicEnable": "true"}},
        }
        await patch_object(kube_api, f"{BROKER_PATH}/orders", change)
        await wait_until(lambda: broker_status(kube_api).get("observedGeneration") == 2)
    stateful_set = get_object(kube_api, "apps/v1/statefulsets", NAMESPACE, "orders-g0") or {}
    images = {c["image"] for c in stateful_set["spec"]["template"]["spec"]["containers"]}
    assert images == {"shoal:0.2.0"}
    config_map = get_object(kube_api, "v1/configmaps", NAMESPACE, "orders-g0-config") or {}
    assert "autoCreateTopicEnable=true" in config_map["data"]["broker.conf"]
    assert ("apps/v1/statefulsets", "orders-g0") in writes(kube_api, km.action.UPDATE)


@pytest.mark.asyncio
async def test_invalid_spec_reports_condition_and_creates_nothing(kube_api: km.KubernetesEmulator) -> None:
    """A hostPath root outside the allow-list gives Ready=False InvalidSpec and no children."""
    body = broker_body(storage={"type": "HostPath", "hostPath": {"root": "/etc"}})
    await reconcile_one_broker(kube_api, body)
    ready = condition_of(broker_status(kube_api), "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert "/etc is not under an allowed host root" in ready["message"]
    assert broker_status(kube_api)["observedGeneration"] == 1
    seeded = ("v1/events", "events.k8s.io/v1/events")
    assert [w for w in writes(kube_api, km.action.CREATE) if w[0] not in seeded] == []


@pytest.mark.asyncio
async def test_restart_resumes_without_duplicates(kube_api: km.KubernetesEmulator) -> None:
    """A second operator run over an existing Broker re-applies without creating anything twice."""
    await reconcile_one_broker(kube_api)
    creates_before = [w for w in writes(kube_api, km.action.CREATE) if w[0] != "v1/events"]
    resumed = len(list(kube_api[km.action.UPDATE, km.resource(BROKERS)]))
    async with running_operator(kube_api):
        await wait_until(lambda: len(list(kube_api[km.action.UPDATE, km.resource(BROKERS)])) > resumed)
    creates_after = [w for w in writes(kube_api, km.action.CREATE) if w[0] != "v1/events"]
    assert creates_after == creates_before
    assert len(set(creates_after)) == len(creates_after), "no child was created twice"


@pytest.mark.asyncio
async def test_topic_reports_unreachable_cluster(kube_api: km.KubernetesEmulator) -> None:
    """A Topic whose cluster does not answer gets Ready=False ClusterUnreachable (and a retry)."""
    await seed_cluster(kube_api)
    broker = broker_body(nameServer={"replicas": 0, "external": ["127.0.0.1:1"]})
    topic = {
        "apiVersion": "shoal.io/v1alpha1",
        "kind": "Topic",
        "metadata": {
            "name": "orders-created",
            "namespace": NAMESPACE,
            "uid": "t-1",
            "generation": 1,
            "resourceVersion": "1",
        },
        "spec": {"clusterRef": {"name": "orders"}, "topicName": "OrdersCreated"},
    }
    async with running_operator(kube_api):
        await post(kube_api, BROKER_PATH, broker)
        await post(kube_api, f"/apis/shoal.io/v1alpha1/namespaces/{NAMESPACE}/topics", topic)
        await wait_until(
            lambda: (
                "conditions" in ((get_object(kube_api, TOPICS, NAMESPACE, "orders-created") or {}).get("status") or {})
            )
        )
    ready = condition_of((get_object(kube_api, TOPICS, NAMESPACE, "orders-created") or {})["status"], "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ClusterUnreachable")


# ---------------------------------------------------------------- RBAC coverage


def _granted() -> set[tuple[str, str, str]]:
    """The chart's ClusterRole (rbac.yaml) and its Secret grant (rbac-secrets.yaml, a Role per watched
    namespace or a ClusterRole: the same rules either way)."""
    rules = []
    for template in ("rbac.yaml", "rbac-secrets.yaml"):
        text = (REPO_ROOT / "charts" / "shoal" / "templates" / template).read_text()
        documents = yaml.safe_load_all(re.sub(r"\{\{.*?\}\}", "x", text))
        rules += next(d for d in documents if isinstance(d, dict) and d["kind"] in ("Role", "ClusterRole"))["rules"]
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


VERBS = {
    km.action.LIST: "list",
    km.action.WATCH: "watch",
    km.action.FETCH: "get",
    km.action.CREATE: "create",
    km.action.UPDATE: "patch",
    km.action.DELETE: "delete",
}


def _used(api: km.KubernetesEmulator) -> Iterator[tuple[str, str, str]]:
    for request in api:
        if request.resource is None or request.resource.plural is None or request.action not in VERBS:
            continue
        resource = request.resource
        plural = str(resource.plural) + (f"/{request.subresource}" if request.subresource else "")
        verb = VERBS[request.action]
        if request.action == km.action.UPDATE and str(request.method).upper().endswith("PUT"):
            verb = "update"
        yield (resource.group or "", plural, verb)


@pytest.mark.asyncio
async def test_rbac_grants_every_request_of_the_operator(kube_api: km.KubernetesEmulator) -> None:
    """Every verb/resource the operator sent while reconciling is granted by the chart's ClusterRole."""
    await reconcile_one_broker(kube_api)
    seeded = {("shoal.io", "brokers", "create")}
    used = set(_used(kube_api)) - seeded
    assert used, "the request log is empty"
    missing = used - _granted()
    assert not missing, f"not granted by charts/shoal/templates/rbac.yaml: {sorted(missing)}"


def topic_body(name: str, created: str) -> dict[str, Any]:
    return {
        "apiVersion": "shoal.io/v1alpha1",
        "kind": "Topic",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"uid-{name}",
            "generation": 1,
            "resourceVersion": "1",
            "creationTimestamp": created,
        },
        "spec": {"clusterRef": {"name": "orders"}, "topicName": "OrdersCreated"},
    }


def topic_ready(api: km.KubernetesEmulator, name: str) -> dict[str, Any] | None:
    status = (get_object(api, TOPICS, NAMESPACE, name) or {}).get("status") or {}
    return next((c for c in status.get("conditions", []) if c["type"] == "Ready"), None)


@pytest.mark.asyncio
async def test_second_topic_for_one_topic_reports_conflict(kube_api: km.KubernetesEmulator) -> None:
    """Of two Topic objects naming one topic, the newer reports ResourceConflict and names the older."""
    await seed_cluster(kube_api)
    broker = broker_body(nameServer={"replicas": 0, "external": ["127.0.0.1:1"]})
    topics = f"/apis/shoal.io/v1alpha1/namespaces/{NAMESPACE}/topics"
    async with running_operator(kube_api):
        await post(kube_api, BROKER_PATH, broker)
        await post(kube_api, topics, topic_body("first", "2026-01-01T00:00:00Z"))
        await post(kube_api, topics, topic_body("second", "2026-01-02T00:00:00Z"))
        await wait_until(
            lambda: topic_ready(kube_api, "first") is not None and topic_ready(kube_api, "second") is not None
        )
    second = topic_ready(kube_api, "second") or {}
    assert (second["status"], second["reason"]) == ("False", "ResourceConflict")
    assert f"{NAMESPACE}/first" in second["message"]
    assert (topic_ready(kube_api, "first") or {})["reason"] == "ClusterUnreachable"


ANALYSIS_GRANTS = {
    ("shoal.io", "storeanalyses", "list"),
    ("shoal.io", "storeanalyses", "watch"),
    ("shoal.io", "storeanalyses", "patch"),
    ("shoal.io", "storeanalyses/status", "patch"),
    ("batch", "jobs", "list"),
    ("batch", "jobs", "delete"),
}
"""Grants only the StoreAnalysis scheduler uses; analysis/test_handlers.py checks it uses each."""

STREAM_GRANTS = {
    ("shoal.io", "streamanalyses", "list"),
    ("shoal.io", "streamanalyses", "watch"),
    ("shoal.io", "streamanalyses", "patch"),
    ("shoal.io", "streamanalyses/status", "patch"),
}
"""Grants only the StreamAnalysis handlers use; stream/test_handlers.py checks it uses each."""

UNSEEN_GRANTS = {
    ("", "namespaces", "get"),
    ("", "namespaces", "list"),
    ("", "namespaces", "watch"),
    ("", "events", "create"),
    ("shoal.io", "brokers/finalizers", "update"),
    ("shoal.io", "storeanalyses/finalizers", "update"),
    ("shoal.io", "streamanalyses/finalizers", "update"),
}
"""Used, but never seen by KMock 0.8: it answers 500 on /api/v1/namespaces (the handlers' Pod
Security read and kopf's namespace observer), and kopf posts its events after a test's
operator has stopped. The finalizers grants are checked by the API server's admission
(OwnerReferencesPermissionEnforcement) when a child carries blockOwnerDeletion, never requested:
tests/kube/test_operator_rbac.py shows they are needed."""


def sample_ca_pem() -> bytes:
    """A real CA certificate (the operator checks ca.crt parses), made once per test session."""
    global _TEST_CA_PEM
    if not _TEST_CA_PEM:
        with tempfile.TemporaryDirectory() as directory:
            _TEST_CA_PEM = make_tls_files(Path(directory)).ca.read_bytes()
    return _TEST_CA_PEM


_TEST_CA_PEM = b""


def seed_security(api: km.KubernetesEmulator, tls_key: str = "a2V5") -> dict[str, Any]:
    """The ACL Secret, a cert-manager Certificate and the TLS Secret it names (as cert-manager would
    leave them); returns the Broker spec fields that use them."""
    ca = base64.b64encode(sample_ca_pem()).decode()
    api.objects["v1/secrets", NAMESPACE, "orders-acl"] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "orders-acl", "namespace": NAMESPACE},
        "data": {"plain_acl.yml": "YWNjb3VudHM6IFtd", "brokerAccessKey": "YnJva2Vy", "brokerSecretKey": "c2VjcmV0"},
    }
    api.objects["cert-manager.io/v1/certificates", NAMESPACE, "orders-tls"] = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": "orders-tls", "namespace": NAMESPACE},
        "spec": {"secretName": "orders-tls-keys"},
    }
    api.objects["v1/secrets", NAMESPACE, "orders-tls-keys"] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": "orders-tls-keys", "namespace": NAMESPACE},
        "data": {"tls.crt": "Y2VydA==", "tls.key": tls_key, "ca.crt": ca},
    }
    return {"acl": {"secretName": "orders-acl"}, "tls": {"certificateName": "orders-tls"}}


NETWORK_POLICY_ENV = '{"enabled": true, "clients": [], "metrics": [{"namespaceSelector": {}}]}'


@pytest.mark.asyncio
async def test_rbac_grants_nothing_the_operator_never_uses(
    kube_api: km.KubernetesEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reverse check: every grant of the chart's ClusterRole is used by some handler. Method:
    one session that creates a Broker of two groups, corrects drifted children, rolls it by the
    manual annotation (patches and deletes pods), adds a Topic, scales to one group (drain check
    skipped: deletes the group's children), switches reclaimPolicy to Delete (patches PVs) and
    deletes the Broker (PVs and cleanup Jobs). The Broker has ACL and TLS (a cert-manager Certificate)
    and the chart's NetworkPolicies are on."""
    monkeypatch.setenv("SHOAL_NETWORK_POLICY", NETWORK_POLICY_ENV)
    security = seed_security(kube_api)
    async with operator_with_broker(kube_api, broker_body(groups=2, nameServer={"replicas": 1}, **security)):
        for resource, name in (
            ("v1/services", "orders-g0"),
            ("v1/configmaps", "orders-g0-config"),
            ("apps/v1/statefulsets", "orders-g0"),
            ("policy/v1/poddisruptionbudgets", "orders-g0"),
            ("networking.k8s.io/v1/networkpolicies", "orders-brokers"),
        ):
            live = kube_api.objects[resource, NAMESPACE, name]
            live["metadata"] = {**dict(live["metadata"]), "labels": {"drifted": "yes"}}
        seed_broker_pods(kube_api, {"conditions": [{"type": "Ready", "status": "False"}]})
        await patch_object(
            kube_api, f"{BROKER_PATH}/orders", {"metadata": {"annotations": {"shoal.io/manual-rolling-update": "true"}}}
        )
        await wait_until(lambda: len(list(kube_api[km.action.DELETE, km.resource("v1/pods")])) > 0)
        topic = topic_body("first", "2026-01-01T00:00:00Z")
        await post(kube_api, f"/apis/shoal.io/v1alpha1/namespaces/{NAMESPACE}/topics", topic)
        await wait_until(lambda: topic_ready(kube_api, "first") is not None)
        scale_down = {
            "metadata": {"annotations": {"shoal.io/skip-drain-check": "true"}},
            "spec": {"groups": 1, "storage": {"type": "HostPath", "hostPath": {"reclaimPolicy": "Delete"}}},
        }
        await patch_object(kube_api, f"{BROKER_PATH}/orders", scale_down)
        await wait_until(lambda: len(list(kube_api[km.action.DELETE, km.resource("apps/v1/statefulsets")])) > 0)
        response = await kube_api.delete(f"{BROKER_PATH}/orders", headers={"Connection": "close"})
        assert response.status < 300, await response.text()
        response.close()
        await wait_until(lambda: len(list(kube_api[km.action.CREATE, km.resource("batch/v1/jobs")])) >= 2)
    by_test = {("shoal.io", "brokers", "create"), ("shoal.io", "brokers", "delete"), ("shoal.io", "topics", "create")}
    used = set(_used(kube_api)) - by_test
    assert not used - _granted(), f"not granted: {sorted(used - _granted())}"
    unused = _granted() - used - ANALYSIS_GRANTS - STREAM_GRANTS - UNSEEN_GRANTS
    assert not unused, f"granted by charts/shoal/templates/rbac.yaml but never used: {sorted(unused)}"


@pytest.mark.asyncio
async def test_a_deleted_child_is_recreated(kube_api: km.KubernetesEmulator) -> None:
    """Goal: drift correction brings back a child deleted by hand. Method: delete the group's
    ConfigMap and StatefulSet through the API, touch the Broker; both come back."""
    async with operator_with_broker(kube_api):
        for path in (
            f"/api/v1/namespaces/{NAMESPACE}/configmaps/orders-g0-config",
            f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets/orders-g0",
        ):
            response = await kube_api.delete(path, headers={"Connection": "close"})
            assert response.status < 300, await response.text()
            response.close()
        assert kube_api.objects["v1/configmaps", NAMESPACE, "orders-g0-config"].deleted
        await patch_object(kube_api, f"{BROKER_PATH}/orders", {"metadata": {"annotations": {"touch": "1"}}})
        await wait_until(
            lambda: (
                not kube_api.objects["v1/configmaps", NAMESPACE, "orders-g0-config"].deleted
                and not kube_api.objects["apps/v1/statefulsets", NAMESPACE, "orders-g0"].deleted
            )
        )


@pytest.mark.parametrize("reclaim", ["Delete", "Retain"])
@pytest.mark.asyncio
async def test_deleting_a_broker_follows_the_reclaim_policy(kube_api: km.KubernetesEmulator, reclaim: str) -> None:
    """Goal: reclaimPolicy Delete removes the PVs and starts one marker-checked cleanup Job per
    directory, pinned to its node; Retain keeps both. Method: create, then delete the Broker."""
    body = broker_body(storage={"type": "HostPath", "hostPath": {"reclaimPolicy": reclaim}})
    async with operator_with_broker(kube_api, body):
        response = await kube_api.delete(f"{BROKER_PATH}/orders", headers={"Connection": "close"})
        assert response.status < 300, await response.text()
        response.close()
        await wait_until(lambda: kube_api.objects[BROKERS, NAMESPACE, "orders"].deleted)
    jobs = [dict(r.data or {}) for r in kube_api[km.action.CREATE, km.resource("batch/v1/jobs")]]
    volumes = {n: kube_api.objects["v1/persistentvolumes", None, f"shoal-mq-orders-g0-{n}"] for n in (0, 1)}
    if reclaim == "Retain":
        assert jobs == []
        assert not any(v.deleted for v in volumes.values())
        return
    assert all(v.deleted for v in volumes.values())
    assert len(jobs) == 2
    by_node = {job["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/hostname"]: job for job in jobs}
    assert set(by_node) == {"node-0", "node-1"}
    for job in jobs:
        container = job["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert container["args"] == ["cleanup-store"] and env["SHOAL_CLUSTER_UID"] == UID
        directory = job["metadata"]["annotations"]["shoal.io/directory"]
        assert directory.startswith("/var/lib/shoal/mq/orders/orders-g0-")
        parent = job["spec"]["template"]["spec"]["volumes"][0]["hostPath"]["path"]
        assert parent == "/var/lib/shoal/mq/orders" and env["SHOAL_STORE_DIR"].endswith(directory.rsplit("/", 1)[1])


@pytest.mark.asyncio
async def test_deleting_a_broker_stops_its_pods_before_removing_their_directories(
    kube_api: km.KubernetesEmulator,
) -> None:
    """Goal: reclaimPolicy Delete never removes a store directory under a running broker (it would
    write its tables back while stopping). Method: a Broker whose two broker pods exist; delete it:
    its StatefulSet is deleted while the finalizer stays and no cleanup Job starts; once the pods
    are gone, the PVs go, the Jobs start and the Broker is released."""
    body = broker_body(storage={"type": "HostPath", "hostPath": {"reclaimPolicy": "Delete"}})
    async with operator_with_broker(kube_api, body):
        pods = seed_broker_pods(kube_api)
        response = await kube_api.delete(f"{BROKER_PATH}/orders", headers={"Connection": "close"})
        assert response.status < 300, await response.text()
        response.close()
        await wait_until(lambda: kube_api.objects["apps/v1/statefulsets", NAMESPACE, "orders-g0"].deleted)
        assert list(kube_api[km.action.CREATE, km.resource("batch/v1/jobs")]) == []
        assert not kube_api.objects[BROKERS, NAMESPACE, "orders"].deleted
        assert not any(
            kube_api.objects["v1/persistentvolumes", None, f"shoal-mq-orders-g0-{n}"].deleted for n in (0, 1)
        )
        for name in pods:
            response = await kube_api.delete(
                f"/api/v1/namespaces/{NAMESPACE}/pods/{name}", headers={"Connection": "close"}
            )
            assert response.status < 300, await response.text()
            response.close()
        await wait_until(lambda: kube_api.objects[BROKERS, NAMESPACE, "orders"].deleted)
    assert len(list(kube_api[km.action.CREATE, km.resource("batch/v1/jobs")])) == 2
    assert all(kube_api.objects["v1/persistentvolumes", None, f"shoal-mq-orders-g0-{n}"].deleted for n in (0, 1))


@pytest.mark.asyncio
async def test_reconciles_are_counted_and_served_as_prometheus_metrics(kube_api: km.KubernetesEmulator) -> None:
    """Goal: a machine can scrape the operator. Method: run `python -m shoal.operator`'s metrics
    server on a free port, reconcile one Broker, read /metrics over HTTP."""
    import socket
    import urllib.request

    import prometheus_client

    from shoal.operator import metrics

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server, thread = prometheus_client.start_http_server(port, addr="127.0.0.1")
    try:
        before = metrics.RECONCILES.labels("Broker", "ok")._value.get()
        await reconcile_one_broker(kube_api)

        def scrape() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                return str(response.read().decode())

        text = await asyncio.to_thread(scrape)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert metrics.RECONCILES.labels("Broker", "ok")._value.get() > before
    assert 'shoal_operator_reconciles_total{kind="Broker",result="ok"}' in text
    assert 'shoal_operator_resource_ready{kind="Broker",name="orders",namespace="mq"} 0.0' in text
    assert "shoal_operator_reconcile_seconds_bucket" in text
