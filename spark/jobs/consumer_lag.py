"""consumer_lag: per group, topic and queue, how far the committed offset is behind the queue.

Committed offsets come from config/consumerOffset.json (read as the broker reads it, falling
back to its .bak), queue ends from the ConsumeQueue files (last written unit + 1). Lag is
max_offset - committed offset, never negative (RocketMQ's brokerOffset - consumerOffset).
Output: `consumer_lag.parquet` (one row per group/topic/queue) and summary.json (per group and
topic totals, and the rows).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import functions as F  # noqa: N812 (the PySpark convention)
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from shoal.formats.consumer_offsets import decode_offset_table
from shoal.formats.errors import FormatError
from shoal.formats.json_compat import parse_fastjson
from shoal.formats.store_layout import BACKUP_SUFFIX, CONFIG_DIRECTORY_NAME, CONSUMER_OFFSET_FILE_NAME
from shoal.spark.jobs.runner import JobContext, JobResult, parser, run_main

OFFSETS_SCHEMA = StructType(
    [
        StructField("group", StringType(), False),
        StructField("topic", StringType(), False),
        StructField("queue_id", IntegerType(), False),
        StructField("consumer_offset", LongType(), False),
    ]
)


def build_parser() -> argparse.ArgumentParser:
    result = parser("consumer_lag", __doc__ or "", filters=False)
    result.add_argument("--group", action="append", default=[], help="only this consumer group (repeatable)")
    return result


def read_offset_table(path: Path) -> dict[str, dict[int, int]]:
    """The table of `path`, else of its `.bak` (as the broker's ConfigManager.load); empty when neither
    is usable."""
    for candidate in (path, path.with_name(path.name + BACKUP_SUFFIX)):
        try:
            text = candidate.read_text(encoding="utf-8")
            if not text.strip():
                continue
            document = parse_fastjson(text)
            if isinstance(document, dict):
                return decode_offset_table(document)
        except (OSError, UnicodeDecodeError, FormatError):
            continue
    return {}


def committed_offsets(context: JobContext) -> list[tuple[str, str, int, int]]:
    """(group, topic, queue id, offset) from consumerOffset.json (nothing when it is absent)."""
    rows: list[tuple[str, str, int, int]] = []
    for key, offsets in read_offset_table(
        context.store_dir / CONFIG_DIRECTORY_NAME / CONSUMER_OFFSET_FILE_NAME
    ).items():
        topic, separator, group = key.partition("@")
        if not separator or (context.args.group and group not in context.args.group):
            continue
        rows.extend((group, topic, queue_id, offset) for queue_id, offset in offsets.items())
    return sorted(rows)


def compute(context: JobContext) -> JobResult:
    spark = context.spark
    offsets = spark.createDataFrame(committed_offsets(context), OFFSETS_SCHEMA)
    units = spark.read.format("shoal_consume_queue").load(str(context.store_dir))
    ends = units.groupBy("topic", "queue_id").agg(
        (F.max("queue_offset") + 1).alias("max_offset"), F.min("queue_offset").alias("min_offset")
    )
    lag = (
        offsets.join(ends, ["topic", "queue_id"], "left")
        .select(
            "group",
            "topic",
            "queue_id",
            "consumer_offset",
            F.coalesce(F.col("max_offset"), F.lit(0)).alias("max_offset"),
            F.coalesce(F.col("min_offset"), F.lit(0)).alias("min_offset"),
        )
        .withColumn("lag", F.greatest(F.col("max_offset") - F.col("consumer_offset"), F.lit(0)))
        .orderBy("group", "topic", "queue_id")
    ).cache()
    context.write_table(lag, "consumer_lag.parquet")
    rows = [row.asDict() for row in lag.collect()]
    lag.unpersist()
    totals: dict[str, dict[str, int]] = {}
    for row in rows:
        key = f"{row['group']}@{row['topic']}"
        total = totals.setdefault(key, {"group": row["group"], "topic": row["topic"], "queues": 0, "lag": 0})
        total["queues"] += 1
        total["lag"] += row["lag"]
    context.write_details({"queues": rows, "groups": list(totals.values())})
    summary = {"groups": len(totals), "queues": len(rows), "lag": sum(row["lag"] for row in rows)}
    lines = [f"consumer_lag: {len(totals)} group/topic pair(s), {len(rows)} queue(s) -> {context.output_dir}"]
    lines += [f"  {t['group']} on {t['topic']}: lag {t['lag']} over {t['queues']} queue(s)" for t in totals.values()]
    return JobResult(summary, "\n".join(lines))


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(argv, build_parser, compute)


if __name__ == "__main__":
    raise SystemExit(main())
