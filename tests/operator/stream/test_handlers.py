"""StreamAnalysis handler tests: the real kopf operator against KMock.

The timer ticks every SHOAL_STREAM_TICK_S (0.2 s, tests/operator/conftest.py). KMock runs no
controllers, so the tests play the StatefulSet controller and the kubelet: they store the query's
pod with the status a kubelet would write. Its /metrics is a real StreamMetrics server (the one
the streaming jobs run) on a free local port, which the pod's IP (127.0.0.1) and the patched
STREAM_METRICS_PORT point the operator at. The Broker is stored directly: its handlers are not
what these tests cover, so the brokers resource is left out of discovery.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from pathlib import Path
from typing import Any

import kmock as km
import pytest

from shoal.operator import limits
from shoal.operator import metrics as operator_metrics
from shoal.operator.stream import handlers as stream_handlers
from shoal.spark.jobs.stream_metrics import StreamMetrics
from tests.operator.conftest import REPO_ROOT, load_yaml
from tests.operator.test_handlers import (
    STREAM_GRANTS,
    _granted,
    _used,
    get_object,
    patch_object,
    point_kubernetes_client_at,
    post,
    wait_until,
)
from tests.operator.test_handlers import (
    running_operator as running_kopf,
)
from tests.ports import free_port

NAMESPACE = "mq"
NAME = "orders-flow"
STREAMS = "shoal.io/v1alpha1/streamanalyses"
STATEFUL_SETS = "apps/v1/statefulsets"
SERVICES = "v1/services"
PODS = "v1/pods"
STREAM_PATH = f"/apis/shoal.io/v1alpha1/namespaces/{NAMESPACE}/streamanalyses"
CHILD = f"{NAME}-stream"
POD = f"{CHILD}-0"


@pytest.fixture
def api(kmock: km.KubernetesEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> km.KubernetesEmulator:
    assert stream_handlers.TICK_S <= 0.5, "conftest.py sets SHOAL_STREAM_TICK_S before the import"
    with warnings.catch_warnings():  # kmock 0.8 uses importlib.resources.read_binary (deprecated)
        warnings.simplefilter("ignore", DeprecationWarning)
        kmock.resources.load_bundled()
    kmock.resources[STREAMS] = km.ResourceInfo(
        kind="StreamAnalysis",
        namespaced=True,
        verbs={"list", "watch", "get", "patch", "create"},
        subresources={"status"},
    )
    point_kubernetes_client_at(kmock, tmp_path, monkeypatch)
    body = copy.deepcopy(load_yaml(REPO_ROOT / "examples" / "cluster.yaml"))
    body["metadata"].update(namespace=NAMESPACE, uid="broker-uid", generation=1)
    kmock.objects["shoal.io/v1alpha1/brokers", NAMESPACE, "orders"] = body
    return kmock


def stream_body(**spec_changes: Any) -> dict[str, Any]:
    body = copy.deepcopy(load_yaml(REPO_ROOT / "examples" / "streamanalysis.yaml"))
    body["metadata"].update(namespace=NAMESPACE, uid="stream-uid", generation=1, resourceVersion="1")
    body["spec"].update(spec_changes)
    return body


def running_operator(api: km.KubernetesEmulator) -> contextlib.AbstractAsyncContextManager[None]:
    """kopf in this loop until the block ends, once it watches StreamAnalyses."""
    return running_kopf(api, (STREAMS,))


def status_of(api: km.KubernetesEmulator) -> dict[str, Any]:
    return dict((get_object(api, STREAMS, NAMESPACE, NAME) or {}).get("status") or {})


def ready(api: km.KubernetesEmulator) -> tuple[str, str]:
    found: dict[str, Any] = next((c for c in status_of(api).get("conditions", []) if c["type"] == "Ready"), {})
    return str(found.get("status")), str(found.get("reason"))


def child(api: km.KubernetesEmulator, resource: str) -> dict[str, Any] | None:
    found = get_object(api, resource, NAMESPACE, CHILD)
    return found if found else None  # KMock keeps a deleted object as an empty one


def store_pod(api: km.KubernetesEmulator, container_status: dict[str, Any]) -> None:
    """Play the StatefulSet controller and the kubelet: the query's pod with this container status."""
    stateful_set = child(api, STATEFUL_SETS)
    assert stateful_set is not None
    api.objects[PODS, NAMESPACE, POD] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": POD,
            "namespace": NAMESPACE,
            "labels": dict(stateful_set["spec"]["template"]["metadata"]["labels"]),
        },
        "status": {
            "phase": "Running",
            "podIP": "127.0.0.1",
            "containerStatuses": [{"name": "query", **container_status}],
        },
    }


