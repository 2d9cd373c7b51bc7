"""Named limits of the operator, each with its unit, and asserts on how they relate.

Kubernetes names bound most of these: a pod name is at most 63 characters and so is a label
value, and the longest name the operator derives from a Broker's name is the PersistentVolume
claim `store-<cluster>-g<group>-<ordinal>` (StatefulSet volume claims are named
`<template>-<statefulset>-<ordinal>`).
"""

from __future__ import annotations

KUBERNETES_NAME_LENGTH_MAX = 63
"""DNS label (RFC 1123): pod, Service and label-value names."""

CLUSTER_NAME_LENGTH_MAX = 40
"""A Broker's metadata.name. 40 + len("store-") + len("-g15") + len("-2") = 52 <= 63, with room
for the `-config` and `-pdb` suffixes of per-group children."""

GROUPS_MAX = 16
"""Broker groups (brokerName `<cluster>-g<i>`) per cluster."""

REPLICAS_PER_GROUP_MAX = 3
"""One master plus up to two slaves per group (RocketMQ's usual topologies)."""

NAME_SERVER_REPLICAS_MAX = 5
"""NameServers: every broker registers with each, so the fan-out per registration is bounded."""

QUEUE_NUMS_MAX = 1024
"""readQueueNums / writeQueueNums of one Topic on one group."""

TOPIC_NAME_LENGTH_MAX = 127
"""RocketMQ 4.x's limit on a topic name (TopicValidator)."""

CONFIG_KEYS_MAX = 64
"""Extra broker.conf keys in Broker.spec.config."""

CONFIG_VALUE_LENGTH_MAX = 1024
"""Characters of one extra broker.conf value."""

HOST_ROOT_LENGTH_MAX = 200
"""Characters of storage.hostPath.root; the per-pod directory appends namespace, cluster and pod."""

REPLICATION_IN_SYNC_LAG_MAX_BYTES = 64 * 1024 * 1024
"""A slave further behind its master than this makes ReplicationInSync False (SlaveLagging)."""

RETENTION_HOURS_MAX = 24 * 365
"""fileReservedTime: a year."""

assert (
    len("store-") + CLUSTER_NAME_LENGTH_MAX + len(f"-g{GROUPS_MAX - 1}") + len(f"-{REPLICAS_PER_GROUP_MAX - 1}")
    <= KUBERNETES_NAME_LENGTH_MAX
)
assert CLUSTER_NAME_LENGTH_MAX + len(f"-g{GROUPS_MAX - 1}-config") <= KUBERNETES_NAME_LENGTH_MAX
assert REPLICAS_PER_GROUP_MAX >= 1
assert NAME_SERVER_REPLICAS_MAX >= 1
assert TOPIC_NAME_LENGTH_MAX <= 255

RECONCILE_INTERVAL_S = 60.0
"""A Broker is re-read and its children re-applied this often (drift, deleted children, status)."""

RETRY_DELAY_S = 15.0
"""Delay before retrying a reconcile that waits for something (nodes, a reachable cluster)."""

ADMIN_TIMEOUT_S = 10.0
"""Bound on one Topic's admin-protocol conversation with its cluster."""
