"""Partition planning, record alignment and damage handling of the CommitLog reader (no Spark)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from shoal.formats.record import MESSAGE_MAGIC_CODE, TAIL, RecordKind
from shoal.spark.commitlog_reader import read_range
from shoal.spark.errors import ReadOptionError
from shoal.spark.planning import RangePlan, list_segments, plan_ranges, prune_by_time
from shoal.spark.record_columns import RowFilter
from shoal.spark.schema import MESSAGE_SCHEMA, arrow_schema, project
from shoal.store.inspection import iter_commitlog
from tests.spark.segment_builder import SEGMENT_BYTES, Written, write_segment

PROJECTION = project(MESSAGE_SCHEMA, ("topic", "commitlog_offset", "size", "body", "store_host", "msg_id"))
COLUMNS = tuple(PROJECTION.fieldNames())
TARGET = arrow_schema(PROJECTION)


def _read(plans: list[RangePlan], row_filter: RowFilter | None = None) -> list[dict[str, Any]]:
    rows = []
    for plan in plans:
        for batch in read_range(plan, COLUMNS, TARGET, row_filter or RowFilter(), check_crc=True):
            rows.extend(batch.to_pylist())
    return rows


def _offsets(rows: list[dict[str, Any]]) -> list[int]:
    return [row["commitlog_offset"] for row in rows]


def test_plan_ranges_cover_each_segment_without_gaps(tmp_path: Path) -> None:
    """Goal: ranges tile every segment; 0 means one per segment; too many ranges is refused.
    Method: plan two segments with several sizes."""
    write_segment(tmp_path, 0, 10)
    write_segment(tmp_path, SEGMENT_BYTES, 10)
    segments = list_segments(tmp_path)
    assert [segment.base_offset for segment in segments] == [0, SEGMENT_BYTES]
    assert [(p.start, p.stop) for p in plan_ranges(segments, 0)] == [(0, SEGMENT_BYTES)] * 2
    plans = plan_ranges(segments, 30_000)
    assert [(p.base_offset, p.start, p.stop) for p in plans] == [
        (base, start, stop)
        for base in (0, SEGMENT_BYTES)
        for start, stop in ((0, 30_000), (30_000, 60_000), (60_000, SEGMENT_BYTES))
    ]
    with pytest.raises(ReadOptionError):
        plan_ranges(segments * 2, 1)


@pytest.mark.parametrize("partition_bytes", [1000, 4093, 10_000, 0])
def test_ranges_own_each_record_exactly_once(tmp_path: Path, partition_bytes: int) -> None:
    """Goal: record alignment: a range starts at the first record at/after its start and owns
    records starting inside it. Method: ranges of several sizes against the written records,
    including bodies that contain a record's magic code (a trap for the alignment scan)."""

    def trap(index: int, _offset: int, body: bytes) -> bytes:
        return body + TAIL.pack(120, MESSAGE_MAGIC_CODE) * 3 if index % 5 == 0 else body

    written = write_segment(tmp_path, 0, 60, body_maker=trap)
    rows = _read(plan_ranges(list_segments(tmp_path), partition_bytes))
    assert _offsets(rows) == [record.offset for record in written]
    assert [row["body"] for row in rows] == [record.body for record in written]


def test_a_range_inside_one_record_owns_nothing(tmp_path: Path) -> None:
    """Goal: a range that lies wholly inside a record's body yields no rows. Method: a range of
    the middle of the first big record."""
    written = write_segment(tmp_path, 0, 3)
    first = written[0]
    assert first.size > 200
    plan = RangePlan(str(tmp_path / f"{0:020d}"), 0, 100, first.size - 10)
    assert _read([plan]) == []


def test_body_that_embeds_a_whole_record_is_not_taken_for_one(tmp_path: Path) -> None:
    """Goal: a record copied into a body (bytes of a real record, at the wrong offset) never
    starts a range. Method: bodies embed an earlier record; every 50-byte range start."""
    source = write_segment(tmp_path, 0, 1)
    raw = (tmp_path / f"{0:020d}").read_bytes()[: source[0].size]

    def embed(index: int, _offset: int, body: bytes) -> bytes:
        return raw + body if index % 2 else body

    written = write_segment(tmp_path, 0, 30, body_maker=embed, seed=3)
    rows = _read(plan_ranges(list_segments(tmp_path), 50))
    assert _offsets(rows) == [record.offset for record in written]


