"""What every streaming job shares: its command line, its topic stream, its query and its progress.

A streaming job reads topics through `format("rocketmq")` (shoal.spark.streaming) and runs until it
is stopped (SIGTERM or SIGINT: the running micro-batch is finished first), or with --once until
what the topics hold when it starts has been processed. Its checkpoint (--checkpoint DIR) holds the
offsets of every micro-batch: restarted on the same checkpoint, it goes on where it stopped, and a
micro-batch a crash cut short is run again with the same offsets. In --output DIR:

    progress.json   after every micro-batch: its id, rows, input and processed rates, duration,
                    and the lag per topic and queue (how far the query is behind each queue's end);
                    the same figures on /metrics with --metrics-port (stream_metrics.py), which
                    Prometheus scrapes and the operator reads into the StreamAnalysis status
    summary.json    when the job ends (or fails): the last progress, `ok` and any error
    tables          the job's own output (Parquet)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.readwriter import DataStreamWriter

from shoal.spark.errors import JobError
from shoal.spark.jobs.runner import ERROR_TEXT_MAX_CHARS, key_value, started_session, write_summary
from shoal.spark.jobs.stream_metrics import StreamMetrics
from shoal.spark.streaming.options import Connection

__all__ = [
    "PROGRESS_FILE_NAME",
    "StreamContext",
    "progress_record",
    "run_stream",
    "stream_parser",
]

PROGRESS_FILE_NAME = "progress.json"
PROGRESS_POLL_S = 1
"""How often the runner looks for a finished micro-batch (and a stop request)."""
TRIGGER_SECONDS_DEFAULT = 1.0
STOP_TIMEOUT_S = 120.0
"""A stop waits this long for the running micro-batch before the query is abandoned."""

log = logging.getLogger("shoal.spark.jobs")


@dataclass(frozen=True)
class StreamContext:
    spark: SparkSession
    args: argparse.Namespace
    output_dir: Path
    checkpoint_dir: Path

    def source_options(self) -> dict[str, str]:
        """The `format("rocketmq")` options from the common arguments."""
        args = self.args
        options = {"namesrv": args.namesrv, "startingOffsets": args.starting_offsets, "group": args.group}
        if args.topic:
            options["topics"] = ",".join(args.topic)
        if args.topic_pattern:
            options["topicPattern"] = args.topic_pattern
        if args.max_messages_per_trigger:
            options["maxMessagesPerTrigger"] = str(args.max_messages_per_trigger)
        access_key, secret_key = _account()
        if access_key and secret_key:
            options.update(accessKey=access_key, secretKey=secret_key)
        return options

    def connection(self) -> Connection:
        """The cluster, for a job's own requests beside the stream (admin reads)."""
        access_key, secret_key = _account()
        return Connection(self.args.namesrv, access_key=access_key, secret_key=secret_key)

    def read_topics(self, **options: str) -> DataFrame:
        merged = {**self.source_options(), **options}
        return self.spark.readStream.format("rocketmq").options(**merged).load()

    def started(self, writer: DataStreamWriter, name: str) -> StreamingQuery:
        """Start `writer` with the job's checkpoint and trigger."""
        writer = writer.option("checkpointLocation", str(self.checkpoint_dir / name)).queryName(name)
        if self.args.once:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{self.args.trigger_seconds} seconds")
        return writer.start()


def _account() -> tuple[str | None, str | None]:
    """SHOAL_ACCESS_KEY / SHOAL_SECRET_KEY (both, or neither)."""
    access_key, secret_key = os.environ.get("SHOAL_ACCESS_KEY"), os.environ.get("SHOAL_SECRET_KEY")
    if access_key and secret_key:
        return access_key, secret_key
    return None, None


def stream_parser(prog: str, description: str) -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    result.add_argument("--namesrv", "-n", required=True, help="NameServer addresses, host:port[;host:port]")
    result.add_argument("--topic", "-t", action="append", default=[], help="a topic to read (repeatable)")
    result.add_argument("--topic-pattern", default=None, help="or a regular expression over the topic list")
    result.add_argument("--checkpoint", type=Path, required=True, help="the query's checkpoint directory")
    result.add_argument("--output", "-o", type=Path, required=True, help="directory for tables and progress.json")
    result.add_argument(
        "--starting-offsets",
        default="earliest",
        help="where a new query starts: earliest (default), latest or JSON offsets (a restart resumes)",
    )
    result.add_argument("--max-messages-per-trigger", type=int, default=None, help="cap each micro-batch")
    result.add_argument("--group", default="shoal-spark-stream", help="consumer group for pulls and offsets")
    result.add_argument(
        "--trigger-seconds", type=float, default=TRIGGER_SECONDS_DEFAULT, help="micro-batch interval (default 1)"
    )
    result.add_argument("--once", action="store_true", help="process what the topics hold now, then stop")
    result.add_argument("--master", default=None, help="Spark master (default local[2], or spark-submit's)")
    result.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark settings")
    result.add_argument(
        "--metrics-port", type=int, default=0, help="serve the progress as Prometheus metrics on /metrics (0: off)"
    )
    result.epilog = "ACL: SHOAL_ACCESS_KEY and SHOAL_SECRET_KEY in the environment sign every request."
    return result


