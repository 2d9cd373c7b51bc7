"""The streaming jobs' progress: Spark's StreamingQueryProgress boiled down (lag per queue), and the
same figures served as Prometheus metrics."""

from __future__ import annotations

import json
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from shoal.spark.jobs.stream_metrics import StreamMetrics
from shoal.spark.jobs.stream_runner import progress_record
from tests.ports import free_port

PROGRESS = {
    "batchId": 7,
    "timestamp": "2026-11-29T09:00:00.000Z",
    "numInputRows": 300,
    "inputRowsPerSecond": 1234.567,
    "processedRowsPerSecond": 999.94,
    "durationMs": {"triggerExecution": 812, "latestOffset": 5},
    "sources": [
        {
            # Spark gives offsets as JSON text or as objects, depending on the version: both are read.
            "endOffset": json.dumps({"T": {"broker-a": {"0": 10, "1": 20}}}),
            "latestOffset": {"T": {"broker-a": {"0": 15, "1": 20}, "broker-b": {"0": 4}}},
        }
    ],
}


def test_a_progress_record_has_rates_duration_and_lag_per_queue() -> None:
    record = progress_record(PROGRESS)
    assert record["batch"] == 7 and record["rows"] == 300 and record["batchDurationMs"] == 812
    assert (record["inputRowsPerSecond"], record["processedRowsPerSecond"]) == (1234.6, 999.9)
    assert record["lagPerQueue"] == {"T": {"broker-a": {"0": 5, "1": 0}, "broker-b": {"0": 4}}}
    assert record["lag"] == 9 and record["ran"]
    assert progress_record({"batchId": 0})["lag"] == 0


def test_an_idle_trigger_reports_the_last_batch_that_ran() -> None:
    """Goal: Spark reports a trigger that found nothing new under the id of the next micro-batch,
    which has not run; the record's batch stays the last one that ran, its lag is current. Method:
    an idle event (no addBatch, no rows) after batch 7, and the first one of a new query."""
    idle = {**PROGRESS, "batchId": 8, "numInputRows": 0, "durationMs": {"triggerExecution": 3, "latestOffset": 2}}
    record = progress_record(idle)
    assert (record["batch"], record["ran"], record["rows"], record["lag"]) == (7, False, 0, 9)
    assert progress_record({**idle, "batchId": 0})["batch"] == -1  # nothing has run yet
    ran = {**idle, "numInputRows": 0, "durationMs": {"addBatch": 1, "triggerExecution": 4}}
    assert progress_record(ran)["batch"] == 8  # an empty batch that ran (a source with no rows) counts


def test_the_metrics_endpoint_serves_the_last_batch() -> None:
    port = free_port()
    metrics = StreamMetrics("topic_archive", port)
    try:
        metrics.update(progress_record(PROGRESS))
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    finally:
        metrics.close()
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    job = (("job", "topic_archive"),)
    assert samples[("shoal_stream_batch_id", job)] == 7
    assert samples[("shoal_stream_processed_rows_per_second", job)] == 999.9
    assert samples[("shoal_stream_batch_duration_seconds", job)] == 0.812
    assert samples[("shoal_stream_lag_messages_total", job)] == 9
    queue = (("broker", "broker-a"), ("job", "topic_archive"), ("queue", "0"), ("topic", "T"))
    assert samples[("shoal_stream_lag_messages", queue)] == 5
