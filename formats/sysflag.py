"""SYSFLAG bits of a CommitLog record (`MessageSysFlag`, spec §1.3)."""

from __future__ import annotations

import enum

COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_TYPE_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_TYPE_MASK = 0x700


class TransactionType(enum.IntEnum):
    NOT_TYPE = 0x0
    PREPARED_TYPE = 0x4
    COMMIT_TYPE = 0x8
    ROLLBACK_TYPE = 0xC


class CompressionType(enum.IntEnum):
    """Compression of a body the client compressed; 0 in the bits means ZLIB (pre-4.9.4)."""

    ZLIB = 3
    LZ4 = 1
    ZSTD = 2


def transaction_type(sysflag: int) -> TransactionType:
    return TransactionType(sysflag & TRANSACTION_TYPE_MASK)


def gets_consume_queue_entry(sysflag: int) -> bool:
    """Only NOT_TYPE and COMMIT_TYPE records are dispatched to a ConsumeQueue (spec §2.3)."""
    kind = sysflag & TRANSACTION_TYPE_MASK
    return kind in (TransactionType.NOT_TYPE, TransactionType.COMMIT_TYPE)


def compression_type(sysflag: int) -> CompressionType | None:
    """The body's compression, or None for an uncompressed body."""
    if not sysflag & COMPRESSED_FLAG:
        return None
    bits = (sysflag & COMPRESSION_TYPE_MASK) >> 8
    return CompressionType.ZLIB if bits == 0 else CompressionType(bits)


def host_lengths(sysflag: int) -> tuple[int, int]:
    """Byte lengths of BORNHOST and STOREHOST (8 for IPv4, 20 for IPv6) per the v6 flags."""
    born = 20 if sysflag & BORNHOST_V6_FLAG else 8
    store = 20 if sysflag & STOREHOSTADDRESS_V6_FLAG else 8
    return born, store
