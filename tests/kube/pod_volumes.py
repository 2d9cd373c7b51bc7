"""A pod's volumes as directories on this machine, the way kubelet's volume plugins lay them out.

- configMap, secret, downwardAPI, projected (with service-account tokens from the TokenRequest API):
  files written into the pod's folder;
- emptyDir: a folder of the pod's;
- hostPath, and a claim bound to a hostPath PersistentVolume: the path under the node's root
  (`<node root>/<hostPath path>`), one root per KWOK node, so two nodes never share a store.
Anything else raises VolumeNotReady with the reason; the runner retries as kubelet would.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from tests.kube.kube_api import KubeApi
from tests.kube.pod_sandbox import field_value

DEFAULT_MODE = 0o644
TOKEN_EXPIRATION_S = 3600


class VolumeNotReady(Exception):
    """The volume cannot be set up yet (a claim not bound, a ConfigMap missing): retry later."""


def _write_files(directory: Path, files: Mapping[str, bytes], mode: int) -> None:
    for relative, content in files.items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(mode)


def _select(
    data: Mapping[str, bytes], items: list[dict[str, Any]] | None, what: str, optional: bool
) -> dict[str, bytes]:
    if not items:
        return dict(data)
    chosen = {}
    for item in items:
        if item["key"] in data:
            chosen[item["path"]] = data[item["key"]]
        elif not optional:
            raise VolumeNotReady(f"{what} has no key {item['key']}")
    return chosen


def object_data(api: KubeApi, namespace: str, kind: str, name: str, optional: bool = False) -> dict[str, bytes]:
    """A ConfigMap's or Secret's data as bytes (empty when optional and missing)."""
    resource = "configmaps" if kind.startswith("configMap") else "secrets"
    body = api.get(f"/api/v1/namespaces/{namespace}/{resource}/{name}")
    if body is None:
        if optional:
            return {}
        raise VolumeNotReady(f"{resource[:-1]} {namespace}/{name} does not exist")
    if resource == "secrets":
        return {key: base64.b64decode(value) for key, value in (body.get("data") or {}).items()}
    data = {key: str(value).encode() for key, value in (body.get("data") or {}).items()}
    data.update({key: base64.b64decode(value) for key, value in (body.get("binaryData") or {}).items()})
    return data


def _service_account_token(api: KubeApi, pod: Mapping[str, Any], source: Mapping[str, Any]) -> bytes:
    meta = pod["metadata"]
    account = pod["spec"].get("serviceAccountName") or "default"
    request: dict[str, Any] = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "expirationSeconds": int(source.get("expirationSeconds") or TOKEN_EXPIRATION_S),
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]},
        },
    }
    if source.get("audience"):
        request["spec"]["audiences"] = [source["audience"]]
    answer = api.request("POST", f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{account}/token", request)
    return str(answer["status"]["token"]).encode()


def _downward(pod: Mapping[str, Any], items: list[dict[str, Any]], pod_ip: str, host_ip: str) -> dict[str, bytes]:
    files = {}
    for item in items:
        if "fieldRef" not in item:
            raise VolumeNotReady(f"downwardAPI item {item.get('path')}: only fieldRef is supported")
        files[item["path"]] = field_value(pod, item["fieldRef"]["fieldPath"], pod_ip, host_ip).encode()
    return files


def _projected(
    api: KubeApi, pod: Mapping[str, Any], sources: list[dict[str, Any]], pod_ip: str, host_ip: str
) -> dict[str, bytes]:
    namespace = pod["metadata"]["namespace"]
    files: dict[str, bytes] = {}
    for source in sources:
        if "serviceAccountToken" in source:
            token = source["serviceAccountToken"]
            files[token["path"]] = _service_account_token(api, pod, token)
        elif "configMap" in source or "secret" in source:
            kind = "configMap" if "configMap" in source else "secret"
            ref = source[kind]
            optional = bool(ref.get("optional"))
            data = object_data(api, namespace, kind, ref["name"], optional)
            files.update(_select(data, ref.get("items"), f"{kind} {ref['name']}", optional))
        elif "downwardAPI" in source:
            files.update(_downward(pod, source["downwardAPI"].get("items") or [], pod_ip, host_ip))
        else:
            raise VolumeNotReady(f"projected source {sorted(source)} is not supported")
    return files


def _host_path(node_root: Path, host_path: Mapping[str, Any]) -> Path:
    path = node_root / str(host_path["path"]).lstrip("/")
    kind = host_path.get("type") or ""
    if kind == "DirectoryOrCreate":
        path.mkdir(parents=True, exist_ok=True)
    elif kind == "Directory" and not path.is_dir():
        raise VolumeNotReady(f"hostPath {host_path['path']} is not a directory on the node")
    elif kind == "FileOrCreate" and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    return path


def _claimed(api: KubeApi, node_root: Path, namespace: str, claim: str) -> Path:
    body = api.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}")
    if body is None or (body.get("status") or {}).get("phase") != "Bound":
        raise VolumeNotReady(f"claim {namespace}/{claim} is not bound")
    volume = api.get(f"/api/v1/persistentvolumes/{body['spec']['volumeName']}")
    if volume is None or "hostPath" not in volume["spec"]:
        raise VolumeNotReady(f"claim {namespace}/{claim}: only hostPath PersistentVolumes are supported")
    return _host_path(node_root, volume["spec"]["hostPath"])


def volume_directory(
    api: KubeApi,
    pod: Mapping[str, Any],
    volume: Mapping[str, Any],
    pod_dir: Path,
    node_root: Path,
    pod_ip: str,
    host_ip: str,
) -> Path:
    """The directory on this machine that backs `volume` of `pod` (written or created now)."""
    namespace = pod["metadata"]["namespace"]
    own = pod_dir / "volumes" / volume["name"]
    mode = DEFAULT_MODE
    if "emptyDir" in volume:
        own.mkdir(parents=True, exist_ok=True)
        return cast("Path", own)
    if "hostPath" in volume:
        return _host_path(node_root, volume["hostPath"])
    if "persistentVolumeClaim" in volume:
        return _claimed(api, node_root, namespace, volume["persistentVolumeClaim"]["claimName"])
    if "configMap" in volume or "secret" in volume:
        kind = "configMap" if "configMap" in volume else "secret"
        ref = volume[kind]
        name = ref["name"] if kind == "configMap" else ref["secretName"]
        optional = bool(ref.get("optional"))
        files = _select(object_data(api, namespace, kind, name, optional), ref.get("items"), f"{kind} {name}", optional)
        mode = int(ref.get("defaultMode", DEFAULT_MODE))
    elif "downwardAPI" in volume:
        files = _downward(pod, volume["downwardAPI"].get("items") or [], pod_ip, host_ip)
    elif "projected" in volume:
        files = _projected(api, pod, volume["projected"].get("sources") or [], pod_ip, host_ip)
        mode = int(volume["projected"].get("defaultMode", DEFAULT_MODE))
    else:
        raise VolumeNotReady(f"volume {volume['name']}: kind {sorted(volume)} is not supported")
    own.mkdir(parents=True, exist_ok=True)
    _write_files(own, files, mode)
    os.chmod(own, 0o755)
    return cast("Path", own)
