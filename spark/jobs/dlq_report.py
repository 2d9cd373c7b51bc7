"""dlq_report: what sits in the dead-letter queues (%DLQ%<group> topics).

Per DLQ topic: its group, message count, oldest and newest store time, counts per original topic
(the RETRY_TOPIC property the broker sets when it dead-letters a message) and the first few
messages (by CommitLog offset) as samples. Output: summary.json.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from pyspark.sql import Window
from pyspark.sql import functions as F  # noqa: N812 (the PySpark convention)

from shoal.formats.properties import ORIGIN_MESSAGE_ID, RETRY_TOPIC
from shoal.spark.jobs.runner import SAMPLES_MAX_COUNT, JobContext, JobResult, parser, run_main

DLQ_TOPIC_PREFIX = "%DLQ%"
UNKNOWN_ORIGINAL_TOPIC = ""
"""Original topic of a dead letter without RETRY_TOPIC (sent to the DLQ topic directly)."""


def build_parser() -> argparse.ArgumentParser:
    return parser("dlq_report", __doc__ or "", filters=False)


def dlq_topics(context: JobContext) -> list[str]:
    """DLQ topics with a ConsumeQueue; an empty list means 'look at every record'."""
    directory = context.store_dir / "consumequeue"
    if not directory.is_dir():
        return []
    return sorted(name for name in os.listdir(directory) if name.startswith(DLQ_TOPIC_PREFIX))


def compute(context: JobContext) -> JobResult:
    topics = dlq_topics(context)
    columns = ["topic", "commitlog_offset", "store_timestamp", "reconsume_times", "properties", "msg_id", "uniq_key"]
    options = {"topic": ",".join(topics)} if topics else {}
    messages = context.read_messages(columns, **options).where(F.col("topic").startswith(DLQ_TOPIC_PREFIX))
    messages = messages.select(
        "topic",
        "commitlog_offset",
        "store_timestamp",
        "reconsume_times",
        "msg_id",
        "uniq_key",
        F.coalesce(F.col("properties")[RETRY_TOPIC], F.lit(UNKNOWN_ORIGINAL_TOPIC)).alias("original_topic"),
        F.col("properties")[ORIGIN_MESSAGE_ID].alias("origin_message_id"),
    ).cache()
    overview = messages.groupBy("topic").agg(
        F.count(F.lit(1)).alias("messages"),
        F.min("store_timestamp").alias("oldest_store_timestamp"),
        F.max("store_timestamp").alias("newest_store_timestamp"),
    )
    per_original = messages.groupBy("topic", "original_topic").count().collect()
    ranked = messages.withColumn(
        "rank", F.row_number().over(Window.partitionBy("topic").orderBy("commitlog_offset"))
    ).where(F.col("rank") <= SAMPLES_MAX_COUNT)
    samples = ranked.orderBy("topic", "commitlog_offset").collect()
    report = []
    for row in overview.orderBy("topic").collect():
        topic = row["topic"]
        report.append(
            {
                "topic": topic,
                "group": topic.removeprefix(DLQ_TOPIC_PREFIX),
                "messages": row["messages"],
                "oldest_store_timestamp": row["oldest_store_timestamp"],
                "newest_store_timestamp": row["newest_store_timestamp"],
                "original_topics": {
                    item["original_topic"]: item["count"] for item in per_original if item["topic"] == topic
                },
                "samples": [
                    {
                        "msg_id": sample["msg_id"],
                        "uniq_key": sample["uniq_key"],
                        "origin_message_id": sample["origin_message_id"],
                        "original_topic": sample["original_topic"],
                        "reconsume_times": sample["reconsume_times"],
                        "commitlog_offset": sample["commitlog_offset"],
                    }
                    for sample in samples
                    if sample["topic"] == topic
                ],
            }
        )
    messages.unpersist()
    total = sum(item["messages"] for item in report)
    context.write_details({"dlq_topics": report, "messages": total})
    summary = {"messages": total, "dlq_topics": {item["topic"]: item["messages"] for item in report}}
    lines = [f"dlq_report: {total} dead letter(s) in {len(report)} DLQ topic(s) -> {context.output_dir}"]
    lines += [f"  {item['topic']}: {item['messages']} from {sorted(item['original_topics'])}" for item in report]
    return JobResult(summary, "\n".join(lines))


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(argv, build_parser, compute)


if __name__ == "__main__":
    raise SystemExit(main())
