"""Pure status of a StoreAnalysis: runs observed from their Jobs in, the object's status out.

A run is the set of Jobs labelled `shoal.io/run=<run>` (one per target); nothing else records it,
so an operator restart loses nothing. Its phase:

    Active            some Job has neither a Complete nor a Failed condition
    Succeeded         every Job Complete
    DeadlineExceeded  some Job Failed with reason DeadlineExceeded (activeDeadlineSeconds)
    Failed            some Job Failed otherwise
    Skipped           never started (starting deadline missed, Forbid, or no target); no Jobs,
                      recorded only in status.lastRun

Conditions and their reasons:

    Ready             True  Scheduled
                      False InvalidSchedule | InvalidTimeZone | InvalidSpec | ClusterNotFound |
                            ClusterNotReady
    Suspended         True  Suspended            False Scheduling
    LastRunSucceeded  True  Succeeded            False Failed | Skipped | DeadlineExceeded
                      Unknown NoRunYet
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shoal.operator import limits
from shoal.operator.analysis.manifests import ANNOTATION_NODE, ANNOTATION_SCHEDULED_TIME, LABEL_RUN, LABEL_TARGET
from shoal.operator.status import condition

FINISHED_PHASES = ("Succeeded", "Failed", "DeadlineExceeded")


@dataclass(frozen=True)
class TargetFacts:
    pod: str
    node: str
    job: str
    phase: str
    message: str = ""


@dataclass(frozen=True)
class RunFacts:
    name: str
    scheduled_time: str
    phase: str
    completion_time: str
    targets: tuple[TargetFacts, ...]

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED_PHASES


def _job_phase(job: Mapping[str, Any]) -> tuple[str, str, str]:
    """(phase, message, completion time) of one Job from its conditions."""
    observed = job.get("status") or {}
    for cond in observed.get("conditions") or []:
        if cond.get("status") != "True":
            continue
        when = str(cond.get("lastTransitionTime") or observed.get("completionTime") or "")
        if cond.get("type") == "Complete":
            return "Succeeded", "", str(observed.get("completionTime") or when)
        if cond.get("type") == "Failed":
            phase = "DeadlineExceeded" if cond.get("reason") == "DeadlineExceeded" else "Failed"
            return phase, str(cond.get("message") or cond.get("reason") or ""), when
    return "Active", "", ""


def observe_runs(jobs: Sequence[Mapping[str, Any]]) -> list[RunFacts]:
    """Group Jobs into runs, oldest scheduled first."""
    by_run: dict[str, list[Mapping[str, Any]]] = {}
    for job in jobs:
        run = ((job.get("metadata") or {}).get("labels") or {}).get(LABEL_RUN)
        if run:
            by_run.setdefault(str(run), []).append(job)
    runs = []
    for name, members in by_run.items():
        targets = []
        completions = []
        for job in sorted(members, key=lambda j: str(j["metadata"]["name"])):
            meta = job["metadata"]
            phase, message, completed = _job_phase(job)
            completions.append(completed)
            targets.append(
                TargetFacts(
                    pod=str((meta.get("labels") or {}).get(LABEL_TARGET, "")),
                    node=str((meta.get("annotations") or {}).get(ANNOTATION_NODE, "")),
                    job=str(meta["name"]),
                    phase=phase,
                    message=message,
                )
            )
        phases = {t.phase for t in targets}
        if "Active" in phases:
            phase = "Active"
        elif "DeadlineExceeded" in phases:
            phase = "DeadlineExceeded"
        elif "Failed" in phases:
            phase = "Failed"
        else:
            phase = "Succeeded"
        scheduled = str((members[0]["metadata"].get("annotations") or {}).get(ANNOTATION_SCHEDULED_TIME, ""))
        runs.append(
            RunFacts(
                name=name,
                scheduled_time=scheduled,
                phase=phase,
                completion_time="" if phase == "Active" else max(completions),
                targets=tuple(targets),
            )
        )
    return sorted(runs, key=lambda r: (r.scheduled_time, r.name))


def runs_to_prune(runs: Sequence[RunFacts], successful_limit: int, failed_limit: int) -> list[str]:
    """Finished runs beyond the history limits, oldest first (active runs are never pruned)."""
    succeeded = [r.name for r in runs if r.phase == "Succeeded"]
    failed = [r.name for r in runs if r.phase in ("Failed", "DeadlineExceeded")]
    return sorted(succeeded[: max(0, len(succeeded) - successful_limit)] + failed[: max(0, len(failed) - failed_limit)])


def parse_summary(message: str) -> dict[str, Any]:
    """A job's termination message as its summary: a JSON object, else the text itself."""
    text = message[: limits.ANALYSIS_SUMMARY_BYTES_MAX].strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"message": text}
    return value if isinstance(value, dict) else {"value": value}


