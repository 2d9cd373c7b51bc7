"""Pure builders for a StreamAnalysis: one StatefulSet of one replica, and its headless Service.

Why a StatefulSet of one and not a Deployment: a Deployment may run a replacement pod while the old
one is still terminating (a node that stopped answering keeps its pod "Terminating" for minutes),
and two queries writing one checkpoint corrupt it. A StatefulSet starts pod `<name>-stream-0`
again only once the old one is gone. Suspending sets replicas to 0; the checkpoint stays.

The pod runs `python -m shoal.spark.jobs.<job>` (shoal.spark.jobs.stream_runner's command line)
with Spark `local[*]` inside it, against the cluster's NameServers (their stable DNS names, as the
brokers get them), its checkpoint in `<subPath>/checkpoint` of spec.checkpoint's claim and its output
in `<subPath>/output` beside it (or in spec.output's directory), and
`--metrics-port`: Prometheus scrapes the pod there, and the operator reads the same figures into
status.progress. Kubernetes restarts the container when the query fails (restartPolicy Always),
and the job goes on from its checkpoint.
"""

from __future__ import annotations

from typing import Any

from shoal.operator import limits, manifests
from shoal.operator.spec import BrokerSpec
from shoal.operator.stream.spec import StreamSpec

Object = dict[str, Any]

LABEL_STREAM = "shoal.io/stream"
COMPONENT = "stream"
CONTAINER = "query"
STATE_MOUNT_PATH = "/stream"
"""spec.checkpoint's claim, whole: the query's directory is its subPath below it."""
OUTPUT_MOUNT_PATH = "/output"
"""spec.output's claim, whole, when it names one of its own."""
METRICS_PORT_NAME = "metrics"
STREAM_UID = manifests.BROKER_UID
"""The image's user; fsGroup makes a claim that supports it writable for that user."""
ACCESS_KEY_ENV, SECRET_KEY_ENV = "SHOAL_ACCESS_KEY", "SHOAL_SECRET_KEY"
"""What stream_runner reads its ACL account from."""


def stateful_set_name(stream: StreamSpec) -> str:
    return f"{stream.name}-stream"


def pod_name(stream: StreamSpec) -> str:
    return f"{stateful_set_name(stream)}-0"


def selector_labels(stream: StreamSpec) -> dict[str, str]:
    return {"app.kubernetes.io/name": "shoal", "app.kubernetes.io/component": COMPONENT, LABEL_STREAM: stream.name}


def stream_labels(stream: StreamSpec) -> dict[str, str]:
    return {
        **selector_labels(stream),
        "app.kubernetes.io/instance": stream.cluster,
        "app.kubernetes.io/part-of": "shoal",
        "app.kubernetes.io/managed-by": manifests.MANAGED_BY,
        manifests.LABEL_CLUSTER: stream.cluster,
    }


