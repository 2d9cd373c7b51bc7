"""kopf handlers for Broker and Topic: the operator's one boundary with kopf.

Thin by design: each handler gathers facts through kube.py and the admin protocol, calls a pure
decision, and carries out what it returns. Parsing is spec.py (InvalidSpecError -> an
InvalidSpec condition and kopf.PermanentError), children manifests.py, observation observe.py
and placement.py, the decisions rollout.py (roll), failover.py and drain.py (one steps.Step per
group), topics.py for Topics, and the status status.py, written with `observedGeneration`.
Something not there yet (no eligible node for a hostPath volume, a cluster that does not answer)
writes its condition and raises kopf.TemporaryError so kopf retries.

Brokers: on.create / on.update / on.resume and a timer (drift: a deleted child is recreated, the
status follows pods becoming ready). Children carry ownerReferences, so the garbage collector
removes them with the Broker; the cluster-scoped hostPath PVs cannot be owned and are deleted by
on.delete when storage.hostPath.reclaimPolicy is Delete (their directories stay on the nodes).

Topics: the oldest Topic naming a (cluster, topicName) manages it (status.topic_owner); the
others report ResourceConflict. The manager creates or adopts the topic through the admin
protocol (UPDATE_AND_CREATE_TOPIC is an upsert) and deletes it behind a finalizer.

Handlers that talk to brokers are async, as kopf's own are: the admin conversations run on kopf's
event loop, and the blocking kubernetes client (kube.py) runs in `asyncio.to_thread`, never on the
loop. broker_deleted only calls the API and stays sync (kopf runs it in its thread pool).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import hashlib
import logging
import tempfile
from collections.abc import AsyncIterator, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import kopf

from shoal.client import Admin, ClientSettings, ClientTlsSettings, Credentials, HaStatus
from shoal.client.errors import MQBrokerError, MQClientError
from shoal.client.route import master_address
from shoal.operator import (
    drain,
    failover,
    kube,
    limits,
    manifests,
    metrics,
    observe,
    placement,
    reclaim,
    rollout,
    secrets,
    status,
    steps,
    topics,
)
from shoal.operator.errors import InvalidSpecError, NotReadyError
from shoal.operator.settings import admin_credentials, allowed_host_roots, network_policy, watched_namespaces
from shoal.operator.spec import BrokerSpec, TopicSpec, broker_spec_from, topic_spec_from

__all__ = ["allowed_host_roots", "broker_address", "reconcile_broker", "reconcile_topic", "watched_namespaces"]

GROUP, VERSION = "shoal.io", "v1alpha1"
ANNOTATION_PAUSE = "shoal.io/pause-reconciliation"
ANNOTATION_MANUAL_ROLL = "shoal.io/manual-rolling-update"
"""On a Broker: "true" restarts every broker pod in the ordered way; on a pod: that pod only."""
ANNOTATION_PROMOTE = "shoal.io/promote"
"""On a Broker: the name of a slave pod to promote to master of its group (manual failover)."""
ANNOTATION_SKIP_DRAIN = "shoal.io/skip-drain-check"
"""On a Broker: "true" deletes groups removed by a scale-down without waiting for consumers."""
POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"

T = TypeVar("T")


def _clock() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _now() -> str:
    return status.timestamp(_clock())


def _client_tls(cluster: BrokerSpec | None) -> ClientTlsSettings:
    """TLS for a cluster with spec.tls: the server's chain checked against the ca.crt of its TLS
    Secret (read now, written once per CA under the temporary directory); plain otherwise."""
    if cluster is None or cluster.tls is None:
        return ClientTlsSettings()
    ca_pem = _mounted_secrets(cluster).ca_pem
    directory = Path(tempfile.gettempdir()) / "shoal-operator-ca"
    directory.mkdir(mode=0o700, exist_ok=True)
    path = directory / f"{hashlib.sha256(ca_pem).hexdigest()[:16]}.crt"
    if not path.exists():
        path.write_bytes(ca_pem)
    return ClientTlsSettings(enable=True, test_mode=False, auth_server=True, trust_cert_path=str(path))


def _admin_settings(cluster: BrokerSpec | None) -> ClientSettings:
    """Signing with the operator's ACL account when the chart gives it one (settings.admin_credentials:
    read on every use, so a rotated Secret applies at once), over TLS when the cluster has spec.tls.
    Blocking: reads files and the cluster's Secrets."""
    keys = admin_credentials()
    credentials = Credentials(*keys) if keys is not None else None
    return ClientSettings(credentials=credentials, tls=_client_tls(cluster))