def pod_summary(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The termination message of the pod's first terminated container that left one."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated") or {}
        if terminated.get("message"):
            return parse_summary(str(terminated["message"]))
    return {}


def run_record(run: RunFacts, summaries: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A run as status.lastRun / active[] / past*Runs[] shows it."""
    record: dict[str, Any] = {"name": run.name, "scheduledTime": run.scheduled_time, "phase": run.phase}
    if run.completion_time:
        record["completionTime"] = run.completion_time
    targets = []
    for target in run.targets:
        entry: dict[str, Any] = {"pod": target.pod, "node": target.node, "job": target.job, "phase": target.phase}
        if target.message:
            entry["message"] = target.message
        if summaries and target.pod in summaries:
            entry["summary"] = summaries[target.pod]
        targets.append(entry)
    record["targets"] = targets
    return record


def skipped_record(name: str, scheduled_time: str, message: str) -> dict[str, Any]:
    return {"name": name, "scheduledTime": scheduled_time, "phase": "Skipped", "message": message, "targets": []}


@dataclass(frozen=True)
class Health:
    """Ready's value; False when the spec or the cluster reference cannot work."""

    ready: bool
    reason: str
    message: str


def analysis_status(
    generation: int,
    health: Health,
    suspended: bool,
    schedule_fields: Mapping[str, str],
    runs: Sequence[RunFacts],
    last_run: Mapping[str, Any] | None,
    now: str,
    previous: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The whole status; `schedule_fields` holds scheduleHash / next / last schedule times."""
    if last_run is None:
        outcome: tuple[bool | None, str, str] = (None, "NoRunYet", "no run has finished yet")
    else:
        phase = str(last_run.get("phase"))
        message = str(last_run.get("message") or f"run {last_run.get('name')} {phase.lower()}")
        outcome = (phase == "Succeeded", phase, message)
    suspended_reason = "Suspended" if suspended else "Scheduling"
    result: dict[str, Any] = {
        "observedGeneration": generation,
        "conditions": [
            condition("Ready", health.ready, health.reason, health.message, generation, now, previous),
            condition(
                "Suspended",
                suspended,
                suspended_reason,
                f"spec.suspend is {str(suspended).lower()}",
                generation,
                now,
                previous,
            ),
            condition("LastRunSucceeded", outcome[0], outcome[1], outcome[2], generation, now, previous),
        ],
        **schedule_fields,
        "active": [run_record(r) for r in runs if r.phase == "Active"],
        "pastSuccessfulRuns": [
            {"name": r.name, "scheduledTime": r.scheduled_time, "completionTime": r.completion_time}
            for r in runs
            if r.phase == "Succeeded"
        ],
        "pastFailedRuns": [
            {"name": r.name, "scheduledTime": r.scheduled_time, "completionTime": r.completion_time, "phase": r.phase}
            for r in runs
            if r.phase in ("Failed", "DeadlineExceeded")
        ],
    }
    if last_run is not None:
        result["lastRun"] = dict(last_run)
    succeeded = [r.completion_time for r in runs if r.phase == "Succeeded"]
    if succeeded:
        result["lastSuccessfulTime"] = max(succeeded)
    return result