def test_every_cut_of_the_last_record_ends_the_read_before_it(tmp_path: Path) -> None:
    """Goal: a torn tail at any byte of the last record (zeros after) ends the read exactly where
    the store's own reader ends it, and nothing before it is lost. Method: cut the last record at
    every offset (STYLE: corruption tests). A cut inside the properties keeps the framing (the
    properties are not CRC'd, in RocketMQ either), so both readers take that record."""
    written = write_segment(tmp_path, 0, 12, blank_end=False)
    path = tmp_path / f"{0:020d}"
    pristine = path.read_bytes()
    last = written[-1]
    for cut in range(last.offset, last.offset + last.size):
        path.write_bytes(pristine[:cut] + bytes(SEGMENT_BYTES - cut))
        rows = _read(plan_ranges(list_segments(tmp_path), 0))
        expected = [
            item.offset for item in iter_commitlog(tmp_path, check_crc=False) if item.check.kind is RecordKind.MESSAGE
        ]
        assert expected[: len(written) - 1] == [record.offset for record in written[:-1]]
        assert _offsets(rows) == expected, f"cut at {cut}"
        if cut < last.offset + last.size - 40:
            assert len(expected) == len(written) - 1
    path.write_bytes(pristine)
    assert _offsets(_read(plan_ranges(list_segments(tmp_path), 0))) == [record.offset for record in written]


def test_garbage_after_the_last_record_is_logged_and_not_read(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Goal: bytes that are neither a record nor zeros end the read with a warning. Method:
    garbage written right after the last record."""
    written = write_segment(tmp_path, 0, 8, blank_end=False)
    path = tmp_path / f"{0:020d}"
    data = bytearray(path.read_bytes())
    end = written[-1].offset + written[-1].size
    data[end : end + 64] = bytes(range(1, 65))
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="shoal.spark"):
        rows = _read(plan_ranges(list_segments(tmp_path), 0))
    assert _offsets(rows) == [record.offset for record in written]
    assert any("torn or damaged" in record.message for record in caplog.records)


def test_ipv6_hosts_change_the_layout_within_a_batch(tmp_path: Path) -> None:
    """Goal: records with IPv6 hosts (longer headers) decode in the same read as IPv4 ones.
    Method: every third record IPv6; hosts and message ids against the written records."""
    written: list[Written] = write_segment(tmp_path, 0, 30, ipv6_every=3)
    rows = _read(plan_ranges(list_segments(tmp_path), 0))
    assert _offsets(rows) == [record.offset for record in written]
    assert rows[0]["store_host"] == "[fd00::1]:10911" and rows[1]["store_host"] == "127.0.0.1:10911"
    assert len(rows[0]["msg_id"]) == 56 and len(rows[1]["msg_id"]) == 32


def test_topic_and_time_filters_and_segment_pruning(tmp_path: Path) -> None:
    """Goal: a time window prunes whole segments by their first store time and filters rows.
    Method: three segments (store times restart in each, so the window matches rows of all)."""
    segments_written = [write_segment(tmp_path, index * SEGMENT_BYTES, 20, seed=index) for index in range(3)]
    segments = list_segments(tmp_path)
    assert prune_by_time(segments, None, 1_600_000_000_000) == [], "every segment starts after `until`"
    assert prune_by_time(segments, 1_700_000_000_000 + 10**6, None) == segments[-1:], "only the last may reach"
    assert prune_by_time(segments, None, None) == segments
    rows = _read(plan_ranges(segments, 0), RowFilter(frozenset({"T1"}), 1_700_000_000_050, 1_700_000_000_120))
    expected = [
        record.offset
        for written in segments_written
        for index, record in enumerate(written)
        if record.topic == "T1" and 50 <= 10 * index < 120
    ]
    assert _offsets(rows) == expected
