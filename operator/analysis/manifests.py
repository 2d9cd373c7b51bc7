"""Pure builders for StoreAnalysis runs: which replicas to read, and one Job per replica.

Why one Job per replica (docs/operator-design.md §4.3): each store lives on one node's hostPath
and Spark has no locality for hostPath files, so every target is pinned to the node holding its
store (`nodeSelector: kubernetes.io/hostname`, the key the broker PVs' nodeAffinity uses) and
mounts that directory read-only. The paths and nodes are the ones manifests.py gives the broker
PVs (`<root>/<ns>/<cluster>/<pod>`, node from the PV's `shoal.io/storage-node` annotation).

Names: a run is `<analysis>-<scheduled minutes since the epoch>` (schedule.run_name); its Jobs are
`<run>-g<i>-<ordinal>`; a spark-submit driver pod is `<job>-driver`. All deterministic, so a
repeated create is a 409 and never a second run.

Command line (shoal.spark.jobs.runner): `python -m shoal.spark.jobs.<module> /store --output
/output [--since <ISO time>] [analysis.args] --master local[*]`. `--since` is the run's scheduled
time minus `analysis.window.since`, so a re-launched run reads the same window.

Results: a job writes `summary.json` (a small JSON object) into its --output directory. For runner
Local that file *is* the container's `terminationMessagePath`, so the kubelet copies it into the
pod status (`state.terminated.message`, at most 4096 bytes) whether the job succeeds or fails, and
the operator reads it back with no API permission in the job, no sidecar and no shared volume.
Spark builds the driver pod of runner SparkSubmit itself, so there the job is asked through
SHOAL_TERMINATION_MESSAGE_PATH (a driver env var) to copy its summary to /dev/termination-log.
The pod that runs the job's main() carries the label `shoal.io/summary: "true"`: the Job's pod for
Local, the driver pod for SparkSubmit (the submitter pod only waits for the application). Tables
(Export, ...) go to output.persistentVolumeClaim at `<subPath>/<run>/<target pod>` when set.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shoal.operator import manifests
from shoal.operator.analysis.spec import AnalysisSpec
from shoal.operator.spec import BrokerSpec
from shoal.spark.jobs import SUMMARY_FILE_NAME, TERMINATION_MESSAGE_ENV

Object = dict[str, Any]

LABEL_ANALYSIS = "shoal.io/analysis"
LABEL_RUN = "shoal.io/run"
LABEL_TARGET = "shoal.io/target"
LABEL_SUMMARY = "shoal.io/summary"
ANNOTATION_SCHEDULED_TIME = "shoal.io/scheduled-time"
ANNOTATION_NODE = "shoal.io/node"
ANNOTATION_RUN_NOW = "shoal.io/run-now"

STORE_MOUNT_PATH = "/store"
OUTPUT_MOUNT_PATH = "/output"
SUMMARY_PATH = f"{OUTPUT_MOUNT_PATH}/{SUMMARY_FILE_NAME}"
"""Where a job's summary lands: the runner writes SUMMARY_FILE_NAME into its --output directory."""
DRIVER_TERMINATION_MESSAGE_PATH = "/dev/termination-log"
SPARK_SCRATCH_OUTPUT = "/tmp/shoal-output"
SPARK_APP_ROOT = "local:///opt/shoal/spark/jobs"
"""Where the Shoal image keeps the job modules as files, for spark-submit's `local://` app."""
K8S_MASTER = "k8s://https://kubernetes.default.svc"
SPARK_DRIVER_CONTAINER = "spark-kubernetes-driver"
HOSTNAME_LABEL = "kubernetes.io/hostname"
ANALYSIS_UID = manifests.BROKER_UID
"""The store directories belong to the broker's user; reading as the same user needs no root."""


@dataclass(frozen=True)
class Target:
    """One replica's store: the pod that writes it, the node it lives on and its host path."""

    group: int
    ordinal: int
    pod: str
    role: str
    """Master | Slave, at the time the run was planned."""
    node: str
    path: str

    @property
    def suffix(self) -> str:
        return f"g{self.group}-{self.ordinal}"


class UnresolvedTargetError(ValueError):
    """A target's store has no node yet (its PV does not exist) or the storage type has no host path."""


