"""A batch body written as CommitLog records (formats/batch_records.py and its compiled twin
formats/_batch_speedups.c): the records are the ones `encode_record_into` writes message by message,
and the two twins agree byte for byte, answer for answer, refusal for refusal, on well-formed and
hostile bodies."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.formats import batch_records
from shoal.formats.batch import BLOCK_HEADER, PROPERTIES_LENGTH, encode_batch_body
from shoal.formats.compiled import pure_python
from shoal.formats.properties import join_properties
from shoal.formats.record import (
    RecordKind,
    body_crc,
    check_record,
    decode_header,
    encode_host,
    python_encode_record_into,
    record_length,
    walk_records,
)
from shoal.formats.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

try:  # directly, not through compiled_module: these tests hold even under SHOAL_PURE_PYTHON
    from shoal.formats import _batch_speedups as COMPILED  # noqa: N812
except ImportError:
    COMPILED = None  # type: ignore[assignment]

V4 = encode_host("10.0.0.1", 10911)
V6 = encode_host("::1", 10911)
STORE = encode_host("10.0.0.2", 10911)
TOPIC = b"BatchTopic"
COUNT_MAX = 4096

Sizes = Callable[..., tuple[list[int], int, int]]
Encode = Callable[..., int]
TWINS: list[Any] = [
    pytest.param((batch_records.python_batch_record_sizes, batch_records.python_encode_batch_into), id="python")
]
if COMPILED is not None or os.environ.get("CI"):  # in CI a missing module fails here, not skips
    TWINS.append(
        pytest.param(
            (getattr(COMPILED, "batch_record_sizes", None), getattr(COMPILED, "encode_batch_into", None)), id="c"
        )
    )


NOT_BUILT_HERE = pytest.mark.skipif(
    COMPILED is None and not os.environ.get("CI"),
    reason="shoal.formats._batch_speedups was not built here (no C compiler or zlib headers at install) and this "
    "is not CI; in CI these tests fail instead",
)


@NOT_BUILT_HERE
def test_the_compiled_module_is_built_and_chosen() -> None:
    """Where a compiler and zlib's headers were present at install (always in CI and the images),
    the broker's batch path is the compiled one, unless SHOAL_PURE_PYTHON asked for Python."""
    assert COMPILED is not None, "no _batch_speedups: was the install made without a C compiler or zlib1g-dev?"
    if pure_python():
        assert batch_records.encode_batch_into is batch_records.python_encode_batch_into
    else:
        assert batch_records.encode_batch_into is COMPILED.encode_batch_into
        assert batch_records.batch_record_sizes is COMPILED.batch_record_sizes


def one_by_one(
    items: list[tuple[int, bytes, bytes]], shared: bytes, born: bytes, first_offset: int, sysflag: int
) -> bytes:
    """The records `encode_record_into` writes for the same messages, one call each."""
    out = bytearray(sum(record_length(len(b), len(TOPIC), len(join_properties(p, shared)), len(born), 8)
                        for _f, b, p in items) or 1)  # fmt: skip
    at = 0
    for index, (flag, body, properties) in enumerate(items):
        at += python_encode_record_into(out, at, body, TOPIC, join_properties(properties, shared), 3, flag,
                                        100 + index, first_offset + at, sysflag, 1_700_000_000_000, born,
                                        1_700_000_000_500, STORE, 2, 0, body_crc(body))  # fmt: skip
    return bytes(out[:at])


blocks = st.lists(
    st.tuples(
        st.integers(-(2**31), 2**31 - 1),
        st.binary(max_size=300),
        st.sampled_from([b"", b"UNIQ_KEY\x01ABC", b"TAGS\x01t\x02KEYS\x01k1 k2", b"a\x01b\x02"]),
    ),
    min_size=1,
    max_size=40,
)


@pytest.mark.parametrize("twins", TWINS)
@settings(max_examples=150, deadline=None)
@given(items=blocks, shared=st.sampled_from([b"", b"WAIT\x01true", b"MAX_OFFSET\x019\x02"]), v6=st.booleans())
def test_the_records_are_those_written_one_by_one(
    twins: tuple[Sizes, Encode], items: list[tuple[int, bytes, bytes]], shared: bytes, v6: bool
) -> None:
    sizes_of, encode = twins
    born = V6 if v6 else V4
    sysflag = BORNHOST_V6_FLAG if v6 else 0
    body = encode_batch_body(items)
    expected = one_by_one(items, shared, born, 5000, sysflag)

    sizes, bodies_total, properties_max = sizes_of(body, shared, len(TOPIC), len(born) + len(STORE), COUNT_MAX)
    assert sum(sizes) == len(expected)
    assert bodies_total == sum(len(b) for _f, b, _p in items)
    assert properties_max == max(len(join_properties(p, shared)) for _f, _b, p in items)

    out = bytearray(b"\xee" * (len(expected) + 64))
    written = encode(out, 32, body, shared, TOPIC, 3, 100, 5000, sysflag, 1_700_000_000_000, born,
                     1_700_000_000_500, STORE, 2)  # fmt: skip
    assert written == len(expected)
    assert bytes(out[32 : 32 + written]) == expected
    assert out[:32] == b"\xee" * 32 and out[32 + written :] == b"\xee" * 32, "wrote outside its records"
    walk = walk_records(bytes(out[32 : 32 + written]), 0, written, written, written)
    assert [decode_header(expected, p).queue_offset for p in walk.positions] == list(range(100, 100 + len(items)))
    for position, size in zip(walk.positions, sizes, strict=True):
        checked = check_record(
            expected, position, len(expected), check_crc=True, expected_physical_offset=5000 + position
        )
        assert (checked.kind, checked.size) == (RecordKind.MESSAGE, size), checked.reason


