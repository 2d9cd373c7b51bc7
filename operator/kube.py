"""The only module of shoal.operator that calls the Kubernetes API.

Synchronous (the kubernetes client): sync handlers call it from kopf's thread pool, async ones
(handlers.py) through `asyncio.to_thread`, never on the event loop. Objects are plain dicts, as
manifests.py builds them; requests go through the client's generic REST layer so no typed model
stands between a manifest and the API server.

`apply` is create-or-update and idempotent: it reads the object, creates it when absent (a 409
from a concurrent or replayed create falls back to read + patch), and sends a JSON merge patch
only when the live object differs from the desired one. Merge patches merge maps and replace
lists, so the operator's fields win without clearing fields the API server defaults; the keys of
a ConfigMap's `data` that the desired object no longer has are removed explicitly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import kubernetes

from shoal.operator import limits

Object = dict[str, Any]

HTTP_NOT_FOUND = 404
HTTP_CONFLICT = 409


@dataclass(frozen=True)
class Kind:
    prefix: str
    """`/api/v1` or `/apis/<group>/<version>`."""
    plural: str
    namespaced: bool


KINDS: Mapping[tuple[str, str], Kind] = {
    ("v1", "Namespace"): Kind("/api/v1", "namespaces", False),
    ("v1", "Node"): Kind("/api/v1", "nodes", False),
    ("v1", "Pod"): Kind("/api/v1", "pods", True),
    ("v1", "Service"): Kind("/api/v1", "services", True),
    ("v1", "ConfigMap"): Kind("/api/v1", "configmaps", True),
    ("v1", "PersistentVolume"): Kind("/api/v1", "persistentvolumes", False),
    ("v1", "PersistentVolumeClaim"): Kind("/api/v1", "persistentvolumeclaims", True),
    ("v1", "Secret"): Kind("/api/v1", "secrets", True),
    ("cert-manager.io/v1", "Certificate"): Kind("/apis/cert-manager.io/v1", "certificates", True),
    ("apps/v1", "StatefulSet"): Kind("/apis/apps/v1", "statefulsets", True),
    ("policy/v1", "PodDisruptionBudget"): Kind("/apis/policy/v1", "poddisruptionbudgets", True),
    ("networking.k8s.io/v1", "NetworkPolicy"): Kind("/apis/networking.k8s.io/v1", "networkpolicies", True),
    ("shoal.io/v1alpha1", "Broker"): Kind("/apis/shoal.io/v1alpha1", "brokers", True),
    ("shoal.io/v1alpha1", "Topic"): Kind("/apis/shoal.io/v1alpha1", "topics", True),
}
"""Every kind the operator reads or writes; the chart's ClusterRole grants exactly these."""


class ApiError(Exception):
    """An API request failed with an HTTP status the caller did not expect."""

    def __init__(self, status: int, method: str, path: str, body: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[: limits.API_ERROR_BODY_LENGTH_MAX]}")
        self.status = status


def _path(api_version: str, kind: str, namespace: str | None, name: str | None = None) -> str:
    info = KINDS[api_version, kind]
    path = info.prefix
    if info.namespaced:
        assert namespace, f"{kind} is namespaced"
        path += f"/namespaces/{namespace}"
    path += f"/{info.plural}"
    if name is not None:
        path += f"/{name}"
    return path


def _request(
    method: str,
    path: str,
    body: Any = None,
    query: Mapping[str, str] | None = None,
    content_type: str = "application/json",
) -> tuple[int, Any]:
    client = kubernetes.client.ApiClient()
    try:
        if query:
            path += "?" + urlencode(query)
        method, url, headers, body, _ = client.param_serialize(
            method,
            path,
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
        )
        response = client.call_api(
            method, url, header_params=headers, body=body, _request_timeout=limits.API_REQUEST_TIMEOUT_S
        )
        raw = response.read()  # type: ignore[no-untyped-call]
    finally:
        client.close()  # type: ignore[no-untyped-call]
    text = raw.decode() if isinstance(raw, bytes) else str(raw or "")
    try:
        data = json.loads(text) if text else None
    except ValueError:
        data = text
    return int(response.status), data


def _checked(method: str, path: str, status: int, data: Any) -> Any:
    if not 200 <= status < 300:
        raise ApiError(status, method, path, json.dumps(data) if not isinstance(data, str) else data)
    return data


def get(api_version: str, kind: str, namespace: str | None, name: str) -> Object | None:
    """The object, or None when it does not exist."""
    path = _path(api_version, kind, namespace, name)
    status, data = _request("GET", path)
    if status == HTTP_NOT_FOUND:
        return None
    result: Object = _checked("GET", path, status, data)
    return result


def list_objects(
    api_version: str, kind: str, namespace: str | None, labels: Mapping[str, str] | None = None
) -> list[Object]:
    """Objects of a kind (in `namespace`, or cluster-wide for None) carrying all `labels`."""
    info = KINDS[api_version, kind]
    path = info.prefix + (f"/namespaces/{namespace}" if namespace and info.namespaced else "") + f"/{info.plural}"
    query = {"labelSelector": ",".join(f"{k}={v}" for k, v in labels.items())} if labels else None
    status, data = _request("GET", path, query=query)
    items = _checked("GET", path, status, data).get("items") or []
    # Filter again: an emulator or an old proxy may ignore labelSelector.
    wanted = dict(labels or {})
    return [
        item
        for item in items
        if all((item.get("metadata", {}).get("labels") or {}).get(k) == v for k, v in wanted.items())
    ]


