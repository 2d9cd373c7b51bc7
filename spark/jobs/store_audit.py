"""store_audit: the body CRC of every record, every ConsumeQueue unit and every index entry
checked against the CommitLog (what `shoal store verify` does, in parallel).

A unit must point at a valid record of its own topic, queue, queue offset and size; an index
entry must point at a valid record one of whose keys (`topic#KEYS token`, `topic#UNIQ_KEY`)
hashes to the entry's hash. Units and entries that point below the first record left in the
CommitLog were expired by retention and are not problems. A record whose framing is damaged
ends its segment's walk (the reader logs it); units that point past it then show up as problems.
Output: summary.json (counts, `ok`, samples of each kind of problem).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F  # noqa: N812 (the PySpark convention)

from shoal.formats import limits as formats_limits
from shoal.formats.java_hash import index_key_hash
from shoal.formats.properties import message_keys
from shoal.spark.jobs.runner import SAMPLES_MAX_COUNT, JobContext, JobResult, parser, run_main


def build_parser() -> argparse.ArgumentParser:
    result = parser("store_audit", __doc__ or "", filters=False)
    result.add_argument(
        "--hash-slots",
        type=int,
        default=formats_limits.INDEX_HASH_SLOTS_DEFAULT,
        help="maxHashSlotNum the index files were made with",
    )
    return result


def key_matches(row: Row) -> bool:
    """Does an index entry's hash match one of its record's keys? (Java's String.hashCode runs in
    Python: Spark SQL's hash functions are not it; plain RDD code needs no pandas.)"""
    hashes = {index_key_hash(f"{row['topic']}#{key}") for key in message_keys(row["keys"])}
    if row["uniq_key"]:
        hashes.add(index_key_hash(f"{row['topic']}#{row['uniq_key']}"))
    return row["key_hash"] in hashes


def _samples(frame: DataFrame, order: list[str]) -> list[dict[str, Any]]:
    return [row.asDict() for row in frame.orderBy(*order).limit(SAMPLES_MAX_COUNT).collect()]


def compute(context: JobContext) -> JobResult:
    spark, store = context.spark, str(context.store_dir)
    columns = ["topic", "queue_id", "queue_offset", "commitlog_offset", "size", "keys", "uniq_key", "body_crc_ok"]
    records = context.read_messages(columns, check_crc="true").cache()
    totals = records.agg(
        F.count(F.lit(1)).alias("records"),
        F.coalesce(F.sum("size"), F.lit(0)).alias("bytes"),
        F.coalesce(F.sum(F.when(~F.col("body_crc_ok"), 1).otherwise(0)), F.lit(0)).alias("crc_failures"),
        F.min(F.when(F.col("body_crc_ok"), F.col("commitlog_offset"))).alias("first_valid_offset"),
    ).first()
    assert totals is not None
    first_valid = totals["first_valid_offset"] if totals["first_valid_offset"] is not None else 0
    crc_samples = _samples(
        records.where(~F.col("body_crc_ok")).select("commitlog_offset", "topic"), ["commitlog_offset"]
    )
    valid = records.where(F.col("body_crc_ok")).select(
        "commitlog_offset",
        F.col("topic").alias("record_topic"),
        F.col("queue_id").alias("record_queue_id"),
        F.col("queue_offset").alias("record_queue_offset"),
        F.col("size").alias("record_size"),
        "keys",
        "uniq_key",
    )
    units = spark.read.format("shoal_consume_queue").load(store)
    unit_check = units.join(valid, "commitlog_offset", "left")
    unit_problems = unit_check.where(
        (F.col("record_topic").isNull() & (F.col("commitlog_offset") >= first_valid))
        | (
            F.col("record_topic").isNotNull()
            & (
                (F.col("record_topic") != F.col("topic"))
                | (F.col("record_queue_id") != F.col("queue_id"))
                | (F.col("record_queue_offset") != F.col("queue_offset"))
                | (F.col("record_size") != F.col("size"))
            )
        )
    ).select("topic", "queue_id", "queue_offset", "commitlog_offset", "size", "record_topic", "record_size")
    entries = spark.read.format("shoal_index").option("hash_slots", str(context.args.hash_slots)).load(store)
    entry_check = entries.join(valid, "commitlog_offset", "left")
    missing = entry_check.where(F.col("record_topic").isNull() & (F.col("commitlog_offset") >= first_valid))
    hashed = entry_check.where(F.col("record_topic").isNotNull()).select(
        "index_file", "entry_number", "key_hash", F.col("record_topic").alias("topic"), "keys", "uniq_key"
    )
    mismatched = hashed.rdd.filter(lambda row: not key_matches(row)).map(
        lambda row: {"index_file": row["index_file"], "entry_number": row["entry_number"]}
    )
    summary: dict[str, Any] = {
        "records": totals["records"],
        "bytes": totals["bytes"],
        "crc_failures": totals["crc_failures"],
        "crc_failure_samples": crc_samples,
        "consume_queue_units": units.count(),
        "consume_queue_problems": unit_problems.count(),
        "consume_queue_problem_samples": _samples(unit_problems, ["topic", "queue_id", "queue_offset"]),
        "index_entries": entries.count(),
        "index_missing_records": missing.count(),
        "index_hash_mismatches": mismatched.count(),
        "index_hash_mismatch_samples": mismatched.take(SAMPLES_MAX_COUNT),
        "index_problem_samples": _samples(
            missing.select("index_file", "entry_number", "commitlog_offset"), ["index_file", "entry_number"]
        ),
    }
    records.unpersist()
    problems = (
        summary["crc_failures"]
        + summary["consume_queue_problems"]
        + summary["index_missing_records"]
        + summary["index_hash_mismatches"]
    )
    summary["ok"] = problems == 0
    context.write_details(summary)
    verdict = "store OK" if summary["ok"] else f"store DAMAGED: {problems} problem(s)"
    counts = {name: value for name, value in summary.items() if not name.endswith("_samples")}
    return JobResult(
        counts,
        f"store_audit: {summary['records']} records ({summary['bytes']} bytes), "
        f"{summary['consume_queue_units']} ConsumeQueue units, {summary['index_entries']} index entries -> "
        f"{context.output_dir}\n{verdict}",
    )


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(argv, build_parser, compute)


if __name__ == "__main__":
    raise SystemExit(main())
