"""Every job (run in-process on the test session) against a direct scan by shoal.store."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, cast

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from shoal.cli.main import cli
from shoal.formats.message_id import offset_msg_id
from shoal.spark.jobs import TERMINATION_MESSAGE_ENV, consumer_lag, dlq_report, export, store_audit, topic_stats
from shoal.spark.jobs.runner import SUMMARY_BYTES_MAX, write_summary
from shoal.store.inspection import consume_queue_dirs, iter_commitlog, iter_consume_queue, verify_store
from shoal.store.metadata import ConsumerOffsetTable
from tests.spark.conftest import HASH_SLOTS, SEGMENT_BYTES, BrokerStore, ReferenceRecord, reference_records

pytestmark = pytest.mark.slow  # a local Spark session and a real broker


def _summary(output: Path) -> dict[str, Any]:
    text = (output / "summary.json").read_text()
    assert len(text.encode()) <= SUMMARY_BYTES_MAX
    return cast("dict[str, Any]", json.loads(text))


def _details(output: Path) -> dict[str, Any]:
    return cast("dict[str, Any]", json.loads((output / "details.json").read_text()))


def _percentile(values: list[int], fraction: float) -> float:
    """Spark's exact `percentile`: linear interpolation between the closest ranks."""
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def test_topic_stats_equals_a_direct_scan(spark: SparkSession, broker_store: BrokerStore, tmp_path: Path) -> None:
    """Goal: counts, bytes and size percentiles per topic and hour. Method: the same numbers
    computed from shoal.store.inspection records."""
    assert topic_stats.main([str(broker_store.store_dir), "--output", str(tmp_path)]) == 0
    groups: dict[tuple[str, int], list[ReferenceRecord]] = defaultdict(list)
    for record in broker_store.reference():
        groups[(record.header.topic, record.header.store_timestamp // 3_600_000 * 3_600_000)].append(record)
    expected = []
    for (topic, hour), records in sorted(groups.items()):
        lengths = [record.header.body_length for record in records]
        expected.append(
            {
                "topic": topic,
                "hour_start_ms": hour,
                "messages": len(records),
                "record_bytes": sum(record.size for record in records),
                "body_bytes": sum(lengths),
                "body_bytes_min": min(lengths),
                "body_bytes_max": max(lengths),
                **{f"body_bytes_p{round(f * 100)}": _percentile(lengths, f) for f in topic_stats.PERCENTILES},
            }
        )
    hours = _details(tmp_path)["hours"]
    assert [{k: pytest.approx(v) for k, v in row.items()} for row in hours] == expected
    assert spark.read.parquet(str(tmp_path / "topic_stats.parquet")).count() == len(expected)


def test_export_writes_the_filtered_messages_to_parquet(
    spark: SparkSession, broker_store: BrokerStore, tmp_path: Path
) -> None:
    """Goal: export by topic and tag. Method: the Parquet rows against the reference records."""
    args = [str(broker_store.store_dir), "--output", str(tmp_path), "--topic", "Orders", "--tag", "Tag1"]
    assert export.main(args) == 0
    exported = spark.read.parquet(str(tmp_path / "messages.parquet")).collect()
    got = sorted((row["msg_id"], bytes(row["body"]), row["tags"]) for row in exported)
    expected = sorted(
        (offset_msg_id(r.header.store_host, r.offset), r.body, "Tag1")
        for r in broker_store.reference()
        if r.header.topic == "Orders" and r.properties.get("TAGS") == "Tag1"
    )
    assert got == expected
    assert _summary(tmp_path)["rows"] == len(expected) > 0


def test_consumer_lag_equals_offsets_file_against_consume_queue_ends(broker_store: BrokerStore, tmp_path: Path) -> None:
    """Goal: lag per group/topic/queue. Method: consumerOffset.json read by shoal.store.metadata,
    queue ends by shoal.store.inspection."""
    assert consumer_lag.main([str(broker_store.store_dir), "--output", str(tmp_path)]) == 0
    ends = {}
    for topic, queue_id, queue_dir in consume_queue_dirs(broker_store.store_dir):
        logical = [unit[0] for unit in iter_consume_queue(queue_dir)]
        if logical:
            ends[(topic, queue_id)] = (max(logical) + 1, min(logical))
    table = ConsumerOffsetTable(broker_store.store_dir / "config" / "consumerOffset.json")
    table.load()
    expected = []
    for key, offsets in sorted(table.all().items()):
        topic, _at, group = key.partition("@")
        for queue_id, offset in sorted(offsets.items()):
            end, first = ends.get((topic, queue_id), (0, 0))
            expected.append((group, topic, queue_id, offset, end, first, max(end - offset, 0)))
    rows = _details(tmp_path)["queues"]
    got = [
        (r["group"], r["topic"], r["queue_id"], r["consumer_offset"], r["max_offset"], r["min_offset"], r["lag"])
        for r in rows
    ]
    assert sorted(got) == sorted(expected)
    lags = {(g["group"], g["topic"]): g["lag"] for g in _details(tmp_path)["groups"]}
    assert lags[("spark-lag-group", "Orders")] > 0
    assert lags[("spark-dlq-group", "Payments")] == 0


def test_dlq_report_equals_a_direct_scan(broker_store: BrokerStore, tmp_path: Path) -> None:
    """Goal: dead letters per DLQ topic with their original topic and samples. Method: the
    reference records of %DLQ% topics."""
    assert dlq_report.main([str(broker_store.store_dir), "--output", str(tmp_path)]) == 0
    dead = [r for r in broker_store.reference() if r.header.topic.startswith("%DLQ%")]
    (report,) = _details(tmp_path)["dlq_topics"]
    assert _summary(tmp_path)["dlq_topics"] == {broker_store.dlq_topic: len(dead)}
    assert report["topic"] == broker_store.dlq_topic
    assert report["group"] == "spark-dlq-group"
    assert report["messages"] == len(dead) > 0
    assert report["oldest_store_timestamp"] == min(r.header.store_timestamp for r in dead)
    assert report["newest_store_timestamp"] == max(r.header.store_timestamp for r in dead)
    assert report["original_topics"] == dict(Counter(r.properties.get("RETRY_TOPIC", "") for r in dead))
    assert [s["msg_id"] for s in report["samples"]] == [
        offset_msg_id(r.header.store_host, r.offset) for r in sorted(dead, key=lambda r: r.offset)[:10]
    ]
    assert all(s["origin_message_id"] and s["original_topic"] == "Payments" for s in report["samples"])


def _verify_counts(store_dir: Path) -> dict[str, int]:
    report = verify_store(store_dir, hash_slots=HASH_SLOTS)
    return {
        "records": report.records,
        "consume_queue_units": report.consume_queue_units,
        "index_entries": report.index_entries,
        "crc_failures": sum("body CRC" in problem for problem in report.problems),
        "consume_queue_problems": sum(" unit " in problem for problem in report.problems),
        "index_problems": sum(problem.startswith("index ") for problem in report.problems),
    }


def _audit_counts(summary: dict[str, Any]) -> dict[str, int]:
    return {
        "records": summary["records"] - summary["crc_failures"],
        "consume_queue_units": summary["consume_queue_units"],
        "index_entries": summary["index_entries"],
        "crc_failures": summary["crc_failures"],
        "consume_queue_problems": summary["consume_queue_problems"],
        "index_problems": summary["index_missing_records"] + summary["index_hash_mismatches"],
    }


def test_store_audit_equals_store_verify(broker_store: BrokerStore, tmp_path: Path) -> None:
    """Goal: the audit finds what `shoal store verify` finds (the torn tail aside: it ends the
    walk and is logged). Method: both on the damaged broker store."""
    args = [str(broker_store.store_dir), "--output", str(tmp_path), "--hash-slots", str(HASH_SLOTS)]
    assert store_audit.main(args) == 0
    summary = _summary(tmp_path)
    assert _audit_counts(summary) == _verify_counts(broker_store.store_dir)
    assert summary["ok"] and summary["index_entries"] > 0 and summary["consume_queue_units"] > 0


def test_store_audit_reports_a_flipped_body_byte_and_the_units_pointing_at_it(
    broker_store: BrokerStore, tmp_path: Path
) -> None:
    """Goal: a bad CRC is a problem, and so is every unit/entry pointing at that record.
    Method: flip one body byte in a copy; compare with `shoal store verify`."""
    store_dir = tmp_path / "store"
    shutil.copytree(broker_store.store_dir, store_dir)
    victim = reference_records(store_dir)[5]
    segment = store_dir / "commitlog" / f"{victim.offset - victim.offset % SEGMENT_BYTES:020d}"
    data = bytearray(segment.read_bytes())
    data[victim.header.body_position] ^= 0xFF
    segment.write_bytes(bytes(data))
    output = tmp_path / "out"
    assert store_audit.main([str(store_dir), "--output", str(output), "--hash-slots", str(HASH_SLOTS)]) == 0
    summary = _summary(output)
    assert _audit_counts(summary) == _verify_counts(store_dir)
    assert summary["crc_failures"] == 1 and not summary["ok"]
    assert _details(output)["crc_failure_samples"][0]["commitlog_offset"] == victim.offset
    assert sum(1 for item in iter_commitlog(store_dir / "commitlog", check_crc=False)) > 0


def test_cli_runs_a_job_and_explains_itself(broker_store: BrokerStore, tmp_path: Path) -> None:
    """Goal: `shoal spark run JOB ...` hands the arguments to the job; --help lists the jobs.
    Method: click's runner, in-process."""
    runner = CliRunner()
    listing = runner.invoke(cli, ["spark", "run", "--help"])
    assert listing.exit_code == 0
    assert all(
        name in listing.output for name in ("topic_stats", "export", "consumer_lag", "dlq_report", "store_audit")
    )
    result = runner.invoke(cli, ["spark", "run", "topic_stats", str(broker_store.store_dir), "--output", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "topic_stats:" in result.output
    assert (tmp_path / "summary.json").exists()
    missing = runner.invoke(cli, ["spark", "run", "topic_stats", str(tmp_path), "--output", str(tmp_path / "x")])
    assert missing.exit_code == 2


def test_summary_is_bounded_written_on_failure_and_copied_for_the_termination_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: summary.json always parses within a termination message's 4096 bytes, exists when a
    job fails, and is copied to $SHOAL_TERMINATION_MESSAGE_PATH. Method: a huge summary, then a
    job pointed at a directory that is not a store."""
    copy = tmp_path / "termination-log"
    monkeypatch.setenv(TERMINATION_MESSAGE_ENV, str(copy))
    write_summary(tmp_path, {"job": "x", "rows": list(range(5000)), "ok": True})
    summary = _summary(tmp_path)
    assert summary["truncated"] and summary["ok"] and copy.read_text() == (tmp_path / "summary.json").read_text()
    output = tmp_path / "failed"
    assert topic_stats.main([str(tmp_path), "--output", str(output)]) == 2
    failed = _summary(output)
    assert failed["ok"] is False and "not a store directory" in failed["error"]


def test_spark_submit_runs_a_job_without_an_activated_virtualenv(broker_store: BrokerStore, tmp_path: Path) -> None:
    """Goal: `shoal spark submit` works where a bare spark-submit from .venv/bin does not (its
    driver runs `python3` from PATH). Method: a real spark-submit, with PATH holding only the
    system directories and no VIRTUAL_ENV; the job's summary counts the store's records."""
    shoal = Path(sys.executable).parent / "shoal"
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "SPARK_LOCAL_IP": "127.0.0.1"}
    if "JAVA_HOME" in os.environ:
        environment["JAVA_HOME"] = os.environ["JAVA_HOME"]
    output = tmp_path / "out"
    command = [str(shoal), "spark", "submit", "--master", "local[1]", "topic_stats", str(broker_store.store_dir)]
    result = subprocess.run(
        [*command, "--output", str(output)], env=environment, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "starting spark-submit" in result.stderr
    summary = _summary(output)
    assert summary["ok"] is True and summary["messages"] == len(broker_store.reference()), summary
