"""topic_archive: a stream of topics into Parquet, exactly once.

Every message of the topics (all the columns of format("rocketmq"), or --columns) is appended to
`<output>/messages.parquet` by Spark's file sink, which records each micro-batch's files in the
table's `_spark_metadata` log together with the checkpoint's offsets: after a crash the cut-short
micro-batch runs again with the same offsets, and readers that go through the log (spark.read,
not a bare directory listing) see each message once.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pyspark.sql.streaming.query import StreamingQuery

from shoal.spark.jobs.stream_runner import StreamContext, run_stream, stream_parser
from shoal.spark.message_table import PARQUET_WRITE_OPTIONS
from shoal.spark.schema import COLUMN_NAMES

TABLE_NAME = "messages.parquet"


def build_parser() -> argparse.ArgumentParser:
    result = stream_parser("topic_archive", __doc__ or "")
    result.add_argument("--columns", default=None, help="comma-separated columns to keep (default: all)")
    result.add_argument("--tag", default=None, help="only messages with these tags (TagA || TagB), by the broker")
    return result


def start(context: StreamContext) -> StreamingQuery:
    options: dict[str, str] = {}
    if context.args.columns:
        wanted = [name.strip() for name in context.args.columns.split(",") if name.strip()]
        unknown = sorted(set(wanted) - set(COLUMN_NAMES))
        if unknown:
            raise SystemExit(f"error: unknown column(s) {', '.join(unknown)}")
        options["columns"] = ",".join(wanted)
    if context.args.tag:
        options["tag"] = context.args.tag
    messages = context.read_topics(**options)
    writer = (
        messages.writeStream.format("parquet")
        .options(**PARQUET_WRITE_OPTIONS)
        .option("path", str(context.output_dir / TABLE_NAME))
    )
    return context.started(writer, "topic_archive")


def main(argv: Sequence[str] | None = None) -> int:
    return run_stream(argv, build_parser, start)


if __name__ == "__main__":
    raise SystemExit(main())
