"""Analysis jobs over a Shoal store: each module has main() for spark-submit and `shoal spark run`.

Importing this package does not import pyspark (the CLI lists the jobs without Spark installed).
"""

JOBS: dict[str, str] = {
    "topic_stats": "messages, bytes and body size percentiles per topic per hour",
    "export": "write messages to Parquet, filtered by topic, store time and tag",
    "consumer_lag": "committed offsets (config/consumerOffset.json) against ConsumeQueue ends",
    "dlq_report": "dead letters per %DLQ% topic: counts, original topics, oldest/newest, samples",
    "store_audit": "every record's CRC; ConsumeQueue units and index entries against the CommitLog",
}
"""Job name (= module name under shoal.spark.jobs) -> one line of what it does. The operator's
StoreAnalysis kinds name these (shoal.operator.analysis.spec.ANALYSIS_KINDS)."""

STREAM_JOBS: dict[str, str] = {
    "topic_archive": "topics into Parquet as messages arrive, exactly once (checkpointed)",
    "topic_flow": "messages and bytes per topic per micro-batch, and every group's lag per queue",
    "dlq_archive": "dead letters into Parquet as they arrive, with their original topic and reason",
}
"""Streaming jobs (shoal.spark.jobs.stream_runner): they read topics through a NameServer
(`format("rocketmq")`), not a store, and run until stopped; StreamAnalysis resources name these."""

SUMMARY_FILE_NAME = "summary.json"
"""What every job writes into its --output directory; the operator reads it back from there."""
TERMINATION_MESSAGE_ENV = "SHOAL_TERMINATION_MESSAGE_PATH"
"""Set on a spark-submit driver, a path the runner copies the summary to (the operator sets it to
the pod's termination-message path)."""

__all__ = ["JOBS", "STREAM_JOBS", "SUMMARY_FILE_NAME", "TERMINATION_MESSAGE_ENV"]
