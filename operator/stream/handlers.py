"""kopf handlers for StreamAnalysis: a long-running Spark query over a Broker cluster's topics.

One reconcile runs on create, update, resume and every STREAM_TICK_S (a timer):

1. parse the spec (spec.py; an invalid one -> Ready=False InvalidSpec and, from the event
   handlers, kopf.PermanentError);
2. read the Broker it names: its NameServers' addresses come from its spec (manifests.py's stable
   DNS names), so a missing Broker is Ready=False ClusterNotFound and nothing is made;
3. apply the headless Service and the one-replica StatefulSet (replicas 0 while suspended), owned
   by the StreamAnalysis; a child deleted by hand comes back on the next tick;
4. read the query's pod (phase, restarts, how it last ended) and, while it runs, its /metrics
   (`progress_from_metrics`); a read that fails keeps the last progress;
5. write only the status keys that changed, and the progress into the operator's own /metrics.

Kubernetes restarts the query's container when it fails (restartPolicy Always); the job then goes
on from its checkpoint. The operator records the restarts and the last termination.
"""

from __future__ import annotations

import datetime
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

import kopf

from shoal.operator import kube, limits, metrics
from shoal.operator.analysis.status import Health
from shoal.operator.errors import InvalidSpecError
from shoal.operator.settings import allowed_host_roots
from shoal.operator.spec import BrokerSpec, broker_spec_from
from shoal.operator.stream import manifests as stream_manifests
from shoal.operator.stream.spec import StreamSpec, stream_spec_from
from shoal.operator.stream.status import PodFacts, pod_facts, progress_from_metrics, stream_status

GROUP, VERSION, PLURAL = "shoal.io", "v1alpha1", "streamanalyses"
KIND = "StreamAnalysis"
BROKER_API = f"{GROUP}/{VERSION}"

TICK_S = float(os.environ.get("SHOAL_STREAM_TICK_S") or limits.STREAM_TICK_S)
"""The timer's period; SHOAL_STREAM_TICK_S (read at import) lets tests tick fast."""

RETRY_ERRORS = (kopf.TemporaryError, kopf.PermanentError)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _cluster(stream: StreamSpec) -> tuple[Health, BrokerSpec | None]:
    body = kube.get(BROKER_API, "Broker", stream.namespace, stream.cluster)
    if body is None:
        return Health(False, "ClusterNotFound", f"Broker {stream.namespace}/{stream.cluster} does not exist"), None
    try:
        cluster = broker_spec_from(body, allowed_host_roots())
    except InvalidSpecError as error:
        return Health(False, "ClusterNotReady", f"Broker {stream.cluster} has an invalid spec: {error}"), None
    return Health(True, "ClusterFound", f"reading topics of cluster {stream.cluster}"), cluster


def _pod(stream: StreamSpec) -> PodFacts | None:
    wanted = stream_manifests.pod_name(stream)
    pods = kube.list_objects("v1", "Pod", stream.namespace, {stream_manifests.LABEL_STREAM: stream.name})
    for pod in pods:
        if pod["metadata"]["name"] == wanted and not pod["metadata"].get("deletionTimestamp"):
            return pod_facts(pod, stream_manifests.CONTAINER)
    return None


def read_metrics(address: str, port: int | None = None) -> str | None:
    """The query's /metrics text (on STREAM_METRICS_PORT unless `port`), or None when it does not
    answer (starting, busy, gone)."""
    url = f"http://{address}:{port or limits.STREAM_METRICS_PORT}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=limits.STREAM_METRICS_TIMEOUT_S) as response:
            data: bytes = response.read(limits.STREAM_METRICS_BYTES_MAX)
    except (OSError, urllib.error.URLError, ValueError):
        return None
    return data.decode("utf-8", "replace")


def _write_status(patch: kopf.Patch, body: Mapping[str, Any], new_status: Mapping[str, Any]) -> None:
    """Only changed keys: a timer that rewrote the whole status every tick would flood watches."""
    current = body.get("status") or {}
    changed = {key: value for key, value in new_status.items() if current.get(key) != value}
    for stale in ("lastTermination", "progress"):
        if stale in current and stale not in new_status:
            changed[stale] = None
    if changed:
        patch.setdefault("status", {}).update(changed)


def _export(namespace: str, name: str, status: Mapping[str, Any]) -> None:
    progress = status.get("progress") or {}
    metrics.set_stream(
        namespace,
        name,
        restarts=float(status.get("restarts") or 0),
        batch=float(progress.get("batch", -1)),
        input_rate=float(progress.get("inputRowsPerSecond", 0.0)),
        processed_rate=float(progress.get("processedRowsPerSecond", 0.0)),
        batch_duration_s=float(progress.get("batchDurationSeconds", 0.0)),
        lag=float(progress.get("lag", 0)),
    )


def _reconcile(body: Mapping[str, Any], patch: kopf.Patch, logger: Any, raise_invalid: bool) -> None:
    meta = body["metadata"]
    generation = int(meta.get("generation") or 0)
    current = body.get("status") or {}
    previous_conditions = current.get("conditions") or []
    now = _now()
    try:
        stream = stream_spec_from(body)
    except InvalidSpecError as error:
        health = Health(False, "InvalidSpec", str(error))
        _write_status(
            patch, body, stream_status(generation, health, False, None, None, False, now, previous_conditions)
        )
        if raise_invalid:
            raise kopf.PermanentError(f"invalid spec: {error}") from error
        return
    health, cluster = _cluster(stream)
    if cluster is not None:
        for child in (stream_manifests.service(stream), stream_manifests.stateful_set(stream, cluster)):
            action, _ = kube.apply(child)
            if action != "unchanged":
                logger.info(f"StreamAnalysis {stream.name}: {child['kind']} {child['metadata']['name']} {action}")
    pod = _pod(stream) if cluster is not None else None
    progress = current.get("progress")
    answering = False
    if pod is not None and pod.running and pod.ip:
        text = read_metrics(pod.ip)
        if text is not None:
            answering = True
            progress = progress_from_metrics(text, now) or progress
    new_status = stream_status(generation, health, stream.suspend, pod, progress, answering, now, previous_conditions)
    _write_status(patch, body, new_status)
    _export(stream.namespace, stream.name, new_status)


def reconcile_stream(body: Mapping[str, Any], patch: kopf.Patch, logger: Any, *, raise_invalid: bool) -> None:
    """See the module docstring."""
    meta = body["metadata"]
    try:
        with metrics.reconciling(KIND, RETRY_ERRORS):
            _reconcile(body, patch, logger, raise_invalid)
    finally:
        metrics.set_ready(KIND, str(meta.get("namespace")), str(meta["name"]), patch.get("status"))


@kopf.on.create(GROUP, VERSION, PLURAL)
def stream_created(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_stream(body, patch, logger, raise_invalid=True)


@kopf.on.update(GROUP, VERSION, PLURAL)
def stream_updated(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_stream(body, patch, logger, raise_invalid=True)


@kopf.on.resume(GROUP, VERSION, PLURAL)
def stream_resumed(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_stream(body, patch, logger, raise_invalid=True)


@kopf.timer(GROUP, VERSION, PLURAL, interval=TICK_S)
def stream_tick(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_stream(body, patch, logger, raise_invalid=False)


@kopf.on.delete(GROUP, VERSION, PLURAL, optional=True)
def stream_deleted(body: kopf.Body, **_: Any) -> None:
    """The children go with their ownerReferences; only the operator's series are dropped."""
    namespace, name = str(body["metadata"].get("namespace")), str(body["metadata"]["name"])
    metrics.forget(KIND, namespace, name)
    metrics.forget_stream(namespace, name)
