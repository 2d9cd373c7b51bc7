"""A streaming job's progress as Prometheus metrics: `--metrics-port PORT` serves `/metrics`
(prometheus_client's server, on every address) with the last micro-batch's figures and the lag per
queue. Prometheus scrapes it, and the operator reads it into the StreamAnalysis status.

    shoal_stream_batch_id                    the last finished micro-batch
    shoal_stream_input_rows                  its rows
    shoal_stream_input_rows_per_second       rows/s arriving (Spark's inputRowsPerSecond)
    shoal_stream_processed_rows_per_second   rows/s processed
    shoal_stream_batch_duration_seconds      its duration
    shoal_stream_lag_messages{topic,broker,queue}   messages behind each queue's end
    shoal_stream_lag_messages_total          their sum
    shoal_stream_progress_timestamp_seconds  when it finished (epoch seconds)

Every family carries the label `job`. Labels of the lag family are bounded by the topics' queues.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, start_http_server

__all__ = ["StreamMetrics"]


class StreamMetrics:
    def __init__(self, job: str, port: int) -> None:
        self.job = job
        self.registry = CollectorRegistry()

        def gauge(name: str, text: str, *labels: str) -> Gauge:
            return Gauge(name, text, ["job", *labels], registry=self.registry)

        self.batch = gauge("shoal_stream_batch_id", "The last finished micro-batch.")
        self.rows = gauge("shoal_stream_input_rows", "Rows of the last micro-batch.")
        self.input_rate = gauge("shoal_stream_input_rows_per_second", "Rows per second arriving.")
        self.processed_rate = gauge("shoal_stream_processed_rows_per_second", "Rows per second processed.")
        self.duration = gauge("shoal_stream_batch_duration_seconds", "Duration of the last micro-batch.")
        self.lag = gauge("shoal_stream_lag_messages", "Messages behind the queue's end.", "topic", "broker", "queue")
        self.lag_total = gauge("shoal_stream_lag_messages_total", "Messages behind, all queues.")
        self.updated = gauge("shoal_stream_progress_timestamp_seconds", "When the last micro-batch finished.")
        self.server, self.thread = start_http_server(port, registry=self.registry)

    def update(self, record: dict[str, Any]) -> None:
        """Set every family from a progress record (stream_runner.progress_record)."""
        job = self.job
        self.batch.labels(job).set(record.get("batch") or 0)
        self.rows.labels(job).set(record.get("rows") or 0)
        self.input_rate.labels(job).set(record.get("inputRowsPerSecond") or 0.0)
        self.processed_rate.labels(job).set(record.get("processedRowsPerSecond") or 0.0)
        self.duration.labels(job).set((record.get("batchDurationMs") or 0) / 1000)
        self.lag_total.labels(job).set(record.get("lag") or 0)
        for topic, brokers in (record.get("lagPerQueue") or {}).items():
            for broker, queues in brokers.items():
                for queue, lag in queues.items():
                    self.lag.labels(job, topic, broker, str(queue)).set(lag)
        self.updated.labels(job).set(time.time())

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
