"""Broker and Topic specs as frozen dataclasses, parsed from the custom resources' `spec`.

Pure: dicts in, dataclasses out, `InvalidSpecError` for a spec that can never work. The CRD
schema (crds/*.yaml) rejects most bad input at the API server; these checks repeat every CEL rule
of the CRDs with the same message (CEL_MESSAGES; a test holds the two in step), apply the schema
defaults (an emulator or an old API server may not), and add what a schema cannot know: the
operator's allow-list of hostPath roots.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shoal.operator import limits
from shoal.operator.errors import HostPathNotAllowedError, InvalidSpecError

OPERATOR_OWNED_CONFIG_KEYS = (
    "brokerClusterName",
    "brokerName",
    "brokerId",
    "brokerRole",
    "namesrvAddr",
    "listenHost",
    "listenPort",
    "haListenPort",
    "haMasterAddress",
    "brokerIP1",
    "metricsPort",
    "storePathRootDir",
    "storePathCommitLog",
    "flushDiskType",
    "fileReservedTime",
    "deleteWhen",
    "diskMaxUsedSpaceRatio",
    "aclEnable",
    "plainAclFile",
    "accessKey",
    "secretKey",
    "useTLS",
    "grpcServerPort",
)
"""broker.conf keys the operator writes from typed fields or pod identity; spec.config may not
set them, nor any key starting with OPERATOR_OWNED_CONFIG_PREFIX (CEL rule on spec.config). ACL
and TLS are switched on through spec.acl and spec.tls, which also mount the files those keys
point at."""
OPERATOR_OWNED_CONFIG_PREFIX = "tls."

RESERVED_TOPIC_NAMES = (
    "TBW102",
    "SCHEDULE_TOPIC_XXXX",
    "OFFSET_MOVED_EVENT",
    "SELF_TEST_TOPIC",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
)
RESERVED_TOPIC_PREFIXES = ("%RETRY%", "%DLQ%", "RMQ_SYS_", "rmq_sys_")

SECRET_NAME_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
"""A Secret's (and a cert-manager Certificate's) name: a DNS subdomain."""
SECRET_KEY_PATTERN = re.compile(r"^[-._a-zA-Z0-9]+$")
"""A key of a Secret's data."""
DEFAULT_ACL_KEY = "plain_acl.yml"
TOPIC_NAME_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
CLUSTER_NAME_PATTERN = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

CEL_MESSAGES = {
    "failover": "failover Automatic requires replication mode Sync",
    "sync_slaves": "replication mode Sync requires replicasPerGroup >= 2",
    "owned_keys": "spec.config must not set operator-owned broker.conf keys",
    "name_server": "nameServer needs replicas >= 1 or at least one external address",
    "host_path": "storage type HostPath requires storage.hostPath",
    "persistent_claim": "storage type PersistentClaim requires storage.persistentClaim",
    "one_storage": "set at most one of storage.hostPath and storage.persistentClaim",
    "reserved_topic": "topicName is a reserved RocketMQ system topic",
    "immutable": "field is immutable",
    "tls_source": "tls needs exactly one of secretName and certificateName",
}
"""Messages of the CRDs' `x-kubernetes-validations`, reused verbatim by the checks here."""


@dataclass(frozen=True)
class NameServerSpec:
    replicas: int = 2
    external: tuple[str, ...] = ()
    resources: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StorageSpec:
    type: str = "HostPath"
    """HostPath | PersistentClaim | Ephemeral."""
    host_root: str = "/var/lib/shoal"
    host_node_selector: Mapping[str, str] = field(default_factory=dict)
    reclaim_policy: str = "Retain"
    """Retain | Delete: what happens to a pod's hostPath directory when the cluster goes."""
    storage_class_name: str = ""
    size: str = "10Gi"
    disk_max_used_ratio_percent: int = 75


@dataclass(frozen=True)
class AclSpec:
    """RocketMQ plain ACL: `key` of Secret `secret_name` (the Broker's namespace) is plain_acl.yml."""

    secret_name: str
    key: str = DEFAULT_ACL_KEY


@dataclass(frozen=True)
class TlsSpec:
    """TLS on every broker and NameServer port, from a kubernetes.io/tls Secret (tls.crt, tls.key,
    ca.crt, as cert-manager writes them), named directly or through a cert-manager Certificate."""

    secret_name: str = ""
    certificate_name: str = ""
    mode: str = "Enforcing"
    """Enforcing (TLS only) | Permissive (TLS and plain connections)."""


