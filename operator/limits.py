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
SECRET_NAME_LENGTH_MAX = 253
"""A Secret's name and a key of its data (Kubernetes' DNS-subdomain and key limits)."""
SECRET_HASH_LENGTH = 16
"""Hex digits of the SHA-256 of the ACL/TLS Secrets kept in the broker pod template."""
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
"""A Topic is re-applied to its cluster this often (drift); a conflicting Topic re-checks this often."""

BROKER_RECONCILE_INTERVAL_S = 10.0
"""A Broker is re-read and its children re-applied this often: drift, status, the next step of a
roll, and a master's unreadiness for failover are all seen on this beat."""

ROLL_SLAVE_LAG_MAX_BYTES = 1024 * 1024
"""A master is restarted in a roll only when each of its slaves is at most this far behind."""

ROLL_MASTER_RESTART_GRACE_S = 600.0
"""After the roll itself restarts a master, Automatic failover waits this long instead of
FAILOVER_GRACE_S: a planned restart recovering a large store is not a failure."""

FAILOVER_GRACE_S = 30.0
"""Automatic failover promotes a slave after the master pod has been unready this long: longer
than a broker restart's recovery of a clean store, so a roll or a node blip does not fail over."""

RETRY_DELAY_S = 15.0
"""Delay before retrying a reconcile that waits for something (nodes, a reachable cluster)."""

POD_STOP_POLL_S = 3.0
"""A deleted Broker with reclaimPolicy Delete: how often to look whether its pods have stopped
(their grace period is the broker's shutdown), so the store directories can go."""

TOPIC_SHRINK_RECHECK_S = 5.0
"""A Topic whose read queues wait for consumers before shrinking is re-checked this often."""

ADMIN_TIMEOUT_S = 10.0
"""Bound on one admin-protocol conversation with a cluster (a Topic's, a promotion, a drain check)."""

API_REQUEST_TIMEOUT_S = 30.0
"""Bound on every Kubernetes API request (connect + read)."""

API_ERROR_BODY_LENGTH_MAX = 500
"""Characters of an API server's error answer kept in kube.ApiError's message (and the logs)."""

BROKER_TERMINATION_GRACE_S = 60
"""terminationGracePeriodSeconds of a broker pod: how long its shutdown may take before the
kubelet sends SIGKILL."""

CLEANUP_JOB_TTL_S = 3600
"""A finished cleanup Job (it has no owner: the Broker is gone) is removed after this long."""

CLEANUP_JOB_RETRIES_MAX = 3
"""backoffLimit of a cleanup Job (reclaimPolicy Delete)."""

# ---------------------------------------------------------------- StoreAnalysis (scheduled Spark runs)

ANALYSIS_NAME_LENGTH_MAX = 36
"""A StoreAnalysis' metadata.name. Its longest child is the spark-submit driver pod
`<analysis>-now-<8 hex>-g15-2-driver`: 36 + 13 + 6 + 7 = 62 <= 63."""

ANALYSIS_RUN_SUFFIX_LENGTH_MAX = len("-now-") + 8
"""`-<minutes since the epoch>` (8 digits until the year 2160) or `-now-<8 hex>`."""

ANALYSIS_TARGET_SUFFIX_LENGTH_MAX = len(f"-g{GROUPS_MAX - 1}-{REPLICAS_PER_GROUP_MAX - 1}")

ANALYSIS_MISSED_RUNS_COUNTED_MAX = 100
"""Missed fire times counted (never run) after downtime; the CronJob controller's bound too."""

ANALYSIS_HISTORY_LIMIT_MAX = 20
"""successful/failedRunsHistoryLimit: finished runs (Jobs, summaries) kept per analysis."""

ANALYSIS_DEADLINE_S_MAX = 7 * 24 * 3600
"""startingDeadlineSeconds and activeDeadlineSeconds: a week."""

ANALYSIS_EXECUTOR_INSTANCES_MAX = 64
"""spark.executor.instances of a SparkSubmit run (the CRD's maximum too)."""

ANALYSIS_ACTIVE_DEADLINE_S_DEFAULT = 3600
"""activeDeadlineSeconds of each run's Jobs when the spec does not set it."""

ANALYSIS_ARGS_MAX = 32
"""Extra job arguments (analysis.args)."""

ANALYSIS_SUMMARY_BYTES_MAX = 4096
"""A job's JSON summary is its pod's termination message, which the kubelet cuts at 4096 bytes."""

ANALYSIS_TICK_S = 10.0
"""The scheduler timer's period per StoreAnalysis (the CronJob controller also polls every 10 s);
a run starts at most this late."""

assert (
    ANALYSIS_NAME_LENGTH_MAX + ANALYSIS_RUN_SUFFIX_LENGTH_MAX + ANALYSIS_TARGET_SUFFIX_LENGTH_MAX + len("-driver")
    <= KUBERNETES_NAME_LENGTH_MAX
)
assert ANALYSIS_TICK_S < 60, "cron has minute resolution: tick more often than once a minute"
assert 0 < ANALYSIS_ACTIVE_DEADLINE_S_DEFAULT <= ANALYSIS_DEADLINE_S_MAX

# ---------------------------------------------------------------- StreamAnalysis (a long-running query)

STREAM_NAME_LENGTH_MAX = 45
"""A StreamAnalysis' metadata.name. Its StatefulSet is `<name>-stream`, whose pods carry the label
controller-revision-hash `<name>-stream-<10 characters>`: 45 + 7 + 11 = 63."""

STREAM_TOPICS_MAX = 64
"""spec.topics (the CRD's maxItems too)."""

STREAM_TRIGGER_S_MAX = 3600
"""spec.triggerSeconds: at most one micro-batch an hour."""

STREAM_TRIGGER_S_DEFAULT = 5

STREAM_ARGS_MAX = 32
"""Extra job arguments (spec.args)."""

STREAM_METRICS_PORT = 9108
"""The query pod's /metrics (`--metrics-port`): the operator reads status.progress from it."""

STREAM_METRICS_TIMEOUT_S = 2.0
"""One read of a query pod's /metrics; a pod that does not answer in time leaves the last progress."""

STREAM_METRICS_BYTES_MAX = 1 << 20
"""A query's /metrics text read at most: its lag family has one series per queue."""

STREAM_LAG_QUEUES_IN_STATUS_MAX = 32
"""status.progress.lagPerQueue keeps the queues furthest behind; /metrics has them all."""

STREAM_TERMINATION_MESSAGE_CHARS_MAX = 1024
"""status.lastTermination.message: the end of the container's termination message."""

STREAM_TICK_S = 15.0
"""How often the operator reads each query's pod and progress into its status."""
