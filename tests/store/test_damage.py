"""find_resync: where intact records resume after damage, in one pass over the damaged bytes."""

from __future__ import annotations

import random

import pytest

from shoal.formats.record import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    TAIL,
    body_crc,
    encode_record_into,
    record_length,
)
from shoal.store import damage
from shoal.store.damage import find_resync

HOST = bytes([127, 0, 0, 1]) + (10911).to_bytes(4, "big")


def record(physical_offset: int, body: bytes, crc: int | None = None) -> bytes:
    """A V1 record with topic "T"; `crc` overrides the stored body CRC."""
    buffer = bytearray(record_length(len(body), 1, 0))
    stored_crc = body_crc(body) if crc is None else crc
    encode_record_into(buffer, 0, body, b"T", b"", 0, 0, 0, physical_offset, 0, 0, HOST, 0, HOST, 0, 0, stored_crc)
    return bytes(buffer)


def test_resync_finds_the_record_valid_at_its_position_after_random_garbage() -> None:
    """Goal: the first record whose PHYSICALOFFSET is its position is found. Method: garbage + record."""
    garbage = random.Random(1).randbytes(5000)
    buffer = memoryview(garbage + record(5000, b"intact") + bytes(100))
    found = find_resync(buffer, 1, len(buffer), len(buffer), 0, 1 << 20)
    assert found.position == 5000


def test_copies_of_records_at_other_positions_are_not_resync_points() -> None:
    """Goal: a record copied to another position (right CRC, wrong PHYSICALOFFSET) is skipped.
    Method: two stale copies before the real record."""
    stale = record(0, b"stale copy") + record(0, b"another")
    real_at = 300 + len(stale)
    buffer = memoryview(bytes(300) + stale + record(real_at, b"real"))
    found = find_resync(buffer, 1, len(buffer), len(buffer), 0, 1 << 20)
    assert found.position == real_at and found.lost_positions == []


def test_a_record_of_its_position_with_a_bad_crc_is_lost_and_stepped_over() -> None:
    """Goal: a framed record whose body CRC fails is reported lost, the next one found. Method: flip a body byte."""
    broken = bytearray(record(100, b"x" * 50))
    broken[-10] ^= 0xFF
    after = 100 + len(broken)
    buffer = memoryview(bytes(100) + bytes(broken) + record(after, b"next"))
    found = find_resync(buffer, 1, len(buffer), len(buffer), 0, 1 << 20)
    assert (found.position, found.lost_positions) == (after, [100])


def test_a_blank_record_reaching_the_segment_end_is_a_resync_point() -> None:
    """Goal: the end-of-segment blank record resumes the walk; a blank of another length does not."""
    segment = 4096
    buffer = bytearray(segment)
    TAIL.pack_into(buffer, 1000, 17, BLANK_MAGIC_CODE)  # wrong length: garbage
    TAIL.pack_into(buffer, 3000, segment - 3000, BLANK_MAGIC_CODE)
    found = find_resync(memoryview(buffer), 1, segment, segment, 0, segment)
    assert found.position == 3000


def test_the_search_stops_at_its_end() -> None:
    """Goal: nothing at or past `end` is taken (the write position). Method: a record just at `end`."""
    buffer = memoryview(bytes(1000) + record(1000, b"beyond"))
    assert find_resync(buffer, 1, 1000, len(buffer), 0, 1 << 20).position == -1
    assert find_resync(buffer, 1, 1001, len(buffer), 0, 1 << 20).position == 1000


@pytest.mark.parametrize("kind", ["magic codes everywhere", "nested framed records"])
def test_the_search_is_linear_in_hostile_garbage(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Goal: no byte is CRC-checked twice, however the garbage is built. Method: count CRC bytes
    over 256 KiB of magic codes, and of records nested in each other's bodies."""
    size = 256 * 1024
    if kind == "magic codes everywhere":
        garbage = bytearray(MESSAGE_MAGIC_CODE.to_bytes(4, "big", signed=True) * (size // 4))
    else:  # Russian dolls: record k at 88*k is the body of record k-1; every stored CRC is wrong
        dolls = b"core"
        for level in reversed(range(size // 180)):
            dolls = bytes(record(88 * level, dolls, crc=1))
        garbage = bytearray(dolls)
        size = len(garbage)
    crc_bytes = 0
    real_crc = damage.body_crc  # type: ignore[attr-defined]  # the name damage.py calls, patched below

    def counting_crc(body: bytes | memoryview) -> int:
        nonlocal crc_bytes
        crc_bytes += len(body)
        return real_crc(body)

    monkeypatch.setattr(damage, "body_crc", counting_crc)
    buffer = memoryview(bytes(garbage) + record(size, b"intact"))
    found = find_resync(buffer, 0, len(buffer), len(buffer), 0, 1 << 30)
    assert found.position == size
    assert crc_bytes <= len(buffer)
