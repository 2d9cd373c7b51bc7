"""Prometheus metrics of the operator: reconciles, their duration and failures, promotions, roll
restarts, and each resource's Ready condition. Served by `python -m shoal.operator --metrics-port`.

Names follow the broker's `shoal_*` families with an `operator` infix; labels are bounded by the
number of custom resources (kind, namespace, name), never by pods or messages.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from prometheus_client import Counter, Gauge, Histogram

RECONCILES = Counter(
    "shoal_operator_reconciles_total",
    "Reconciles by kind and result (ok, retry: waiting for something, error: an unexpected failure).",
    ["kind", "result"],
)
RECONCILE_SECONDS = Histogram(
    "shoal_operator_reconcile_seconds",
    "Wall time of one reconcile, API and broker round trips included.",
    ["kind"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
READY = Gauge(
    "shoal_operator_resource_ready",
    "1 when the resource's Ready condition is True, else 0.",
    ["kind", "namespace", "name"],
)
PROMOTIONS = Counter(
    "shoal_operator_promotions_total", "Slaves promoted to master, by trigger.", ["namespace", "name", "trigger"]
)
ROLL_RESTARTS = Counter(
    "shoal_operator_roll_restarts_total", "Broker pods deleted by the ordered roll.", ["namespace", "name"]
)


@contextmanager
def reconciling(kind: str, retry_errors: tuple[type[BaseException], ...]) -> Iterator[None]:
    """Count and time one reconcile; `retry_errors` count as "retry", anything else as "error"."""
    started = time.monotonic()
    result = "ok"
    try:
        yield
    except retry_errors:
        result = "retry"
        raise
    except BaseException:
        result = "error"
        raise
    finally:
        RECONCILES.labels(kind, result).inc()
        RECONCILE_SECONDS.labels(kind).observe(time.monotonic() - started)


def set_ready(kind: str, namespace: str, name: str, status: object) -> None:
    """Mirror the Ready condition of a status just written (a dict with `conditions`)."""
    conditions = status.get("conditions") if isinstance(status, dict) else None
    ready = next((c for c in conditions or [] if isinstance(c, dict) and c.get("type") == "Ready"), None)
    if ready is not None:
        READY.labels(kind, namespace, name).set(1 if ready.get("status") == "True" else 0)


def forget(kind: str, namespace: str, name: str) -> None:
    """Drop a deleted resource's series."""
    with suppress(KeyError):
        READY.remove(kind, namespace, name)


_STREAM_LABELS = ["namespace", "name"]
STREAM_FIGURES = {
    "restarts": Gauge(
        "shoal_operator_stream_restarts", "Restarts of a StreamAnalysis query's container in its pod.", _STREAM_LABELS
    ),
    "batch": Gauge(
        "shoal_operator_stream_batch_id",
        "A StreamAnalysis query's last finished micro-batch (-1: none).",
        _STREAM_LABELS,
    ),
    "input_rate": Gauge(
        "shoal_operator_stream_input_rows_per_second", "Rows per second arriving at the query.", _STREAM_LABELS
    ),
    "processed_rate": Gauge(
        "shoal_operator_stream_processed_rows_per_second", "Rows per second the query processes.", _STREAM_LABELS
    ),
    "batch_duration_s": Gauge(
        "shoal_operator_stream_batch_duration_seconds", "Duration of the query's last micro-batch.", _STREAM_LABELS
    ),
    "lag": Gauge("shoal_operator_stream_lag_messages", "Messages the query is behind, all queues.", _STREAM_LABELS),
}
"""StreamAnalysis progress as the operator last read it (status.progress); the query's own pod
serves the per-queue lag."""


def set_stream(namespace: str, name: str, **figures: float) -> None:
    for figure, value in figures.items():
        STREAM_FIGURES[figure].labels(namespace, name).set(value)


def forget_stream(namespace: str, name: str) -> None:
    for gauge in STREAM_FIGURES.values():
        with suppress(KeyError):
            gauge.remove(namespace, name)
