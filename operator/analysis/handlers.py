"""kopf handlers for StoreAnalysis: scheduled Spark runs over the brokers' stores.

One reconcile runs on create, update, resume and every ANALYSIS_TICK_S (a timer):

1. parse the spec (spec.py; a bad schedule or time zone -> Ready=False InvalidSchedule /
   InvalidTimeZone and kopf.PermanentError from the event handlers);
2. read the cluster (Broker) and the analysis' Jobs; runs are observed from Jobs only
   (status.observe_runs), so nothing is lost when the operator restarts;
3. plan with the injected clock (schedule.plan): a due run, a Skipped one (starting deadline),
   the next time, recomputed when the schedule or time zone changes;
4. launch a due run, or the `shoal.io/run-now` one, by its deterministic name after the
   concurrency decision (Forbid records Skipped; Replace deletes the active runs first). A create
   that meets AlreadyExists means "already launched", which is what keeps a restart from running
   anything twice;
5. for a newly finished run, read each target's summary (the job pod's termination message),
   mirror it into status.lastRun and, if output.configMap.enabled, a ConfigMap named after the run;
6. prune finished runs beyond the history limits (right after they finish, not when the next one
   starts), then write only the status keys that changed.

Time is `clock()`, a module attribute that tests replace to move time instead of sleeping.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import kopf

from shoal.operator import kube, limits, manifests, schedule
from shoal.operator.analysis import manifests as analysis_manifests
from shoal.operator.analysis.manifests import LABEL_ANALYSIS, LABEL_RUN, LABEL_SUMMARY, LABEL_TARGET
from shoal.operator.analysis.spec import AnalysisSpec, analysis_spec_from
from shoal.operator.analysis.status import (
    Health,
    RunFacts,
    analysis_status,
    observe_runs,
    pod_summary,
    run_record,
    runs_to_prune,
    skipped_record,
)
from shoal.operator.errors import InvalidSpecError
from shoal.operator.settings import allowed_host_roots
from shoal.operator.spec import BrokerSpec, broker_spec_from

GROUP, VERSION, PLURAL = "shoal.io", "v1alpha1", "storeanalyses"
BROKER_API = f"{GROUP}/{VERSION}"

TICK_S = float(os.environ.get("SHOAL_ANALYSIS_TICK_S") or limits.ANALYSIS_TICK_S)
"""The timer's period; SHOAL_ANALYSIS_TICK_S (read at import) lets tests tick fast."""

INVALID_REASONS = {"spec.schedule": "InvalidSchedule", "spec.timeZone": "InvalidTimeZone"}


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


clock: Callable[[], datetime.datetime] = _utc_now
"""The scheduler's time source; tests assign a controllable one."""


# ---------------------------------------------------------------- the cluster's stores


def _storage_nodes(cluster: BrokerSpec) -> dict[str, str]:
    """Pod name -> node holding its store, from the hostPath PVs the Broker reconcile made."""
    nodes = {}
    for volume in kube.cluster_volumes(cluster.uid, manifests.LABEL_CLUSTER_UID):
        meta = volume["metadata"]
        labels = meta.get("labels") or {}
        node = (meta.get("annotations") or {}).get(manifests.ANNOTATION_STORAGE_NODE, "")
        if node and labels.get(manifests.LABEL_GROUP) and labels.get(manifests.LABEL_ORDINAL):
            nodes[f"{labels[manifests.LABEL_GROUP]}-{labels[manifests.LABEL_ORDINAL]}"] = str(node)
    return nodes


def _masters(cluster_body: Mapping[str, Any], cluster: BrokerSpec) -> dict[int, int]:
    """Group -> master ordinal as the Broker's status reports it (after a failover it is not 0)."""
    masters = {}
    for index in range(cluster.groups):
        name = manifests.group_name(cluster, index)
        for group in (cluster_body.get("status") or {}).get("groups") or []:
            ordinal = str(group.get("master") or "").rsplit("-", 1)[-1]
            if group.get("name") == name and ordinal.isdigit():
                masters[index] = int(ordinal)
    return masters


def _cluster(spec: AnalysisSpec) -> tuple[Health, BrokerSpec | None, Mapping[str, Any]]:
    body = kube.get(BROKER_API, "Broker", spec.namespace, spec.cluster)
    if body is None:
        return Health(False, "ClusterNotFound", f"Broker {spec.namespace}/{spec.cluster} does not exist"), None, {}
    try:
        cluster = broker_spec_from(body, allowed_host_roots())
    except InvalidSpecError as error:
        return Health(False, "ClusterNotReady", f"Broker {spec.cluster} has an invalid spec: {error}"), None, body
    message = f"schedule {spec.schedule!r} in {spec.time_zone} over cluster {spec.cluster}"
    return Health(True, "Scheduled", message), cluster, body


