"""What every job shares: its command line, its SparkSession, its reads and its output files.

Each job module has `main(argv=None)`; run it as `python -m shoal.spark.jobs.<job>`, as
`spark-submit .../shoal/spark/jobs/<job>.py` (the Spark image keeps them in /opt/shoal/spark/jobs)
or as `shoal spark run <job>`. Results go to --output DIR:

    summary.json   a small JSON object (at most SUMMARY_BYTES_MAX), written on failure too: the
                   operator uses it as the pod's termination message (docs/analysis.md); a copy
                   goes to $SHOAL_TERMINATION_MESSAGE_PATH when that is set (spark-submit drivers)
    details.json   the whole result (every row of a small table, samples of findings)
    *.parquet      tables, when the result is one
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from shoal.spark import limits
from shoal.spark.errors import JobError
from shoal.spark.jobs import SUMMARY_FILE_NAME, TERMINATION_MESSAGE_ENV
from shoal.spark.options import parse_time_ms
from shoal.spark.session import session, under_spark_submit

DETAILS_FILE_NAME = "details.json"
SUMMARY_BYTES_MAX = 4096
"""A Kubernetes termination message holds 4096 bytes; a longer summary would not parse there."""
ERROR_TEXT_MAX_CHARS = 1000
STARTUP_PROGRESS_INTERVAL_S = 5.0
"""How often a person waiting for the JVM hears that Spark is still starting."""
SAMPLES_MAX_COUNT = 10
"""Example ids / offsets kept per finding in a summary: enough to look one up, bounded."""


@dataclass(frozen=True)
class JobResult:
    summary: dict[str, Any]
    """Counts and verdicts: small (written to summary.json, bounded by SUMMARY_BYTES_MAX)."""
    text: str
    """What the job prints for a person."""


@dataclass(frozen=True)
class JobContext:
    spark: SparkSession
    args: argparse.Namespace
    store_dir: Path
    output_dir: Path

    def read_messages(self, columns: Sequence[str] | None = None, **options: str) -> DataFrame:
        """The store's messages, filtered by the common --topic/--since/--until arguments."""
        merged = dict(self.base_options())
        if columns is not None:
            merged["columns"] = ",".join(columns)
        merged.update(options)
        return self.spark.read.format("shoal").options(**merged).load(str(self.store_dir))

    def base_options(self) -> dict[str, str]:
        options = {"partition_bytes": str(self.args.partition_bytes)}
        if getattr(self.args, "topic", None):
            options["topic"] = ",".join(self.args.topic)
        for name in ("since", "until"):
            value = getattr(self.args, name, None)
            if value:
                options[name] = str(parse_time_ms(value))
        return options

    def write_details(self, details: dict[str, Any]) -> Path:
        path = self.output_dir / DETAILS_FILE_NAME
        path.write_text(json.dumps(details, indent=2, sort_keys=True, default=str) + "\n")
        return path

    def write_table(self, frame: DataFrame, name: str) -> Path:
        path = self.output_dir / name
        frame.write.mode("overwrite").parquet(str(path))
        return path


def parser(prog: str, description: str, *, filters: bool = True) -> argparse.ArgumentParser:
    """Arguments every job takes; `filters` adds --topic/--since/--until."""
    result = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    result.add_argument("store_dir", type=Path, help="the store directory (holds commitlog/, consumequeue/, config/)")
    result.add_argument("--output", "-o", type=Path, required=True, help="directory for summary.json and tables")
    result.add_argument(
        "--master",
        default=None,
        help="Spark master (default: local[2], or spark-submit's when run under spark-submit)",
    )
    result.add_argument(
        "--partition-bytes",
        type=int,
        default=limits.PARTITION_BYTES_DEFAULT,
        help="split CommitLog segments into ranges this big (0: one partition per segment)",
    )
    result.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark settings")
    if filters:
        result.add_argument("--topic", action="append", default=[], help="only this topic (repeatable)")
        result.add_argument("--since", default=None, help="store time from (epoch ms or ISO-8601, UTC by default)")
        result.add_argument("--until", default=None, help="store time before (epoch ms or ISO-8601)")
    return result


