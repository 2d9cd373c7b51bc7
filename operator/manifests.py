"""Pure builders: a parsed Broker spec in, the Kubernetes objects that run it out (plain dicts).

No I/O and no kopf: handlers.py applies what `desired_state` returns (server-side apply through
kube.py), and the golden tests in tests/operator/ pin every object. Every child has an explicit,
deterministic name, so a retried create can never make a duplicate.

Children of a Broker `<c>` in namespace `<ns>`:

    <c>-ns                 headless Service + StatefulSet of NameServers (when nameServer.replicas > 0)
    <c>-ns                 PodDisruptionBudget (maxUnavailable 1)
    <c>-g<i>               one StatefulSet per broker group i (brokerName `<c>-g<i>`) with its
                           headless Service (stable pod DNS) and PodDisruptionBudget
    <c>-g<i>-config        ConfigMap: broker.conf shared by the group + broker-<ordinal>.conf
    shoal-<ns>-<c>-g<i>-<n>  PersistentVolume per pod (storage type HostPath), cluster-scoped

Brokers reach NameServers by the headless Service's DNS names
(`<c>-ns-<k>.<c>-ns.<ns>.svc:9876`), never by pod IP: a NameServer that restarts with a new IP
keeps its name, so no broker needs a new config or a restart (rocketmq-operator's pod-IP lists
went stale, see docs/operator-design.md §3.2). The Service publishes not-ready addresses so the
names resolve while NameServers start.

How an ordinal maps to a role. A group's StatefulSet has `replicasPerGroup` pods, ordinals
0..N-1, and one pod template for all of them. The ConfigMap carries `broker.conf` (keys common to
the group) and one `broker-<n>.conf` per ordinal holding only `brokerId` and `brokerRole`. The
image's entrypoint reads its ordinal from the hostname (`<c>-g<i>-<n>`), concatenates the two
files and appends `brokerIP1=$POD_IP`. With no failover ordinal 0 is the master (brokerId 0,
brokerRole ASYNC_MASTER or SYNC_MASTER) and ordinal n > 0 is a slave (brokerId n, SLAVE). After a
promotion the operator passes the group's current master ordinal (`masters`), the per-ordinal files
swap roles, and no pod name or selector changes: the role is a mutable label and status field,
never part of an identity.

Storage (type HostPath), docs/operator-design.md §5.1: the StatefulSet claims `store` volumes of
StorageClass `shoal-hostpath` (no provisioner, WaitForFirstConsumer; shipped by the chart), and
the operator pre-creates one hostPath PersistentVolume per pod, pre-bound by `claimRef` to
`store-<c>-g<i>-<n>` and pinned by `nodeAffinity` to the node chosen for that pod. The scheduler
therefore always puts ordinal n back on the node that holds its data. The directory is
`<root>/<ns>/<c>/<pod>`, so no two pods ever share one, and `root` has passed the operator's
allow-list (spec.check_host_root). PVs carry no ownerReference (a cluster-scoped object cannot be
owned by a namespaced one); they are labelled with the cluster and its UID, keep
`persistentVolumeReclaimPolicy: Retain`, and `storage.hostPath.reclaimPolicy: Delete` is carried
out by the operator's cleanup job, which removes a directory only if its marker names this cluster.

Every broker pod runs an init container `prepare-store` as root with only CHOWN, FOWNER and
DAC_OVERRIDE: it creates the store marker `.shoal-store` (cluster UID, group, ordinal, format) in
an empty directory, refuses a directory whose marker names another cluster or that holds data
without a marker, and chowns the directory to the broker's non-root user (fsGroup does not apply
to hostPath volumes). The broker itself runs as UID 10001 with a read-only root filesystem.

ACL and TLS (spec.acl, spec.tls): the Secrets are mounted read-only (ACL_MOUNT_PATH,
TLS_MOUNT_PATH; files 0440, group `fsGroup` = the broker's group) into every broker pod, the TLS
Secret into the NameServers too, and broker.conf / namesrv.conf point at them (SECURITY_KEYS).
`secrets_hash`, a hash of the Secrets' data that the handler reads, sits in the pod templates:
a changed ACL file or a renewed certificate makes a new StatefulSet revision, which the ordered
roll (rollout.py) applies slaves first; the NameServers (RollingUpdate) follow on their own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from shoal.operator import limits
from shoal.operator.settings import NetworkPolicySettings
from shoal.operator.spec import BrokerSpec

API_GROUP = "shoal.io"
API_VERSION = "shoal.io/v1alpha1"
MANAGED_BY = "shoal-operator"

NAME_SERVER_PORT = 9876
BROKER_PORT = 10911
HA_PORT = 10912
VIP_PORT = BROKER_PORT - 2
"""The VIP channel (fastListenPort's default): clients with sendMessageWithVIPChannel=true send there."""
METRICS_PORT = 11011
"""listenPort + 100, the broker's default metricsPort; /healthz lives there too."""
GRPC_PORT = 8081
"""grpcServerPort under spec.grpc.enabled: RocketMQ 5 clients (RocketMQ 5's proxy port)."""

BROKER_UID = 10001
"""The image's non-root user (broker_image/Dockerfile)."""

STORE_MOUNT_PATH = "/store"
CONFIG_MOUNT_PATH = "/etc/shoal/config"
STORE_MARKER_NAME = ".shoal-store"
STORE_FORMAT_VERSION = 1
HOSTPATH_STORAGE_CLASS = "shoal-hostpath"
ENTRYPOINT = "/usr/local/bin/shoal-entrypoint"

LABEL_CLUSTER = "shoal.io/cluster"
LABEL_CLUSTER_UID = "shoal.io/cluster-uid"
LABEL_GROUP = "shoal.io/group"
LABEL_ORDINAL = "shoal.io/ordinal"
ANNOTATION_CONFIG_HASH = "shoal.io/config-hash"
ANNOTATION_STORAGE_NODE = "shoal.io/storage-node"
ANNOTATION_RECLAIM_POLICY = "shoal.io/reclaim-policy"
ANNOTATION_SECRETS_HASH = "shoal.io/secrets-hash"

ACL_MOUNT_PATH = "/etc/shoal/acl"
ACL_FILE_NAME = "plain_acl.yml"
TLS_MOUNT_PATH = "/etc/shoal/tls"
TLS_KEYS = ("tls.crt", "tls.key", "ca.crt")
"""The keys a kubernetes.io/tls Secret from cert-manager holds; each must be present."""
SECRET_FILE_MODE = 0o440
"""Owner root, group fsGroup (the broker's): readable by the broker, by nobody else."""
NAME_SERVER_CONFIG_PATH = f"{CONFIG_MOUNT_PATH}/namesrv.conf"
ACL_FILE_CONFIG_KEY = "plainAclFile"
"""Where the broker reads plain_acl.yml (RocketMQ: $ROCKETMQ_HOME/conf/plain_acl.yml, moved by the
system property rocketmq.acl.plain.file; Shoal takes a broker.conf key)."""
BROKER_CREDENTIAL_KEYS = {"brokerAccessKey": "accessKey", "brokerSecretKey": "secretKey"}
"""ACL Secret key -> file under ACL_MOUNT_PATH: the account brokers sign their own requests with
(registration at ACL-enabled NameServers, a slave's sync). The entrypoint appends them to the
rendered broker.conf (in the pod's /tmp), so they are never in a ConfigMap."""
TLS_MODES = {"Enforcing": "enforcing", "Permissive": "permissive"}
"""spec.tls.mode -> tls.server.mode (RocketMQ's TlsMode names)."""

Object = dict[str, Any]


# ---------------------------------------------------------------- names


def name_server_name(spec: BrokerSpec) -> str:
    return f"{spec.name}-ns"


def group_name(spec: BrokerSpec, group: int) -> str:
    """The StatefulSet, headless Service and RocketMQ brokerName of group `group`."""
    return f"{spec.name}-g{group}"


def pod_name(spec: BrokerSpec, group: int, ordinal: int) -> str:
    return f"{group_name(spec, group)}-{ordinal}"


def claim_name(spec: BrokerSpec, group: int, ordinal: int) -> str:
    """The PVC a StatefulSet makes from volumeClaimTemplate `store` for this pod."""
    return f"store-{pod_name(spec, group, ordinal)}"


def volume_name(spec: BrokerSpec, group: int, ordinal: int) -> str:
    """PersistentVolumes are cluster-scoped, so the name carries the namespace."""
    return f"shoal-{spec.namespace}-{pod_name(spec, group, ordinal)}"


def host_directory(spec: BrokerSpec, group: int, ordinal: int) -> str:
    return f"{spec.storage.host_root}/{spec.namespace}/{spec.name}/{pod_name(spec, group, ordinal)}"


def name_server_addresses(spec: BrokerSpec) -> list[str]:
    """namesrvAddr entries: stable headless-Service DNS names, or the external list."""
    if spec.name_server.replicas == 0:
        return list(spec.name_server.external)
    service = name_server_name(spec)
    return [
        f"{service}-{k}.{service}.{spec.namespace}.svc:{NAME_SERVER_PORT}" for k in range(spec.name_server.replicas)
    ]


# ---------------------------------------------------------------- metadata


def labels(spec: BrokerSpec, component: str, group: int | None = None) -> dict[str, str]:
    """Labels on every child; `selector_labels` is the immutable subset used in selectors."""
    result = {
        "app.kubernetes.io/name": "shoal",
        "app.kubernetes.io/instance": spec.name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": "shoal",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        LABEL_CLUSTER: spec.name,
    }
    if group is not None:
        result[LABEL_GROUP] = group_name(spec, group)
    return result


def selector_labels(spec: BrokerSpec, component: str, group: int | None = None) -> dict[str, str]:
    """Unique per StatefulSet (rocketmq-operator's shared selectors are the anti-pattern)."""
    result = {
        "app.kubernetes.io/name": "shoal",
        "app.kubernetes.io/instance": spec.name,
        "app.kubernetes.io/component": component,
    }
    if group is not None:
        result[LABEL_GROUP] = group_name(spec, group)
    return result


def owner_reference(spec: BrokerSpec) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Broker",
        "name": spec.name,
        "uid": spec.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _metadata(spec: BrokerSpec, name: str, component: str, group: int | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": spec.namespace,
        "labels": labels(spec, component, group),
        "ownerReferences": [owner_reference(spec)],
    }


# ---------------------------------------------------------------- pod parts


def _security_context_restricted() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": BROKER_UID,
        "runAsGroup": BROKER_UID,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def _pod_security_context() -> dict[str, Any]:
    """fsGroup makes mounted Secrets (0440) and PersistentClaim stores the broker's group; it does
    not apply to hostPath volumes, which the prepare-store init container chowns instead."""
    return {
        "runAsNonRoot": True,
        "runAsUser": BROKER_UID,
        "runAsGroup": BROKER_UID,
        "fsGroup": BROKER_UID,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _secret_volumes(spec: BrokerSpec, tls_secret: str, broker: bool = True) -> list[Object]:
    """The ACL and TLS Secret volumes (items pinned: a missing key fails the mount, not the broker).
    NameServers (`broker` False) get plain_acl.yml only, never the brokers' own keys."""
    volumes: list[Object] = []
    if spec.acl is not None:
        items = [{"key": spec.acl.key, "path": ACL_FILE_NAME}]
        if broker:
            items += [{"key": key, "path": path} for key, path in BROKER_CREDENTIAL_KEYS.items()]
        volumes.append(
            {
                "name": "acl",
                "secret": {"secretName": spec.acl.secret_name, "items": items, "defaultMode": SECRET_FILE_MODE},
            }
        )
    if spec.tls is not None:
        items = [{"key": key, "path": key} for key in TLS_KEYS]
        volumes.append(
            {"name": "tls", "secret": {"secretName": tls_secret, "items": items, "defaultMode": SECRET_FILE_MODE}}
        )
    return volumes


def _secret_mounts(volumes: list[Object]) -> list[Object]:
    paths = {"acl": ACL_MOUNT_PATH, "tls": TLS_MOUNT_PATH}
    return [{"name": v["name"], "mountPath": paths[v["name"]], "readOnly": True} for v in volumes]


def secrets_hash(secrets: Mapping[str, Mapping[str, str]]) -> str:
    """A short hash of the mounted Secrets' data (Secret name -> its `data`): the pod template
    annotation that rolls the pods when an ACL file or a certificate changes."""
    digest = hashlib.sha256()
    for name in sorted(secrets):
        for key in sorted(secrets[name]):
            digest.update(f"{name}\0{key}\0{secrets[name][key]}\0".encode())
    return digest.hexdigest()[: limits.SECRET_HASH_LENGTH]


def _template_annotations(secrets_digest: str, **others: str) -> dict[str, str]:
    annotations = dict(others)
    if secrets_digest:
        annotations[ANNOTATION_SECRETS_HASH] = secrets_digest
    return annotations


def _pod_env() -> list[dict[str, Any]]:
    return [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]


def _anti_affinity(selector: Mapping[str, str]) -> dict[str, Any]:
    """Prefer one member of a group (or one NameServer) per node."""
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": dict(selector)},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        }
    }


# ---------------------------------------------------------------- NameServers


def name_server_service(spec: BrokerSpec) -> Object:
    """Headless Service giving each NameServer pod a stable DNS name."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(spec, name_server_name(spec), "nameserver"),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector_labels(spec, "nameserver"),
            "ports": [{"name": "remoting", "port": NAME_SERVER_PORT, "targetPort": NAME_SERVER_PORT}],
        },
    }


def name_server_conf(spec: BrokerSpec) -> str:
    """namesrv.conf: the ACL/TLS keys (security_keys), the only ones the operator sets."""
    lines = [f"# Generated by shoal-operator from Broker {spec.namespace}/{spec.name}; edits are overwritten."]
    lines += [f"{key}={value}" for key, value in security_keys(spec).items()]
    return "\n".join(lines) + "\n"


def name_server_config_map(spec: BrokerSpec) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(spec, f"{name_server_name(spec)}-config", "nameserver"),
        "data": {"namesrv.conf": name_server_conf(spec)},
    }


def _secured(spec: BrokerSpec) -> bool:
    return spec.acl is not None or spec.tls is not None


def name_server_stateful_set(spec: BrokerSpec, tls_secret: str = "", secrets_digest: str = "") -> Object:
    """NameServers hold no data: RollingUpdate is safe (brokers register with every one)."""
    selector = selector_labels(spec, "nameserver")
    secret_volumes = _secret_volumes(spec, tls_secret or (spec.tls.secret_name if spec.tls else ""), broker=False)
    volumes: list[Object] = [{"name": "tmp", "emptyDir": {}}, *secret_volumes]
    mounts: list[Object] = [{"name": "tmp", "mountPath": "/tmp"}, *_secret_mounts(secret_volumes)]
    args = ["namesrv"]
    if _secured(spec):
        volumes.append({"name": "config", "configMap": {"name": f"{name_server_name(spec)}-config"}})
        mounts.append({"name": "config", "mountPath": CONFIG_MOUNT_PATH, "readOnly": True})
        args += ["-c", NAME_SERVER_CONFIG_PATH]
    template_metadata: Object = {"labels": labels(spec, "nameserver")}
    if _secured(spec):
        template_metadata["annotations"] = _template_annotations(
            secrets_digest, **{ANNOTATION_CONFIG_HASH: _short_hash(name_server_conf(spec))}
        )
    container = {
        "name": "nameserver",
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "args": args,
        "env": _pod_env(),
        "ports": [{"name": "remoting", "containerPort": NAME_SERVER_PORT}],
        "readinessProbe": {"tcpSocket": {"port": NAME_SERVER_PORT}, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": NAME_SERVER_PORT}, "periodSeconds": 10, "failureThreshold": 6},
        "resources": dict(spec.name_server.resources),
        "securityContext": _security_context_restricted(),
        "volumeMounts": mounts,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _metadata(spec, name_server_name(spec), "nameserver"),
        "spec": {
            "serviceName": name_server_name(spec),
            "replicas": spec.name_server.replicas,
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate"},
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": template_metadata,
                "spec": {
                    "securityContext": _pod_security_context(),
                    "affinity": _anti_affinity(selector),
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def pod_disruption_budget(spec: BrokerSpec, component: str, group: int | None, max_unavailable: int) -> Object:
    name = name_server_name(spec) if group is None else group_name(spec, group)
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(spec, name, component, group),
        "spec": {
            "maxUnavailable": max_unavailable,
            "selector": {"matchLabels": selector_labels(spec, component, group)},
        },
    }


# ---------------------------------------------------------------- broker groups


def broker_role(spec: BrokerSpec, ordinal: int, master_ordinal: int = 0) -> str:
    """brokerRole of `ordinal` when `master_ordinal` holds the group's master role."""
    if ordinal != master_ordinal:
        return "SLAVE"
    return "SYNC_MASTER" if spec.replication_mode == "Sync" else "ASYNC_MASTER"


def broker_id(ordinal: int, master_ordinal: int = 0) -> int:
    """RocketMQ requires brokerId 0 for the master; slaves keep distinct non-zero ids.

    The ordinals 0 and `master_ordinal` swap ids, so ids stay unique after a promotion.
    """
    if ordinal == master_ordinal:
        return 0
    if ordinal == 0:
        return master_ordinal
    return ordinal


def security_keys(spec: BrokerSpec) -> dict[str, str]:
    """broker.conf / namesrv.conf keys for spec.acl and spec.tls (RocketMQ 4.9.7's names), pointing
    at the mounted Secrets. tls.enable and tls.ha.enable make the process's own connections
    (registration, replication) TLS too."""
    keys: dict[str, str] = {}
    if spec.acl is not None:
        keys["aclEnable"] = "true"
        keys[ACL_FILE_CONFIG_KEY] = f"{ACL_MOUNT_PATH}/{ACL_FILE_NAME}"
    if spec.tls is not None:
        keys["tls.server.mode"] = TLS_MODES[spec.tls.mode]
        keys["tls.server.certPath"] = f"{TLS_MOUNT_PATH}/tls.crt"
        keys["tls.server.keyPath"] = f"{TLS_MOUNT_PATH}/tls.key"
        keys["tls.server.trustCertPath"] = f"{TLS_MOUNT_PATH}/ca.crt"
        keys["tls.enable"] = "true"
        keys["tls.ha.enable"] = "true"
        # The process's own connections check the peer's chain against the cluster's CA (RocketMQ's
        # default trusts any certificate; host names are not checked, as in RocketMQ).
        keys["tls.test.mode.enable"] = "false"
        keys["tls.client.authServer"] = "true"
        keys["tls.client.trustCertPath"] = f"{TLS_MOUNT_PATH}/ca.crt"
    return keys


def broker_conf(spec: BrokerSpec, group: int) -> str:
    """The broker.conf keys shared by every member of `group` (deterministic order)."""
    owned = {
        "brokerClusterName": spec.cluster_name,
        "brokerName": group_name(spec, group),
        "namesrvAddr": ";".join(name_server_addresses(spec)),
        "listenPort": str(BROKER_PORT),
        "haListenPort": str(HA_PORT),
        "metricsPort": str(METRICS_PORT),
        "storePathRootDir": STORE_MOUNT_PATH,
        "flushDiskType": "SYNC_FLUSH" if spec.flush == "Sync" else "ASYNC_FLUSH",
        "fileReservedTime": str(spec.file_reserved_hours),
        "deleteWhen": spec.delete_when,
        "diskMaxUsedSpaceRatio": str(spec.storage.disk_max_used_ratio_percent),
        **({"grpcServerPort": str(GRPC_PORT)} if spec.grpc_enabled else {}),
        **security_keys(spec),
    }
    lines = ["# Generated by shoal-operator from Broker " + f"{spec.namespace}/{spec.name}; edits are overwritten."]
    lines += [f"{key}={value}" for key, value in owned.items()]
    if spec.config:
        lines.append("# spec.config")
        lines += [f"{key}={spec.config[key]}" for key in sorted(spec.config)]
    return "\n".join(lines) + "\n"


def broker_conf_for_ordinal(spec: BrokerSpec, ordinal: int, master_ordinal: int = 0) -> str:
    return f"brokerId={broker_id(ordinal, master_ordinal)}\nbrokerRole={broker_role(spec, ordinal, master_ordinal)}\n"


def config_hash(spec: BrokerSpec, group: int) -> str:
    """Hash of what needs a restart to take effect; in the pod template, so a change makes a new
    StatefulSet revision and the operator's roll (OnDelete) picks the outdated pods."""
    return _short_hash(broker_conf(spec, group))


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def group_config_map(spec: BrokerSpec, group: int, master_ordinal: int = 0) -> Object:
    data = {"broker.conf": broker_conf(spec, group)}
    for ordinal in range(spec.replicas_per_group):
        data[f"broker-{ordinal}.conf"] = broker_conf_for_ordinal(spec, ordinal, master_ordinal)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(spec, f"{group_name(spec, group)}-config", "broker", group),
        "data": data,
    }