def resolve_targets(
    analysis: AnalysisSpec,
    cluster: BrokerSpec,
    storage_nodes: Mapping[str, str],
    masters: Mapping[int, int] | None = None,
) -> list[Target]:
    """The replicas a run reads, per `target.replica`; `masters` maps a group to its master
    ordinal (Broker status, default 0); PreferSlave takes the lowest-ordinal slave, else the master."""
    if cluster.storage.type != "HostPath":
        raise UnresolvedTargetError(f"storage type {cluster.storage.type} has no host path to analyse")
    masters = masters or {}
    groups = analysis.target.groups or tuple(range(cluster.groups))
    targets = []
    for group in groups:
        if group >= cluster.groups:
            raise UnresolvedTargetError(f"group {group} does not exist (the cluster has {cluster.groups})")
        master = masters.get(group, 0)
        slaves = [n for n in range(cluster.replicas_per_group) if n != master]
        if analysis.target.replica == "AllReplicas":
            ordinals = list(range(cluster.replicas_per_group))
        elif analysis.target.replica == "PreferSlave" and slaves:
            ordinals = slaves[:1]
        else:
            ordinals = [master]
        for ordinal in ordinals:
            pod = manifests.pod_name(cluster, group, ordinal)
            node = storage_nodes.get(pod, "")
            if not node:
                raise UnresolvedTargetError(f"the store of {pod} has no node yet")
            targets.append(
                Target(
                    group=group,
                    ordinal=ordinal,
                    pod=pod,
                    role="Master" if ordinal == master else "Slave",
                    node=node,
                    path=manifests.host_directory(cluster, group, ordinal),
                )
            )
    return targets


# ---------------------------------------------------------------- metadata


def job_name(run: str, target: Target) -> str:
    return f"{run}-{target.suffix}"


def driver_pod_name(run: str, target: Target) -> str:
    return f"{job_name(run, target)}-driver"


def run_labels(analysis: AnalysisSpec, run: str, target: Target | None = None) -> dict[str, str]:
    result = {
        "app.kubernetes.io/name": "shoal",
        "app.kubernetes.io/instance": analysis.cluster,
        "app.kubernetes.io/component": "analysis",
        "app.kubernetes.io/part-of": "shoal",
        "app.kubernetes.io/managed-by": manifests.MANAGED_BY,
        manifests.LABEL_CLUSTER: analysis.cluster,
        LABEL_ANALYSIS: analysis.name,
        LABEL_RUN: run,
    }
    if target is not None:
        result[LABEL_TARGET] = target.pod
    return result