@dataclass(frozen=True)
class BrokerSpec:
    """A whole Shoal cluster: NameServers and `groups` broker groups of one master plus slaves."""

    name: str
    namespace: str
    uid: str
    cluster_name: str
    image: str
    image_pull_policy: str = "IfNotPresent"
    name_server: NameServerSpec = NameServerSpec()
    groups: int = 1
    replicas_per_group: int = 2
    replication_mode: str = "Async"
    failover: str = "Manual"
    flush: str = "Async"
    storage: StorageSpec = StorageSpec()
    file_reserved_hours: int = 72
    delete_when: str = "04"
    resources: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, str] = field(default_factory=dict)
    pdb_max_unavailable: int = 1
    acl: AclSpec | None = None
    tls: TlsSpec | None = None
    grpc_enabled: bool = True
    """spec.grpc.enabled: each broker also serves RocketMQ 5 clients over gRPC (local proxy mode)."""


@dataclass(frozen=True)
class TopicSpec:
    cluster: str
    topic_name: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    permission: str = "ReadWrite"
    order: bool = False
    message_type: str = "Normal"
    groups: tuple[int, ...] = ()
    """Group indices holding the topic; empty: every group of the cluster."""
    allow_shrink: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict)


PERMISSION_BITS = {"ReadWrite": 6, "ReadOnly": 4, "WriteOnly": 2, "Deny": 0}
"""Topic.spec.permission -> RocketMQ's perm bits (PermName)."""


def require(condition: bool, field_name: str, message: str) -> None:
    """Raise InvalidSpecError(field_name, message) unless `condition` (shared by every spec parser)."""
    if not condition:
        raise InvalidSpecError(field_name, message)


def one_of(value: Any, field_name: str, choices: Sequence[str]) -> str:
    require(value in choices, field_name, f"must be one of {', '.join(choices)}, not {value!r}")
    return str(value)


def _boolean(value: Any, field_name: str) -> bool:
    require(isinstance(value, bool), field_name, "must be true or false")
    return bool(value)


def int_in(value: Any, field_name: str, low: int, high: int) -> int:
    require(
        isinstance(value, int) and not isinstance(value, bool) and low <= value <= high,
        field_name,
        f"must be an integer in [{low}, {high}], not {value!r}",
    )
    return int(value)


def check_host_root(root: str, allowed_roots: Sequence[str]) -> str:
    """Return `root` if it is a normalised absolute path equal to or under an allowed root.

    The allow-list is what stops anyone who may create a Broker from having the operator mount
    an arbitrary node directory (/etc, /var/lib/kubelet) into a pod that runs a root init step.
    """
    field_name = "spec.storage.hostPath.root"
    require(root.startswith("/"), field_name, "must be an absolute path")
    require(posixpath.normpath(root) == root, field_name, "must be normalised (no '..', '.', '//' or trailing '/')")
    require(len(root) <= limits.HOST_ROOT_LENGTH_MAX, field_name, "is too long")
    for allowed in allowed_roots:
        allowed_clean = posixpath.normpath(allowed)
        if allowed_clean != "/" and (root == allowed_clean or root.startswith(allowed_clean + "/")):
            return root
    raise HostPathNotAllowedError(
        field_name, f"{root} is not under an allowed host root ({', '.join(allowed_roots) or 'none configured'})"
    )


def _storage_from(raw: Mapping[str, Any], allowed_roots: Sequence[str]) -> StorageSpec:
    kind = one_of(raw.get("type", "HostPath"), "spec.storage.type", ("HostPath", "PersistentClaim", "Ephemeral"))
    host = raw.get("hostPath")
    claim = raw.get("persistentClaim")
    require(not (host is not None and claim is not None), "spec.storage", CEL_MESSAGES["one_storage"])
    require(kind != "HostPath" or host is not None, "spec.storage", CEL_MESSAGES["host_path"])
    require(kind != "PersistentClaim" or claim is not None, "spec.storage", CEL_MESSAGES["persistent_claim"])
    host = host or {}
    claim = claim or {}
    root = str(host.get("root", StorageSpec.host_root))
    if kind == "HostPath":
        check_host_root(root, allowed_roots)
    return StorageSpec(
        type=kind,
        host_root=root,
        host_node_selector=dict(host.get("nodeSelector", {})),
        reclaim_policy=one_of(
            host.get("reclaimPolicy", "Retain"), "spec.storage.hostPath.reclaimPolicy", ("Retain", "Delete")
        ),
        storage_class_name=str(claim.get("storageClassName", "")),
        size=str(raw.get("size", StorageSpec.size)),
        disk_max_used_ratio_percent=int_in(raw.get("diskMaxUsedRatio", 75), "spec.storage.diskMaxUsedRatio", 10, 95),
    )