def block(total: int, body_len: int, body: bytes, props_len: int, props: bytes) -> bytes:
    return BLOCK_HEADER.pack(total, 0, 0, 7, body_len) + body + PROPERTIES_LENGTH.pack(props_len) + props


HOSTILE = {
    "empty": (b"", "batch body holds no message"),
    "truncated header": (b"\x00" * 21, "batch block 0 is truncated at byte 0"),
    "negative body length": (block(26, -1, b"abcd", 0, b""), "batch block 0 has a bad BODYLENGTH -1"),
    "body past the end": (block(26, 900, b"abcd", 0, b""), "batch block 0 has a bad BODYLENGTH 900"),
    "negative properties length": (block(26, 4, b"abcd", -2, b""), "batch block 0 has TOTALSIZE 26 but spans 24"),
    "properties past the end": (block(30, 4, b"abcd", 50, b"ab"), "batch block 0 has TOTALSIZE 30 but spans 76"),
    "total disagrees": (block(99, 4, b"abcd", 0, b""), "batch block 0 has TOTALSIZE 99 but spans 26"),
    "second block truncated": (block(26, 4, b"abcd", 0, b"") + b"\x00\x01", "batch block 1 is truncated at byte 26"),
}


@pytest.mark.parametrize("twins", TWINS)
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_bodies_are_refused_with_formats_batch_message_and_nothing_written(
    twins: tuple[Sizes, Encode], case: str
) -> None:
    sizes_of, encode = twins
    body, message = HOSTILE[case]
    with pytest.raises(ValueError, match=f"^{message}$"):
        sizes_of(body, b"", len(TOPIC), 16, COUNT_MAX)
    out = bytearray(4096)
    with pytest.raises(ValueError):
        encode(out, 0, body, b"", TOPIC, 0, 0, 0, 0, 0, V4, 0, STORE, 0)
    assert out == bytearray(4096)


@pytest.mark.parametrize("twins", TWINS)
def test_more_blocks_than_allowed_are_refused(twins: tuple[Sizes, Encode]) -> None:
    sizes_of, _encode = twins
    body = encode_batch_body([(0, b"x", b"")] * 5)
    assert len(sizes_of(body, b"", len(TOPIC), 16, 5)[0]) == 5
    with pytest.raises(ValueError, match=r"^batch holds more than 4 messages$"):
        sizes_of(body, b"", len(TOPIC), 16, 4)


@pytest.mark.parametrize("twins", TWINS)
def test_records_that_do_not_fit_the_buffer_or_their_fields_write_nothing(twins: tuple[Sizes, Encode]) -> None:
    _sizes_of, encode = twins
    body = encode_batch_body([(0, b"x" * 100, b"TAGS\x01a")] * 3)
    size = record_length(100, len(TOPIC), 6, 8, 8)
    out = bytearray(3 * size - 1)
    with pytest.raises(ValueError, match="do not fit the buffer"):
        encode(out, 0, body, b"", TOPIC, 0, 0, 0, 0, 0, V4, 0, STORE, 0)
    assert out == bytearray(len(out))
    out = bytearray(3 * size)
    with pytest.raises(ValueError):  # a v6 born host the SYSFLAG does not announce
        encode(out, 0, body, b"", TOPIC, 0, 0, 0, 0, 0, V6, 0, STORE, 0)
    with pytest.raises(ValueError):  # the same the other way round
        encode(out, 0, body, b"", TOPIC, 0, 0, 0, STOREHOSTADDRESS_V6_FLAG, 0, V4, 0, STORE, 0)
    with pytest.raises(ValueError):  # properties joined past PROPERTIESLENGTH
        encode(out, 0, encode_batch_body([(0, b"x", b"a" * 32_000)]), b"b" * 1000, TOPIC, 0, 0, 0, 0, 0, V4, 0,
               STORE, 0)  # fmt: skip
    with pytest.raises(ValueError):
        encode(out, 0, body, b"", b"", 0, 0, 0, 0, 0, V4, 0, STORE, 0)  # no topic
    assert out == bytearray(len(out))
    assert encode(out, 0, body, b"", TOPIC, 0, 0, 0, 0, 0, V4, 0, STORE, 0) == 3 * size


@NOT_BUILT_HERE
def test_the_twins_agree_on_random_bytes() -> None:
    """Random bytes mostly fail to frame: both twins fail the same way, or both give the same sizes."""
    assert COMPILED is not None, "no _batch_speedups: was the install made without a C compiler or zlib1g-dev?"
    rng = random.Random(7)
    for _ in range(3000):
        valid = encode_batch_body(
            [(rng.randrange(9), rng.randbytes(rng.randrange(40)), b"K\x01v")] * rng.randrange(1, 4)
        )
        data = bytearray(valid)
        for _flip in range(rng.randrange(3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        answers: list[object] = []
        for sizes_of in (batch_records.python_batch_record_sizes, COMPILED.batch_record_sizes):
            try:
                answers.append(sizes_of(bytes(data), b"S\x01t", 5, 16, 8))
            except ValueError as error:
                answers.append(str(error))
        assert answers[0] == answers[1], bytes(data).hex()