def owner_reference(stream: StreamSpec) -> Object:
    return {
        "apiVersion": manifests.API_VERSION,
        "kind": "StreamAnalysis",
        "name": stream.name,
        "uid": stream.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _metadata(stream: StreamSpec, name: str) -> Object:
    return {
        "name": name,
        "namespace": stream.namespace,
        "labels": stream_labels(stream),
        "ownerReferences": [owner_reference(stream)],
    }


def _under(root: str, sub_path: str, *rest: str) -> str:
    return "/".join(part for part in (root, sub_path, *rest) if part)


def checkpoint_path(stream: StreamSpec) -> str:
    """The claims are mounted whole and the job makes its directories below them itself: a subPath
    mount would have the kubelet make a missing directory owned by root, where the query (not
    root) cannot write."""
    return _under(STATE_MOUNT_PATH, stream.checkpoint.sub_path, "checkpoint")


def output_path(stream: StreamSpec) -> str:
    if stream.output is None:
        return _under(STATE_MOUNT_PATH, stream.checkpoint.sub_path, "output")
    return _under(OUTPUT_MOUNT_PATH, stream.output.sub_path)


def job_arguments(stream: StreamSpec, cluster: BrokerSpec) -> list[str]:
    """The job's command line after `python -m shoal.spark.jobs.<module>`."""
    arguments = [
        "--namesrv",
        ";".join(manifests.name_server_addresses(cluster)),
        "--checkpoint",
        checkpoint_path(stream),
        "--output",
        output_path(stream),
        "--group",
        stream.consumer_group,
        "--starting-offsets",
        stream.starting_offsets,
        "--trigger-seconds",
        str(stream.trigger_seconds),
        "--metrics-port",
        str(limits.STREAM_METRICS_PORT),
        "--master",
        "local[*]",
    ]
    for topic in stream.topics:
        arguments += ["--topic", topic]
    if stream.topic_pattern:
        arguments += ["--topic-pattern", stream.topic_pattern]
    if stream.max_messages_per_trigger is not None:
        arguments += ["--max-messages-per-trigger", str(stream.max_messages_per_trigger)]
    for key, value in sorted(stream.spark_conf.items()):
        arguments += ["--conf", f"{key}={value}"]
    return arguments + list(stream.args)


def _env(stream: StreamSpec) -> list[Object]:
    env: list[Object] = [
        {"name": "HOME", "value": "/tmp"},
        {"name": "SPARK_LOCAL_IP", "value": "127.0.0.1"},
        {"name": "SHOAL_STREAM", "value": stream.name},
    ]
    if stream.account_secret:
        env += [
            {"name": variable, "valueFrom": {"secretKeyRef": {"name": stream.account_secret, "key": key}}}
            for variable, key in ((ACCESS_KEY_ENV, "accessKey"), (SECRET_KEY_ENV, "secretKey"))
        ]
    return env


def service(stream: StreamSpec) -> Object:
    """Headless: the StatefulSet's governing Service, and where Prometheus finds the query's /metrics."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(stream, stateful_set_name(stream)),
        "spec": {
            "clusterIP": "None",
            "selector": selector_labels(stream),
            "ports": [{"name": METRICS_PORT_NAME, "port": limits.STREAM_METRICS_PORT, "targetPort": METRICS_PORT_NAME}],
        },
    }


def stateful_set(stream: StreamSpec, cluster: BrokerSpec) -> Object:
    """The query's StatefulSet: one replica, none while suspended."""
    mounts: list[Object] = [{"name": "state", "mountPath": STATE_MOUNT_PATH}, {"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[Object] = [
        {"name": "state", "persistentVolumeClaim": {"claimName": stream.checkpoint.claim_name}},
        {"name": "tmp", "emptyDir": {}},
    ]
    if stream.output is not None:
        mounts.append({"name": "output", "mountPath": OUTPUT_MOUNT_PATH})
        volumes.append({"name": "output", "persistentVolumeClaim": {"claimName": stream.output.claim_name}})
    container: Object = {
        "name": CONTAINER,
        "image": stream.image or cluster.image,
        "imagePullPolicy": cluster.image_pull_policy,
        "command": ["python", "-m", f"shoal.spark.jobs.{stream.job_module}"],
        "args": job_arguments(stream, cluster),
        "env": _env(stream),
        "ports": [{"name": METRICS_PORT_NAME, "containerPort": limits.STREAM_METRICS_PORT}],
        # /metrics answers once the query has started (its first micro-batch may take longer).
        "readinessProbe": {
            "httpGet": {"path": "/metrics", "port": METRICS_PORT_NAME},
            "periodSeconds": 10,
            "timeoutSeconds": int(limits.STREAM_METRICS_TIMEOUT_S),
        },
        "resources": dict(stream.resources),
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": STREAM_UID,
            "runAsGroup": STREAM_UID,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": mounts,
    }
    pod_spec = {
        "automountServiceAccountToken": False,
        # stream_runner finishes the running micro-batch on SIGTERM (its stop timeout is longer).
        "terminationGracePeriodSeconds": 150,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": STREAM_UID,
            "runAsGroup": STREAM_UID,
            "fsGroup": STREAM_UID,
            "fsGroupChangePolicy": "OnRootMismatch",
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": volumes,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _metadata(stream, stateful_set_name(stream)),
        "spec": {
            "serviceName": stateful_set_name(stream),
            "replicas": 0 if stream.suspend else 1,
            "selector": {"matchLabels": selector_labels(stream)},
            "template": {
                "metadata": {
                    "labels": stream_labels(stream),
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(limits.STREAM_METRICS_PORT),
                    },
                },
                "spec": pod_spec,
            },
        },
    }
