"""Tests of shoal.store.checkpoint: RocketMQ's 4096-byte checkpoint page plus our CRC trailer."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest

from shoal.store.checkpoint import StoreCheckpoint

PAGE_SIZE = 4096
TRAILER_AT = 4088


def crc32c_reference(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected 0x82F63B78) bit by bit, independent of the crc32c package."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def java_checkpoint(physic: int, logics: int, index: int, extra: bytes = b"") -> bytes:
    """A checkpoint as a Java broker leaves it: three longs, optional 5.x fields, zeros, no trailer."""
    page = struct.pack(">qqq", physic, logics, index) + extra
    return page + bytes(PAGE_SIZE - len(page))


def written(path: Path, physic: int, logics: int, index: int) -> StoreCheckpoint:
    checkpoint = StoreCheckpoint(path)
    checkpoint.physic_msg_timestamp = physic
    checkpoint.logics_msg_timestamp = logics
    checkpoint.index_msg_timestamp = index
    checkpoint.flush()
    return checkpoint


def test_crc32c_reference_matches_the_standard_check_value() -> None:
    """The reference CRC-32C of '123456789' is 0xE3069283 (the published check value)."""
    assert crc32c_reference(b"123456789") == 0xE3069283


def test_missing_checkpoint_starts_at_zero_and_trusted(tmp_path: Path) -> None:
    """No file: all timestamps 0, trusted, and nothing is written until flush()."""
    checkpoint = StoreCheckpoint(tmp_path / "checkpoint")
    assert (checkpoint.physic_msg_timestamp, checkpoint.logics_msg_timestamp, checkpoint.index_msg_timestamp) == (
        0,
        0,
        0,
    )
    assert checkpoint.trusted
    assert not (tmp_path / "checkpoint").exists()


def test_flushed_file_is_one_page_with_rocketmq_layout_and_our_trailer(tmp_path: Path) -> None:
    """4096 bytes: longs at 0/8/16, zeros, 'SHCK' + CRC32C(bytes 0..23) big-endian at 4088."""
    path = tmp_path / "checkpoint"
    written(path, 1_700_000_000_123, 1_700_000_000_100, 1_699_999_999_000)
    data = path.read_bytes()
    assert len(data) == PAGE_SIZE
    assert data[0:8] == struct.pack(">q", 1_700_000_000_123)
    assert data[8:16] == struct.pack(">q", 1_700_000_000_100)
    assert data[16:24] == struct.pack(">q", 1_699_999_999_000)
    assert data[24:TRAILER_AT] == bytes(TRAILER_AT - 24)
    assert data[TRAILER_AT : TRAILER_AT + 4] == b"SHCK"
    assert data[TRAILER_AT + 4 :] == struct.pack(">I", crc32c_reference(data[:24]))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


def test_flushed_values_load_back_trusted(tmp_path: Path) -> None:
    """A second StoreCheckpoint reads what the first flushed."""
    path = tmp_path / "checkpoint"
    written(path, 30, 20, 10)
    loaded = StoreCheckpoint(path)
    assert (loaded.physic_msg_timestamp, loaded.logics_msg_timestamp, loaded.index_msg_timestamp) == (30, 20, 10)
    assert loaded.trusted


@pytest.mark.parametrize("position", [0, 7, 8, 15, 23, TRAILER_AT + 4, PAGE_SIZE - 1])
def test_corrupted_checkpoint_is_not_trusted(tmp_path: Path, position: int, caplog: pytest.LogCaptureFixture) -> None:
    """Flip one byte of a timestamp or of the CRC: trusted=False, timestamps read as 0, a warning."""
    path = tmp_path / "checkpoint"
    written(path, 1_700_000_000_123, 1_700_000_000_100, 1_699_999_999_000)
    data = bytearray(path.read_bytes())
    data[position] ^= 0x40
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="shoal.store.checkpoint"):
        loaded = StoreCheckpoint(path)
    assert not loaded.trusted
    assert (loaded.physic_msg_timestamp, loaded.logics_msg_timestamp, loaded.index_msg_timestamp) == (0, 0, 0)
    assert loaded.min_timestamp == 0
    assert "CRC" in caplog.text


@pytest.mark.parametrize("size", [0, 24, PAGE_SIZE - 1, PAGE_SIZE + 1])
def test_checkpoint_of_the_wrong_size_is_not_trusted(tmp_path: Path, size: int) -> None:
    """A truncated or overlong checkpoint file is ignored: trusted=False, zeros."""
    path = tmp_path / "checkpoint"
    path.write_bytes(struct.pack(">qqq", 5, 5, 5)[:size] + bytes(max(0, size - 24)))
    loaded = StoreCheckpoint(path)
    assert not loaded.trusted
    assert loaded.physic_msg_timestamp == 0


def test_java_written_checkpoint_without_trailer_is_trusted(tmp_path: Path) -> None:
    """No 'SHCK' magic (a Java broker's file): trusted as RocketMQ would, values read."""
    path = tmp_path / "checkpoint"
    path.write_bytes(java_checkpoint(1_700_000_000_123, 1_700_000_000_100, 1_699_999_999_000))
    loaded = StoreCheckpoint(path)
    assert loaded.trusted
    assert loaded.physic_msg_timestamp == 1_700_000_000_123
    assert loaded.logics_msg_timestamp == 1_700_000_000_100
    assert loaded.index_msg_timestamp == 1_699_999_999_000


def test_flush_keeps_the_5x_fields_rocketmq_may_have_written(tmp_path: Path) -> None:
    """masterFlushedOffset (24) and confirmPhyOffset (32) from a 5.x broker survive our flush."""
    path = tmp_path / "checkpoint"
    extra = struct.pack(">qq", 123_456, 654_321)
    path.write_bytes(java_checkpoint(1, 2, 3, extra))
    loaded = StoreCheckpoint(path)
    loaded.physic_msg_timestamp = 10
    loaded.flush()
    data = path.read_bytes()
    assert struct.unpack_from(">qqqqq", data, 0) == (10, 2, 3, 123_456, 654_321)
    assert data[TRAILER_AT : TRAILER_AT + 4] == b"SHCK"
    assert StoreCheckpoint(path).trusted


def test_flush_replaces_an_untrusted_file(tmp_path: Path) -> None:
    """After a corrupt load, the next flush writes a valid, trusted page again."""
    path = tmp_path / "checkpoint"
    path.write_bytes(b"garbage")
    checkpoint = StoreCheckpoint(path)
    assert not checkpoint.trusted
    checkpoint.logics_msg_timestamp = 77
    checkpoint.flush()
    reloaded = StoreCheckpoint(path)
    assert reloaded.trusted
    assert reloaded.logics_msg_timestamp == 77
    assert len(path.read_bytes()) == PAGE_SIZE


@pytest.mark.parametrize(
    ("physic", "logics", "index", "minimum", "minimum_index"),
    [
        (10_000, 20_000, 50_000, 7_000, 7_000),  # min(physic, logics) - 3000
        (20_000, 10_000, 5_000, 7_000, 5_000),  # the index timestamp can be lower still
        (2_000, 9_000, 9_000, 0, 0),  # never below 0
        (0, 0, 0, 0, 0),
    ],
)
def test_min_timestamp_is_the_older_of_physic_and_logics_minus_three_seconds(
    tmp_path: Path, physic: int, logics: int, index: int, minimum: int, minimum_index: int
) -> None:
    """getMinTimestamp = max(0, min(physic, logics) - 3000); the index variant also takes index."""
    checkpoint = StoreCheckpoint(tmp_path / "checkpoint")
    checkpoint.physic_msg_timestamp = physic
    checkpoint.logics_msg_timestamp = logics
    checkpoint.index_msg_timestamp = index
    assert checkpoint.min_timestamp == minimum
    assert checkpoint.min_timestamp_index == minimum_index


# --- the index mark (ours, bytes 4064..4087) ---

MARK_AT = 4064


def test_index_mark_is_written_with_its_own_crc_and_loads_back(tmp_path: Path) -> None:
    """'SHIX', the file number, the count, CRC32C of those 16 bytes; RocketMQ's bytes untouched."""
    path = tmp_path / "checkpoint"
    checkpoint = StoreCheckpoint(path)
    checkpoint.index_durable = (20261128034512345, 1_234)
    checkpoint.flush()
    data = path.read_bytes()
    assert data[MARK_AT : MARK_AT + 4] == b"SHIX"
    assert struct.unpack_from(">qq", data, MARK_AT + 4) == (20261128034512345, 1_234)
    assert data[MARK_AT + 20 : TRAILER_AT] == struct.pack(">I", crc32c_reference(data[MARK_AT + 4 : MARK_AT + 20]))
    assert data[24:MARK_AT] == bytes(MARK_AT - 24)
    assert StoreCheckpoint(path).index_durable == (20261128034512345, 1_234)


@pytest.mark.parametrize("position", [MARK_AT, MARK_AT + 5, MARK_AT + 19, MARK_AT + 21])
def test_a_damaged_index_mark_keeps_nothing_and_the_timestamps_stay_trusted(tmp_path: Path, position: int) -> None:
    """A flipped byte in the mark: no mark (recovery rebuilds the whole unfilled index file)."""
    path = tmp_path / "checkpoint"
    checkpoint = written(path, 30, 20, 10)
    checkpoint.index_durable = (20261128034512345, 99)
    checkpoint.flush()
    data = bytearray(path.read_bytes())
    data[position] ^= 0x01
    path.write_bytes(bytes(data))
    loaded = StoreCheckpoint(path)
    assert loaded.index_durable == (0, 0)
    assert loaded.trusted
    assert loaded.physic_msg_timestamp == 30


def test_clearing_the_index_mark_writes_zeros(tmp_path: Path) -> None:
    """A mark set then cleared (no index file any more) leaves the bytes as a file without one."""
    path = tmp_path / "checkpoint"
    checkpoint = StoreCheckpoint(path)
    checkpoint.index_durable = (20261128034512345, 7)
    checkpoint.flush()
    reloaded = StoreCheckpoint(path)
    reloaded.index_durable = (0, 0)
    reloaded.flush()
    assert path.read_bytes()[MARK_AT:TRAILER_AT] == bytes(TRAILER_AT - MARK_AT)
    assert StoreCheckpoint(path).index_durable == (0, 0)
