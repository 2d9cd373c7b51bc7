"""The SEND_BATCH_MESSAGE body (`MessageDecoder.encodeMessages`, spec §1.10): one declaration used
by the client's encoder and the broker's decoder.

A batch body is a run of blocks, one per message, big-endian:

    offset  size  field
    0       4     TOTALSIZE            this block, this field included
    4       4     MAGICCODE            0 (ignored when read)
    8       4     BODYCRC              0 (ignored when read)
    12      4     FLAG                 the producer's opaque int
    16      4     BODYLENGTH
    20      B     BODY
    20+B    2     PROPERTIESLENGTH     signed short
    22+B    P     PROPERTIES           shoal.formats.properties

The broker expands each block into one full CommitLog record (shoal.formats.record).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

from shoal.formats import limits
from shoal.formats.errors import BatchBodyError

BLOCK_HEADER = struct.Struct(">iiiii")
"""TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLENGTH."""
assert BLOCK_HEADER.size == 20
PROPERTIES_LENGTH = struct.Struct(">h")
assert PROPERTIES_LENGTH.size == 2
BLOCK_FIXED_SIZE_BYTES = BLOCK_HEADER.size + PROPERTIES_LENGTH.size
"""A block with no body and no properties."""
assert BLOCK_FIXED_SIZE_BYTES == 22


class BatchItem(NamedTuple):
    """One decoded block: `body` is a view of the batch body (no copy), `properties` the raw string."""

    flag: int
    body: memoryview
    properties: bytes


def decode_batch_body(data: bytes | memoryview, *, count_max: int) -> list[BatchItem]:
    """Split a batch body into its messages; BatchBodyError names the failing block, and a body of
    no block or of more than `count_max` blocks is refused."""
    assert count_max > 0
    view = memoryview(data)
    items: list[BatchItem] = []
    position = 0
    while position < len(view):
        if len(items) >= count_max:
            raise BatchBodyError(f"batch holds more than {count_max} messages")
        if len(view) - position < BLOCK_FIXED_SIZE_BYTES:
            raise BatchBodyError(f"batch block {len(items)} is truncated at byte {position}")
        total, _magic, _crc, flag, body_len = BLOCK_HEADER.unpack_from(view, position)
        body_at = position + BLOCK_HEADER.size
        if body_len < 0 or body_at + body_len + PROPERTIES_LENGTH.size > len(view):
            raise BatchBodyError(f"batch block {len(items)} has a bad BODYLENGTH {body_len}")
        props_at = body_at + body_len
        props_len = PROPERTIES_LENGTH.unpack_from(view, props_at)[0]
        end = props_at + PROPERTIES_LENGTH.size + props_len
        if props_len < 0 or end > len(view) or total != end - position:
            raise BatchBodyError(f"batch block {len(items)} has TOTALSIZE {total} but spans {end - position}")
        items.append(BatchItem(flag, view[body_at:props_at], bytes(view[props_at + PROPERTIES_LENGTH.size : end])))
        position = end
    if not items:
        raise BatchBodyError("batch body holds no message")
    return items


def encode_batch_body(items: Iterable[tuple[int, bytes, bytes]]) -> bytes:
    """The body of (flag, body, properties) blocks, as a client writes it; MAGICCODE and BODYCRC
    are 0. Callers check the property string's length (PROPERTIESLENGTH is a signed short)."""
    parts = []
    for flag, body, properties in items:
        assert len(properties) <= limits.PROPERTIES_LENGTH_MAX_BYTES
        total = BLOCK_FIXED_SIZE_BYTES + len(body) + len(properties)
        parts.append(BLOCK_HEADER.pack(total, 0, 0, flag, len(body)))
        parts.append(body)
        parts.append(PROPERTIES_LENGTH.pack(len(properties)))
        parts.append(properties)
    return b"".join(parts)