def group_service(spec: BrokerSpec, group: int) -> Object:
    """Headless Service: stable DNS for each member (HA links, metrics scraping)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(spec, group_name(spec, group), "broker", group),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector_labels(spec, "broker", group),
            "ports": [
                {"name": "remoting", "port": BROKER_PORT, "targetPort": BROKER_PORT},
                {"name": "vip", "port": VIP_PORT, "targetPort": VIP_PORT},
                {"name": "ha", "port": HA_PORT, "targetPort": HA_PORT},
                {"name": "metrics", "port": METRICS_PORT, "targetPort": METRICS_PORT},
                *([{"name": "grpc", "port": GRPC_PORT, "targetPort": GRPC_PORT}] if spec.grpc_enabled else []),
            ],
        },
    }


def _prepare_store_container(spec: BrokerSpec, group: int) -> Object:
    return {
        "name": "prepare-store",
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "args": ["prepare-store"],
        "env": [
            *_pod_env(),
            {"name": "SHOAL_CLUSTER_UID", "value": spec.uid},
            {"name": "SHOAL_GROUP", "value": group_name(spec, group)},
            {"name": "SHOAL_STORE_DIR", "value": STORE_MOUNT_PATH},
            {"name": "SHOAL_STORE_FORMAT", "value": str(STORE_FORMAT_VERSION)},
        ],
        "securityContext": _prepare_store_security_context(spec),
        "volumeMounts": [{"name": "store", "mountPath": STORE_MOUNT_PATH}],
    }


def _prepare_store_security_context(spec: BrokerSpec) -> dict[str, Any]:
    """Root with CHOWN/FOWNER/DAC_OVERRIDE only for hostPath, which fsGroup does not reach; claims and
    emptyDir belong to fsGroup already, so there the step runs as the broker and the pod meets the
    Restricted Pod Security profile."""
    if spec.storage.type != "HostPath":
        return _security_context_restricted()
    return {
        "runAsUser": 0,
        "runAsNonRoot": False,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "FOWNER", "DAC_OVERRIDE"]},
    }


def _broker_container(spec: BrokerSpec, group: int, secret_volumes: list[Object]) -> Object:
    return {
        "name": "broker",
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "args": ["broker"],
        "env": [
            *_pod_env(),
            {"name": "SHOAL_CONFIG_DIR", "value": CONFIG_MOUNT_PATH},
            *([{"name": "SHOAL_ACL_DIR", "value": ACL_MOUNT_PATH}] if spec.acl is not None else []),
        ],
        "ports": [
            {"name": "remoting", "containerPort": BROKER_PORT},
            {"name": "vip", "containerPort": VIP_PORT},
            {"name": "ha", "containerPort": HA_PORT},
            {"name": "metrics", "containerPort": METRICS_PORT},
            *([{"name": "grpc", "containerPort": GRPC_PORT}] if spec.grpc_enabled else []),
        ],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": METRICS_PORT}, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": BROKER_PORT}, "periodSeconds": 10, "failureThreshold": 6},
        "resources": dict(spec.resources),
        "securityContext": _security_context_restricted(),
        "volumeMounts": [
            {"name": "store", "mountPath": STORE_MOUNT_PATH},
            {"name": "config", "mountPath": CONFIG_MOUNT_PATH, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
            *_secret_mounts(secret_volumes),
        ],
    }


def _volume_claim_templates(spec: BrokerSpec, group: int) -> list[Object]:
    if spec.storage.type == "Ephemeral":
        return []
    storage_class = HOSTPATH_STORAGE_CLASS if spec.storage.type == "HostPath" else spec.storage.storage_class_name
    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": spec.storage.size}},
    }
    if storage_class:
        claim_spec["storageClassName"] = storage_class
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "store", "labels": labels(spec, "store", group)},
            "spec": claim_spec,
        }
    ]


def group_stateful_set(spec: BrokerSpec, group: int, tls_secret: str = "", secrets_digest: str = "") -> Object:
    """One StatefulSet per group: Parallel (a down master never blocks its slaves' pods) and
    OnDelete (the operator restarts pods itself: slaves first, then the master once in sync).
    `tls_secret` is the TLS Secret's name (a Certificate's secretName); `secrets_digest` the
    hash of the mounted Secrets (secrets_hash)."""
    name = group_name(spec, group)
    selector = selector_labels(spec, "broker", group)
    secret_volumes = _secret_volumes(spec, tls_secret or (spec.tls.secret_name if spec.tls else ""))
    volumes: list[Object] = [
        {"name": "config", "configMap": {"name": f"{name}-config"}},
        {"name": "tmp", "emptyDir": {}},
        *secret_volumes,
    ]
    if spec.storage.type == "Ephemeral":
        volumes.insert(0, {"name": "store", "emptyDir": {"sizeLimit": spec.storage.size}})
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _metadata(spec, name, "broker", group),
        "spec": {
            "serviceName": name,
            "replicas": spec.replicas_per_group,
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {
                    "labels": labels(spec, "broker", group),
                    "annotations": _template_annotations(
                        secrets_digest, **{ANNOTATION_CONFIG_HASH: config_hash(spec, group)}
                    ),
                },
                "spec": {
                    "securityContext": _pod_security_context(),
                    "affinity": _anti_affinity(selector),
                    "terminationGracePeriodSeconds": limits.BROKER_TERMINATION_GRACE_S,
                    "initContainers": [_prepare_store_container(spec, group)],
                    "containers": [_broker_container(spec, group, secret_volumes)],
                    "volumes": volumes,
                },
            },
            "volumeClaimTemplates": _volume_claim_templates(spec, group),
        },
    }


def store_persistent_volume(spec: BrokerSpec, group: int, ordinal: int, node: str) -> Object:
    """The hostPath PV of one pod, pre-bound to its claim and pinned to `node`."""
    assert spec.storage.type == "HostPath", "hostPath volumes only for storage type HostPath"
    assert node, "a PV is created only once its node is chosen"
    pv_labels = labels(spec, "store", group)
    pv_labels[LABEL_CLUSTER_UID] = spec.uid
    pv_labels[LABEL_ORDINAL] = str(ordinal)
    pv_labels["shoal.io/namespace"] = spec.namespace
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": volume_name(spec, group, ordinal),
            "labels": pv_labels,
            "annotations": {
                ANNOTATION_STORAGE_NODE: node,
                ANNOTATION_RECLAIM_POLICY: spec.storage.reclaim_policy,
            },
        },
        "spec": {
            "capacity": {"storage": spec.storage.size},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": HOSTPATH_STORAGE_CLASS,
            "volumeMode": "Filesystem",
            "hostPath": {"path": host_directory(spec, group, ordinal), "type": "DirectoryOrCreate"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": spec.namespace,
                "name": claim_name(spec, group, ordinal),
            },
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
                    ]
                }
            },
        },
    }


# ---------------------------------------------------------------- NetworkPolicies


OPERATOR_POD_LABELS = {"app.kubernetes.io/name": "shoal", "app.kubernetes.io/component": "operator"}
"""Labels of the chart's operator pod (charts/shoal/templates/_helpers.tpl shoal.selectorLabels)."""


