"""kopf handlers for Broker and Topic: the operator's one boundary with kopf.

Every handler follows one path: parse the spec (spec.py; InvalidSpecError -> an InvalidSpec
condition and kopf.PermanentError), compute what should exist (manifests.py), apply it (kube.py),
gather observed facts, and write the status (status.py) with `observedGeneration`. Something not
there yet (no eligible node for a hostPath volume, a cluster that does not answer) writes its
condition and raises kopf.TemporaryError so kopf retries.

Brokers: on.create / on.update / on.resume and a timer (drift: a deleted child is recreated, the
status follows pods becoming ready). Children carry ownerReferences, so the garbage collector
removes them with the Broker; the cluster-scoped hostPath PVs cannot be owned and are deleted by
on.delete when storage.hostPath.reclaimPolicy is Delete (their directories stay on the nodes).

Topics: the oldest Topic naming a (cluster, topicName) manages it (status.topic_owner); the
others report ResourceConflict. The manager creates or adopts the topic through the admin
protocol (UPDATE_AND_CREATE_TOPIC is an upsert) and deletes it behind a finalizer.
"""

from __future__ import annotations

import asyncio
import datetime
import os
from collections.abc import Mapping, Sequence
from typing import Any

import kopf

from shoal.client import Admin
from shoal.client.errors import MQClientError
from shoal.operator import kube, limits, manifests, status
from shoal.operator.errors import InvalidSpecError, NotReadyError
from shoal.operator.spec import PERMISSION_BITS, BrokerSpec, TopicSpec, broker_spec_from, topic_spec_from

GROUP, VERSION = "shoal.io", "v1alpha1"
DEFAULT_HOST_ROOTS = ("/var/lib/shoal",)
ANNOTATION_PAUSE = "shoal.io/pause-reconciliation"
POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"


def watched_namespaces() -> list[str]:
    """SHOAL_WATCH_NAMESPACES, comma-separated; empty: the whole cluster."""
    return [n.strip() for n in os.environ.get("SHOAL_WATCH_NAMESPACES", "").split(",") if n.strip()]


def allowed_host_roots() -> tuple[str, ...]:
    """SHOAL_ALLOWED_HOSTPATH_ROOTS, colon-separated; unset: /var/lib/shoal (the chart's default)."""
    raw = os.environ.get("SHOAL_ALLOWED_HOSTPATH_ROOTS")
    if raw is None:
        return DEFAULT_HOST_ROOTS
    return tuple(root for root in raw.split(":") if root)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _generation(body: Mapping[str, Any]) -> int:
    return int(body["metadata"].get("generation") or 0)


