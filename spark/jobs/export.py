"""export: write messages to Parquet, filtered by topic, store time and tag.

Output: `messages.parquet` (every column of the data source but `body_crc_ok`, or --columns)
and summary.json (rows written per topic).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pyspark.sql import functions as F  # noqa: N812 (the PySpark convention)

from shoal.spark.jobs.runner import JobContext, JobResult, parser, run_main
from shoal.spark.schema import COLUMN_NAMES

EXPORTED_COLUMNS_DEFAULT = tuple(name for name in COLUMN_NAMES if name != "body_crc_ok")


def build_parser() -> argparse.ArgumentParser:
    result = parser("export", __doc__ or "")
    result.add_argument("--tag", action="append", default=[], help="only messages with this TAGS value (repeatable)")
    result.add_argument(
        "--columns",
        default=",".join(EXPORTED_COLUMNS_DEFAULT),
        help="comma-separated columns to export (default: all but body_crc_ok)",
    )
    return result


def compute(context: JobContext) -> JobResult:
    columns = [name.strip() for name in context.args.columns.split(",") if name.strip()]
    read_columns = sorted(set(columns) | ({"tags"} if context.args.tag else set()) | {"topic"})
    messages = context.read_messages([name for name in COLUMN_NAMES if name in read_columns])
    if context.args.tag:
        messages = messages.where(F.col("tags").isin(list(context.args.tag)))
    path = context.write_table(messages.select(*columns), "messages.parquet")
    written = context.spark.read.parquet(str(path))
    per_topic = {}
    if "topic" in columns:
        per_topic = {row["topic"]: row["count"] for row in written.groupBy("topic").count().collect()}
    total = written.count()
    context.write_details({"rows": total, "topics": per_topic, "columns": columns, "parquet": str(path)})
    summary = {"rows": total, "topics": len(per_topic), "parquet": str(path)}
    return JobResult(summary, f"export: {total} message(s) of {len(per_topic)} topic(s) -> {path}")


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(argv, build_parser, compute)


if __name__ == "__main__":
    raise SystemExit(main())