def _operator_peer(policy: NetworkPolicySettings) -> list[Object]:
    if not policy.operator_namespace:
        return []
    return [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": policy.operator_namespace}},
            "podSelector": {"matchLabels": dict(OPERATOR_POD_LABELS)},
        }
    ]


def _port_rule(ports: list[int], peers: list[Object] | None) -> Object:
    """Ingress on `ports` from `peers`; None: from every source."""
    rule: Object = {"ports": [{"protocol": "TCP", "port": port} for port in ports]}
    if peers is not None:
        rule["from"] = peers
    return rule


def network_policies(spec: BrokerSpec, policy: NetworkPolicySettings) -> list[Object]:
    """Ingress rules of the cluster's pods (egress is left open: DNS, NameServers, masters).

    Brokers: the client ports (remoting, VIP, gRPC) from `policy.clients` (every source when empty);
    the HA port only from the same cluster's brokers (a slave connects to its master); metrics
    from `policy.metrics`. NameServers: 9876 from the clients, the cluster's brokers and the
    operator. The operator's pod always reaches the remoting ports (admin requests).
    """
    if not policy.enabled:
        return []
    own_brokers = [{"podSelector": {"matchLabels": selector_labels(spec, "broker")}}]
    operator = _operator_peer(policy)
    clients = [dict(peer) for peer in policy.clients] + operator if policy.clients else None
    broker_rules = [
        _port_rule(
            [BROKER_PORT, VIP_PORT, *([GRPC_PORT] if spec.grpc_enabled else [])],
            None if clients is None else clients + own_brokers,
        ),
        _port_rule([HA_PORT], own_brokers),
        _port_rule([METRICS_PORT], [dict(peer) for peer in policy.metrics] + operator),
    ]
    result = [
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _metadata(spec, f"{spec.name}-brokers", "broker"),
            "spec": {
                "podSelector": {"matchLabels": selector_labels(spec, "broker")},
                "policyTypes": ["Ingress"],
                "ingress": broker_rules,
            },
        }
    ]
    if spec.name_server.replicas > 0:
        result.append(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": _metadata(spec, f"{name_server_name(spec)}", "nameserver"),
                "spec": {
                    "podSelector": {"matchLabels": selector_labels(spec, "nameserver")},
                    "policyTypes": ["Ingress"],
                    "ingress": [_port_rule([NAME_SERVER_PORT], None if clients is None else clients + own_brokers)],
                },
            }
        )
    return result