def _previous(body: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    return list((body.get("status") or {}).get("conditions") or [])


def _set_status(patch: kopf.Patch, new_status: Mapping[str, Any]) -> None:
    patch.setdefault("status", {}).update(new_status)


def _invalid(patch: kopf.Patch, body: Mapping[str, Any], error: InvalidSpecError) -> kopf.PermanentError:
    _set_status(patch, status.invalid_spec_status(_generation(body), str(error), _now(), _previous(body)))
    return kopf.PermanentError(f"invalid spec: {error}")


# ---------------------------------------------------------------- Broker: observed facts


def _storage_nodes(spec: BrokerSpec) -> dict[str, str]:
    """Pod name -> node of its hostPath volume: read back from existing PVs, then chosen for the
    rest among eligible nodes, spreading each group's members across nodes."""
    if spec.storage.type != "HostPath":
        return {}
    chosen: dict[str, str] = {}
    for volume in kube.cluster_volumes(spec.uid, manifests.LABEL_CLUSTER_UID):
        meta = volume["metadata"]
        pod = f"{meta['labels'].get(manifests.LABEL_GROUP)}-{meta['labels'].get(manifests.LABEL_ORDINAL)}"
        node = (meta.get("annotations") or {}).get(manifests.ANNOTATION_STORAGE_NODE, "")
        if node:
            chosen[pod] = node
    eligible = sorted(
        node["metadata"]["name"]
        for node in kube.nodes(spec.storage.host_node_selector)
        if not (node.get("spec") or {}).get("unschedulable")
    )
    for group in range(spec.groups):
        members = [manifests.pod_name(spec, group, ordinal) for ordinal in range(spec.replicas_per_group)]
        used = {chosen[pod] for pod in members if pod in chosen}
        for pod in members:
            if pod in chosen or not eligible:
                continue
            free = [node for node in eligible if node not in used] or eligible
            chosen[pod] = free[group % len(free)]
            used.add(chosen[pod])
    return chosen


def _stateful_set_facts(body: Mapping[str, Any]) -> status.StatefulSetFacts:
    observed = body.get("status") or {}
    return status.StatefulSetFacts(
        replicas=int((body.get("spec") or {}).get("replicas") or 0),
        ready_replicas=int(observed.get("readyReplicas") or 0),
        update_revision=str(observed.get("updateRevision") or ""),
    )


def _pod_facts(spec: BrokerSpec, pod: Mapping[str, Any]) -> status.PodFacts | None:
    meta = pod["metadata"]
    groups = {manifests.group_name(spec, g): g for g in range(spec.groups)}
    group = groups.get((meta.get("labels") or {}).get(manifests.LABEL_GROUP, ""))
    ordinal_text = str(meta["name"]).rsplit("-", 1)[-1]
    if group is None or not ordinal_text.isdigit():
        return None
    conditions = (pod.get("status") or {}).get("conditions") or []
    return status.PodFacts(
        name=str(meta["name"]),
        group=group,
        ordinal=int(ordinal_text),
        ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
        node=str((pod.get("spec") or {}).get("nodeName") or ""),
        revision=str((meta.get("labels") or {}).get("controller-revision-hash", "")),
    )


def _pod_security_level(namespace: str, logger: Any) -> str:
    """The namespace's enforced Pod Security level; "" when unknown. Only a status hint: a
    namespace that cannot be read must not stop the reconcile."""
    try:
        return kube.namespace_labels(namespace).get(POD_SECURITY_ENFORCE, "")
    except kube.ApiError as error:
        logger.warning(f"cannot read namespace {namespace} for its Pod Security level: {error}")
        return ""


def _cluster_facts(
    spec: BrokerSpec, storage_nodes: Mapping[str, str], paused: bool, logger: Any
) -> status.ClusterFacts:
    stateful_sets = {
        s["metadata"]["name"]: s for s in kube.cluster_stateful_sets(spec.namespace, spec.name, manifests.LABEL_CLUSTER)
    }
    name_server = stateful_sets.get(manifests.name_server_name(spec))
    groups = {
        g: _stateful_set_facts(stateful_sets[manifests.group_name(spec, g)])
        for g in range(spec.groups)
        if manifests.group_name(spec, g) in stateful_sets
    }
    pods = [
        facts
        for pod in kube.cluster_pods(spec.namespace, spec.name, manifests.LABEL_CLUSTER)
        if (facts := _pod_facts(spec, pod)) is not None
    ]
    host_path = spec.storage.type == "HostPath"
    expected_pods = [manifests.pod_name(spec, g, n) for g in range(spec.groups) for n in range(spec.replicas_per_group)]
    enforce = _pod_security_level(spec.namespace, logger) if host_path else ""
    return status.ClusterFacts(
        name_server=_stateful_set_facts(name_server) if name_server else None,
        groups=groups,
        pods=pods,
        volumes_bound=not host_path or all(pod in storage_nodes for pod in expected_pods),
        pod_security_forbids_host_path=enforce in ("baseline", "restricted"),
        paused=paused,
    )


# ---------------------------------------------------------------- Broker: reconcile


def reconcile_broker(body: Mapping[str, Any], patch: kopf.Patch, logger: Any, *, raise_invalid: bool = True) -> None:
    """Parse, apply every child, write the status; see the module docstring."""
    try:
        spec = broker_spec_from(body, allowed_host_roots())
    except InvalidSpecError as error:
        permanent = _invalid(patch, body, error)
        if raise_invalid:
            raise permanent from error
        return
    paused = (body["metadata"].get("annotations") or {}).get(ANNOTATION_PAUSE) == "true"
    storage_nodes = _storage_nodes(spec)
    if not paused:
        actions: dict[str, int] = {}
        for child in manifests.desired_state(spec, storage_nodes):
            action, _ = kube.apply(child)
            actions[action] = actions.get(action, 0) + 1
        logger.info(f"Broker {spec.namespace}/{spec.name}: children {actions}")
    facts = _cluster_facts(spec, storage_nodes, paused, logger)
    _set_status(patch, status.broker_status(spec, _generation(body), facts, _now(), _previous(body)))
    if not facts.volumes_bound and not paused:
        raise kopf.TemporaryError(
            f"no eligible node for every hostPath volume (node selector {dict(spec.storage.host_node_selector)})",
            delay=limits.RETRY_DELAY_S,
        )


@kopf.on.create(GROUP, VERSION, "brokers")
def broker_created(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_broker(body, patch, logger)


@kopf.on.update(GROUP, VERSION, "brokers")
def broker_updated(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_broker(body, patch, logger)


@kopf.on.resume(GROUP, VERSION, "brokers")
def broker_resumed(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_broker(body, patch, logger)


@kopf.timer(GROUP, VERSION, "brokers", interval=limits.RECONCILE_INTERVAL_S, initial_delay=limits.RECONCILE_INTERVAL_S)
def broker_drift(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_broker(body, patch, logger, raise_invalid=False)


@kopf.on.delete(GROUP, VERSION, "brokers")
def broker_deleted(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    """Namespaced children go with their ownerReferences; hostPath PVs per the reclaim policy."""
    uid = str(body["metadata"].get("uid") or "")
    reclaim = (((body.get("spec") or {}).get("storage") or {}).get("hostPath") or {}).get("reclaimPolicy", "Retain")
    if not uid or reclaim != "Delete":
        return
    for volume in kube.cluster_volumes(uid, manifests.LABEL_CLUSTER_UID):
        kube.delete("v1", "PersistentVolume", None, volume["metadata"]["name"])
        logger.info(f"deleted PersistentVolume {volume['metadata']['name']} (reclaimPolicy Delete)")


# ---------------------------------------------------------------- Topic


def _topic_status(body: Mapping[str, Any], ready: bool, reason: str, message: str) -> dict[str, Any]:
    generation = _generation(body)
    return {
        "observedGeneration": generation,
        "conditions": [status.condition("Ready", ready, reason, message, generation, _now(), _previous(body))],
    }


def _same_topic(candidate: Mapping[str, Any], spec: TopicSpec) -> bool:
    try:
        other = topic_spec_from(candidate)
    except InvalidSpecError:
        return False
    return other.cluster == spec.cluster and other.topic_name == spec.topic_name


def _topic_context(body: Mapping[str, Any], patch: kopf.Patch) -> tuple[TopicSpec, BrokerSpec]:
    """The Topic's spec and its cluster's, once it is the topic's manager; else status + error."""
    try:
        spec = topic_spec_from(body)
    except InvalidSpecError as error:
        raise _invalid(patch, body, error) from error
    namespace, name = str(body["metadata"].get("namespace")), str(body["metadata"]["name"])
    cluster_body = kube.get(f"{GROUP}/{VERSION}", "Broker", namespace, spec.cluster)
    if cluster_body is None:
        message = f"Broker {namespace}/{spec.cluster} does not exist"
        _set_status(patch, _topic_status(body, False, "ClusterNotFound", message))
        raise kopf.TemporaryError(message, delay=limits.RETRY_DELAY_S)
    candidates = [t for t in kube.list_objects(f"{GROUP}/{VERSION}", "Topic", namespace) if _same_topic(t, spec)]
    if not any(t["metadata"]["name"] == name for t in candidates):
        candidates.append(dict(body))
    owner = status.topic_owner(candidates)
    if owner != f"{namespace}/{name}":
        message = f"topic {spec.topic_name} of cluster {spec.cluster} is managed by Topic {owner}"
        _set_status(patch, _topic_status(body, False, "ResourceConflict", message))
        raise kopf.TemporaryError(message, delay=limits.RECONCILE_INTERVAL_S)
    try:
        cluster = broker_spec_from(cluster_body, allowed_host_roots())
    except InvalidSpecError as error:
        message = f"Broker {namespace}/{spec.cluster} has an invalid spec: {error}"
        _set_status(patch, _topic_status(body, False, "ClusterNotReady", message))
        raise kopf.TemporaryError(message, delay=limits.RECONCILE_INTERVAL_S) from error
    return spec, cluster


async def _create_topic(addresses: Sequence[str], cluster_name: str, spec: TopicSpec) -> bool:
    """Create or update the topic on every master; True if it existed before (adopted)."""
    async with Admin(list(addresses)) as admin:
        existed = spec.topic_name in await admin.topic_list()
        await admin.create_topic(
            spec.topic_name,
            cluster=cluster_name,
            read_queue_nums=spec.read_queue_nums,
            write_queue_nums=spec.write_queue_nums,
            perm=PERMISSION_BITS[spec.permission],
            order=spec.order,
        )
        return existed


async def _delete_topic(addresses: Sequence[str], cluster_name: str, topic_name: str) -> None:
    async with Admin(list(addresses)) as admin:
        await admin.delete_topic(topic_name, cluster=cluster_name)


def _run_admin(work: Any, what: str) -> Any:
    """Run one admin conversation in this worker thread, bounded; NotReadyError if it fails."""
    try:
        return asyncio.run(asyncio.wait_for(work, limits.ADMIN_TIMEOUT_S))
    except (MQClientError, OSError, TimeoutError) as error:
        raise NotReadyError(f"{what}: cluster not reachable: {error!r}", limits.RETRY_DELAY_S) from error


def reconcile_topic(body: Mapping[str, Any], patch: kopf.Patch, logger: Any) -> None:
    spec, cluster = _topic_context(body, patch)
    addresses = manifests.name_server_addresses(cluster)
    try:
        existed = _run_admin(_create_topic(addresses, cluster.cluster_name, spec), f"create {spec.topic_name}")
    except NotReadyError as error:
        _set_status(patch, _topic_status(body, False, "ClusterUnreachable", str(error)))
        raise kopf.TemporaryError(str(error), delay=error.delay_s) from error
    reason = "Adopted" if existed else "Created"
    logger.info(f"topic {spec.topic_name} {reason.lower()} on cluster {cluster.cluster_name}")
    _set_status(patch, _topic_status(body, True, reason, f"topic {spec.topic_name} is on cluster {cluster.name}"))


@kopf.on.create(GROUP, VERSION, "topics")
def topic_created(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_topic(body, patch, logger)


@kopf.on.update(GROUP, VERSION, "topics")
def topic_updated(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_topic(body, patch, logger)


@kopf.on.resume(GROUP, VERSION, "topics")
def topic_resumed(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_topic(body, patch, logger)


@kopf.on.delete(GROUP, VERSION, "topics")
def topic_deleted(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    """Delete the topic from the cluster if this Topic manages it; a gone cluster needs nothing."""
    try:
        spec, cluster = _topic_context(body, patch)
    except (kopf.PermanentError, kopf.TemporaryError) as error:
        logger.info(f"Topic released without deleting anything on a cluster: {error}")
        return
    try:
        _run_admin(_delete_topic(manifests.name_server_addresses(cluster), cluster.cluster_name, spec.topic_name), "")
    except NotReadyError as error:
        raise kopf.TemporaryError(str(error), delay=error.delay_s) from error
