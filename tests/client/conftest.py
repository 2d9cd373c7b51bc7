"""Client test helpers: CommitLog records built straight from spec §1.2 (independently of the
client's decoder)."""

from __future__ import annotations

import ipaddress
import struct
import zlib
from collections.abc import Callable

import pytest

MESSAGE_MAGIC_CODE = -626843481
MESSAGE_MAGIC_CODE_V2 = -626843477


def encode_host(address: str, port: int) -> bytes:
    return ipaddress.ip_address(address).packed + struct.pack(">i", port)


def build_record(
    *,
    topic: str = "TopicTest",
    body: bytes = b"Hello",
    properties: str = "",
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    sysflag: int = 0,
    born_timestamp: int = 1700000000000,
    born_host: tuple[str, int] = ("127.0.0.1", 54321),
    store_timestamp: int = 1700000000123,
    store_host: tuple[str, int] = ("192.168.1.10", 10911),
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    magic: int = MESSAGE_MAGIC_CODE,
) -> bytes:
    """One record, field by field in the order of the spec's table; v6 flags follow the hosts."""
    born = encode_host(*born_host)
    store = encode_host(*store_host)
    sysflag |= (0x10 if len(born) == 20 else 0) | (0x20 if len(store) == 20 else 0)
    topic_bytes = topic.encode("utf-8")
    properties_bytes = properties.encode("utf-8")
    topic_length = struct.pack(">h", len(topic_bytes)) if magic == MESSAGE_MAGIC_CODE_V2 else bytes([len(topic_bytes)])
    tail = (
        struct.pack(">i", reconsume_times)
        + struct.pack(">q", prepared_transaction_offset)
        + struct.pack(">i", len(body))
        + body
        + topic_length
        + topic_bytes
        + struct.pack(">h", len(properties_bytes))
        + properties_bytes
    )
    middle = (
        struct.pack(">i", zlib.crc32(body) & 0x7FFFFFFF)
        + struct.pack(">i", queue_id)
        + struct.pack(">i", flag)
        + struct.pack(">q", queue_offset)
        + struct.pack(">q", physical_offset)
        + struct.pack(">i", sysflag)
        + struct.pack(">q", born_timestamp)
        + born
        + struct.pack(">q", store_timestamp)
        + store
    )
    total = 8 + len(middle) + len(tail)
    return struct.pack(">ii", total, magic) + middle + tail


@pytest.fixture(name="build_record")
def build_record_fixture() -> Callable[..., bytes]:
    return build_record
