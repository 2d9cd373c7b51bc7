"""dlq_archive: dead letters into Parquet as they arrive, with where they came from and why.

Reads every `%DLQ%<group>` topic (or --topic-pattern) and appends one row per dead letter to
`<output>/dead_letters.parquet`, exactly once (the file sink's log and the checkpoint, as
topic_archive): the group, the original topic (the RETRY_TOPIC property the broker sets when it
dead-letters a message), the original message id (ORIGIN_MESSAGE_ID, else the message's own), how
many times it was consumed again, the reason, times, tags, keys, properties and body.

The reason, read from RECONSUMETIMES as the broker wrote it (one more than the times the message
had been redelivered, in RocketMQ's send-back and in POP alike): "retries exhausted" when it had
been redelivered at least once (the group's maxReconsumeTimes, or its POP retries, used up), "first
failure" when it went to the DLQ the first time it failed (a group whose maximum is 0, or a
consumer that asked for no retry with a negative delay level).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812 (the PySpark convention)
from pyspark.sql.streaming.query import StreamingQuery

from shoal.formats.properties import ORIGIN_MESSAGE_ID, RETRY_TOPIC
from shoal.spark.jobs.stream_runner import StreamContext, run_stream, stream_parser
from shoal.spark.message_table import PARQUET_WRITE_OPTIONS

TABLE_NAME = "dead_letters.parquet"
DLQ_PATTERN = "%DLQ%.*"
DLQ_PREFIX = "%DLQ%"
REASON_EXHAUSTED = "retries exhausted"
REASON_FIRST_FAILURE = "first failure"


def build_parser() -> argparse.ArgumentParser:
    result = stream_parser("dlq_archive", __doc__ or "")
    result.set_defaults(topic_pattern=DLQ_PATTERN)
    return result


def dead_letters(frame: DataFrame) -> DataFrame:
    """The archive's columns from format("rocketmq") rows (pure: tested on a static DataFrame)."""
    properties = F.col("properties")
    return frame.select(
        F.col("topic").alias("dlq_topic"),
        F.expr(f"substring(topic, {len(DLQ_PREFIX) + 1})").alias("group"),
        properties.getItem(RETRY_TOPIC).alias("origin_topic"),
        F.coalesce(properties.getItem(ORIGIN_MESSAGE_ID), "uniq_key", "msg_id").alias("origin_message_id"),
        F.col("reconsume_times"),
        F.when(F.col("reconsume_times") > 1, F.lit(REASON_EXHAUSTED))
        .otherwise(F.lit(REASON_FIRST_FAILURE))
        .alias("reason"),
        F.col("store_timestamp"),
        F.col("born_timestamp"),
        F.col("tags"),
        F.col("keys"),
        properties.alias("properties"),
        F.col("body"),
        F.col("queue_id"),
        F.col("queue_offset"),
    )


def start(context: StreamContext) -> StreamingQuery:
    letters = dead_letters(context.read_topics())
    writer = (
        letters.writeStream.format("parquet")
        .options(**PARQUET_WRITE_OPTIONS)
        .option("path", str(context.output_dir / TABLE_NAME))
    )
    return context.started(writer, "dlq_archive")


def main(argv: Sequence[str] | None = None) -> int:
    return run_stream(argv, build_parser, start)


if __name__ == "__main__":
    raise SystemExit(main())