# ---------------------------------------------------------------- runs


def _list_jobs(spec: AnalysisSpec) -> list[kube.Object]:
    return kube.list_objects("batch/v1", "Job", spec.namespace, {LABEL_ANALYSIS: spec.name})


def _delete_run(spec: AnalysisSpec, run: RunFacts, logger: Any) -> None:
    """A run's Jobs (their pods go with them), spark-submit driver pods and summary ConfigMap."""
    for target in run.targets:
        kube.delete_with_dependents("batch/v1", "Job", spec.namespace, target.job)
        if spec.spark.runner == "SparkSubmit":
            kube.delete("v1", "Pod", spec.namespace, f"{target.job}-driver")
    kube.delete("v1", "ConfigMap", spec.namespace, run.name)
    logger.info(f"StoreAnalysis {spec.name}: deleted run {run.name} ({run.phase})")


def _launch(
    spec: AnalysisSpec,
    cluster: BrokerSpec,
    cluster_body: Mapping[str, Any],
    run: str,
    scheduled_time: str,
    runs: Sequence[RunFacts],
    logger: Any,
) -> str:
    """Start `run` unless the concurrency policy or its targets forbid it; "" or why it was skipped."""
    active = tuple(r.name for r in runs if r.phase == "Active" and r.name != run)
    decision = schedule.concurrency(spec.concurrency_policy, active)
    if not decision.start:
        return decision.reason
    try:
        targets = analysis_manifests.resolve_targets(
            spec, cluster, _storage_nodes(cluster), _masters(cluster_body, cluster)
        )
    except analysis_manifests.UnresolvedTargetError as error:
        return f"no target: {error}"
    for name in decision.replace:
        _delete_run(spec, next(r for r in runs if r.name == name), logger)
    created = [
        job["metadata"]["name"]
        for job in analysis_manifests.run_jobs(spec, cluster, run, targets, scheduled_time)
        if kube.create_once(job)
    ]
    logger.info(f"StoreAnalysis {spec.name}: run {run} launched Jobs {created or '(all existed)'}")
    return ""


def _summaries(spec: AnalysisSpec, run: str) -> dict[str, Any]:
    """Target pod -> the JSON summary its job left as termination message."""
    pods = kube.list_objects("v1", "Pod", spec.namespace, {LABEL_RUN: run, LABEL_SUMMARY: "true"})
    found: dict[str, Any] = {}
    for pod in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
        target = ((pod["metadata"].get("labels") or {}).get(LABEL_TARGET)) or pod["metadata"]["name"]
        summary = pod_summary(pod)
        if summary or target not in found:
            found[str(target)] = summary
    return found