@contextlib.asynccontextmanager
async def admin(addresses: Sequence[str], cluster: BrokerSpec | None = None) -> AsyncIterator[Admin]:
    """An admin client for `cluster`, open for the block (its settings read in a worker thread)."""
    client_settings = await asyncio.to_thread(_admin_settings, cluster)
    async with Admin(list(addresses), client_settings=client_settings) as client:
        yield client


def broker_address(pod: Mapping[str, Any]) -> str:
    """Where the operator reaches a broker pod's remoting port ("" before it has an IP)."""
    ip = str((pod.get("status") or {}).get("podIP") or "")
    return f"{ip}:{manifests.BROKER_PORT}" if ip else ""


def name_server_addresses(spec: BrokerSpec) -> list[str]:
    """Where the operator reaches the NameServers: their pods' IPs from the API (it may run outside the
    cluster, where `*.svc` names do not resolve), else the headless-Service names brokers use.
    Blocking (kube.py): call it through asyncio.to_thread from a coroutine."""
    if spec.name_server.replicas == 0:
        return manifests.name_server_addresses(spec)
    pods = kube.cluster_pods(spec.namespace, spec.name, manifests.LABEL_CLUSTER)
    addresses = sorted(
        f"{ip}:{manifests.NAME_SERVER_PORT}"
        for pod in pods
        if (pod["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == "nameserver"
        and (ip := (pod.get("status") or {}).get("podIP"))
    )
    return addresses or manifests.name_server_addresses(spec)


def _generation(body: Mapping[str, Any]) -> int:
    return int(body["metadata"].get("generation") or 0)


def _previous(body: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    return list((body.get("status") or {}).get("conditions") or [])


def _set_status(patch: kopf.Patch, new_status: Mapping[str, Any]) -> None:
    patch.setdefault("status", {}).update(new_status)


def _clear_annotation(patch: kopf.Patch, annotation: str) -> None:
    patch.setdefault("metadata", {}).setdefault("annotations", {})[annotation] = None


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
    """Pod name -> node of its hostPath volume (placement.storage_nodes)."""
    if spec.storage.type != "HostPath":
        return {}
    volumes = kube.cluster_volumes(spec.uid, manifests.LABEL_CLUSTER_UID)
    return placement.storage_nodes(spec, volumes, kube.nodes(spec.storage.host_node_selector))


def _pod_security_level(namespace: str, logger: Any) -> str:
    """The namespace's enforced Pod Security level; "" when unknown. Only a status hint: a
    namespace that cannot be read must not stop the reconcile."""
    try:
        return kube.namespace_labels(namespace).get(POD_SECURITY_ENFORCE, "")
    except kube.ApiError as error:
        logger.warning(f"cannot read namespace {namespace} for its Pod Security level: {error}")
        return ""


async def _ha_of(addresses: Mapping[str, str], cluster: BrokerSpec | None = None) -> dict[str, HaStatus | None]:
    """Pod name -> its broker's replication state; None for a broker that does not answer."""
    if not addresses:
        return {}
    # ha_status goes straight to each broker; the Admin's nameserver list is never consulted.
    async with admin(list(addresses.values()), cluster) as client:

        async def one(address: str) -> HaStatus | None:
            try:
                return await asyncio.wait_for(client.ha_status(address), limits.ADMIN_TIMEOUT_S)
            except (MQClientError, OSError, TimeoutError):
                return None

        answers = await asyncio.gather(*(one(address) for address in addresses.values()))
    return dict(zip(addresses, answers, strict=True))


async def _observe_brokers(
    pods: Sequence[Mapping[str, Any]], logger: Any, cluster: BrokerSpec | None = None
) -> dict[str, HaStatus | None]:
    """Ask every ready broker pod for its replication state (lag, CommitLog end, role)."""
    addresses = {
        str(pod["metadata"]["name"]): address
        for pod in pods
        if observe.pod_ready(pod) and (address := broker_address(pod))
    }
    try:
        return await _ha_of(addresses, cluster)
    except (MQClientError, OSError, NotReadyError) as error:
        logger.warning(f"cannot observe brokers: {error!r}")
        return {}


async def _cluster_facts(
    spec: BrokerSpec, observed: observe.Observed, logger: Any
) -> tuple[status.ClusterFacts, observe.Observed]:
    """Read the cluster's StatefulSets, pods, brokers and namespace into `observed`; its facts."""
    namespace, name, label = spec.namespace, spec.name, manifests.LABEL_CLUSTER
    stateful_sets = await asyncio.to_thread(kube.cluster_stateful_sets, namespace, name, label)
    listed = await asyncio.to_thread(kube.cluster_pods, namespace, name, label)
    pods = [pod for pod in listed if observe.group_index(spec, pod) is not None]
    ha = await _observe_brokers(pods, logger, spec)
    level = await asyncio.to_thread(_pod_security_level, namespace, logger) if spec.storage.type == "HostPath" else ""
    observed = dataclasses.replace(
        observed,
        stateful_sets={s["metadata"]["name"]: s for s in stateful_sets},
        pods=pods,
        ha=ha,
        pod_security_level=level,
    )
    return observe.cluster_facts(spec, observed), observed


# ---------------------------------------------------------------- Broker: roll, failover, drain


async def _promote(spec: BrokerSpec, promotion: failover.Promotion, address: str, logger: Any) -> bool:
    """PROMOTE_TO_MASTER on the chosen slave; True when the broker accepted."""
    if not address:
        logger.warning(f"cannot promote {promotion.pod}: no pod address")
        return False
    role = "SYNC_MASTER" if spec.replication_mode == "Sync" else "ASYNC_MASTER"

    async def promote() -> None:
        async with admin([address], spec) as client:
            await client.promote(address, role=role)

    try:
        await asyncio.wait_for(promote(), limits.ADMIN_TIMEOUT_S)
    except MQBrokerError as error:
        if not await _reports_master(spec, address):
            logger.warning(f"promotion of {promotion.pod} refused by the broker: {error.remark}")
            return False
        logger.info(f"{promotion.pod} is master already (an earlier promotion went through): {error.remark}")
    except (MQClientError, OSError, TimeoutError, NotReadyError) as error:
        # The broker answers once it has re-registered with every NameServer, and one of them may be
        # down (on the lost node, say): the answer can come too late although the promotion is done.
        if not await _reports_master(spec, address):
            logger.warning(f"promotion of {promotion.pod} failed: {error!r}")
            return False
        logger.info(f"{promotion.pod} reports the master role although the promotion's answer was lost ({error!r})")
    logger.info(
        f"promoted {promotion.pod} to master of {manifests.group_name(spec, promotion.group)}: {promotion.reason}"
    )
    return True


async def _reports_master(spec: BrokerSpec, address: str) -> bool:
    """Whether the broker at `address` says it is a master now (False when it does not answer)."""

    async def ask() -> bool:
        async with admin([address], spec) as client:
            return (await client.ha_status(address)).is_master

    try:
        return await asyncio.wait_for(ask(), limits.ADMIN_TIMEOUT_S)
    except (MQClientError, OSError, TimeoutError, NotReadyError):
        return False


async def _fail_over(
    spec: BrokerSpec,
    facts: status.ClusterFacts,
    pods: Sequence[Mapping[str, Any]],
    requested: str,
    patch: kopf.Patch,
    logger: Any,
) -> dict[int, int]:
    """Carry out failover.decide_failover; the groups' master ordinals afterwards."""
    plan = failover.decide_failover(failover.FailoverFacts(spec, facts, _clock(), requested))
    for waiting in plan.waiting:
        logger.info(waiting)
    if plan.request_done:
        _clear_annotation(patch, ANNOTATION_PROMOTE)
    masters = dict(facts.masters)
    for promotion in plan.promotions:
        pod = next((p for p in pods if p["metadata"]["name"] == promotion.pod), None)
        if not await _promote(spec, promotion, broker_address(pod) if pod is not None else "", logger):
            continue
        trigger = "annotation" if promotion.requested else "automatic"
        metrics.PROMOTIONS.labels(spec.namespace, spec.name, trigger).inc()
        masters[promotion.group] = promotion.ordinal
        await asyncio.to_thread(kube.apply, manifests.group_config_map(spec, promotion.group, promotion.ordinal))
        if promotion.requested:
            _clear_annotation(patch, ANNOTATION_PROMOTE)
    return masters


def _roll(
    spec: BrokerSpec, facts: status.ClusterFacts, pods: Sequence[Mapping[str, Any]], manual: bool, logger: Any
) -> rollout.RollPlan:
    """Carry out rollout.decide_roll: delete at most one pod per group.

    The Broker's manual-rolling-update annotation is handed down to every current pod (as
    Strimzi does): a pod restarted since comes back without it, so each is restarted once."""
    forced = observe.annotated_pods(spec, pods, ANNOTATION_MANUAL_ROLL)
    for pod in pods if manual else ():
        name, group = str(pod["metadata"]["name"]), observe.group_index(spec, pod)
        changes = {"metadata": {"annotations": {ANNOTATION_MANUAL_ROLL: "true"}}}
        if kube.patch("v1", "Pod", spec.namespace, name, changes) is not None and group is not None:
            forced.setdefault(group, set()).add(name)
    plan = rollout.decide_roll(rollout.RollFacts(spec, facts, forced))
    for restart in plan.restarts:
        kube.delete("v1", "Pod", spec.namespace, restart.pod)
        metrics.ROLL_RESTARTS.labels(spec.namespace, spec.name).inc()
        logger.info(f"rolling {manifests.group_name(spec, restart.group)}: deleted {restart.pod}: {restart.reason}")
    return plan


def _release_volumes(volumes: Sequence[Mapping[str, Any]], image: str, reclaim: str, logger: Any) -> None:
    """reclaimPolicy Delete: a cleanup Job per directory (on its node), then the claim and the PV
    objects (a PV whose deletion has begun is left alone: released already)."""
    for volume in volumes:
        name = volume["metadata"]["name"]
        if reclaim != "Delete":
            logger.info(f"kept PersistentVolume {name} and its directory (reclaimPolicy Retain)")
            continue
        if volume["metadata"].get("deletionTimestamp"):
            continue
        if (volume["metadata"].get("annotations") or {}).get(manifests.ANNOTATION_STORAGE_NODE):
            kube.apply(manifests.store_cleanup_job(volume, image))
        claim = (volume.get("spec") or {}).get("claimRef") or {}
        claimed = ""
        if claim.get("namespace") and claim.get("name"):
            kube.delete("v1", "PersistentVolumeClaim", str(claim["namespace"]), str(claim["name"]))
            claimed = f" and its claim {claim['namespace']}/{claim['name']}"
        kube.delete("v1", "PersistentVolume", None, name)
        logger.info(
            f"deleted PersistentVolume {name}{claimed} and started its directory cleanup (reclaimPolicy Delete)"
        )


async def _consumer_lag(spec: BrokerSpec, target: drain.DrainTarget, logger: Any) -> int | None:
    """Wipe the group's write permission on the NameServers and ask its master what is left to
    consume; None when it has no master or does not answer."""
    if not target.master_address:
        return None

    async def ask() -> int:
        async with admin(await asyncio.to_thread(name_server_addresses, spec), spec) as client:
            await client.set_write_permission(target.name, writable=False)
            return await client.broker_consumer_lag(target.master_address)

    try:
        return await asyncio.wait_for(ask(), limits.ADMIN_TIMEOUT_S)
    except (MQClientError, OSError, TimeoutError, NotReadyError) as error:
        logger.warning(f"draining {target.name}: {error!r}")
        return None


async def _drain(
    spec: BrokerSpec, facts: status.ClusterFacts, skip: bool, observed: observe.Observed, logger: Any
) -> list[str]:
    """Groups beyond spec.groups: wipe their write permission, delete them once drained."""
    pod_groups = {
        str(p["metadata"]["name"]): group for p in observed.pods if (group := observe.group_index(spec, p)) is not None
    }
    masters = [pod for pod, ha in observed.ha.items() if ha is not None and ha.is_master]  # in pod order
    addresses = {str(p["metadata"]["name"]): broker_address(p) for p in observed.pods}
    targets = drain.drain_targets(spec, facts.surplus_groups, pod_groups, masters, addresses)
    notes = []
    for target in targets:
        step = drain.plan_drain(drain.DrainFacts(target.name, await _consumer_lag(spec, target, logger), skip))
        if step.action != steps.DELETE_GROUP:
            notes.append(step.reason)
            continue
        for api_version, kind, child in manifests.group_children(spec, target.group):
            await asyncio.to_thread(kube.delete, api_version, kind, spec.namespace, child)
        volumes = (
            "its volumes go once its pods have stopped"
            if spec.storage.reclaim_policy == "Delete"
            else "its volumes and their directories are kept"
        )
        logger.info(
            f"scale-down: {step.reason}; deleted group {target.name}; {volumes} "
            f"(reclaimPolicy {spec.storage.reclaim_policy})"
        )
    return notes


def _release_stopped_groups(spec: BrokerSpec, observed: observe.Observed, logger: Any) -> None:
    """reclaimPolicy Delete: release the volumes of groups beyond spec.groups none of whose pods
    remain (reclaim.py: a directory is removed only under stopped brokers)."""
    if spec.storage.type != "HostPath" or spec.storage.reclaim_policy != "Delete" or not spec.uid:
        return
    kept = {manifests.group_name(spec, group) for group in range(spec.groups)}
    volumes = reclaim.releasable_volumes(
        kube.cluster_volumes(spec.uid, manifests.LABEL_CLUSTER_UID),
        kept_groups=kept,
        groups_with_pods=reclaim.broker_pod_groups(observed.pods),
    )
    _release_volumes(volumes, spec.image, spec.storage.reclaim_policy, logger)


# ---------------------------------------------------------------- Broker: reconcile


RETRY_ERRORS = (kopf.TemporaryError, kopf.PermanentError)
"""Handler outcomes that are a state of the world (not ready yet, invalid spec), not a fault."""


async def reconcile_broker(
    body: Mapping[str, Any], patch: kopf.Patch, logger: Any, *, raise_invalid: bool = True
) -> None:
    """Parse, apply every child, observe, take one roll/failover/drain step, write the status."""
    meta = body["metadata"]
    try:
        with metrics.reconciling("Broker", RETRY_ERRORS):
            await _reconcile_broker(body, patch, logger, raise_invalid)
    finally:
        metrics.set_ready("Broker", str(meta.get("namespace")), str(meta["name"]), patch.get("status"))


def _mounted_secrets(spec: BrokerSpec) -> secrets.MountedSecrets:
    """Read the Broker's ACL and TLS Secrets (and its cert-manager Certificate); NotReadyError
    names what is missing."""
    if spec.acl is None and spec.tls is None:
        return secrets.MountedSecrets()
    certificate = None
    if spec.tls is not None and spec.tls.certificate_name:
        name = spec.tls.certificate_name
        certificate = kube.get(secrets.CERTIFICATE_API_VERSION, "Certificate", spec.namespace, name)
    tls_secret = secrets.tls_secret_name(spec, certificate)
    found = {name: kube.get("v1", "Secret", spec.namespace, name) for name in secrets.secret_names(spec, tls_secret)}
    return secrets.mounted_secrets(spec, tls_secret, found)


def _apply_children(children: Iterable[kube.Object]) -> dict[str, int]:
    """kube.apply each child; how many were created, updated and unchanged."""
    actions: dict[str, int] = {}
    for child in children:
        action, _ = kube.apply(child)
        actions[action] = actions.get(action, 0) + 1
    return actions


async def _reconcile_broker(body: Mapping[str, Any], patch: kopf.Patch, logger: Any, raise_invalid: bool) -> None:
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
    storage_nodes = await asyncio.to_thread(_storage_nodes, spec)
    try:
        mounted = await asyncio.to_thread(_mounted_secrets, spec)
    except NotReadyError as error:
        _set_status(patch, secrets.unavailable_status(_generation(body), str(error), _now(), _previous(body)))
        raise kopf.TemporaryError(str(error), delay=error.delay_s) from error
    if not paused:
        children = manifests.desired_state(
            spec, storage_nodes, masters, mounted.tls_secret, mounted.digest, network_policy()
        )
        actions = await asyncio.to_thread(_apply_children, children)
        logger.info(f"Broker {spec.namespace}/{spec.name}: children {actions}")
    observed = observe.Observed(
        stateful_sets={},
        pods=[],
        now=_now(),
        masters=masters,
        previous_groups=previous_groups,
        storage_nodes=storage_nodes,
        paused=paused,
    )
    facts, observed = await _cluster_facts(spec, observed, logger)
    if not paused:
        requested = str(annotations.get(ANNOTATION_PROMOTE, ""))
        masters = await _fail_over(spec, facts, observed.pods, requested, patch, logger)
        facts = dataclasses.replace(facts, masters=masters)
        manual_roll = annotations.get(ANNOTATION_MANUAL_ROLL) == "true"
        plan = await asyncio.to_thread(_roll, spec, facts, observed.pods, manual_roll, logger)
        facts = rollout.after_roll(facts, plan, _now())
        if manual_roll:
            _clear_annotation(patch, ANNOTATION_MANUAL_ROLL)
        skip_drain = annotations.get(ANNOTATION_SKIP_DRAIN) == "true"
        draining = await _drain(spec, facts, skip_drain, observed, logger)
        facts = dataclasses.replace(facts, draining=draining)
        await asyncio.to_thread(_release_stopped_groups, spec, observed, logger)
    _set_status(patch, status.broker_status(spec, _generation(body), facts, _now(), _previous(body)))
    if not facts.volumes_bound and not paused:
        raise kopf.TemporaryError(
            f"no eligible node for every hostPath volume (node selector {dict(spec.storage.host_node_selector)})",
            delay=limits.RETRY_DELAY_S,
        )


@kopf.on.create(GROUP, VERSION, "brokers")
@kopf.on.update(GROUP, VERSION, "brokers")
@kopf.on.resume(GROUP, VERSION, "brokers")
async def broker_changed(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    """Create, update and resume (operator start) are one reconcile: kopf calls it once per event."""
    await reconcile_broker(body, patch, logger)


@kopf.timer(
    GROUP,
    VERSION,
    "brokers",
    interval=limits.BROKER_RECONCILE_INTERVAL_S,
    initial_delay=limits.BROKER_RECONCILE_INTERVAL_S,
)
async def broker_drift(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    await reconcile_broker(body, patch, logger, raise_invalid=False)


@kopf.on.delete(GROUP, VERSION, "brokers")
def broker_deleted(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    """Namespaced children go with their ownerReferences; hostPath PVs per the reclaim policy."""
    metrics.forget("Broker", str(body["metadata"].get("namespace")), str(body["metadata"]["name"]))
    uid = str(body["metadata"].get("uid") or "")
    spec = body.get("spec") or {}
    policy = ((spec.get("storage") or {}).get("hostPath") or {}).get("reclaimPolicy", "Retain")
    if not uid or policy != "Delete":
        return
    namespace, name = str(body["metadata"].get("namespace")), str(body["metadata"]["name"])
    running = reclaim.broker_pod_groups(kube.cluster_pods(namespace, name, manifests.LABEL_CLUSTER))
    if running:
        # The garbage collector removes the pods only after the Broker is gone, which this handler's
        # finalizer holds back: stop them here, and release the volumes on a retry.
        for group in sorted(running):
            kube.delete("apps/v1", "StatefulSet", namespace, group)
        note = reclaim.waiting_note(running)
        logger.info(note)
        raise kopf.TemporaryError(note, delay=limits.POD_STOP_POLL_S)
    _release_volumes(kube.cluster_volumes(uid, manifests.LABEL_CLUSTER_UID), str(spec.get("image", "")), policy, logger)


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
    """The Topic's spec and its cluster's, once it is the topic's manager; else status + error.
    Blocking (kube.py): call it through asyncio.to_thread from a coroutine."""
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


async def _apply_topic(addresses: Sequence[str], cluster: BrokerSpec, spec: TopicSpec) -> topics.TopicOutcome:
    """Bring the topic on each placement group's master to the spec (topics.plan_topic)."""
    outcome = topics.TopicOutcome()
    async with admin(addresses, cluster) as client:
        info = await client.cluster_info()
        registered = set(info.cluster_addr_table.get(cluster.cluster_name) or ())
        wanted = [manifests.group_name(cluster, g) for g in (spec.groups or range(cluster.groups))]
        for broker_name in wanted:
            address = master_address(info.broker_addr_table[broker_name]) if broker_name in registered else None
            if address is None:
                outcome.missing.append(broker_name)
                continue
            config = (await client.broker_topic_configs(address)).get(spec.topic_name)
            live = (
                None
                if config is None
                else topics.LiveTopic(
                    config.read_queue_nums, config.write_queue_nums, int(config.perm), config.order, config.attributes
                )
            )
            lag = None
            if topics.needs_removed_queue_lag(spec, live):
                lag = await client.broker_consumer_lag(address, spec.topic_name, spec.read_queue_nums)
            step = topics.plan_topic(spec, live, lag)
            if step.action in (topics.CREATE, topics.UPDATE):
                await client.create_topic(
                    spec.topic_name,
                    broker_addr=address,
                    read_queue_nums=step.read_queue_nums,
                    write_queue_nums=step.write_queue_nums,
                    perm=step.perm,
                    order=step.order,
                    attributes=step.attributes or None,
                )
            outcome.steps[broker_name] = step
    return outcome


async def _delete_topic(addresses: Sequence[str], cluster: BrokerSpec, topic_name: str) -> None:
    async with admin(addresses, cluster) as client:
        await client.delete_topic(topic_name, cluster=cluster.cluster_name)


async def _run_admin(work: Coroutine[Any, Any, T], what: str) -> T:
    """Run one admin conversation, bounded; NotReadyError if it fails."""
    try:
        return await asyncio.wait_for(work, limits.ADMIN_TIMEOUT_S)
    except (MQClientError, OSError, TimeoutError) as error:
        raise NotReadyError(f"{what}: cluster not reachable: {error!r}", limits.RETRY_DELAY_S) from error


async def reconcile_topic(body: Mapping[str, Any], patch: kopf.Patch, logger: Any) -> None:
    """Apply the Topic to its cluster's groups and report; retried while something is pending."""
    meta = body["metadata"]
    try:
        with metrics.reconciling("Topic", RETRY_ERRORS):
            await _reconcile_topic(body, patch, logger)
    finally:
        metrics.set_ready("Topic", str(meta.get("namespace")), str(meta["name"]), patch.get("status"))


async def _reconcile_topic(body: Mapping[str, Any], patch: kopf.Patch, logger: Any) -> None:
    spec, cluster = await asyncio.to_thread(_topic_context, body, patch)
    addresses = await asyncio.to_thread(name_server_addresses, cluster)
    try:
        outcome = await _run_admin(_apply_topic(addresses, cluster, spec), f"apply {spec.topic_name}")
    except NotReadyError as error:
        _set_status(patch, _topic_status(body, False, "ClusterUnreachable", str(error)))
        raise kopf.TemporaryError(str(error), delay=error.delay_s) from error
    for broker_name, step in outcome.steps.items():
        if step.action in (topics.CREATE, topics.UPDATE) or step.shrinking:
            logger.info(f"topic {spec.topic_name} {step.reason} on {broker_name}")
    first_status = not (body.get("status") or {}).get("conditions")
    report = topics.report_topic(spec, cluster.name, outcome, first_status)
    new_status = _topic_status(body, report.ready, report.reason, report.message)
    new_status["brokers"] = list(report.brokers)
    _set_status(patch, new_status)
    if report.retry:
        raise kopf.TemporaryError(report.retry, delay=report.retry_delay_s)


@kopf.on.create(GROUP, VERSION, "topics")
@kopf.on.update(GROUP, VERSION, "topics")
@kopf.on.resume(GROUP, VERSION, "topics")
async def topic_changed(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    """Create, update and resume (operator start) are one reconcile: kopf calls it once per event."""
    await reconcile_topic(body, patch, logger)


@kopf.timer(GROUP, VERSION, "topics", interval=limits.RECONCILE_INTERVAL_S, initial_delay=limits.RECONCILE_INTERVAL_S)
async def topic_drift(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    """Drift correction: a topic changed or deleted behind the operator's back is put back."""
    try:
        await reconcile_topic(body, patch, logger)
    except (kopf.PermanentError, kopf.TemporaryError) as error:
        logger.info(f"topic drift check: {error}")


@kopf.on.delete(GROUP, VERSION, "topics")
async def topic_deleted(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    """Delete the topic from the cluster if this Topic manages it; a gone cluster needs nothing."""
    metrics.forget("Topic", str(body["metadata"].get("namespace")), str(body["metadata"]["name"]))
    try:
        spec, cluster = await asyncio.to_thread(_topic_context, body, patch)
    except (kopf.PermanentError, kopf.TemporaryError) as error:
        logger.info(f"Topic released without deleting anything on a cluster: {error}")
        return
    addresses = await asyncio.to_thread(name_server_addresses, cluster)
    try:
        await _run_admin(_delete_topic(addresses, cluster, spec.topic_name), "")
    except NotReadyError as error:
        raise kopf.TemporaryError(str(error), delay=error.delay_s) from error
