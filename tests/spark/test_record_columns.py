"""The store's layout-as-data helpers (shoal.formats.record) and the bulk decoder built on them."""

from __future__ import annotations

import array
from pathlib import Path

from shoal.formats.properties import decode_properties
from shoal.formats.record import HEADERS, WalkStop, check_record, decode_header, header_layout, walk_records
from shoal.spark.record_columns import Damage, Framing, RowFilter, decode_records
from shoal.spark.schema import COLUMN_NAMES, MESSAGE_SCHEMA, arrow_schema
from tests.spark.segment_builder import SEGMENT_BYTES, write_segment


def test_header_layout_matches_decode_header_for_every_host_layout(tmp_path: Path) -> None:
    """Goal: the field table read off HEADERS locates every field decode_header decodes.
    Method: IPv4 and IPv6 records; each field sliced at its span and unpacked."""
    written = write_segment(tmp_path, 0, 6, ipv6_every=2)
    data = (tmp_path / f"{0:020d}").read_bytes()
    for record in written:
        header = decode_header(data, record.offset)
        born = 20 if len(header.born_host) == 20 else 8
        store = 20 if len(header.store_host) == 20 else 8
        for name, span in header_layout(born, store).items():
            raw = data[record.offset + span.offset : record.offset + span.offset + span.size]
            value = raw if span.code == "s" else int.from_bytes(raw, "big", signed=True)
            assert value == getattr(header, name), name
        assert (
            max(span.offset + span.size for span in header_layout(born, store).values()) == HEADERS[(born, store)].size
        )


def test_walk_records_frames_until_blank_and_respects_stop_at(tmp_path: Path) -> None:
    """Goal: the framing walk finds every record start and says why it stopped. Method: a
    segment with a blank end record; walks with count, stop_at and limit bounds."""
    written = write_segment(tmp_path, 0, 20)
    data = (tmp_path / f"{0:020d}").read_bytes()
    walk = walk_records(data, 0, len(data), len(data), 1000)
    assert walk.positions == [record.offset for record in written] and walk.stop is WalkStop.END_OF_FILE
    assert walk_records(data, 0, len(data), len(data), 5).stop is WalkStop.COUNT
    third = written[3].offset
    assert walk_records(data, 0, len(data), third, 1000).positions == [r.offset for r in written[:3]]
    short = walk_records(data, 0, written[5].offset + 10, SEGMENT_BYTES, 1000)
    assert short.stop is WalkStop.LIMIT and short.end == written[5].offset


def test_bulk_decode_equals_check_record_and_drops_bad_rows_in_drop_mode(tmp_path: Path) -> None:
    """Goal: every column equals the one-record decoder; DROP mode leaves out a bad record and
    keeps the rest. Method: decode all records, then again with one PHYSICALOFFSET corrupted."""
    written = write_segment(tmp_path, 0, 25)
    data = bytearray((tmp_path / f"{0:020d}").read_bytes())
    starts = array.array("i", [record.offset for record in written])
    ends = array.array("i", [record.offset + record.size for record in written])
    target = arrow_schema(MESSAGE_SCHEMA)
    decoded = decode_records(
        Framing(bytes(data), 0, starts, ends), COLUMN_NAMES, target, RowFilter(), damage=Damage.STOP, check_crc=True
    )
    rows = [row for batch in decoded.batches for row in batch.to_pylist()]
    for row, record in zip(rows, written, strict=True):
        header = check_record(data, record.offset, len(data), check_crc=True).header
        assert header is not None
        assert row["queue_offset"] == header.queue_offset and row["body"] == record.body
        properties = decode_properties(
            bytes(data[header.properties_position : header.properties_position + header.properties_length])
        )
        assert dict(row["properties"]) == properties and row["body_crc_ok"]
    data[written[7].offset + 28] ^= 0x01  # PHYSICALOFFSET no longer matches the position
    dropped = decode_records(
        Framing(bytes(data), 0, starts, ends), COLUMN_NAMES, target, RowFilter(), damage=Damage.DROP, check_crc=False
    )
    kept = [row["commitlog_offset"] for batch in dropped.batches for row in batch.to_pylist()]
    assert kept == [record.offset for index, record in enumerate(written) if index != 7]
    assert dropped.dropped == 1
    stopped = decode_records(
        Framing(bytes(data), 0, starts, ends), COLUMN_NAMES, target, RowFilter(), damage=Damage.STOP, check_crc=False
    )
    assert sum(batch.num_rows for batch in stopped.batches) == 7 and stopped.damage_offset == written[7].offset