def _record_finished(
    spec: AnalysisSpec, runs: Sequence[RunFacts], current: Mapping[str, Any], skipped_now: Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """Read the summaries of runs that finished since the last status write (once each: a run in
    status.past*Runs is recorded), write their ConfigMaps, and return the new status.lastRun.

    lastRun is what happened last. A run skipped in this reconcile happened now, so it stays. A run
    that finished since the last write replaces whatever that write recorded, even a Skipped run
    scheduled after it: with Forbid and runs longer than the schedule's period, every tick skips
    while the previous run is active, and ordering by scheduled time alone hid every finished
    run's outcome behind the next skip."""
    recorded = {str(r.get("name")) for key in ("pastSuccessfulRuns", "pastFailedRuns") for r in current.get(key) or []}
    finished: Mapping[str, Any] | None = None
    for run in runs:
        if not run.finished or run.name in recorded:
            continue
        summaries = _summaries(spec, run.name)
        if spec.output.config_map:
            kube.apply(analysis_manifests.summary_config_map(spec, run.name, summaries))
        if finished is None or run.scheduled_time >= str(finished.get("scheduledTime", "")):
            finished = run_record(run, summaries)
    if skipped_now is not None:
        return skipped_now
    return finished if finished is not None else current.get("lastRun")


# ---------------------------------------------------------------- reconcile


def _write_status(patch: kopf.Patch, body: Mapping[str, Any], new_status: Mapping[str, Any]) -> None:
    """Only changed keys: a timer that rewrote the whole status every tick would flood watches."""
    current = body.get("status") or {}
    changed = {key: value for key, value in new_status.items() if current.get(key) != value}
    if changed:
        patch.setdefault("status", {}).update(changed)


def _invalid_status(body: Mapping[str, Any], error: InvalidSpecError, now: str) -> dict[str, Any]:
    health = Health(False, INVALID_REASONS.get(error.field, "InvalidSpec"), str(error))
    current = body.get("status") or {}
    generation = int(body["metadata"].get("generation") or 0)
    suspended = bool((body.get("spec") or {}).get("suspend", False))
    return analysis_status(
        generation, health, suspended, {}, [], current.get("lastRun"), now, current.get("conditions") or []
    )


def reconcile_analysis(body: Mapping[str, Any], patch: kopf.Patch, logger: Any, *, raise_invalid: bool) -> None:
    """See the module docstring."""
    now = clock()
    now_text = schedule.format_time(now)
    current = body.get("status") or {}
    try:
        spec = analysis_spec_from(body)
    except InvalidSpecError as error:
        _write_status(patch, body, _invalid_status(body, error, now_text))
        if raise_invalid:
            raise kopf.PermanentError(f"invalid spec: {error}") from error
        return
    health, cluster, cluster_body = _cluster(spec)
    runs = observe_runs(_list_jobs(spec))
    plan = schedule.plan(
        spec.schedule,
        spec.time_zone,
        now,
        str(current.get("scheduleHash") or ""),
        schedule.parse_time(current.get("nextScheduleTime")),
        spec.starting_deadline_s,
        spec.suspend,
    )
    schedule_fields = {"scheduleHash": plan.schedule_hash, "nextScheduleTime": schedule.format_time(plan.next_time)}
    skipped_now: Mapping[str, Any] | None = None
    wanted: list[tuple[str, str]] = []
    if plan.skipped_time is not None:
        scheduled = schedule.format_time(plan.skipped_time)
        schedule_fields["lastScheduleTime"] = scheduled
        late = f"missed its starting deadline of {spec.starting_deadline_s} s"
        skipped_now = skipped_record(schedule.run_name(spec.name, plan.skipped_time), scheduled, late)
    if plan.due_time is not None:
        schedule_fields["lastScheduleTime"] = schedule.format_time(plan.due_time)
        wanted.append((schedule.run_name(spec.name, plan.due_time), schedule.format_time(plan.due_time)))
    request = (body["metadata"].get("annotations") or {}).get(analysis_manifests.ANNOTATION_RUN_NOW)
    if request:
        wanted.append((schedule.ad_hoc_run_name(spec.name, str(request)), now_text))
        patch.setdefault("metadata", {}).setdefault("annotations", {})[analysis_manifests.ANNOTATION_RUN_NOW] = None
    changed = False
    for run, scheduled in wanted:
        if any(r.name == run for r in runs):
            continue  # launched before (an earlier tick, or before a restart)
        why = "cluster not ready: " + health.message if cluster is None else ""
        if cluster is not None:
            why = _launch(spec, cluster, cluster_body, run, scheduled, runs, logger)
            changed = changed or not why
        if why:
            logger.info(f"StoreAnalysis {spec.name}: run {run} skipped: {why}")
            skipped_now = skipped_record(run, scheduled, why)
    if changed:
        runs = observe_runs(_list_jobs(spec))
    last_run = _record_finished(spec, runs, current, skipped_now)
    pruned = set(runs_to_prune(runs, spec.successful_history_limit, spec.failed_history_limit))
    for run_facts in runs:
        if run_facts.name in pruned:
            _delete_run(spec, run_facts, logger)
    runs = [r for r in runs if r.name not in pruned]
    generation = int(body["metadata"].get("generation") or 0)
    new_status = analysis_status(
        generation, health, spec.suspend, schedule_fields, runs, last_run, now_text, current.get("conditions") or []
    )
    _write_status(patch, body, new_status)


@kopf.on.create(GROUP, VERSION, PLURAL)
def analysis_created(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_analysis(body, patch, logger, raise_invalid=True)


@kopf.on.update(GROUP, VERSION, PLURAL)
def analysis_updated(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_analysis(body, patch, logger, raise_invalid=True)


@kopf.on.resume(GROUP, VERSION, PLURAL)
def analysis_resumed(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_analysis(body, patch, logger, raise_invalid=True)


@kopf.timer(GROUP, VERSION, PLURAL, interval=TICK_S)
def analysis_tick(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    reconcile_analysis(body, patch, logger, raise_invalid=False)
