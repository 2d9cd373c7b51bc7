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

The C++ client (rocketmq-client-cpp 1.2.x, PyPI `rocketmq`) zlib-compresses a whole batch body over
its compressMsgBodyOverHowmuch (4 KiB) and sets the COMPRESSED sysflag on the request; the Java
client never compresses a batch. `inflate_batch_body` undoes that before the blocks are read.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence
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


def encode_batch_body_with_prefix(items: Sequence[tuple[int, bytes]], prefix: bytes, suffixes: Sequence[str]) -> bytes:
    """`encode_batch_body` of (flag, body) blocks whose properties are `prefix` + an ASCII suffix
    each (a client's batch: one property string up to the UNIQ_KEY, then each message's key),
    without building each block's property string first. Callers check the lengths."""
    assert len(items) == len(suffixes)
    parts: list[bytes] = []
    append = parts.append
    pack_header = BLOCK_HEADER.pack
    pack_length = PROPERTIES_LENGTH.pack
    prefix_size = len(prefix)
    for (flag, body), suffix in zip(items, suffixes, strict=True):
        properties_size = prefix_size + len(suffix)
        append(pack_header(BLOCK_FIXED_SIZE_BYTES + len(body) + properties_size, 0, 0, flag, len(body)))
        append(body)
        append(pack_length(properties_size) + prefix)
        append(suffix.encode("ascii"))
    return b"".join(parts)


def inflate_batch_body(data: bytes | memoryview, size_max: int) -> bytes:
    """A zlib-compressed batch body, inflated; BatchBodyError if it is not zlib data or would
    inflate beyond `size_max` bytes (the broker's maxMessageSize: never inflate unbounded)."""
    inflater = zlib.decompressobj()
    try:
        inflated = inflater.decompress(data, size_max + 1)
    except zlib.error as error:
        raise BatchBodyError(f"the batch body is flagged compressed but is not zlib data: {error}") from None
    if len(inflated) > size_max or inflater.unconsumed_tail:
        raise BatchBodyError(f"the batch body inflates beyond maxMessageSize={size_max} bytes")
    if not inflater.eof:
        raise BatchBodyError("the batch body is flagged compressed but its zlib stream is truncated")
    return inflated
