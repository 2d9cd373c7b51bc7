"""Tests of shoal.formats.batch: the SEND_BATCH_MESSAGE body (spec §1.10)."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.formats.batch import (
    BLOCK_HEADER,
    BatchItem,
    encode_batch_body,
    encode_batch_body_with_prefix,
    inflate_batch_body,
)
from shoal.formats.batch import decode_batch_body as decode_with_count_max
from shoal.formats.errors import BatchBodyError

COUNT_MAX = 1024
"""The bound these tests decode with (the store and the client each choose their own)."""


def decode_batch_body(data: bytes | memoryview) -> list[BatchItem]:
    return decode_with_count_max(data, count_max=COUNT_MAX)


def block(
    body: bytes,
    properties: bytes,
    *,
    flag: int = 0,
    total: int | None = None,
    body_length: int | None = None,
    properties_length: int | None = None,
    magic: int = 0,
    crc: int = 0,
) -> bytes:
    """One block written by hand (not with the encoder under test), with overridable fields."""
    size = 20 + len(body) + 2 + len(properties)
    return (
        struct.pack(
            ">iiiii",
            size if total is None else total,
            magic,
            crc,
            flag,
            len(body) if body_length is None else body_length,
        )
        + body
        + struct.pack(">h", len(properties) if properties_length is None else properties_length)
        + properties
    )


def items_of(data: bytes) -> list[tuple[int, bytes, bytes]]:
    return [(item.flag, bytes(item.body), item.properties) for item in decode_batch_body(data)]


def test_encoder_writes_the_documented_block_layout() -> None:
    """One block: TOTALSIZE, MAGIC 0, BODYCRC 0, FLAG, BODYLENGTH, body, short length, properties."""
    encoded = encode_batch_body([(7, b"Hello", b"KEYS\x01k1")])
    assert encoded == bytes.fromhex("000000220000000000000000000000070000000548656c6c6f00074b455953016b31")
    assert len(encoded) == 0x22 == 20 + 5 + 2 + 7


def test_decoder_reads_blocks_written_by_hand() -> None:
    """Two hand-made blocks decode to their flags, bodies and properties in order."""
    data = block(b"Hello", b"TAGS\x01A", flag=1) + block(b"World", b"", flag=-2)
    assert items_of(data) == [(1, b"Hello", b"TAGS\x01A"), (-2, b"World", b"")]


def test_decoded_bodies_are_views_of_the_input() -> None:
    """Bodies are zero-copy memoryviews; properties are bytes."""
    item = decode_batch_body(block(b"Hello", b"P\x01v"))[0]
    assert isinstance(item.body, memoryview)
    assert isinstance(item.properties, bytes)


def test_client_magic_and_crc_are_ignored() -> None:
    """The broker ignores the client's MAGIC and BODYCRC fields: nonzero values still decode."""
    assert items_of(block(b"x", b"", magic=-626843481, crc=12345)) == [(0, b"x", b"")]


def test_empty_body_and_empty_properties_are_allowed() -> None:
    """A block of 22 bytes (no body, no properties) is a valid message."""
    assert items_of(block(b"", b"")) == [(0, b"", b"")]


def test_exactly_the_maximum_message_count_is_accepted() -> None:
    """COUNT_MAX minimal blocks decode."""
    data = block(b"", b"") * COUNT_MAX
    assert len(decode_batch_body(data)) == COUNT_MAX


@settings(deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=64), st.binary(max_size=64)),
        min_size=1,
        max_size=20,
    )
)
def test_encode_then_decode_round_trips(items: list[tuple[int, bytes, bytes]]) -> None:
    """Random (flag, body, properties) lists survive encode/decode unchanged."""
    assert items_of(encode_batch_body(items)) == items


@settings(deadline=None)
@given(
    st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=64)), max_size=20),
    st.binary(max_size=40),
    st.data(),
)
def test_blocks_with_one_property_prefix_are_the_blocks_written_one_by_one(
    items: list[tuple[int, bytes]], prefix: bytes, data: st.DataObject
) -> None:
    """Goal: the batch writer that shares a property prefix writes what `encode_batch_body` writes
    for the joined strings. Method: random blocks, prefixes and ASCII suffixes."""
    suffixes = data.draw(st.lists(st.text(st.characters(max_codepoint=127)), min_size=len(items), max_size=len(items)))
    joined = [(flag, body, prefix + suffix.encode()) for (flag, body), suffix in zip(items, suffixes, strict=True)]
    assert encode_batch_body_with_prefix(items, prefix, suffixes) == encode_batch_body(joined)


# --- malformed bodies: each raises BatchBodyError ---


def test_empty_batch_body_is_illegal() -> None:
    """A batch must hold at least one message."""
    with pytest.raises(BatchBodyError, match="no message"):
        decode_batch_body(b"")


def test_more_than_the_maximum_message_count_is_illegal() -> None:
    """One block over COUNT_MAX is refused."""
    data = block(b"", b"") * (COUNT_MAX + 1)
    with pytest.raises(BatchBodyError, match=str(COUNT_MAX)):
        decode_batch_body(data)


