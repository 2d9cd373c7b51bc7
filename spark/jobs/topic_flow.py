"""topic_flow: throughput per topic and lag per consumer group, as tables that grow with time.

Every micro-batch of the topics (default: every topic but RocketMQ's own, `--topic-pattern .*`)
adds, under `<output>`:

    topic_rates.parquet/batch=<id>   per topic: messages and bytes in the batch, their first and
                                     last store time, and the batch's wall-clock time
    group_lag.parquet/batch=<id>     per consumer group, topic and queue: the broker's offset, the
                                     group's committed offset and the lag (each master's
                                     GET_BROKER_CONSUME_STATS, at the batch's time)

Each batch's rows are written to their own `batch=<id>` directory, replaced if the batch runs again
after a crash, so a replay never counts twice. `spark.read.parquet(".../topic_rates.parquet")`
reads them all (`batch` becomes a column). Columns are only what rates need (no bodies are kept).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812 (the PySpark convention)
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from shoal.spark.jobs.stream_runner import StreamContext, run_stream, stream_parser
from shoal.spark.streaming.cluster import consumer_lag

RATES_TABLE = "topic_rates.parquet"
LAG_TABLE = "group_lag.parquet"
READ_COLUMNS = "topic,size,store_timestamp"
LAG_SCHEMA = StructType(
    [
        StructField("group", StringType()),
        StructField("topic", StringType()),
        StructField("broker", StringType()),
        StructField("queue_id", IntegerType()),
        StructField("broker_offset", LongType()),
        StructField("consumer_offset", LongType()),
        StructField("lag", LongType()),
        StructField("batch_time_ms", LongType()),
    ]
)


def build_parser() -> argparse.ArgumentParser:
    result = stream_parser("topic_flow", __doc__ or "")
    result.set_defaults(topic_pattern=".*")
    result.add_argument("--no-group-lag", action="store_true", help="write topic_rates only")
    return result


def topic_rates(batch: DataFrame, batch_time_ms: int) -> DataFrame:
    """Per topic: messages, bytes, first and last store time of one micro-batch (pure)."""
    return batch.groupBy("topic").agg(
        F.count(F.lit(1)).alias("messages"),
        F.sum("size").cast("long").alias("bytes"),
        F.min("store_timestamp").alias("first_store_timestamp"),
        F.max("store_timestamp").alias("last_store_timestamp"),
        F.lit(batch_time_ms).cast("long").alias("batch_time_ms"),
    )


def start(context: StreamContext) -> StreamingQuery:
    output = context.output_dir
    connection = context.connection()
    with_lag = not context.args.no_group_lag

    def write(batch: DataFrame, batch_id: int) -> None:
        now_ms = int(time.time() * 1000)
        rates = topic_rates(batch, now_ms)
        rates.write.mode("overwrite").parquet(str(output / RATES_TABLE / f"batch={batch_id}"))
        if with_lag:
            rows = [{**row, "batch_time_ms": now_ms} for row in consumer_lag(connection)]
            lag = batch.sparkSession.createDataFrame(rows, LAG_SCHEMA)
            lag.write.mode("overwrite").parquet(str(output / LAG_TABLE / f"batch={batch_id}"))

    messages = context.read_topics(columns=READ_COLUMNS)
    return context.started(messages.writeStream.foreachBatch(write), "topic_flow")


def main(argv: Sequence[str] | None = None) -> int:
    return run_stream(argv, build_parser, start)


if __name__ == "__main__":
    raise SystemExit(main())