def write_summary(output_dir: Path, summary: dict[str, Any]) -> Path:
    """summary.json, cut to SUMMARY_BYTES_MAX (longest values first) if it has to be, and its
    copy for the termination message."""
    bounded = dict(summary)
    text = json.dumps(bounded, sort_keys=True, default=str)
    while len(text.encode()) > SUMMARY_BYTES_MAX and bounded:
        longest = max(bounded, key=lambda name: len(json.dumps(bounded[name], default=str)))
        bounded[longest] = "(cut: see details.json)"
        bounded["truncated"] = True
        text = json.dumps(bounded, sort_keys=True, default=str)
    path = output_dir / SUMMARY_FILE_NAME
    path.write_text(text)
    copy = os.environ.get(TERMINATION_MESSAGE_ENV)
    if copy:
        Path(copy).write_text(text)
    return path


def run(
    argv: Sequence[str] | None,
    build_parser: Callable[[], argparse.ArgumentParser],
    job: Callable[[JobContext], JobResult],
) -> int:
    """Parse, start Spark, run `job`, write its summary and print its text; returns the exit code.
    A failure still leaves a summary (`ok: false` and the error) before it propagates."""
    parsed = build_parser()
    args = parsed.parse_args(argv)
    logging.basicConfig(
        level=os.environ.get("SHOAL_LOG_LEVEL", "WARNING"), format="%(levelname)s %(name)s: %(message)s"
    )
    output_dir: Path = args.output
    output_dir.mkdir(parents=True, exist_ok=True)
    try:
        store_dir: Path = args.store_dir
        if not (store_dir / "commitlog").is_dir():
            raise JobError(f"{store_dir} is not a store directory (no commitlog/ in it)")
        conf = dict(key_value(item) for item in args.conf)
        spark = started_session(f"shoal-{parsed.prog}", args.master, conf)
        result = job(JobContext(spark, args, store_dir, output_dir))
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"[:ERROR_TEXT_MAX_CHARS]
        write_summary(output_dir, {"job": parsed.prog, "ok": False, "error": error})
        raise
    write_summary(output_dir, {"job": parsed.prog, "ok": True, **result.summary})
    print(result.text)
    return 0


def started_session(app_name: str, master: str | None, conf: Mapping[str, str]) -> SparkSession:
    """The session, with progress on stderr while a JVM starts (10-30 s, most of a small job)."""
    if under_spark_submit():  # spark-submit started the JVM already
        return session(app_name, master, conf)
    with _progress(f"starting Spark ({master or 'local[2]'}): the JVM takes 10-30 s") as elapsed_s:
        spark = session(app_name, master, conf)
    print(f"Spark ready in {elapsed_s():.1f} s", file=sys.stderr, flush=True)
    return spark


@contextmanager
def _progress(text: str) -> Iterator[Callable[[], float]]:
    """Print `text`, then a line every STARTUP_PROGRESS_INTERVAL_S until the block ends."""
    started = time.monotonic()
    done = threading.Event()
    print(f"{text} ...", file=sys.stderr, flush=True)

    def tick() -> None:
        while not done.wait(STARTUP_PROGRESS_INTERVAL_S):
            print(f"  still starting Spark ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)

    ticker = threading.Thread(target=tick, name="spark-start-progress", daemon=True)
    ticker.start()
    try:
        yield lambda: time.monotonic() - started
    finally:
        done.set()
        ticker.join()


def key_value(item: str) -> tuple[str, str]:
    key, separator, value = item.partition("=")
    if not separator:
        raise JobError(f"--conf {item!r} is not KEY=VALUE")
    return key, value


def run_main(
    argv: Sequence[str] | None,
    build_parser: Callable[[], argparse.ArgumentParser],
    job: Callable[[JobContext], JobResult],
) -> int:
    """The body of a job module's `main(argv=None)`: exit code 2 on a JobError."""
    try:
        return run(argv, build_parser, job)
    except JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
