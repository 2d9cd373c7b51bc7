"""The client's batch body (`MessageDecoder.encodeMessages`, spec §1.10) decoded into messages.

Each block: `int TOTALSIZE, int MAGIC (0), int BODYCRC (0), int FLAG, int BODYLENGTH, BODY,
short PROPERTIESLENGTH, PROPERTIES`. The broker expands each block into a full record.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from shoal.store import limits
from shoal.store.errors import MessageIllegalError

BLOCK_HEADER = struct.Struct(">iiiii")
"""TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLENGTH."""
PROPERTIES_LENGTH = struct.Struct(">h")


class BatchItem(NamedTuple):
    flag: int
    body: memoryview
    properties: bytes


def decode_batch_body(data: bytes | memoryview) -> list[BatchItem]:
    """Split a batch body into its messages; raises MessageIllegalError with the failing block."""
    view = memoryview(data)
    items: list[BatchItem] = []
    position = 0
    while position < len(view):
        if len(items) >= limits.BATCH_MESSAGES_MAX_COUNT:
            raise MessageIllegalError(f"batch holds more than {limits.BATCH_MESSAGES_MAX_COUNT} messages")
        if len(view) - position < BLOCK_HEADER.size + PROPERTIES_LENGTH.size:
            raise MessageIllegalError(f"batch block {len(items)} is truncated at byte {position}")
        total, _magic, _crc, flag, body_len = BLOCK_HEADER.unpack_from(view, position)
        body_at = position + BLOCK_HEADER.size
        if body_len < 0 or body_at + body_len + PROPERTIES_LENGTH.size > len(view):
            raise MessageIllegalError(f"batch block {len(items)} has a bad BODYLENGTH {body_len}")
        props_at = body_at + body_len
        props_len = PROPERTIES_LENGTH.unpack_from(view, props_at)[0]
        end = props_at + PROPERTIES_LENGTH.size + props_len
        if props_len < 0 or end > len(view) or total != end - position:
            raise MessageIllegalError(f"batch block {len(items)} has TOTALSIZE {total} but spans {end - position}")
        items.append(BatchItem(flag, view[body_at:props_at], bytes(view[props_at + PROPERTIES_LENGTH.size : end])))
        position = end
    if not items:
        raise MessageIllegalError("batch body holds no message")
    return items


def encode_batch_body(items: list[tuple[int, bytes, bytes]]) -> bytes:
    """The client side of the format (used by shoal.client and tests): (flag, body, properties)."""
    parts = []
    for flag, body, properties in items:
        total = BLOCK_HEADER.size + len(body) + PROPERTIES_LENGTH.size + len(properties)
        parts.append(BLOCK_HEADER.pack(total, 0, 0, flag, len(body)))
        parts.append(body)
        parts.append(PROPERTIES_LENGTH.pack(len(properties)))
        parts.append(properties)
    return b"".join(parts)