def delete(api_version: str, kind: str, namespace: str | None, name: str) -> bool:
    """Delete the object; False if it was already gone."""
    path = _path(api_version, kind, namespace, name)
    status, data = _request("DELETE", path)
    if status == HTTP_NOT_FOUND:
        return False
    _checked("DELETE", path, status, data)
    return True


def is_subset(desired: Any, live: Any) -> bool:
    """True when every field of `desired` has the same value in `live` (lists compared whole)."""
    if isinstance(desired, Mapping):
        return isinstance(live, Mapping) and all(is_subset(v, live.get(k)) for k, v in desired.items())
    if isinstance(desired, list):
        return (
            isinstance(live, list)
            and len(desired) == len(live)
            and all(is_subset(d, v) for d, v in zip(desired, live, strict=True))
        )
    return bool(desired == live)


def merge_patch_for(desired: Object, live: Object) -> Object:
    """The merge patch taking `live` to `desired`: desired's fields, plus removal of stale data keys."""
    patch = dict(desired)
    if desired.get("kind") == "ConfigMap":
        stale = set(live.get("data") or {}) - set(desired.get("data") or {})
        patch["data"] = {**(desired.get("data") or {}), **dict.fromkeys(stale)}
    return patch


def apply(desired: Object) -> tuple[str, Object]:
    """Create or update `desired`; returns ("created" | "updated" | "unchanged", live object)."""
    api_version, kind = desired["apiVersion"], desired["kind"]
    namespace, name = desired["metadata"].get("namespace"), desired["metadata"]["name"]
    live = get(api_version, kind, namespace, name)
    if live is None:
        path = _path(api_version, kind, namespace)
        status, data = _request("POST", path, body=desired)
        if status != HTTP_CONFLICT:
            return "created", _checked("POST", path, status, data)
        live = get(api_version, kind, namespace, name)
        assert live is not None, f"{kind} {name} conflicted on create but cannot be read"
    if is_subset(desired, live):
        return "unchanged", live
    path = _path(api_version, kind, namespace, name)
    status, data = _request(
        "PATCH", path, body=merge_patch_for(desired, live), content_type="application/merge-patch+json"
    )
    return "updated", _checked("PATCH", path, status, data)


def patch(api_version: str, kind: str, namespace: str | None, name: str, changes: Object) -> Object | None:
    """JSON merge patch of an existing object; None when it is gone (never creates it)."""
    path = _path(api_version, kind, namespace, name)
    status, data = _request("PATCH", path, body=changes, content_type="application/merge-patch+json")
    if status == HTTP_NOT_FOUND:
        return None
    result: Object = _checked("PATCH", path, status, data)
    return result


# ---------------------------------------------------------------- a cluster's children


def cluster_stateful_sets(namespace: str, cluster: str, label_cluster: str) -> list[Object]:
    return list_objects("apps/v1", "StatefulSet", namespace, {label_cluster: cluster})


def cluster_pods(namespace: str, cluster: str, label_cluster: str) -> list[Object]:
    return list_objects("v1", "Pod", namespace, {label_cluster: cluster})


def cluster_volumes(cluster_uid: str, label_cluster_uid: str) -> list[Object]:
    return list_objects("v1", "PersistentVolume", None, {label_cluster_uid: cluster_uid})


def nodes(selector: Mapping[str, str] | None = None) -> list[Object]:
    return list_objects("v1", "Node", None, selector)


def namespace_labels(namespace: str) -> dict[str, str]:
    body = get("v1", "Namespace", None, namespace)
    return dict(((body or {}).get("metadata") or {}).get("labels") or {})


# ---------------------------------------------------------------- StoreAnalysis runs (analysis_handlers.py)

ANALYSIS_KINDS: Mapping[tuple[str, str], Kind] = {
    ("batch/v1", "Job"): Kind("/apis/batch/v1", "jobs", True),
    ("shoal.io/v1alpha1", "StoreAnalysis"): Kind("/apis/shoal.io/v1alpha1", "storeanalyses", True),
}
KINDS = {**ANALYSIS_KINDS, **KINDS}


def create_once(desired: Object) -> bool:
    """Create `desired`; False if an object of that name exists already. Run children have
    deterministic names, so AlreadyExists means a previous attempt launched it: done, not an error."""
    api_version, kind = desired["apiVersion"], desired["kind"]
    path = _path(api_version, kind, desired["metadata"].get("namespace"))
    status, data = _request("POST", path, body=desired)
    if status == HTTP_CONFLICT:
        return False
    _checked("POST", path, status, data)
    return True


def delete_with_dependents(api_version: str, kind: str, namespace: str | None, name: str) -> bool:
    """Delete with propagationPolicy Background: a Job's pods go with it (the API's default for
    batch/v1 Jobs orphans them). False if it was already gone."""
    path = _path(api_version, kind, namespace, name)
    status, data = _request("DELETE", path, query={"propagationPolicy": "Background"})
    if status == HTTP_NOT_FOUND:
        return False
    _checked("DELETE", path, status, data)
    return True
