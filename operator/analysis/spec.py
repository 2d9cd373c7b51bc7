"""StoreAnalysis spec as frozen dataclasses, parsed from the custom resource (pure).

Like spec.py for Broker and Topic: defaults are applied here too (an emulator or an old API
server may not), every CEL rule of crds/storeanalysis.yaml is repeated with the same message
(ANALYSIS_CEL_MESSAGES; tests/operator/test_crds.py holds the two in step), and what a schema
cannot check is added: that the schedule parses as cron and the time zone exists (the API server
has no tz database in CEL). Those two raise InvalidSpecError on the fields `spec.schedule` and
`spec.timeZone`, which the handlers report as InvalidSchedule and InvalidTimeZone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shoal.operator import limits, schedule
from shoal.operator.errors import InvalidSpecError
from shoal.operator.spec import int_in, one_of, require
from shoal.spark.jobs import JOBS

ANALYSIS_KINDS = {
    "TopicStats": "topic_stats",
    "ConsumerLag": "consumer_lag",
    "DlqReport": "dlq_report",
    "StoreAudit": "store_audit",
    "Export": "export",
}
"""analysis.kind -> module of shoal.spark.jobs (each has main(argv) with --store and --output)."""
assert set(ANALYSIS_KINDS.values()) <= set(JOBS), "every StoreAnalysis kind names a job of shoal.spark.jobs"

OPERATOR_OWNED_SPARK_CONF_PREFIXES = (
    "spark.master",
    "spark.submit.deployMode",
    "spark.kubernetes.namespace",
    "spark.kubernetes.container.image",
    "spark.kubernetes.driver.pod.name",
    "spark.kubernetes.driver.node.selector.",
    "spark.kubernetes.executor.node.selector.",
    "spark.kubernetes.driver.volumes.",
    "spark.kubernetes.executor.volumes.",
    "spark.kubernetes.authenticate.driver.serviceAccountName",
)
"""sparkConf keys the operator sets: pinning, the read-only store mount and identity must hold."""

WINDOW_KINDS = ("TopicStats", "Export")
"""Kinds whose jobs take --since (shoal.spark.jobs.runner's store-time filters)."""

NAME_PATTERN = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
WINDOW_PATTERN = re.compile(r"^[0-9]{1,5}(m|h|d)$")

ANALYSIS_CEL_MESSAGES = {
    "immutable": "field is immutable",
    "export_output": "analysis kind Export requires output.persistentVolumeClaim.claimName",
    "owned_spark_conf": "spark.sparkConf must not set operator-owned keys",
    "window_kind": "analysis.window applies only to kinds TopicStats and Export",
}
"""Messages of crds/storeanalysis.yaml's `x-kubernetes-validations`, reused verbatim here."""


@dataclass(frozen=True)
class TargetSpec:
    groups: tuple[int, ...] = ()
    """Group indices to analyse; empty: every group of the cluster."""
    replica: str = "PreferSlave"
    """Master | PreferSlave | AllReplicas."""


@dataclass(frozen=True)
class SparkSpec:
    runner: str = "Local"
    """Local (pyspark local[*] inside the Job's pod) | SparkSubmit (cluster mode on Kubernetes)."""
    image: str = ""
    """Empty: the cluster's image (Broker.spec.image)."""
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    driver_resources: Mapping[str, Any] = field(default_factory=dict)
    executor_resources: Mapping[str, Any] = field(default_factory=dict)
    executor_instances: int = 1
    service_account_name: str = "shoal-spark"


@dataclass(frozen=True)
class OutputSpec:
    config_map: bool = True
    """Write each finished run's summaries to a ConfigMap named after the run."""
    claim_name: str = ""
    sub_path: str = ""


@dataclass(frozen=True)
class AnalysisSpec:
    name: str
    namespace: str
    uid: str
    cluster: str
    schedule: str
    kind: str
    time_zone: str = "UTC"
    suspend: bool = False
    concurrency_policy: str = "Forbid"
    starting_deadline_s: int | None = None
    active_deadline_s: int = limits.ANALYSIS_ACTIVE_DEADLINE_S_DEFAULT
    successful_history_limit: int = 3
    failed_history_limit: int = 3
    target: TargetSpec = TargetSpec()
    window_since: str = ""
    """Only store files overlapping the last `window_since` (e.g. 24h) are read; empty: all."""
    args: tuple[str, ...] = ()
    spark: SparkSpec = SparkSpec()
    output: OutputSpec = OutputSpec()

    @property
    def job_module(self) -> str:
        return ANALYSIS_KINDS[self.kind]


def _spark_from(raw: Mapping[str, Any]) -> SparkSpec:
    conf = {str(k): str(v) for k, v in (raw.get("sparkConf") or {}).items()}
    require(
        not any(key.startswith(OPERATOR_OWNED_SPARK_CONF_PREFIXES) for key in conf),
        "spec.spark.sparkConf",
        ANALYSIS_CEL_MESSAGES["owned_spark_conf"],
    )
    executor = raw.get("executor") or {}
    return SparkSpec(
        runner=one_of(raw.get("runner", "Local"), "spec.spark.runner", ("Local", "SparkSubmit")),
        image=str(raw.get("image", "")),
        spark_conf=conf,
        driver_resources=dict((raw.get("driver") or {}).get("resources") or {}),
        executor_resources=dict(executor.get("resources") or {}),
        executor_instances=int_in(
            executor.get("instances", 1), "spec.spark.executor.instances", 1, limits.ANALYSIS_EXECUTOR_INSTANCES_MAX
        ),
        service_account_name=str(raw.get("serviceAccountName") or SparkSpec.service_account_name),
    )


def analysis_spec_from(body: Mapping[str, Any]) -> AnalysisSpec:
    """Parse a StoreAnalysis object (metadata + spec), applying defaults; raise InvalidSpecError."""
    metadata = body["metadata"]
    name = str(metadata["name"])
    require(
        len(name) <= limits.ANALYSIS_NAME_LENGTH_MAX and NAME_PATTERN.match(name) is not None,
        "metadata.name",
        f"must be a DNS label of at most {limits.ANALYSIS_NAME_LENGTH_MAX} characters",
    )
    spec = body.get("spec") or {}
    raw_schedule = str(spec.get("schedule", ""))
    try:
        schedule.check_schedule(raw_schedule)
    except schedule.ScheduleError as error:
        raise InvalidSpecError("spec.schedule", str(error)) from error
    time_zone = str(spec.get("timeZone") or "UTC")
    try:
        schedule.zone_of(time_zone)
    except schedule.TimeZoneError as error:
        raise InvalidSpecError("spec.timeZone", str(error)) from error
    target = spec.get("target") or {}
    analysis = spec.get("analysis") or {}
    output = spec.get("output") or {}
    claim = output.get("persistentVolumeClaim") or {}
    kind = one_of(analysis.get("kind", "TopicStats"), "spec.analysis.kind", tuple(ANALYSIS_KINDS))
    require(kind != "Export" or bool(claim.get("claimName")), "spec.output", ANALYSIS_CEL_MESSAGES["export_output"])
    window = str((analysis.get("window") or {}).get("since", ""))
    require(window == "" or WINDOW_PATTERN.match(window) is not None, "spec.analysis.window.since", "e.g. 90m, 24h, 7d")
    require(window == "" or kind in WINDOW_KINDS, "spec.analysis.window", ANALYSIS_CEL_MESSAGES["window_kind"])
    args = tuple(str(a) for a in analysis.get("args") or ())
    require(len(args) <= limits.ANALYSIS_ARGS_MAX, "spec.analysis.args", f"at most {limits.ANALYSIS_ARGS_MAX}")
    deadline = spec.get("startingDeadlineSeconds")
    return AnalysisSpec(
        name=name,
        namespace=str(metadata.get("namespace", "default")),
        uid=str(metadata.get("uid", "")),
        cluster=str(spec["clusterRef"]["name"]),
        schedule=raw_schedule,
        kind=kind,
        time_zone=time_zone,
        suspend=bool(spec.get("suspend", False)),
        concurrency_policy=one_of(
            spec.get("concurrencyPolicy", "Forbid"), "spec.concurrencyPolicy", ("Allow", "Forbid", "Replace")
        ),
        starting_deadline_s=None
        if deadline is None
        else int_in(deadline, "spec.startingDeadlineSeconds", 0, limits.ANALYSIS_DEADLINE_S_MAX),
        active_deadline_s=int_in(
            spec.get("activeDeadlineSeconds", limits.ANALYSIS_ACTIVE_DEADLINE_S_DEFAULT),
            "spec.activeDeadlineSeconds",
            1,
            limits.ANALYSIS_DEADLINE_S_MAX,
        ),
        successful_history_limit=int_in(
            spec.get("successfulRunsHistoryLimit", 3),
            "spec.successfulRunsHistoryLimit",
            0,
            limits.ANALYSIS_HISTORY_LIMIT_MAX,
        ),
        failed_history_limit=int_in(
            spec.get("failedRunsHistoryLimit", 3), "spec.failedRunsHistoryLimit", 0, limits.ANALYSIS_HISTORY_LIMIT_MAX
        ),
        target=TargetSpec(
            groups=tuple(int_in(g, "spec.target.groups[]", 0, limits.GROUPS_MAX - 1) for g in target.get("groups", ())),
            replica=one_of(
                target.get("replica", "PreferSlave"), "spec.target.replica", ("Master", "PreferSlave", "AllReplicas")
            ),
        ),
        window_since=window,
        args=args,
        spark=_spark_from(spec.get("spark") or {}),
        output=OutputSpec(
            config_map=bool((output.get("configMap") or {}).get("enabled", True)),
            claim_name=str(claim.get("claimName", "")),
            sub_path=str(claim.get("subPath", "")),
        ),
    )