# ---------------------------------------------------------------- everything


def desired_state(
    spec: BrokerSpec,
    storage_nodes: Mapping[str, str] | None = None,
    masters: Mapping[int, int] | None = None,
    tls_secret: str = "",
    secrets_digest: str = "",
    network_policy: NetworkPolicySettings | None = None,
) -> list[Object]:
    """Every object the Broker should own, in apply order.

    `storage_nodes` maps a pod name to the node chosen for its hostPath volume (the handler picks
    nodes once, spreading a group across nodes, and reads them back from existing PVs); pods
    without a node get no PV yet. `masters` maps a group index to the ordinal holding its master
    role (default 0). `tls_secret` names the TLS Secret (default spec.tls.secretName; the
    handler resolves a cert-manager Certificate), `secrets_digest` is secrets_hash of the ACL and
    TLS Secrets' data; `network_policy` the chart's NetworkPolicy settings (none by default).
    """
    storage_nodes = storage_nodes or {}
    masters = masters or {}
    objects: list[Object] = []
    if spec.name_server.replicas > 0:
        if _secured(spec):
            objects.append(name_server_config_map(spec))
        objects += [
            name_server_service(spec),
            name_server_stateful_set(spec, tls_secret, secrets_digest),
            pod_disruption_budget(spec, "nameserver", None, 1),
        ]
    for group in range(spec.groups):
        if spec.storage.type == "HostPath":
            for ordinal in range(spec.replicas_per_group):
                node = storage_nodes.get(pod_name(spec, group, ordinal))
                if node:
                    objects.append(store_persistent_volume(spec, group, ordinal, node))
        objects += [
            group_config_map(spec, group, masters.get(group, 0)),
            group_service(spec, group),
            group_stateful_set(spec, group, tls_secret, secrets_digest),
            pod_disruption_budget(spec, "broker", group, spec.pdb_max_unavailable),
        ]
    return objects + network_policies(spec, network_policy or NetworkPolicySettings())