@pytest.mark.parametrize("length", [1, 4, 20, 21])
def test_a_block_shorter_than_its_fixed_fields_is_illegal(length: int) -> None:
    """Fewer than 22 bytes cannot hold a block header and properties length: truncated."""
    with pytest.raises(BatchBodyError, match="truncated"):
        decode_batch_body(block(b"", b"")[:length])


def test_trailing_bytes_after_a_valid_block_are_illegal() -> None:
    """A valid block followed by 5 stray bytes names the second block as truncated."""
    with pytest.raises(BatchBodyError, match="block 1 is truncated"):
        decode_batch_body(block(b"ok", b"") + b"\x00" * 5)


def test_negative_body_length_is_illegal() -> None:
    """BODYLENGTH -1 raises, naming BODYLENGTH."""
    with pytest.raises(BatchBodyError, match="BODYLENGTH -1"):
        decode_batch_body(block(b"abc", b"", body_length=-1))


def test_body_length_beyond_the_data_is_illegal() -> None:
    """BODYLENGTH larger than the remaining bytes raises."""
    with pytest.raises(BatchBodyError, match="BODYLENGTH"):
        decode_batch_body(block(b"abc", b"", body_length=1000))


def test_negative_properties_length_is_illegal() -> None:
    """PROPERTIESLENGTH -1 raises."""
    with pytest.raises(BatchBodyError):
        decode_batch_body(block(b"abc", b"p\x01v", properties_length=-1))


def test_properties_length_beyond_the_data_is_illegal() -> None:
    """PROPERTIESLENGTH longer than the remaining bytes raises."""
    with pytest.raises(BatchBodyError):
        decode_batch_body(block(b"abc", b"p\x01v", properties_length=100))


@pytest.mark.parametrize("delta", [-1, 1, 1000])
def test_totalsize_that_disagrees_with_the_fields_is_illegal(delta: int) -> None:
    """TOTALSIZE must equal the block's span; off by any amount raises naming TOTALSIZE."""
    good = 20 + 3 + 2 + 3
    with pytest.raises(BatchBodyError, match="TOTALSIZE"):
        decode_batch_body(block(b"abc", b"p\x01v", total=good + delta) + bytes(max(delta, 0)))


def test_the_error_names_the_failing_block() -> None:
    """The third block is broken: the message says 'block 2'."""
    data = block(b"a", b"") + block(b"b", b"") + block(b"c", b"", total=3)
    with pytest.raises(BatchBodyError, match="block 2"):
        decode_batch_body(data)


@settings(deadline=None, max_examples=300)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise_batch_body_error(data: bytes) -> None:
    """Garbage never raises anything but BatchBodyError, and decoded items fit in the data."""
    try:
        items = decode_batch_body(data)
    except BatchBodyError:
        return
    assert sum(BLOCK_HEADER.size + len(i.body) + 2 + len(i.properties) for i in items) == len(data)


@settings(deadline=None, max_examples=300)
@given(
    st.lists(st.tuples(st.integers(0, 9), st.binary(max_size=8), st.binary(max_size=8)), min_size=1, max_size=3),
    st.integers(0, 10_000),
    st.integers(0, 255),
)
def test_one_corrupted_byte_decodes_or_raises_message_illegal(
    items: list[tuple[int, bytes, bytes]], where: int, value: int
) -> None:
    """Overwrite one byte of a valid batch: the decoder either succeeds or raises BatchBodyError."""
    data = bytearray(encode_batch_body(items))
    data[where % len(data)] = value
    try:
        decoded = decode_batch_body(bytes(data))
    except BatchBodyError:
        return
    assert decoded


def test_a_zlib_compressed_batch_body_inflates_to_its_blocks() -> None:
    """Goal: the C++ client's compressed batch (the whole body deflated) reads back as its blocks.
    Method: deflate an encoded body, inflate, decode."""
    body = encode_batch_body([(0, b"a" * 3000, b"KEYS\x01k1"), (7, b"b" * 3000, b"")])
    inflated = inflate_batch_body(zlib.compress(body), 1 << 20)
    assert inflated == body
    assert [(item.flag, bytes(item.body)[:1]) for item in decode_with_count_max(inflated, count_max=10)] == [
        (0, b"a"),
        (7, b"b"),
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00\x00\x00\x10not zlib at all", "not zlib data"),
        (zlib.compress(b"x" * 3000)[:-6], "truncated"),
        (zlib.compress(b"x" * 5000), "beyond maxMessageSize=4096"),
    ],
)
def test_a_bad_compressed_batch_body_is_refused_without_inflating_unbounded(data: bytes, message: str) -> None:
    """Goal: not-zlib, truncated and over-limit bodies are BatchBodyError naming why; a zlib bomb
    is never inflated past the limit. Method: three bodies against a 4 KiB limit."""
    with pytest.raises(BatchBodyError, match=message):
        inflate_batch_body(data, 4096)
