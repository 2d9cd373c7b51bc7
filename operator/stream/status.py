"""A StreamAnalysis' status from what the operator reads (pure): its pod and the query's /metrics.

`progress_from_metrics` turns the job's Prometheus text (shoal.spark.jobs.stream_metrics) into
status.progress: the last micro-batch's id, rows, rates and duration, the total lag and the
queues furthest behind. `pod_facts` reads the pod's phase, readiness, restarts and how its
container last ended. `stream_status` makes the whole status from them, with the Ready condition:

    Running         the query's container runs and answers on /metrics
    Starting        the pod exists, the query is not answering yet (Spark starting, first batch)
    Failing         the container is waiting to be restarted after a failure (CrashLoopBackOff, ...)
    Pending         no pod yet (being scheduled, or the StatefulSet was just made)
    Suspended       spec.suspend: no pod, the checkpoint kept
    ClusterNotFound / InvalidSpec   nothing runs

A progress read that fails keeps the last one (with its readAt), so a pod busy in a long batch
does not blank the figures.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from shoal.operator import limits
from shoal.operator.analysis.status import Health
from shoal.operator.status import condition

METRIC_PREFIX = "shoal_stream_"
WAITING_FAILURES = frozenset({"CrashLoopBackOff", "Error", "ImagePullBackOff", "ErrImagePull", "CreateContainerError"})
"""Container waiting reasons that mean the query cannot run now (not merely starting)."""


@dataclass(frozen=True)
class PodFacts:
    name: str
    phase: str
    ready: bool
    running: bool
    restarts: int
    waiting_reason: str
    ip: str
    last_termination: dict[str, Any] | None


def pod_facts(pod: Mapping[str, Any], container: str) -> PodFacts:
    """What the status needs of the query's pod and its `container`."""
    status = pod.get("status") or {}
    statuses = [s for s in status.get("containerStatuses") or [] if s.get("name") == container]
    state = statuses[0] if statuses else {}
    waiting = (state.get("state") or {}).get("waiting") or {}
    terminated = (state.get("lastState") or {}).get("terminated") or (state.get("state") or {}).get("terminated")
    last = None
    if terminated:
        message = str(terminated.get("message") or "")
        last = {
            "reason": str(terminated.get("reason") or ""),
            "exitCode": int(terminated.get("exitCode") or 0),
            "finishedAt": str(terminated.get("finishedAt") or ""),
            "message": message[-limits.STREAM_TERMINATION_MESSAGE_CHARS_MAX :],
        }
    return PodFacts(
        name=str(pod["metadata"]["name"]),
        phase=str(status.get("phase") or "Pending"),
        ready=bool(state.get("ready")),
        running="running" in (state.get("state") or {}),
        restarts=int(state.get("restartCount") or 0),
        waiting_reason=str(waiting.get("reason") or ""),
        ip=str(status.get("podIP") or ""),
        last_termination=last,
    )


def progress_from_metrics(text: str, read_at: str) -> dict[str, Any] | None:
    """status.progress from a query's /metrics text; None before its first micro-batch (or for
    text that is not the job's)."""
    values: dict[str, float] = {}
    lags: list[dict[str, Any]] = []
    for family in text_string_to_metric_families(text):
        if not family.name.startswith(METRIC_PREFIX):
            continue
        for sample in family.samples:
            if sample.name == "shoal_stream_lag_messages":
                labels = sample.labels
                queue = labels.get("queue", "")
                if queue.isdigit():
                    lags.append(
                        {
                            "topic": labels.get("topic", ""),
                            "broker": labels.get("broker", ""),
                            "queue": int(queue),
                            "lag": int(sample.value),
                        }
                    )
            else:
                values[sample.name] = float(sample.value)
    if "shoal_stream_batch_id" not in values or "shoal_stream_progress_timestamp_seconds" not in values:
        return None
    lags.sort(key=lambda entry: (-entry["lag"], entry["topic"], entry["broker"], entry["queue"]))
    finished = values["shoal_stream_progress_timestamp_seconds"]
    return {
        "batch": int(values["shoal_stream_batch_id"]),
        "rows": int(values.get("shoal_stream_input_rows", 0)),
        "inputRowsPerSecond": round(values.get("shoal_stream_input_rows_per_second", 0.0), 3),
        "processedRowsPerSecond": round(values.get("shoal_stream_processed_rows_per_second", 0.0), 3),
        "batchDurationSeconds": round(values.get("shoal_stream_batch_duration_seconds", 0.0), 3),
        "lag": int(values.get("shoal_stream_lag_messages_total", 0)),
        "lagPerQueue": lags[: limits.STREAM_LAG_QUEUES_IN_STATUS_MAX],
        "finishedAt": _iso_seconds(finished),
        "readAt": read_at,
    }


def _iso_seconds(epoch_s: float) -> str:
    return datetime.datetime.fromtimestamp(epoch_s, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _phase(health: Health, suspended: bool, pod: PodFacts | None, answering: bool) -> tuple[str, bool, str, str]:
    """(phase, ready, reason, message)."""
    if not health.ready:
        return "Pending", False, health.reason, health.message
    if suspended:
        return "Suspended", False, "Suspended", "spec.suspend is true: no query runs; the checkpoint is kept"
    if pod is None:
        return "Pending", False, "Pending", "the query's pod does not exist yet"
    if pod.waiting_reason in WAITING_FAILURES:
        ended = pod.last_termination or {}
        detail = f" (last exit {ended.get('exitCode')}: {ended.get('reason')})" if ended else ""
        return "Failing", False, "Failing", f"pod {pod.name}: {pod.waiting_reason}{detail}, restarts {pod.restarts}"
    if pod.running and answering:
        return "Running", True, "Running", f"pod {pod.name} runs the query"
    if pod.running:
        return "Running", False, "Starting", f"pod {pod.name} runs; the query does not answer on /metrics yet"
    return "Pending", False, "Pending", f"pod {pod.name} is {pod.phase}"


def stream_status(
    generation: int,
    health: Health,
    suspended: bool,
    pod: PodFacts | None,
    progress: Mapping[str, Any] | None,
    answering: bool,
    now: str,
    previous: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The whole status. `progress` is the latest read (or the previous status' when this read
    failed); `answering`: whether /metrics answered this time."""
    phase, ready, reason, message = _phase(health, suspended, pod, answering)
    result: dict[str, Any] = {
        "observedGeneration": generation,
        "phase": phase,
        "conditions": [condition("Ready", ready, reason, message, generation, now, previous)],
        "pod": pod.name if pod is not None else "",
        "restarts": pod.restarts if pod is not None else 0,
    }
    if pod is not None and pod.last_termination is not None:
        result["lastTermination"] = pod.last_termination
    if progress is not None:
        result["progress"] = dict(progress)
    return result