def _secret_name(value: Any, field_name: str) -> str:
    name = str(value)
    require(
        len(name) <= limits.SECRET_NAME_LENGTH_MAX and SECRET_NAME_PATTERN.match(name) is not None,
        field_name,
        f"must be a DNS subdomain of at most {limits.SECRET_NAME_LENGTH_MAX} characters",
    )
    return name


def _acl_from(raw: Mapping[str, Any] | None) -> AclSpec | None:
    if raw is None:
        return None
    require("secretName" in raw, "spec.acl.secretName", "is required")
    key = str(raw.get("key", DEFAULT_ACL_KEY))
    require(
        len(key) <= limits.SECRET_NAME_LENGTH_MAX and SECRET_KEY_PATTERN.match(key) is not None,
        "spec.acl.key",
        "must be a Secret data key (letters, digits, '-', '_', '.')",
    )
    return AclSpec(secret_name=_secret_name(raw["secretName"], "spec.acl.secretName"), key=key)


def _tls_from(raw: Mapping[str, Any] | None) -> TlsSpec | None:
    if raw is None:
        return None
    require(("secretName" in raw) != ("certificateName" in raw), "spec.tls", CEL_MESSAGES["tls_source"])
    return TlsSpec(
        secret_name=_secret_name(raw["secretName"], "spec.tls.secretName") if "secretName" in raw else "",
        certificate_name=(
            _secret_name(raw["certificateName"], "spec.tls.certificateName") if "certificateName" in raw else ""
        ),
        mode=one_of(raw.get("mode", "Enforcing"), "spec.tls.mode", ("Enforcing", "Permissive")),
    )