def group_children(spec: BrokerSpec, group: int) -> list[tuple[str, str, str]]:
    """(apiVersion, kind, name) of the namespaced objects of one group, for deleting a drained
    group (its PVs follow the reclaim policy)."""
    name = group_name(spec, group)
    return [
        ("apps/v1", "StatefulSet", name),
        ("policy/v1", "PodDisruptionBudget", name),
        ("v1", "Service", name),
        ("v1", "ConfigMap", f"{name}-config"),
    ]


CLEANUP_MOUNT_PATH = "/cluster"


def store_cleanup_job(volume: Mapping[str, Any], image: str) -> Object:
    """A Job that removes one pod's hostPath store directory on its node (reclaimPolicy Delete).

    It mounts the directory's parent, so the directory itself can go, and runs the entrypoint's
    `cleanup-store`, which deletes it only when its `.shoal-store` marker names this cluster's
    UID: a directory reused by another cluster, or never written by Shoal, is left alone.
    """
    meta = volume["metadata"]
    directory = str(volume["spec"]["hostPath"]["path"])
    parent, _, leaf = directory.rpartition("/")
    node = str((meta.get("annotations") or {}).get(ANNOTATION_STORAGE_NODE, ""))
    pv_labels = meta.get("labels") or {}
    namespace = str(pv_labels.get("shoal.io/namespace", "default"))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            # Deterministic (a retried delete never makes two) and short enough for a Job name.
            "name": f"shoal-cleanup-{hashlib.sha256(str(meta['name']).encode()).hexdigest()[:16]}",
            "namespace": namespace,
            "annotations": {"shoal.io/persistent-volume": str(meta["name"]), "shoal.io/directory": directory},
            "labels": {
                "app.kubernetes.io/name": "shoal",
                "app.kubernetes.io/component": "store-cleanup",
                "app.kubernetes.io/managed-by": MANAGED_BY,
                LABEL_CLUSTER: str(pv_labels.get(LABEL_CLUSTER, "")),
            },
        },
        "spec": {
            "backoffLimit": limits.CLEANUP_JOB_RETRIES_MAX,
            "ttlSecondsAfterFinished": limits.CLEANUP_JOB_TTL_S,
            "template": {
                "spec": {
                    "restartPolicy": "OnFailure",
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [
                        {
                            "name": "cleanup-store",
                            "image": image,
                            "args": ["cleanup-store"],
                            "env": [
                                {"name": "SHOAL_CLUSTER_UID", "value": str(pv_labels.get(LABEL_CLUSTER_UID, ""))},
                                {"name": "SHOAL_STORE_DIR", "value": f"{CLEANUP_MOUNT_PATH}/{leaf}"},
                            ],
                            "securityContext": {
                                "runAsUser": 0,
                                "runAsNonRoot": False,
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"], "add": ["DAC_OVERRIDE", "FOWNER"]},
                            },
                            "volumeMounts": [{"name": "cluster", "mountPath": CLEANUP_MOUNT_PATH}],
                        }
                    ],
                    "volumes": [{"name": "cluster", "hostPath": {"path": parent, "type": "Directory"}}],
                }
            },
        },
    }