def owner_reference(analysis: AnalysisSpec) -> dict[str, Any]:
    return {
        "apiVersion": manifests.API_VERSION,
        "kind": "StoreAnalysis",
        "name": analysis.name,
        "uid": analysis.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


# ---------------------------------------------------------------- the job's command line


WINDOW_UNITS_S = {"m": 60, "h": 3600, "d": 86400}


def window_start(scheduled_time: str, window: str) -> str:
    """`scheduled_time` minus `window` (90m, 24h, 7d) as an ISO-8601 UTC time."""
    scheduled = datetime.datetime.strptime(scheduled_time, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    since = scheduled - datetime.timedelta(seconds=int(window[:-1]) * WINDOW_UNITS_S[window[-1]])
    return since.strftime("%Y-%m-%dT%H:%M:%SZ")


def job_arguments(analysis: AnalysisSpec, scheduled_time: str, output_dir: str = OUTPUT_MOUNT_PATH) -> list[str]:
    """What every runner passes to `shoal.spark.jobs.<module>` (the runner adds --master for Local)."""
    arguments = [STORE_MOUNT_PATH, "--output", output_dir]
    if analysis.window_since:
        arguments += ["--since", window_start(scheduled_time, analysis.window_since)]
    return arguments + list(analysis.args)


def _job_env(analysis: AnalysisSpec, run: str, target: Target) -> list[Object]:
    return [
        {"name": "HOME", "value": "/tmp"},
        {"name": "SHOAL_ANALYSIS", "value": analysis.name},
        {"name": "SHOAL_RUN", "value": run},
        {"name": "SHOAL_TARGET_POD", "value": target.pod},
    ]


def output_sub_path(analysis: AnalysisSpec, run: str, target: Target) -> str:
    """Where a target's tables land on output.persistentVolumeClaim (the kubelet creates it)."""
    return "/".join(part for part in (analysis.output.sub_path, run, target.pod) if part)


def _security_context() -> Object:
    return {
        "runAsNonRoot": True,
        "runAsUser": ANALYSIS_UID,
        "runAsGroup": ANALYSIS_UID,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def _output_volume(analysis: AnalysisSpec, run: str, target: Target) -> tuple[Object, Object]:
    """(volume, mount) of --output: the claim's per-run directory, else scratch space."""
    mount: Object = {"name": "output", "mountPath": OUTPUT_MOUNT_PATH}
    if not analysis.output.claim_name:
        return {"name": "output", "emptyDir": {}}, mount
    mount["subPath"] = output_sub_path(analysis, run, target)
    return {"name": "output", "persistentVolumeClaim": {"claimName": analysis.output.claim_name}}, mount


# ---------------------------------------------------------------- Jobs


def _job(
    analysis: AnalysisSpec,
    run: str,
    target: Target,
    scheduled_time: str,
    pod_spec: Object,
    pod_labels: Mapping[str, str],
) -> Object:
    labels = run_labels(analysis, run, target)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(run, target),
            "namespace": analysis.namespace,
            "labels": labels,
            "annotations": {ANNOTATION_SCHEDULED_TIME: scheduled_time, ANNOTATION_NODE: target.node},
            "ownerReferences": [owner_reference(analysis)],
        },
        "spec": {
            # A failed analysis is reported, not retried: the next scheduled run is the retry.
            "backoffLimit": 0,
            "activeDeadlineSeconds": analysis.active_deadline_s,
            "template": {"metadata": {"labels": dict(pod_labels)}, "spec": pod_spec},
        },
    }


def local_job(analysis: AnalysisSpec, cluster: BrokerSpec, run: str, target: Target, scheduled_time: str) -> Object:
    """runner Local: pyspark `local[*]` inside one pod on the store's node, store mounted read-only."""
    output_volume, output_mount = _output_volume(analysis, run, target)
    container = {
        "name": "analysis",
        "image": analysis.spark.image or cluster.image,
        "imagePullPolicy": cluster.image_pull_policy,
        "command": ["python", "-m", f"shoal.spark.jobs.{analysis.job_module}"],
        "args": [*job_arguments(analysis, scheduled_time), "--master", "local[*]"],
        "env": [*_job_env(analysis, run, target), {"name": "SPARK_LOCAL_IP", "value": "127.0.0.1"}],
        "resources": dict(analysis.spark.driver_resources),
        "securityContext": _security_context(),
        "terminationMessagePath": SUMMARY_PATH,
        "terminationMessagePolicy": "File",
        "volumeMounts": [
            {"name": "store", "mountPath": STORE_MOUNT_PATH, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
            output_mount,
        ],
    }
    pod_spec = {
        "restartPolicy": "Never",
        "nodeSelector": {HOSTNAME_LABEL: target.node},
        "automountServiceAccountToken": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [
            # type Directory: a missing store is an error, never an empty directory made on the node.
            {"name": "store", "hostPath": {"path": target.path, "type": "Directory"}},
            {"name": "tmp", "emptyDir": {}},
            output_volume,
        ],
    }
    pod_labels = {**run_labels(analysis, run, target), LABEL_SUMMARY: "true"}
    return _job(analysis, run, target, scheduled_time, pod_spec, pod_labels)


def _spark_memory(quantity: Any) -> str | None:
    """A Kubernetes memory quantity as Spark's size (512Mi -> 512m); None if it has no Spark form."""
    text = str(quantity)
    for suffix, spark_suffix in (("Gi", "g"), ("Mi", "m")):
        if text.endswith(suffix) and text[: -len(suffix)].isdigit():
            return text[: -len(suffix)] + spark_suffix
    return None


def _resource_conf(role: str, resources: Mapping[str, Any]) -> dict[str, str]:
    conf = {}
    requests, limits_ = resources.get("requests") or {}, resources.get("limits") or {}
    if "cpu" in requests:
        conf[f"spark.kubernetes.{role}.request.cores"] = str(requests["cpu"])
    if "cpu" in limits_:
        conf[f"spark.kubernetes.{role}.limit.cores"] = str(limits_["cpu"])
    memory = _spark_memory(requests.get("memory") or limits_.get("memory") or "")
    if memory:
        conf[f"spark.{role}.memory"] = memory
    return conf


def spark_conf(analysis: AnalysisSpec, cluster: BrokerSpec, run: str, target: Target) -> dict[str, str]:
    """Every --conf of a spark-submit run: pinning and the read-only store mount on driver and
    executors, deterministic driver pod name and labels (to read the summary and to prune)."""
    conf = dict(analysis.spark.spark_conf)
    for role in ("driver", "executor"):
        volume = f"spark.kubernetes.{role}.volumes.hostPath.store"
        conf |= {
            f"spark.kubernetes.{role}.node.selector.{HOSTNAME_LABEL}": target.node,
            f"{volume}.options.path": target.path,
            f"{volume}.options.type": "Directory",
            f"{volume}.mount.path": STORE_MOUNT_PATH,
            f"{volume}.mount.readOnly": "true",
        }
        for key, value in run_labels(analysis, run, target).items():
            conf[f"spark.kubernetes.{role}.label.{key}"] = value
        conf |= _resource_conf(
            role, analysis.spark.driver_resources if role == "driver" else analysis.spark.executor_resources
        )
    conf |= {
        "spark.kubernetes.namespace": analysis.namespace,
        "spark.kubernetes.container.image": analysis.spark.image or cluster.image,
        "spark.kubernetes.container.image.pullPolicy": cluster.image_pull_policy,
        "spark.kubernetes.authenticate.driver.serviceAccountName": analysis.spark.service_account_name,
        "spark.kubernetes.driver.pod.name": driver_pod_name(run, target),
        f"spark.kubernetes.driver.label.{LABEL_SUMMARY}": "true",
        "spark.kubernetes.submission.waitAppCompletion": "true",
        "spark.executor.instances": str(analysis.spark.executor_instances),
    }
    conf[f"spark.kubernetes.driverEnv.{TERMINATION_MESSAGE_ENV}"] = DRIVER_TERMINATION_MESSAGE_PATH
    if analysis.output.claim_name:
        # Spark writes tables from the executors too; all pods share the one node (RWO is fine).
        for role in ("driver", "executor"):
            claim = f"spark.kubernetes.{role}.volumes.persistentVolumeClaim.output"
            conf |= {
                f"{claim}.options.claimName": analysis.output.claim_name,
                f"{claim}.mount.path": OUTPUT_MOUNT_PATH,
                f"{claim}.mount.subPath": output_sub_path(analysis, run, target),
            }
    return conf


def spark_submit_job(
    analysis: AnalysisSpec, cluster: BrokerSpec, run: str, target: Target, scheduled_time: str
) -> Object:
    """runner SparkSubmit: a Job whose pod runs `spark-submit --deploy-mode cluster` and waits.

    The submitter needs the Spark service account (it creates the driver pod); the driver and
    executors, not this pod, read the store, so only they mount it.
    """
    arguments = ["--master", K8S_MASTER, "--deploy-mode", "cluster", "--name", job_name(run, target)]
    for key, value in sorted(spark_conf(analysis, cluster, run, target).items()):
        arguments += ["--conf", f"{key}={value}"]
    # Without a claim the driver's tables are scratch: a directory a non-root driver may create.
    output_dir = OUTPUT_MOUNT_PATH if analysis.output.claim_name else SPARK_SCRATCH_OUTPUT
    arguments += [f"{SPARK_APP_ROOT}/{analysis.job_module}.py", *job_arguments(analysis, scheduled_time, output_dir)]
    container = {
        "name": "spark-submit",
        "image": analysis.spark.image or cluster.image,
        "imagePullPolicy": cluster.image_pull_policy,
        "command": ["spark-submit"],
        "args": arguments,
        "env": _job_env(analysis, run, target),
        "securityContext": _security_context(),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    pod_spec = {
        "restartPolicy": "Never",
        "serviceAccountName": analysis.spark.service_account_name,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [{"name": "tmp", "emptyDir": {}}],
    }
    return _job(analysis, run, target, scheduled_time, pod_spec, run_labels(analysis, run, target))


def run_jobs(
    analysis: AnalysisSpec, cluster: BrokerSpec, run: str, targets: Sequence[Target], scheduled_time: str
) -> list[Object]:
    """Every Job of one run, one per target, for the analysis' runner."""
    build = local_job if analysis.spark.runner == "Local" else spark_submit_job
    return [build(analysis, cluster, run, target, scheduled_time) for target in targets]


def summary_config_map(analysis: AnalysisSpec, run: str, summaries: Mapping[str, Any]) -> Object:
    """output.configMap: a finished run's summaries (`<target pod>.json`), named after the run."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": run,
            "namespace": analysis.namespace,
            "labels": run_labels(analysis, run),
            "ownerReferences": [owner_reference(analysis)],
        },
        "data": {f"{pod}.json": json.dumps(summary, sort_keys=True) for pod, summary in sorted(summaries.items())},
    }
