"""topic_stats: messages, bytes and body size percentiles per topic per hour (of store time).

Output: `topic_stats.parquet` (one row per topic and hour) and summary.json (the same rows, and
totals per topic). Percentiles are exact (Spark's `percentile`, linear interpolation).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pyspark.sql import functions as F  # noqa: N812 (the PySpark convention)

from shoal.spark.jobs.runner import JobContext, JobResult, parser, run_main

HOUR_MS = 3_600_000
PERCENTILES = (0.5, 0.9, 0.99)


def build_parser() -> argparse.ArgumentParser:
    return parser("topic_stats", __doc__ or "")


def compute(context: JobContext) -> JobResult:
    messages = context.read_messages(["topic", "store_timestamp", "size", "body_length"])
    hour = (F.floor(F.col("store_timestamp") / HOUR_MS) * HOUR_MS).cast("long")
    stats = (
        messages.groupBy(F.col("topic"), hour.alias("hour_start_ms"))
        .agg(
            F.count(F.lit(1)).alias("messages"),
            F.sum("size").alias("record_bytes"),
            F.sum("body_length").alias("body_bytes"),
            F.min("body_length").alias("body_bytes_min"),
            F.percentile(F.col("body_length"), F.lit(list(PERCENTILES))).alias("body_bytes_percentiles"),
            F.max("body_length").alias("body_bytes_max"),
        )
        .orderBy("topic", "hour_start_ms")
    )
    stats = stats.cache()
    context.write_table(stats, "topic_stats.parquet")
    rows = []
    for row in stats.collect():
        item = row.asDict()
        percentiles = item.pop("body_bytes_percentiles")
        for fraction, value in zip(PERCENTILES, percentiles, strict=True):
            item[f"body_bytes_p{round(fraction * 100)}"] = value
        rows.append(item)
    stats.unpersist()
    topics: dict[str, dict[str, int]] = {}
    for item in rows:
        total = topics.setdefault(item["topic"], {"messages": 0, "record_bytes": 0, "body_bytes": 0})
        for name in total:
            total[name] += item[name]
    context.write_details({"hours": rows, "topics": topics})
    summary = {"topics": len(topics), "rows": len(rows), "messages": sum(t["messages"] for t in topics.values())}
    lines = [f"topic_stats: {len(topics)} topic(s), {len(rows)} topic-hour row(s) -> {context.output_dir}"]
    lines += [
        f"  {topic}: {total['messages']} messages, {total['record_bytes']} bytes"
        for topic, total in sorted(topics.items())
    ]
    return JobResult(summary, "\n".join(lines))


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(argv, build_parser, compute)


if __name__ == "__main__":
    raise SystemExit(main())