def progress_record(progress: dict[str, Any]) -> dict[str, Any]:
    """What a person and the operator want from Spark's StreamingQueryProgress: rates, duration,
    rows, and lag per topic/broker/queue (the source's latest offsets minus where the batch ended).

    `batch` is the last micro-batch that ran (-1: none yet). Spark also reports triggers that found
    no new data (every 10 s while idle) under the id of the *next* micro-batch, which has not run;
    for those `batch` is the one before, and the lag is current."""
    lag: dict[str, dict[str, dict[str, int]]] = {}
    for source in progress.get("sources") or []:
        end, latest = _offsets(source.get("endOffset")), _offsets(source.get("latestOffset"))
        for topic, brokers in latest.items():
            for broker, queues in brokers.items():
                for queue, offset in queues.items():
                    done = end.get(topic, {}).get(broker, {}).get(queue, 0)
                    lag.setdefault(topic, {}).setdefault(broker, {})[queue] = max(0, int(offset) - int(done))
    batch_id = progress.get("batchId")
    ran = ran_a_batch(progress)
    return {
        "batch": batch_id if ran or batch_id is None else int(batch_id) - 1,
        "ran": ran,
        "timestamp": progress.get("timestamp"),
        "rows": progress.get("numInputRows", 0),
        "inputRowsPerSecond": round(float(progress.get("inputRowsPerSecond") or 0.0), 1),
        "processedRowsPerSecond": round(float(progress.get("processedRowsPerSecond") or 0.0), 1),
        "batchDurationMs": (progress.get("durationMs") or {}).get("triggerExecution", 0),
        "lag": sum(value for brokers in lag.values() for queues in brokers.values() for value in queues.values()),
        "lagPerQueue": lag,
    }


def ran_a_batch(progress: dict[str, Any]) -> bool:
    """Whether a progress event reports a micro-batch that ran (Spark times its `addBatch`), not a
    trigger that found nothing new."""
    return "addBatch" in (progress.get("durationMs") or {}) or bool(progress.get("numInputRows"))


def _offsets(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def run_stream(
    argv: Sequence[str] | None,
    build_parser: Callable[[], argparse.ArgumentParser],
    start: Callable[[StreamContext], StreamingQuery],
) -> int:
    """Parse, start Spark and the query, report each micro-batch until the query ends; the exit code."""
    parsed = build_parser()
    args = parsed.parse_args(argv)
    logging.basicConfig(
        level=os.environ.get("SHOAL_LOG_LEVEL", "WARNING"), format="%(levelname)s %(name)s: %(message)s"
    )
    if args.topic and args.topic_pattern == parsed.get_default("topic_pattern"):
        args.topic_pattern = None  # --topic replaces a job's default pattern
    if bool(args.topic) == bool(args.topic_pattern):
        print("error: give --topic (repeatable) or --topic-pattern", file=sys.stderr)
        return 2
    output_dir: Path = args.output
    output_dir.mkdir(parents=True, exist_ok=True)
    last: dict[str, Any] = {}
    try:
        conf = dict(key_value(item) for item in args.conf)
        spark = started_session(f"shoal-{parsed.prog}", args.master, conf)
        query = start(StreamContext(spark, args, output_dir, args.checkpoint))
        print(f"{parsed.prog}: query {query.id} running (checkpoint {args.checkpoint})", file=sys.stderr, flush=True)
        metrics = StreamMetrics(parsed.prog, args.metrics_port) if args.metrics_port else None
        try:
            last = _watch(query, output_dir, parsed.prog, metrics)
        finally:
            if metrics is not None:
                metrics.close()
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"[:ERROR_TEXT_MAX_CHARS]
        write_summary(output_dir, {"job": parsed.prog, "ok": False, "error": error, **_brief(last)})
        if isinstance(exc, JobError):
            print(f"error: {exc}", file=sys.stderr)
            return 2
        raise
    write_summary(output_dir, {"job": parsed.prog, "ok": True, **_brief(last)})
    return 0


def _brief(record: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key != "lagPerQueue"}


def _watch(query: StreamingQuery, output_dir: Path, prog: str, metrics: StreamMetrics | None) -> dict[str, Any]:
    """Write progress.json and a line per finished micro-batch until the query ends; SIGTERM and
    SIGINT stop it after its running micro-batch."""
    stopping = threading.Event()

    def stop(signum: int, _frame: FrameType | None) -> None:
        print(f"{prog}: {signal.Signals(signum).name}: stopping after the running micro-batch", file=sys.stderr)
        stopping.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)
    last: dict[str, Any] = {}
    reported = None
    while query.isActive and not stopping.is_set():
        query.awaitTermination(PROGRESS_POLL_S)
        progress = query.lastProgress
        # Each event once; an idle trigger and the batch that then runs share a batchId.
        identity = (progress.get("batchId"), progress.get("timestamp")) if progress else None
        if progress and identity != reported:
            reported = identity
            last = progress_record(progress)
            (output_dir / PROGRESS_FILE_NAME).write_text(json.dumps(last, sort_keys=True) + "\n")
            if metrics is not None:
                metrics.update(last)
            if last["ran"]:
                print(
                    f"{prog}: batch {last['batch']}: {last['rows']} rows, {last['processedRowsPerSecond']}/s, "
                    f"{last['batchDurationMs']} ms, lag {last['lag']}",
                    file=sys.stderr,
                    flush=True,
                )
    if stopping.is_set():
        query.stop()
    failure = query.exception()
    if failure is not None:
        raise JobError(f"the query failed: {failure}")
    return last