def broker_spec_from(body: Mapping[str, Any], allowed_host_roots: Sequence[str]) -> BrokerSpec:
    """Parse a Broker object (metadata + spec), applying defaults; raise InvalidSpecError."""
    metadata = body["metadata"]
    name = str(metadata["name"])
    require(
        len(name) <= limits.CLUSTER_NAME_LENGTH_MAX and CLUSTER_NAME_PATTERN.match(name) is not None,
        "metadata.name",
        f"must be a DNS label of at most {limits.CLUSTER_NAME_LENGTH_MAX} characters",
    )
    spec = body.get("spec", {})
    name_server_raw = spec.get("nameServer", {})
    name_server = NameServerSpec(
        replicas=int_in(
            name_server_raw.get("replicas", 2), "spec.nameServer.replicas", 0, limits.NAME_SERVER_REPLICAS_MAX
        ),
        external=tuple(str(a) for a in name_server_raw.get("external", ())),
        resources=dict(name_server_raw.get("resources", {})),
    )
    require(name_server.replicas >= 1 or bool(name_server.external), "spec.nameServer", CEL_MESSAGES["name_server"])
    replication = spec.get("replication", {})
    mode = one_of(replication.get("mode", "Async"), "spec.replication.mode", ("Async", "Sync"))
    failover = one_of(replication.get("failover", "Manual"), "spec.replication.failover", ("Manual", "Automatic"))
    require(failover != "Automatic" or mode == "Sync", "spec.replication", CEL_MESSAGES["failover"])
    replicas_per_group = int_in(
        spec.get("replicasPerGroup", 2), "spec.replicasPerGroup", 1, limits.REPLICAS_PER_GROUP_MAX
    )
    require(mode != "Sync" or replicas_per_group >= 2, "spec", CEL_MESSAGES["sync_slaves"])
    config = {str(k): str(v) for k, v in spec.get("config", {}).items()}
    require(
        not set(config) & set(OPERATOR_OWNED_CONFIG_KEYS)
        and not any(key.startswith(OPERATOR_OWNED_CONFIG_PREFIX) for key in config),
        "spec.config",
        CEL_MESSAGES["owned_keys"],
    )
    require(len(config) <= limits.CONFIG_KEYS_MAX, "spec.config", f"at most {limits.CONFIG_KEYS_MAX} keys")
    for key, value in config.items():
        require(
            len(value) <= limits.CONFIG_VALUE_LENGTH_MAX and "\n" not in value and "\n" not in key,
            f"spec.config.{key}",
            "must be one line",
        )
    retention = spec.get("retention", {})
    return BrokerSpec(
        name=name,
        namespace=str(metadata.get("namespace", "default")),
        uid=str(metadata.get("uid", "")),
        cluster_name=str(spec.get("clusterName") or name),
        image=str(spec["image"]),
        image_pull_policy=one_of(
            spec.get("imagePullPolicy", "IfNotPresent"), "spec.imagePullPolicy", ("Always", "IfNotPresent", "Never")
        ),
        name_server=name_server,
        groups=int_in(spec.get("groups", 1), "spec.groups", 1, limits.GROUPS_MAX),
        replicas_per_group=replicas_per_group,
        replication_mode=mode,
        failover=failover,
        flush=one_of(spec.get("flush", "Async"), "spec.flush", ("Async", "Sync")),
        storage=_storage_from(spec.get("storage", {"type": "HostPath", "hostPath": {}}), allowed_host_roots),
        file_reserved_hours=int_in(
            retention.get("fileReservedHours", 72), "spec.retention.fileReservedHours", 1, limits.RETENTION_HOURS_MAX
        ),
        delete_when=str(retention.get("deleteWhen", "04")),
        resources=dict(spec.get("resources", {})),
        config=config,
        pdb_max_unavailable=int_in(
            spec.get("podDisruptionBudget", {}).get("maxUnavailable", 1),
            "spec.podDisruptionBudget.maxUnavailable",
            0,
            limits.REPLICAS_PER_GROUP_MAX,
        ),
        acl=_acl_from(spec.get("acl")),
        tls=_tls_from(spec.get("tls")),
        grpc_enabled=_boolean(spec.get("grpc", {}).get("enabled", True), "spec.grpc.enabled"),
    )


def is_reserved_topic(topic_name: str) -> bool:
    return topic_name in RESERVED_TOPIC_NAMES or topic_name.startswith(RESERVED_TOPIC_PREFIXES)


def topic_spec_from(body: Mapping[str, Any]) -> TopicSpec:
    """Parse a Topic object, applying defaults; raise InvalidSpecError."""
    spec = body.get("spec", {})
    topic_name = str(spec.get("topicName") or body["metadata"]["name"])
    require(
        len(topic_name) <= limits.TOPIC_NAME_LENGTH_MAX and TOPIC_NAME_PATTERN.match(topic_name) is not None,
        "spec.topicName",
        f"must match {TOPIC_NAME_PATTERN.pattern} and be at most {limits.TOPIC_NAME_LENGTH_MAX} characters",
    )
    require(not is_reserved_topic(topic_name), "spec.topicName", CEL_MESSAGES["reserved_topic"])
    groups = tuple(int_in(g, "spec.groups[]", 0, limits.GROUPS_MAX - 1) for g in spec.get("groups", ()))
    return TopicSpec(
        cluster=str(spec["clusterRef"]["name"]),
        topic_name=topic_name,
        read_queue_nums=int_in(spec.get("readQueueNums", 8), "spec.readQueueNums", 1, limits.QUEUE_NUMS_MAX),
        write_queue_nums=int_in(spec.get("writeQueueNums", 8), "spec.writeQueueNums", 1, limits.QUEUE_NUMS_MAX),
        permission=one_of(spec.get("permission", "ReadWrite"), "spec.permission", tuple(PERMISSION_BITS)),
        order=bool(spec.get("order", False)),
        message_type=one_of(
            spec.get("messageType", "Normal"), "spec.messageType", ("Normal", "FIFO", "Delay", "Transaction")
        ),
        groups=groups,
        allow_shrink=bool(spec.get("allowShrink", False)),
        attributes={str(k): str(v) for k, v in spec.get("attributes", {}).items()},
    )
