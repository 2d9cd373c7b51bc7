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
import dataclasses
import datetime
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import kopf

from shoal.client import Admin, HaStatus
from shoal.client.errors import MQBrokerError, MQClientError
from shoal.client.route import master_address
from shoal.operator import kube, limits, manifests, metrics, rollout, status, topics
from shoal.operator.errors import InvalidSpecError, NotReadyError
from shoal.operator.spec import BrokerSpec, TopicSpec, broker_spec_from, topic_spec_from

GROUP, VERSION = "shoal.io", "v1alpha1"
DEFAULT_HOST_ROOTS = ("/var/lib/shoal",)
ANNOTATION_PAUSE = "shoal.io/pause-reconciliation"
ANNOTATION_MANUAL_ROLL = "shoal.io/manual-rolling-update"
"""On a Broker: "true" restarts every broker pod in the ordered way; on a pod: that pod only."""
ANNOTATION_PROMOTE = "shoal.io/promote"
"""On a Broker: the name of a slave pod to promote to master of its group (manual failover)."""
ANNOTATION_SKIP_DRAIN = "shoal.io/skip-drain-check"
"""On a Broker: "true" deletes groups removed by a scale-down without waiting for consumers."""
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


def _clock() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _now() -> str:
    return _clock().strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds_since(stamp: str) -> float:
    try:
        then = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    except ValueError:
        return 0.0
    return max((_clock() - then).total_seconds(), 0.0)


def broker_address(pod: Mapping[str, Any]) -> str:
    """Where the operator reaches a broker pod's remoting port ("" before it has an IP)."""
    ip = str((pod.get("status") or {}).get("podIP") or "")
    return f"{ip}:{manifests.BROKER_PORT}" if ip else ""


def _generation(body: Mapping[str, Any]) -> int:
    return int(body["metadata"].get("generation") or 0)


