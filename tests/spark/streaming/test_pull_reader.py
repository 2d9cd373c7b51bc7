"""Pull answers framed into rows (`pull_reader._decode`): records at or past a segment's end are
left out, every other record is a row with its own CommitLog offset, bodies joined in order."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from shoal.formats.properties import encode_properties
from shoal.formats.record import body_crc, encode_host, encode_record_into, header_layout, host_flags
from shoal.spark.errors import ShoalSparkError
from shoal.spark.streaming.pull_reader import _decode

STORE_HOST = encode_host("127.0.0.1", 10911)
BORN_HOST = encode_host("10.0.0.7", 40000)


def pulled(queue_offsets: list[int], first_physical: int) -> tuple[bytes, list[int]]:
    """A pull answer's body: one record per queue offset, stored from `first_physical` on."""
    buffer = bytearray(64 * 1024)
    position = 0
    physicals = []
    for queue_offset in queue_offsets:
        body = f"m-{queue_offset}".encode() * (1 + queue_offset % 5)
        properties = encode_properties({"TAGS": "T", "UNIQ_KEY": f"U{queue_offset:08d}"})
        physical = first_physical + position
        position += encode_record_into(
            buffer, position, body, b"Topic", properties, 3, 0, queue_offset, physical,
            host_flags(BORN_HOST, STORE_HOST), 1_700_000_000_000, BORN_HOST, 1_700_000_000_001, STORE_HOST,
            0, 0, body_crc(body),
        )  # fmt: skip
        physicals.append(physical)
    return bytes(buffer[:position]), physicals


def rows(records: list[tuple[bytes, int]]) -> list[dict[str, object]]:
    batches = list(_decode(records, check_crc=True))  # type: ignore[arg-type]
    return pa.Table.from_batches(batches).to_pylist() if batches else []


@pytest.mark.parametrize("end", [0, 10, 11, 13, 15, 16, 100])
def test_records_at_or_past_the_segments_end_are_left_out(end: int) -> None:
    """Goal: a filtered pull that ran ahead (offsets 10, 11, 13, 15) keeps only those below `end`,
    each with its own offsets and body. Method: every cut point, before, inside and after."""
    offsets = [10, 11, 13, 15]
    body, physicals = pulled(offsets, 5_000_000)
    found = rows([(body, end)])
    kept = [(offset, physical) for offset, physical in zip(offsets, physicals, strict=True) if offset < end]
    assert [(row["queue_offset"], row["commitlog_offset"]) for row in found] == kept
    assert [row["body"] for row in found] == [f"m-{offset}".encode() * (1 + offset % 5) for offset, _ in kept]
    assert all(row["body_crc_ok"] and row["uniq_key"] == f"U{row['queue_offset']:08d}" for row in found)


def test_answers_from_different_places_are_joined_in_order() -> None:
    """Goal: several answers (stored far apart, one cut, one empty after its cut) give one run of
    rows whose offsets are each record's own. Method: three bodies, the middle one cut at 3 of 5."""
    first, first_physicals = pulled([0, 1], 1_000)
    middle, middle_physicals = pulled([2, 3, 4, 5, 6], 9_000_000_000)
    last, _ = pulled([7], 20_000)
    found = rows([(first, 2), (middle, 5), (last, 7)])
    assert [row["queue_offset"] for row in found] == [0, 1, 2, 3, 4]
    assert [row["commitlog_offset"] for row in found] == first_physicals + middle_physicals[:3]
    assert rows([]) == []


def test_a_body_that_is_not_a_run_of_records_fails_the_task() -> None:
    """Goal: bytes that do not frame are an error naming where, never rows."""
    body, _ = pulled([0, 1], 0)
    with pytest.raises(ShoalSparkError, match="not a run of records"):
        rows([(body + b"\x00" * 3, 5)])


def test_a_damaged_record_fails_the_task_with_its_offset() -> None:
    """Goal: a pulled record whose fields do not add up (a BODYLENGTH beyond its TOTALSIZE) is
    named with its CommitLog offset, never read; one whose body does not match its CRC is read
    with body_crc_ok false (the file source's rule)."""
    body, physicals = pulled([0, 1], 4096)
    second = physicals[1] - physicals[0]
    length_at = second + header_layout(len(BORN_HOST), len(STORE_HOST))["body_length"].offset
    damaged = bytearray(body)
    struct.pack_into(">i", damaged, length_at, 60_000)
    with pytest.raises(ShoalSparkError, match=f"offset {physicals[1]} is damaged: BODYLENGTH"):
        rows([(bytes(damaged), 5)])
    flipped = bytearray(body)
    flipped[body.index(b"m-1m-1")] ^= 0xFF
    assert [row["body_crc_ok"] for row in rows([(bytes(flipped), 5)])] == [True, False]