@pytest.mark.asyncio
async def test_a_stream_gets_its_query_and_reports_its_progress(
    api: km.KubernetesEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: a StreamAnalysis gets a one-replica StatefulSet and headless Service it owns; once its
    pod runs, status.progress and the operator's gauges carry the query's figures. Method: create
    it, store the pod a kubelet would report, serve real job metrics on the pod's address."""
    port = free_port()
    monkeypatch.setattr(limits, "STREAM_METRICS_PORT", port)
    served = StreamMetrics("topic_flow", port)
    try:
        async with running_operator(api):
            await post(api, STREAM_PATH, stream_body())
            await wait_until(lambda: child(api, STATEFUL_SETS) is not None and child(api, SERVICES) is not None)
            stateful_set = child(api, STATEFUL_SETS)
            assert stateful_set is not None and stateful_set["spec"]["replicas"] == 1
            assert stateful_set["metadata"]["ownerReferences"][0]["uid"] == "stream-uid"
            await wait_until(lambda: ready(api) == ("False", "Pending"))
            store_pod(api, {"ready": True, "restartCount": 0, "state": {"running": {}}})
            await wait_until(lambda: ready(api) == ("True", "Running"))
            assert "progress" not in status_of(api)  # no micro-batch yet
            served.update(
                {"batch": 3, "rows": 900, "inputRowsPerSecond": 90.0, "processedRowsPerSecond": 300.0, "lag": 12}
            )
            await wait_until(lambda: (status_of(api).get("progress") or {}).get("batch") == 3)
            progress = status_of(api)["progress"]
            assert (progress["rows"], progress["processedRowsPerSecond"], progress["lag"]) == (900, 300.0, 12)
            gauge = operator_metrics.STREAM_FIGURES["processed_rate"].labels(NAMESPACE, NAME)
            assert gauge._value.get() == 300.0
            assert status_of(api)["phase"] == "Running" and status_of(api)["pod"] == POD
    finally:
        served.close()


@pytest.mark.asyncio
async def test_a_failing_query_is_reported_and_its_progress_kept(api: km.KubernetesEmulator) -> None:
    """Goal: a query the kubelet keeps restarting reads Failing with its restarts and last exit,
    and the last progress stays. Method: a pod in CrashLoopBackOff after an OOM kill."""
    async with running_operator(api):
        await post(api, STREAM_PATH, stream_body())
        await wait_until(lambda: child(api, STATEFUL_SETS) is not None)
        store_pod(
            api,
            {
                "ready": False,
                "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {
                    "terminated": {"reason": "OOMKilled", "exitCode": 137, "finishedAt": "2026-11-29T12:00:00Z"}
                },
            },
        )
        await wait_until(lambda: ready(api) == ("False", "Failing"))
        status = status_of(api)
        assert (status["phase"], status["restarts"], status["lastTermination"]["exitCode"]) == ("Failing", 4, 137)
        assert "OOMKilled" in next(c for c in status["conditions"] if c["type"] == "Ready")["message"]


@pytest.mark.asyncio
async def test_suspend_scales_to_zero_and_a_deleted_child_comes_back(api: km.KubernetesEmulator) -> None:
    """Goal: suspending stops the query (replicas 0) and keeps everything else; a StatefulSet
    deleted by hand is made again. Method: patch spec.suspend, then delete the StatefulSet."""
    async with running_operator(api):
        await post(api, STREAM_PATH, stream_body())
        await wait_until(lambda: child(api, STATEFUL_SETS) is not None)
        await patch_object(api, f"{STREAM_PATH}/{NAME}", {"metadata": {"generation": 2}, "spec": {"suspend": True}})
        await wait_until(lambda: (child(api, STATEFUL_SETS) or {}).get("spec", {}).get("replicas") == 0)
        await wait_until(lambda: status_of(api).get("phase") == "Suspended")
        response = await api.delete(
            f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets/{CHILD}", headers={"Connection": "close"}
        )
        assert response.status < 300, await response.text()
        response.close()
        await wait_until(lambda: child(api, STATEFUL_SETS) is not None)


@pytest.mark.asyncio
async def test_a_missing_cluster_or_an_invalid_spec_makes_nothing(api: km.KubernetesEmulator) -> None:
    """Goal: a StreamAnalysis naming no Broker, or with a spec the CRD would refuse, is Ready=False
    with the reason and gets no query. Method: one of each."""
    async with running_operator(api):
        missing = stream_body(clusterRef={"name": "nobody"})
        await post(api, STREAM_PATH, missing)
        await wait_until(lambda: ready(api) == ("False", "ClusterNotFound"))
        assert child(api, STATEFUL_SETS) is None
        await patch_object(
            api,
            f"{STREAM_PATH}/{NAME}",
            {"metadata": {"generation": 2}, "spec": {"clusterRef": {"name": "orders"}, "job": "TopicArchive"}},
        )
        await wait_until(lambda: ready(api) == ("False", "InvalidSpec"))
        assert "TopicArchive needs topics" in next(c for c in status_of(api)["conditions"])["message"]
        assert child(api, STATEFUL_SETS) is None


@pytest.mark.asyncio
async def test_rbac_grants_every_request_of_the_stream_handlers(api: km.KubernetesEmulator) -> None:
    """Goal: every verb and resource the StreamAnalysis handlers send is granted by the chart's
    ClusterRole, and each grant only they need is used. Method: record KMock's requests."""
    async with running_operator(api):
        await post(api, STREAM_PATH, stream_body())
        await wait_until(lambda: child(api, STATEFUL_SETS) is not None)
        store_pod(api, {"ready": True, "restartCount": 0, "state": {"running": {}}})
        await patch_object(api, f"{STREAM_PATH}/{NAME}", {"metadata": {"generation": 2}, "spec": {"suspend": True}})
        await wait_until(lambda: status_of(api).get("phase") == "Suspended")
    used = set(_used(api)) - {("shoal.io", "streamanalyses", "create")}  # the test's own create
    assert ("apps", "statefulsets", "create") in used and ("", "pods", "list") in used
    unused = STREAM_GRANTS - used
    assert not unused, f"test_handlers.STREAM_GRANTS names grants the stream handlers never used: {sorted(unused)}"
    missing = used - _granted()
    assert not missing, f"not granted by charts/shoal/templates/rbac.yaml: {sorted(missing)}"