def _previous(body: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    return list((body.get("status") or {}).get("conditions") or [])


def _set_status(patch: kopf.Patch, new_status: Mapping[str, Any]) -> None:
    patch.setdefault("status", {}).update(new_status)


def _invalid(patch: kopf.Patch, body: Mapping[str, Any], error: InvalidSpecError) -> kopf.PermanentError:
    _set_status(patch, status.invalid_spec_status(_generation(body), str(error), _now(), _previous(body)))
    return kopf.PermanentError(f"invalid spec: {error}")


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Kubernetes Events only for warnings and errors: timers tick every few seconds per object,
    and an Event per successful tick would flood `kubectl describe` and etcd."""
    settings.posting.level = logging.WARNING
    settings.persistence.finalizer = "shoal.io/finalizer"


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


def _group_index(spec: BrokerSpec, pod: Mapping[str, Any]) -> int | None:
    """The group a pod belongs to, including groups beyond spec.groups (being drained)."""
    label = str((pod["metadata"].get("labels") or {}).get(manifests.LABEL_GROUP, ""))
    prefix = f"{spec.name}-g"
    suffix = label[len(prefix) :] if label.startswith(prefix) else ""
    return int(suffix) if suffix.isdigit() else None


def _pod_facts(spec: BrokerSpec, pod: Mapping[str, Any], ha: HaStatus | None = None) -> status.PodFacts | None:
    meta = pod["metadata"]
    group = _group_index(spec, pod)
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
        ha_lag_bytes=None if ha is None or ha.is_master or ha.lag_bytes < 0 else ha.lag_bytes,
        store_end=None if ha is None or ha.commitlog_max_offset < 0 else ha.commitlog_max_offset,
    )


def _pod_security_level(namespace: str, logger: Any) -> str:
    """The namespace's enforced Pod Security level; "" when unknown. Only a status hint: a
    namespace that cannot be read must not stop the reconcile."""
    try:
        return kube.namespace_labels(namespace).get(POD_SECURITY_ENFORCE, "")
    except kube.ApiError as error:
        logger.warning(f"cannot read namespace {namespace} for its Pod Security level: {error}")
        return ""


async def _ha_of(addresses: Mapping[str, str]) -> dict[str, HaStatus | None]:
    """Pod name -> its broker's replication state; None for a broker that does not answer."""
    if not addresses:
        return {}
    # ha_status goes straight to each broker; the Admin's nameserver list is never consulted.
    async with Admin(list(addresses.values())) as admin:

        async def one(address: str) -> HaStatus | None:
            try:
                return await asyncio.wait_for(admin.ha_status(address), limits.ADMIN_TIMEOUT_S)
            except (MQClientError, OSError, TimeoutError):
                return None

        answers = await asyncio.gather(*(one(address) for address in addresses.values()))
    return dict(zip(addresses, answers, strict=True))


def _observe_brokers(pods: Sequence[Mapping[str, Any]], logger: Any) -> dict[str, HaStatus | None]:
    """Ask every ready broker pod for its replication state (lag, CommitLog end, role)."""
    addresses = {}
    for pod in pods:
        conditions = (pod.get("status") or {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        address = broker_address(pod)
        if ready and address:
            addresses[str(pod["metadata"]["name"])] = address
    try:
        return asyncio.run(_ha_of(addresses))
    except (MQClientError, OSError) as error:
        logger.warning(f"cannot observe brokers: {error!r}")
        return {}


def _cluster_facts(
    spec: BrokerSpec,
    storage_nodes: Mapping[str, str],
    paused: bool,
    logger: Any,
    masters: Mapping[int, int],
    previous_groups: Any,
) -> tuple[status.ClusterFacts, list[dict[str, Any]], dict[str, HaStatus | None]]:
    """Observed facts, plus the raw pods and each ready broker's replication state."""
    stateful_sets = {
        s["metadata"]["name"]: s for s in kube.cluster_stateful_sets(spec.namespace, spec.name, manifests.LABEL_CLUSTER)
    }
    name_server = stateful_sets.get(manifests.name_server_name(spec))
    groups = {
        g: _stateful_set_facts(stateful_sets[manifests.group_name(spec, g)])
        for g in range(spec.groups)
        if manifests.group_name(spec, g) in stateful_sets
    }
    raw_pods = [
        pod
        for pod in kube.cluster_pods(spec.namespace, spec.name, manifests.LABEL_CLUSTER)
        if _group_index(spec, pod) is not None
    ]
    ha = _observe_brokers(raw_pods, logger)
    pods = [
        pod_facts
        for pod in raw_pods
        if (pod_facts := _pod_facts(spec, pod, ha.get(str(pod["metadata"]["name"])))) is not None
        and pod_facts.group < spec.groups
    ]
    previous_since = {
        str(detail.get("name")): str(detail["masterUnreadySince"])
        for detail in (previous_groups if isinstance(previous_groups, list) else [])
        if isinstance(detail, Mapping) and detail.get("masterUnreadySince")
    }
    previous_restart = {
        str(detail.get("name")): str(detail["masterRestartedAt"])
        for detail in (previous_groups if isinstance(previous_groups, list) else [])
        if isinstance(detail, Mapping) and detail.get("masterRestartedAt")
    }
    unready_since, restarted_at = {}, {}
    for group in range(spec.groups):
        master = next((p for p in pods if p.group == group and p.ordinal == masters.get(group, 0)), None)
        if group in groups and (master is None or not master.ready):
            name = manifests.group_name(spec, group)
            unready_since[group] = previous_since.get(name, _now())
            if name in previous_restart:
                restarted_at[group] = previous_restart[name]
    host_path = spec.storage.type == "HostPath"
    expected_pods = [manifests.pod_name(spec, g, n) for g in range(spec.groups) for n in range(spec.replicas_per_group)]
    enforce = _pod_security_level(spec.namespace, logger) if host_path else ""
    cluster = status.ClusterFacts(
        name_server=_stateful_set_facts(name_server) if name_server else None,
        groups=groups,
        pods=pods,
        masters=dict(masters),
        master_unready_since=unready_since,
        master_restarted_at=restarted_at,
        surplus_groups=[
            g for g in range(spec.groups, limits.GROUPS_MAX) if manifests.group_name(spec, g) in stateful_sets
        ],
        volumes_bound=not host_path or all(pod in storage_nodes for pod in expected_pods),
        pod_security_forbids_host_path=enforce in ("baseline", "restricted"),
        paused=paused,
    )
    return cluster, raw_pods, ha


# ---------------------------------------------------------------- Broker: roll, failover, drain


def _promote(
    spec: BrokerSpec, group: int, step: rollout.Step, raw_pods: Sequence[Mapping[str, Any]], logger: Any
) -> bool:
    """PROMOTE_TO_MASTER on the chosen slave; True when the broker accepted."""
    pod = next((p for p in raw_pods if p["metadata"]["name"] == step.pod), None)
    address = broker_address(pod) if pod is not None else ""
    if not address:
        logger.warning(f"cannot promote {step.pod}: no pod address")
        return False
    role = "SYNC_MASTER" if spec.replication_mode == "Sync" else "ASYNC_MASTER"

    async def promote() -> None:
        async with Admin([address]) as admin:
            await admin.promote(address, role=role)

    try:
        asyncio.run(asyncio.wait_for(promote(), limits.ADMIN_TIMEOUT_S))
    except MQBrokerError as error:
        logger.warning(f"promotion of {step.pod} refused by the broker: {error.remark}")
        return False
    except (MQClientError, OSError, TimeoutError) as error:
        logger.warning(f"promotion of {step.pod} failed: {error!r}")
        return False
    logger.info(f"promoted {step.pod} to master of {manifests.group_name(spec, group)}: {step.reason}")
    return True


def _fail_over(
    spec: BrokerSpec,
    facts: status.ClusterFacts,
    raw_pods: Sequence[Mapping[str, Any]],
    requested: str,
    patch: kopf.Patch,
    logger: Any,
) -> dict[int, int]:
    """Promote where rollout.plan_failover says so; the groups' master ordinals afterwards."""
    masters = dict(facts.masters)
    for group in range(spec.groups):
        since = facts.master_unready_since.get(group)
        restarted = facts.master_restarted_at.get(group)
        mine = requested if requested.startswith(manifests.group_name(spec, group) + "-") else ""
        step = rollout.plan_failover(
            spec,
            facts,
            group,
            _seconds_since(since) if since else None,
            mine,
            _seconds_since(restarted) if restarted else None,
        )
        if step.action == rollout.WAIT and (mine or spec.failover == "Automatic"):
            logger.info(f"failover of {manifests.group_name(spec, group)}: {step.reason}")
        if step.action != rollout.PROMOTE:
            if mine and step.action == rollout.NOTHING:
                patch.setdefault("metadata", {}).setdefault("annotations", {})[ANNOTATION_PROMOTE] = None
            continue
        if _promote(spec, group, step, raw_pods, logger):
            metrics.PROMOTIONS.labels(spec.namespace, spec.name, "annotation" if mine else "automatic").inc()
            masters[group] = step.ordinal
            kube.apply(manifests.group_config_map(spec, group, step.ordinal))
            if mine:
                patch.setdefault("metadata", {}).setdefault("annotations", {})[ANNOTATION_PROMOTE] = None
    return masters


def _roll(
    spec: BrokerSpec, facts: status.ClusterFacts, raw_pods: Sequence[dict[str, Any]], manual: bool, logger: Any
) -> tuple[list[str], set[int]]:
    """One ordered-roll step per group (rollout.plan_roll): what each group waits for, and the
    groups whose master it restarted.

    The Broker's manual-rolling-update annotation is handed down to every current pod (as
    Strimzi does): a pod restarted since comes back without it, so each is restarted once."""
    notes = []
    masters_restarted = set()
    if manual:
        for pod in raw_pods:
            name = str(pod["metadata"]["name"])
            changes = {"metadata": {"annotations": {ANNOTATION_MANUAL_ROLL: "true"}}}
            if kube.patch("v1", "Pod", spec.namespace, name, changes) is not None:
                pod.setdefault("metadata", {}).setdefault("annotations", {})[ANNOTATION_MANUAL_ROLL] = "true"
    for group in range(spec.groups):
        forced = {
            str(p["metadata"]["name"])
            for p in raw_pods
            if _group_index(spec, p) == group
            and (p["metadata"].get("annotations") or {}).get(ANNOTATION_MANUAL_ROLL) == "true"
        }
        step = rollout.plan_roll(spec, facts, group, forced)
        if step.action == rollout.DELETE_POD:
            kube.delete("v1", "Pod", spec.namespace, step.pod)
            metrics.ROLL_RESTARTS.labels(spec.namespace, spec.name).inc()
            logger.info(f"rolling {manifests.group_name(spec, group)}: deleted {step.pod}: {step.reason}")
            notes.append(f"restarting {step.pod}")
            if step.ordinal == facts.masters.get(group, 0):
                masters_restarted.add(group)
        elif step.action == rollout.WAIT:
            notes.append(step.reason)
    return notes, masters_restarted


def _release_volumes(volumes: Sequence[Mapping[str, Any]], image: str, reclaim: str, logger: Any) -> None:
    """reclaimPolicy Delete: a cleanup Job per directory (on its node), then the PV object."""
    for volume in volumes:
        name = volume["metadata"]["name"]
        if reclaim == "Delete":
            if (volume["metadata"].get("annotations") or {}).get(manifests.ANNOTATION_STORAGE_NODE):
                kube.apply(manifests.store_cleanup_job(volume, image))
            kube.delete("v1", "PersistentVolume", None, name)
            logger.info(f"deleted PersistentVolume {name} and started its directory cleanup (reclaimPolicy Delete)")
        else:
            logger.info(f"kept PersistentVolume {name} and its directory (reclaimPolicy Retain)")


def _drain(
    spec: BrokerSpec,
    facts: status.ClusterFacts,
    body: Mapping[str, Any],
    raw_pods: Sequence[Mapping[str, Any]],
    ha: Mapping[str, HaStatus | None],
    logger: Any,
) -> list[str]:
    """Groups beyond spec.groups: wipe their write permission, delete them once drained."""
    skip = (body["metadata"].get("annotations") or {}).get(ANNOTATION_SKIP_DRAIN) == "true"
    notes = []
    for group in facts.surplus_groups:
        name = manifests.group_name(spec, group)
        masters = [
            broker_address(p)
            for p in raw_pods
            if _group_index(spec, p) == group
            and (state := ha.get(p["metadata"]["name"])) is not None
            and state.is_master
        ]
        lag = None
        if masters:

            async def drain_facts(address: str = masters[0], broker_name: str = name) -> int:
                async with Admin(manifests.name_server_addresses(spec)) as admin:
                    await admin.set_write_permission(broker_name, writable=False)
                    return await admin.broker_consumer_lag(address)

            try:
                lag = asyncio.run(asyncio.wait_for(drain_facts(), limits.ADMIN_TIMEOUT_S))
            except (MQClientError, OSError, TimeoutError) as error:
                logger.warning(f"draining {name}: {error!r}")
        step = rollout.plan_drain(name, lag, skip)
        if step.action != rollout.DELETE_GROUP:
            notes.append(step.reason)
            continue
        for api_version, kind, child in manifests.group_children(spec, group):
            kube.delete(api_version, kind, spec.namespace, child)
        volumes = [
            v
            for v in kube.cluster_volumes(spec.uid, manifests.LABEL_CLUSTER_UID)
            if (v["metadata"].get("labels") or {}).get(manifests.LABEL_GROUP) == name
        ]
        _release_volumes(volumes, spec.image, spec.storage.reclaim_policy, logger)
        logger.info(f"scale-down: {step.reason}; deleted group {name}")
    return notes


# ---------------------------------------------------------------- Broker: reconcile


RETRY_ERRORS = (kopf.TemporaryError, kopf.PermanentError)
"""Handler outcomes that are a state of the world (not ready yet, invalid spec), not a fault."""


def reconcile_broker(body: Mapping[str, Any], patch: kopf.Patch, logger: Any, *, raise_invalid: bool = True) -> None:
    """Parse, apply every child, observe, take one roll/failover/drain step, write the status."""
    meta = body["metadata"]
    try:
        with metrics.reconciling("Broker", RETRY_ERRORS):
            _reconcile_broker(body, patch, logger, raise_invalid)
    finally:
        metrics.set_ready("Broker", str(meta.get("namespace")), str(meta["name"]), patch.get("status"))


def _reconcile_broker(body: Mapping[str, Any], patch: kopf.Patch, logger: Any, raise_invalid: bool) -> None:
    try:
        spec = broker_spec_from(body, allowed_host_roots())
    except InvalidSpecError as error:
        permanent = _invalid(patch, body, error)
        if raise_invalid:
            raise permanent from error
        return
    annotations = body["metadata"].get("annotations") or {}
    paused = annotations.get(ANNOTATION_PAUSE) == "true"
    previous_groups = (body.get("status") or {}).get("groups")
    masters = rollout.master_ordinals(spec, previous_groups)
    storage_nodes = _storage_nodes(spec)
    if not paused:
        actions: dict[str, int] = {}
        for child in manifests.desired_state(spec, storage_nodes, masters):
            action, _ = kube.apply(child)
            actions[action] = actions.get(action, 0) + 1
        logger.info(f"Broker {spec.namespace}/{spec.name}: children {actions}")
    facts, raw_pods, ha = _cluster_facts(spec, storage_nodes, paused, logger, masters, previous_groups)
    if not paused:
        masters = _fail_over(spec, facts, raw_pods, str(annotations.get(ANNOTATION_PROMOTE, "")), patch, logger)
        facts = dataclasses.replace(facts, masters=masters)
        manual_roll = annotations.get(ANNOTATION_MANUAL_ROLL) == "true"
        roll_steps, masters_restarted = _roll(spec, facts, raw_pods, manual_roll, logger)
        if masters_restarted:
            now = _now()
            facts = dataclasses.replace(
                facts,
                master_restarted_at={**facts.master_restarted_at, **dict.fromkeys(masters_restarted, now)},
                master_unready_since={**dict.fromkeys(masters_restarted, now), **facts.master_unready_since},
            )
        if manual_roll:
            patch.setdefault("metadata", {}).setdefault("annotations", {})[ANNOTATION_MANUAL_ROLL] = None
        draining = _drain(spec, facts, body, raw_pods, ha, logger)
        facts = dataclasses.replace(facts, roll_steps=roll_steps, draining=draining)
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


@kopf.timer(
    GROUP,
    VERSION,
    "brokers",
    interval=limits.BROKER_RECONCILE_INTERVAL_S,
    initial_delay=limits.BROKER_RECONCILE_INTERVAL_S,
)
def broker_drift(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_broker(body, patch, logger, raise_invalid=False)


@kopf.on.delete(GROUP, VERSION, "brokers")
def broker_deleted(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    """Namespaced children go with their ownerReferences; hostPath PVs per the reclaim policy."""
    metrics.forget("Broker", str(body["metadata"].get("namespace")), str(body["metadata"]["name"]))
    uid = str(body["metadata"].get("uid") or "")
    spec = body.get("spec") or {}
    reclaim = ((spec.get("storage") or {}).get("hostPath") or {}).get("reclaimPolicy", "Retain")
    if not uid or reclaim != "Delete":
        return
    _release_volumes(
        kube.cluster_volumes(uid, manifests.LABEL_CLUSTER_UID), str(spec.get("image", "")), reclaim, logger
    )


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
    if cluster_body is None or cluster_body["metadata"].get("deletionTimestamp"):
        message = f"Broker {namespace}/{spec.cluster} does not exist or is being deleted"
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


@dataclasses.dataclass
class TopicOutcome:
    """What one reconcile of a Topic did, per broker group (brokerName)."""

    steps: dict[str, topics.TopicStep] = dataclasses.field(default_factory=dict)
    missing: list[str] = dataclasses.field(default_factory=list)
    """Placement groups not registered with the NameServers (not up yet)."""


async def _apply_topic(addresses: Sequence[str], cluster: BrokerSpec, spec: TopicSpec) -> TopicOutcome:
    """Bring the topic on each placement group's master to the spec (topics.plan_topic)."""
    outcome = TopicOutcome()
    async with Admin(list(addresses)) as admin:
        info = await admin.cluster_info()
        registered = set(info.cluster_addr_table.get(cluster.cluster_name) or ())
        wanted = [manifests.group_name(cluster, g) for g in (spec.groups or range(cluster.groups))]
        for broker_name in wanted:
            address = master_address(info.broker_addr_table[broker_name]) if broker_name in registered else None
            if address is None:
                outcome.missing.append(broker_name)
                continue
            config = (await admin.broker_topic_configs(address)).get(spec.topic_name)
            live = (
                None
                if config is None
                else topics.LiveTopic(config.read_queue_nums, config.write_queue_nums, int(config.perm), config.order)
            )
            lag = None
            if topics.needs_removed_queue_lag(spec, live):
                lag = await admin.broker_consumer_lag(address, spec.topic_name, spec.read_queue_nums)
            step = topics.plan_topic(spec, live, lag)
            if step.action in (topics.CREATE, topics.UPDATE):
                await admin.create_topic(
                    spec.topic_name,
                    broker_addr=address,
                    read_queue_nums=step.read_queue_nums,
                    write_queue_nums=step.write_queue_nums,
                    perm=step.perm,
                    order=step.order,
                )
            outcome.steps[broker_name] = step
    return outcome


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
    """Apply the Topic to its cluster's groups and report; retried while something is pending."""
    meta = body["metadata"]
    try:
        with metrics.reconciling("Topic", RETRY_ERRORS):
            _reconcile_topic(body, patch, logger)
    finally:
        metrics.set_ready("Topic", str(meta.get("namespace")), str(meta["name"]), patch.get("status"))


def _reconcile_topic(body: Mapping[str, Any], patch: kopf.Patch, logger: Any) -> None:
    spec, cluster = _topic_context(body, patch)
    addresses = manifests.name_server_addresses(cluster)
    try:
        outcome: TopicOutcome = _run_admin(_apply_topic(addresses, cluster, spec), f"apply {spec.topic_name}")
    except NotReadyError as error:
        _set_status(patch, _topic_status(body, False, "ClusterUnreachable", str(error)))
        raise kopf.TemporaryError(str(error), delay=error.delay_s) from error
    for broker_name, step in outcome.steps.items():
        if step.action in (topics.CREATE, topics.UPDATE) or step.shrinking:
            logger.info(f"topic {spec.topic_name} {step.reason} on {broker_name}")
    refused = {name: step for name, step in outcome.steps.items() if step.action == topics.REFUSED}
    holders = sorted(outcome.steps)
    new_status = {}
    if refused:
        name, step = next(iter(sorted(refused.items())))
        new_status = _topic_status(body, False, "QueueShrinkRefused", f"{name}: {step.reason}")
    elif outcome.missing:
        message = f"groups not serving yet: {', '.join(outcome.missing)}"
        new_status = _topic_status(body, False, "GroupNotServing", message)
    else:
        actions = {step.action for step in outcome.steps.values()}
        reason = "Created" if actions == {topics.CREATE} else "Updated" if actions - {topics.UNCHANGED} else "InSync"
        if not (body.get("status") or {}).get("conditions") and topics.CREATE not in actions:
            reason = "Adopted"
        message = f"topic {spec.topic_name} is on {', '.join(holders)} of cluster {cluster.name}"
        shrinking = sorted(name for name, step in outcome.steps.items() if step.shrinking)
        if shrinking:
            reason = "ShrinkingQueues"
            message += f"; read queues shrink on {', '.join(shrinking)} once consumers have emptied them"
        new_status = _topic_status(body, True, reason, message)
    new_status["brokers"] = holders
    _set_status(patch, new_status)
    if outcome.missing:
        raise kopf.TemporaryError(f"topic {spec.topic_name}: groups not serving yet", delay=limits.RETRY_DELAY_S)
    if any(step.shrinking for step in outcome.steps.values()):
        raise kopf.TemporaryError(f"topic {spec.topic_name}: shrinking", delay=limits.TOPIC_SHRINK_RECHECK_S)


@kopf.on.create(GROUP, VERSION, "topics")
def topic_created(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_topic(body, patch, logger)


@kopf.on.update(GROUP, VERSION, "topics")
def topic_updated(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_topic(body, patch, logger)


@kopf.on.resume(GROUP, VERSION, "topics")
def topic_resumed(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_topic(body, patch, logger)


@kopf.timer(GROUP, VERSION, "topics", interval=limits.RECONCILE_INTERVAL_S, initial_delay=limits.RECONCILE_INTERVAL_S)
def topic_drift(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    """Drift correction: a topic changed or deleted behind the operator's back is put back."""
    try:
        reconcile_topic(body, patch, logger)
    except (kopf.PermanentError, kopf.TemporaryError) as error:
        logger.info(f"topic drift check: {error}")


@kopf.on.delete(GROUP, VERSION, "topics")
def topic_deleted(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    """Delete the topic from the cluster if this Topic manages it; a gone cluster needs nothing."""
    metrics.forget("Topic", str(body["metadata"].get("namespace")), str(body["metadata"]["name"]))
    try:
        spec, cluster = _topic_context(body, patch)
    except (kopf.PermanentError, kopf.TemporaryError) as error:
        logger.info(f"Topic released without deleting anything on a cluster: {error}")
        return
    try:
        _run_admin(_delete_topic(manifests.name_server_addresses(cluster), cluster.cluster_name, spec.topic_name), "")
    except NotReadyError as error:
        raise kopf.TemporaryError(str(error), delay=error.delay_s) from error
