"""Tests of shoal.formats.sysflag: the SYSFLAG bits of a CommitLog record (spec §1.3)."""

from __future__ import annotations

import pytest

from shoal.formats import sysflag
from shoal.formats.sysflag import (
    CompressionType,
    TransactionType,
    compression_type,
    gets_consume_queue_entry,
    host_lengths,
    transaction_type,
)


def test_bit_masks_match_message_sys_flag() -> None:
    """Each mask has the value of RocketMQ's MessageSysFlag."""
    assert sysflag.COMPRESSED_FLAG == 0x1
    assert sysflag.MULTI_TAGS_FLAG == 0x2
    assert sysflag.TRANSACTION_TYPE_MASK == 0xC
    assert sysflag.BORNHOST_V6_FLAG == 0x10
    assert sysflag.STOREHOSTADDRESS_V6_FLAG == 0x20
    assert sysflag.NEED_UNWRAP_FLAG == 0x40
    assert sysflag.INNER_BATCH_FLAG == 0x80
    assert sysflag.COMPRESSION_TYPE_MASK == 0x700


def test_transaction_types_have_rocketmq_values() -> None:
    """NOT 0x0, PREPARED 0x4, COMMIT 0x8, ROLLBACK 0xC."""
    assert [int(t) for t in TransactionType] == [0x0, 0x4, 0x8, 0xC]


@pytest.mark.parametrize("kind", list(TransactionType))
def test_transaction_type_reads_bits_2_and_3_only(kind: TransactionType) -> None:
    """Other bits (compression, v6 hosts, multi tags) do not disturb the transaction type."""
    assert transaction_type(int(kind)) is kind
    assert transaction_type(int(kind) | 0x1 | 0x2 | 0x30 | 0x700) is kind


@pytest.mark.parametrize(
    ("kind", "dispatched"),
    [
        (TransactionType.NOT_TYPE, True),
        (TransactionType.PREPARED_TYPE, False),
        (TransactionType.COMMIT_TYPE, True),
        (TransactionType.ROLLBACK_TYPE, False),
    ],
)
def test_only_normal_and_committed_records_get_a_consume_queue_entry(kind: TransactionType, dispatched: bool) -> None:
    """Spec §2.3: NOT and COMMIT are dispatched to a ConsumeQueue, PREPARED and ROLLBACK are not."""
    assert gets_consume_queue_entry(int(kind)) is dispatched
    assert gets_consume_queue_entry(int(kind) | 0x33) is dispatched


def test_uncompressed_body_has_no_compression_type() -> None:
    """Without COMPRESSED_FLAG the type bits are ignored: None."""
    assert compression_type(0) is None
    assert compression_type(0x100) is None
    assert compression_type(0x300) is None


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        (0x1, CompressionType.ZLIB),  # pre-4.9.4: 0 in the type bits means zlib
        (0x101, CompressionType.LZ4),
        (0x201, CompressionType.ZSTD),
        (0x301, CompressionType.ZLIB),
        (0x1 | 0x30 | 0x8, CompressionType.ZLIB),
    ],
)
def test_compression_type_of_a_compressed_body(flag: int, expected: CompressionType) -> None:
    """(flag & 0x700) >> 8: 1 LZ4, 2 ZSTD, 3 ZLIB and 0 also ZLIB."""
    assert compression_type(flag) is expected


@pytest.mark.parametrize(
    ("flag", "lengths"),
    [(0, (8, 8)), (0x10, (20, 8)), (0x20, (8, 20)), (0x30, (20, 20)), (0xFCF, (8, 8))],
)
def test_host_lengths_follow_the_v6_flags(flag: int, lengths: tuple[int, int]) -> None:
    """BORNHOST/STOREHOST are 8 bytes (IPv4) or 20 (IPv6) per bits 4 and 5, whatever else is set."""
    assert host_lengths(flag) == lengths
