"""spark.read.format("shoal") on a store written by a real broker, against the store's own reader."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from shoal.formats.message_id import offset_msg_id
from shoal.formats.record import decode_host
from shoal.spark.datasource import MessageReader
from shoal.spark.options import parse_options
from shoal.spark.schema import MESSAGE_SCHEMA, project
from shoal.store.inspection import consume_queue_dirs, iter_consume_queue
from tests.spark.conftest import BrokerStore, ReferenceRecord

pytestmark = pytest.mark.slow  # a local Spark session and a real broker

SMALL_PARTITION_BYTES = 5000
"""Far smaller than a 64 KiB segment: most ranges start inside a record and must align."""


def _host(raw: bytes) -> str:
    address, port = decode_host(raw)
    return f"{address}:{port}"


def _expected_row(record: ReferenceRecord) -> dict[str, Any]:
    header = record.header
    return {
        "topic": header.topic,
        "queue_id": header.queue_id,
        "queue_offset": header.queue_offset,
        "commitlog_offset": record.offset,
        "size": record.size,
        "born_timestamp": header.born_timestamp,
        "store_timestamp": header.store_timestamp,
        "born_host": _host(header.born_host),
        "store_host": _host(header.store_host),
        "sys_flag": header.sysflag,
        "flag": header.flag,
        "reconsume_times": header.reconsume_times,
        "prepared_transaction_offset": header.prepared_transaction_offset,
        "tags": record.properties.get("TAGS"),
        "keys": record.properties.get("KEYS"),
        "uniq_key": record.properties.get("UNIQ_KEY"),
        "properties": record.properties,
        "msg_id": offset_msg_id(header.store_host, record.offset),
        "body_length": header.body_length,
        "body_crc": header.body_crc,
        "body_crc_ok": True,
        "body": record.body,
    }


def _rows(spark: SparkSession, store_dir: Path, **options: str) -> list[dict[str, Any]]:
    frame = spark.read.format("shoal").options(**options).load(str(store_dir))
    rows = [row.asDict() for row in frame.collect()]
    for row in rows:
        if "properties" in row:
            row["properties"] = dict(row["properties"])
        if "body" in row:
            row["body"] = bytes(row["body"])
    return sorted(rows, key=lambda row: row["commitlog_offset"])


def test_every_field_of_every_record_equals_the_store_reader(spark: SparkSession, broker_store: BrokerStore) -> None:
    """Goal: all columns, all records, nothing from the deleted segment or the torn tail.
    Method: small byte ranges with CRC checks, compared row by row with shoal.store.inspection."""
    rows = _rows(spark, broker_store.store_dir, partition_bytes=str(SMALL_PARTITION_BYTES), check_crc="true")
    expected = [_expected_row(record) for record in broker_store.reference()]
    assert len(rows) == len(expected) > 300
    assert rows == expected
    assert all(row["commitlog_offset"] < broker_store.torn_offset for row in rows)
    assert min(row["commitlog_offset"] for row in rows) >= 64 * 1024, "the deleted first segment is not read"


@pytest.mark.parametrize("partition_bytes", [0, 3001, 20_000])
def test_partitioning_never_changes_which_records_are_read(
    spark: SparkSession, broker_store: BrokerStore, partition_bytes: int
) -> None:
    """Goal: byte ranges cover each record exactly once, whatever their size. Method: offsets read
    with one partition per segment and with 3001-byte ranges (most records straddle a boundary)."""
    rows = _rows(spark, broker_store.store_dir, partition_bytes=str(partition_bytes), columns="commitlog_offset")
    assert [row["commitlog_offset"] for row in rows] == [record.offset for record in broker_store.reference()]


def test_topic_filter_and_time_window_keep_exactly_the_matching_records(
    spark: SparkSession, broker_store: BrokerStore
) -> None:
    """Goal: topic and since/until options filter rows and segments correctly. Method: a window
    over the middle third of store times, two topics; compared with the reference."""
    reference = broker_store.reference()
    times = sorted(record.header.store_timestamp for record in reference)
    since, until = times[len(times) // 3], times[2 * len(times) // 3]
    rows = _rows(
        spark,
        broker_store.store_dir,
        topic="Orders,Logs",
        since=str(since),
        until=str(until),
        columns="commitlog_offset,topic,store_timestamp",
    )
    expected = [
        record.offset
        for record in reference
        if record.header.topic in {"Orders", "Logs"} and since <= record.header.store_timestamp < until
    ]
    assert [row["commitlog_offset"] for row in rows] == expected
    assert expected


def test_consume_queue_read_returns_the_records_its_units_point_at(
    spark: SparkSession, broker_store: BrokerStore
) -> None:
    """Goal: a ConsumeQueue-driven read of one topic yields, per queue, the records of its units
    that still exist. Method: units read by shoal.store.inspection, joined with the reference."""
    by_offset = {record.offset: record for record in broker_store.reference()}
    expected = []
    for topic, _queue_id, queue_dir in consume_queue_dirs(broker_store.store_dir):
        if topic == "Orders":
            expected += [
                offset for _logical, offset, _size, _tags in iter_consume_queue(queue_dir) if offset in by_offset
            ]
    rows = _rows(spark, broker_store.store_dir, topic="Orders", consume_queue="true")
    assert sorted(row["commitlog_offset"] for row in rows) == sorted(expected)
    assert rows == [_expected_row(by_offset[row["commitlog_offset"]]) | {"body_crc_ok": None} for row in rows]


def test_reading_never_creates_or_changes_any_store_file(spark: SparkSession, broker_store: BrokerStore) -> None:
    """Goal: the data source is read-only: no lock or abort file, no byte or mtime changed.
    Method: a snapshot of every file before and after reads of all three formats."""

    def snapshot() -> dict[str, tuple[int, int]]:
        found = {}
        for directory, _dirs, files in os.walk(broker_store.store_dir):
            for name in files:
                stat = os.stat(os.path.join(directory, name))
                found[os.path.join(directory, name)] = (stat.st_size, stat.st_mtime_ns)
        return found

    before = snapshot()
    store = str(broker_store.store_dir)
    spark.read.format("shoal").load(store).count()
    spark.read.format("shoal_consume_queue").load(store).count()
    spark.read.format("shoal_index").option("hash_slots", "64").load(store).count()
    assert snapshot() == before
    assert not (broker_store.store_dir / "abort").exists()
    assert not (broker_store.store_dir / "lock").exists() or str(broker_store.store_dir / "lock") in before


def test_segment_deleted_after_planning_is_skipped_with_a_log_line(
    store_copy: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Goal: retention deleting a segment between planning and reading costs its records, not
    the read. Method: plan on the driver side, delete one planned segment, read every partition."""
    store_dir = store_copy()
    options = parse_options({"path": str(store_dir), "partition_bytes": "0", "columns": "commitlog_offset"})
    reader = MessageReader(options, project(MESSAGE_SCHEMA, options.columns))
    partitions = reader.partitions()
    doomed = Path(partitions[1].plan.path)  # type: ignore[attr-defined]
    doomed.unlink()
    with caplog.at_level(logging.WARNING, logger="shoal.spark"):
        offsets = [
            offset
            for partition in partitions
            for batch in reader.read(partition)
            for offset in batch.column(0).to_pylist()
        ]
    base = int(doomed.name)
    assert offsets
    assert not [offset for offset in offsets if base <= offset < base + 64 * 1024]
    assert any("deleted" in record.message and doomed.name in record.message for record in caplog.records)


@pytest.mark.parametrize("source", ["shoal", "shoal_consume_queue", "shoal_index"])
def test_a_path_that_is_no_directory_is_an_error_naming_it_not_an_empty_read(
    spark: SparkSession, tmp_path: Path, source: str
) -> None:
    """Goal: a mistyped store path fails with the path in the message (a store with no segments
    yet still reads as empty). Method: load a missing path through Spark; then an empty directory."""
    missing = tmp_path / "no-such-store"
    options = {"topic": "T"} if source == "shoal_consume_queue" else {}
    with pytest.raises(Exception, match=r"no store directory at .*no-such-store"):
        spark.read.format(source).options(**options).load(str(missing)).count()
    empty = tmp_path / "empty-store"
    empty.mkdir()
    assert spark.read.format(source).options(**options).load(str(empty)).count() == 0
