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
"""Job name (= module name under shoal.spark.jobs) -> one line of what it does."""

__all__ = ["JOBS"]
