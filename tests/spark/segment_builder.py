"""Synthetic CommitLog segments for reader unit tests, written with the store's own encoder."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from shoal.formats.properties import encode_properties
from shoal.formats.record import body_crc, encode_blank_into, encode_host, encode_record_into, host_flags

SEGMENT_BYTES = 64 * 1024
STORE_HOST = encode_host("127.0.0.1", 10911)
STORE_HOST_V6 = encode_host("fd00::1", 10911)
BORN_HOST = encode_host("10.0.0.7", 40000)
BORN_HOST_V6 = encode_host("fd00::7", 40001)


@dataclass(frozen=True)
class Written:
    offset: int
    size: int
    topic: str
    body: bytes


def write_segment(
    directory: Path,
    base_offset: int,
    count: int,
    *,
    seed: int = 1,
    ipv6_every: int = 0,
    body_maker: object = None,
    blank_end: bool = True,
) -> list[Written]:
    """A full-size segment of `count` records (random sizes and topics), then the blank record
    (when `blank_end`) or zeros. Every `ipv6_every`-th record has IPv6 hosts."""
    rng = random.Random(seed)
    buffer = bytearray(SEGMENT_BYTES)
    position = 0
    written = []
    for index in range(count):
        topic = f"T{index % 3}"
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 900)))
        if callable(body_maker):
            body = body_maker(index, base_offset + position, body)
        v6 = ipv6_every and index % ipv6_every == 0
        born, store = (BORN_HOST_V6, STORE_HOST_V6) if v6 else (BORN_HOST, STORE_HOST)
        properties = encode_properties({"TAGS": f"tag{index % 2}", "KEYS": f"k{index}", "UNIQ_KEY": f"U{index:08d}"})
        size = encode_record_into(
            buffer,
            position,
            body,
            topic.encode(),
            properties,
            index % 4,
            0,
            index,
            base_offset + position,
            host_flags(born, store),
            1_700_000_000_000 + index,
            born,
            1_700_000_000_000 + 10 * index,
            store,
            0,
            0,
            body_crc(body),
        )
        written.append(Written(base_offset + position, size, topic, body))
        position += size
    assert position + 8 <= SEGMENT_BYTES, "too many records for one segment"
    if blank_end:
        encode_blank_into(buffer, position, SEGMENT_BYTES - position)
    (directory / f"{base_offset:020d}").write_bytes(bytes(buffer))
    return written
