"""The compiled record helpers (formats/_record_speedups.c) against their Python twins: same bytes,
same answers, same refusals, on well-formed and hostile input."""

from __future__ import annotations

import os
import random
import struct
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.formats import index_entry, java_hash, properties, record
from shoal.formats import limits as record_module_limits
from shoal.formats.compiled import pure_python
from shoal.formats.index_entry import python_index_put, python_index_relink
from shoal.formats.properties import python_find_properties
from shoal.formats.record import (
    body_crc,
    check_record,
    encode_host,
    python_dispatch_fields,
    python_encode_record_into,
    python_frame_messages,
    python_walk_records,
    record_length,
    walk_records,
)
from shoal.formats.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

try:  # directly, not through compiled_module: these tests hold even under SHOAL_PURE_PYTHON
    from shoal.formats import _record_speedups as COMPILED  # noqa: N812
except ImportError:
    COMPILED = None  # type: ignore[assignment]
if COMPILED is None:
    pytestmark = pytest.mark.skipif(
        not os.environ.get("CI"),
        reason="shoal.formats._record_speedups was not built (no C compiler at install) and this is not CI; "
        "in CI this module's tests fail instead",
    )

V4 = encode_host("10.0.0.1", 10911)
V6 = encode_host("::1", 10911)


def test_the_compiled_module_is_built_and_chosen() -> None:
    """Where a compiler was present at install (always in CI and the broker image), the hot
    functions are the compiled ones, unless SHOAL_PURE_PYTHON asked for the Python path."""
    assert COMPILED is not None, "no _record_speedups: was the install made without a C compiler?"
    if not pure_python():
        assert record.encode_record_into is COMPILED.encode_record_into
        assert record.dispatch_fields is COMPILED.dispatch_fields
        assert java_hash.java_string_hash is COMPILED.java_string_hash
        assert index_entry.index_put is COMPILED.index_put
        assert properties.find_properties is COMPILED.find_properties
        assert record._compiled is COMPILED, "walk_records and frame_messages call the compiled ones"
        assert index_entry.index_relink is COMPILED.index_relink
    else:
        assert record.encode_record_into is python_encode_record_into
        assert record.dispatch_fields is python_dispatch_fields
        assert java_hash.java_string_hash is java_hash.python_java_string_hash
        assert index_entry.index_put is python_index_put
        assert properties.find_properties is python_find_properties


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_java_string_hash_matches_the_python_twin(text: str) -> None:
    assert COMPILED is not None
    assert COMPILED.java_string_hash(text) == java_hash.python_java_string_hash(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("a", 97), ("hello", 99162322), ("polygenelubricants", -2147483648), ("😀", 31 * 0xD83D + 0xDE00)],
)
def test_java_string_hash_known_values(text: str, expected: int) -> None:
    """Values Java's String.hashCode() gives (the emoji counts as its surrogate pair)."""
    assert COMPILED is not None
    assert COMPILED.java_string_hash(text) == expected


def _arguments(draw_random: random.Random, buffer: bytearray, position: int) -> list[Any]:
    born = draw_random.choice([V4, V6])
    store = draw_random.choice([V4, V6])
    body = draw_random.randbytes(draw_random.randrange(0, 300))
    topic = "".join(draw_random.choices("abcXYZ_%-09", k=draw_random.randrange(0, 128))).encode()
    properties = draw_random.randbytes(draw_random.randrange(0, 400))
    sysflag = (BORNHOST_V6_FLAG if born is V6 else 0) | (STOREHOSTADDRESS_V6_FLAG if store is V6 else 0)
    return [
        buffer,
        position,
        body,
        topic,
        properties,
        draw_random.randrange(-(2**31), 2**31),
        draw_random.randrange(-(2**31), 2**31),
        draw_random.randrange(-(2**63), 2**63),
        draw_random.randrange(-(2**63), 2**63),
        sysflag,
        draw_random.randrange(-(2**63), 2**63),
        born,
        draw_random.randrange(-(2**63), 2**63),
        store,
        draw_random.randrange(-(2**31), 2**31),
        draw_random.randrange(-(2**63), 2**63),
        body_crc(body),
    ]


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=2**32), st.integers(min_value=0, max_value=64))
def test_encode_record_into_writes_the_same_bytes(seed: int, position: int) -> None:
    assert COMPILED is not None
    rng = random.Random(seed)
    arguments = _arguments(rng, bytearray(), position)
    size = record_length(
        len(arguments[2]), len(arguments[3]), len(arguments[4]), len(arguments[11]), len(arguments[13])
    )
    compiled_buffer, python_buffer = bytearray(position + size + 5), bytearray(position + size + 5)
    arguments[0] = compiled_buffer
    assert COMPILED.encode_record_into(*arguments) == size
    arguments[0] = python_buffer
    assert python_encode_record_into(*arguments) == size
    assert compiled_buffer == python_buffer


@pytest.mark.parametrize(
    ("index", "value"),
    [
        (5, 2**31),  # queue id beyond a Java int
        (6, -(2**31) - 1),  # flag
        (7, 2**63),  # queue offset beyond a Java long
        (16, 2**31),  # crc
        (11, b"\x00" * 9),  # a host neither 8 nor 20 bytes
        (3, b"t" * 256),  # a topic longer than TOPICLENGTH holds
        (4, b"p" * 32768),  # properties longer than PROPERTIESLENGTH holds
        (1, -1),  # a negative position
    ],
)
def test_encode_record_into_refuses_what_does_not_fit_and_writes_nothing(index: int, value: object) -> None:
    assert COMPILED is not None
    arguments = _arguments(random.Random(index), bytearray(70_000), 0)
    arguments[index] = value
    buffer = arguments[0]
    assert isinstance(buffer, bytearray)
    with pytest.raises((ValueError, OverflowError, struct.error, KeyError)):
        python_encode_record_into(*arguments)
    buffer[:] = bytes(len(buffer))
    with pytest.raises(ValueError):
        COMPILED.encode_record_into(*arguments)
    assert buffer == bytes(len(buffer))


@pytest.mark.parametrize("bits", [BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG])
def test_encode_record_into_refuses_host_bits_that_do_not_match_the_hosts(bits: int) -> None:
    """The Python encoder writes such a record and the CommitLog's re-read refuses it; the compiled
    one refuses it at once, so what it writes always frames (the CommitLog skips the re-read)."""
    assert COMPILED is not None
    arguments = _arguments(random.Random(3), bytearray(70_000), 0)
    arguments[11], arguments[13] = V4, V4
    arguments[9] = bits
    with pytest.raises(ValueError, match="host bits"):
        COMPILED.encode_record_into(*arguments)
    assert arguments[0] == bytes(70_000)


def test_encode_record_into_refuses_a_record_past_the_buffer_end() -> None:
    assert COMPILED is not None
    arguments = _arguments(random.Random(7), bytearray(100), 50)
    before = bytes(arguments[0])
    with pytest.raises(ValueError):
        COMPILED.encode_record_into(*arguments)
    assert bytes(arguments[0]) == before


def _encoded(seed: int) -> tuple[bytearray, int]:
    rng = random.Random(seed)
    position = rng.randrange(0, 40)
    arguments = _arguments(rng, bytearray(), position)
    size = record_length(
        len(arguments[2]), len(arguments[3]), len(arguments[4]), len(arguments[11]), len(arguments[13])
    )
    buffer = bytearray(rng.randbytes(position)) + bytearray(size + rng.randrange(0, 30))
    arguments[0] = buffer
    python_encode_record_into(*arguments)
    return buffer, position


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_dispatch_fields_of_a_record_match_the_python_twin_and_the_full_decoder(seed: int) -> None:
    assert COMPILED is not None
    buffer, position = _encoded(seed)
    expected_offset = struct.unpack_from(">q", buffer, position + 28)[0]
    fields = COMPILED.dispatch_fields(buffer, position, len(buffer), expected_offset)
    assert fields == python_dispatch_fields(buffer, position, len(buffer), expected_offset)
    check = check_record(buffer, position, len(buffer), check_crc=True, expected_physical_offset=expected_offset)
    header = check.header
    assert fields is not None and header is not None
    assert fields[:6] == (
        header.total_size,
        header.queue_id,
        header.queue_offset,
        header.physical_offset,
        header.sysflag,
        header.store_timestamp,
    )


@settings(max_examples=1500, deadline=None)
@given(
    st.integers(min_value=0, max_value=2**32),
    st.integers(min_value=0, max_value=400),
    st.binary(min_size=1, max_size=8),
)
def test_dispatch_fields_of_damaged_bytes_match_the_python_twin(seed: int, at: int, garbage: bytes) -> None:
    """Any byte run over a record (lengths, magic, offset, flags): both answer alike, never crash."""
    assert COMPILED is not None
    buffer, position = _encoded(seed)
    expected_offset = struct.unpack_from(">q", buffer, position + 28)[0]
    at = min(at, len(buffer) - 1)
    buffer[at : at + len(garbage)] = garbage
    for limit in (len(buffer), max(0, len(buffer) - 7)):
        assert COMPILED.dispatch_fields(buffer, position, limit, expected_offset) == python_dispatch_fields(
            buffer, position, limit, expected_offset
        )


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300), st.integers(min_value=0, max_value=300), st.integers(min_value=-5, max_value=5))
def test_dispatch_fields_of_random_bytes_is_none_like_the_python_twin(data: bytes, position: int, offset: int) -> None:
    assert COMPILED is not None
    position = min(position, len(data))
    assert COMPILED.dispatch_fields(data, position, len(data), offset) == python_dispatch_fields(
        data, position, len(data), offset
    )


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.tuples(st.text(max_size=30), st.integers(min_value=0, max_value=2**40)), min_size=1, max_size=40),
    st.integers(min_value=1, max_value=16),
    st.binary(max_size=8),
)
def test_index_put_writes_what_the_python_twin_writes(
    keys: list[tuple[str, int]], hash_slots: int, noise: bytes
) -> None:
    """Entries chained through few slots (collisions), slots holding damage (numbers beyond the
    count, negatives), keys beyond the BMP: the same bytes, the same previous entry numbers."""
    assert COMPILED is not None
    size = 40 + hash_slots * 4 + (len(keys) + 1) * 20
    compiled_buffer = bytearray(size)
    compiled_buffer[40 : 40 + len(noise)] = noise  # slots with whatever a crash left
    python_buffer = bytearray(compiled_buffer)
    for count, (key, offset) in enumerate(keys, start=1):
        time_diff = offset % 1000
        assert COMPILED.index_put(compiled_buffer, hash_slots, count, key, offset, time_diff) == python_index_put(
            python_buffer, hash_slots, count, key, offset, time_diff
        )
    assert compiled_buffer == python_buffer


def test_index_put_refuses_an_entry_outside_the_buffer() -> None:
    assert COMPILED is not None
    buffer = bytearray(40 + 4 * 4 + 2 * 20)
    with pytest.raises(ValueError, match="outside"):
        COMPILED.index_put(buffer, 4, 2, "key", 1, 0)
    assert buffer == bytes(len(buffer))


PROPERTY_NAMES = (b"TAGS", b"KEYS", b"UNIQ_KEY")


@settings(max_examples=1500, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [b"TAGS", b"KEYS", b"UNIQ_KEY", b"TAG", b"", b"\x01", b"\x02", b"v", b"\xff\xfe", "é".encode()]
        ),
        max_size=16,
    ).map(b"".join),
    st.sampled_from([PROPERTY_NAMES, (b"KEYS",), (), (b"TAGS", b"TAGS")]),
)
def test_find_properties_matches_the_python_twin(data: bytes, names: tuple[bytes, ...]) -> None:
    """Repeated names, empty values, a name without a value, invalid UTF-8, doubled separators."""
    assert COMPILED is not None
    assert COMPILED.find_properties(data, names) == python_find_properties(data, names)


def _encoded_record(arguments: list[Any]) -> bytearray:
    """The record `python_encode_record_into` writes for `arguments` (its buffer and position replaced)."""
    size = record_length(
        len(arguments[2]), len(arguments[3]), len(arguments[4]), len(arguments[11]), len(arguments[13])
    )
    arguments[0], arguments[1] = bytearray(size), 0
    python_encode_record_into(*arguments)
    return bytearray(arguments[0])


def _log_ending(rng: random.Random, tail_max: int) -> bytes:
    """What may follow a log's records: nothing, a blank record, zeros or garbage."""
    ending = rng.randrange(4)
    if ending == 1:
        return struct.pack(">ii", 64, record.BLANK_MAGIC_CODE) + bytes(56)
    if ending == 2:
        return bytes(rng.randrange(0, tail_max))
    if ending == 3:
        return rng.randbytes(rng.randrange(0, tail_max))
    return b""


def _log_of_records(rng: random.Random) -> bytearray:
    """A few encoded records back to back, then (maybe) a blank record, zeros or garbage."""
    log = bytearray()
    for _ in range(rng.randrange(0, 6)):
        log += _encoded_record(_arguments(rng, bytearray(), 0))
    return log + _log_ending(rng, 40)


@settings(max_examples=600, deadline=None)
@given(
    st.integers(min_value=0, max_value=2**32),
    st.integers(min_value=0, max_value=4000),
    st.integers(min_value=0, max_value=4000),
    st.integers(min_value=0, max_value=8),
    st.binary(max_size=12),
    st.integers(min_value=0, max_value=4000),
)
def test_walk_records_frames_what_the_python_walk_frames(
    seed: int, cut: int, stop_at: int, count_max: int, damage: bytes, damage_at: int
) -> None:
    """Goal: the compiled walk stops where the reference stops, for the same reason, over logs of
    records ending in a blank record, zeros or garbage, cut anywhere, with bytes overwritten
    anywhere (a record's TOTALSIZE or MAGICCODE included), bounded by stop_at and count_max."""
    assert COMPILED is not None
    rng = random.Random(seed)
    log = _log_of_records(rng)
    if damage and log:
        at = damage_at % len(log)
        log[at : at + len(damage)] = damage[: len(log) - at]
    limit = min(cut, len(log)) if rng.random() < 0.5 else len(log)
    start = rng.choice([0, rng.randrange(0, len(log) + 1)])
    size_max = rng.choice([record_module_limits.RECORD_SIZE_MAX_BYTES, 100, 600])
    expected = python_walk_records(log, start, limit, stop_at, count_max)
    # the reference's size bound is the module's; the compiled walk takes it as an argument
    if size_max == record_module_limits.RECORD_SIZE_MAX_BYTES:
        positions, end, stop = COMPILED.walk_records(bytes(log), start, limit, stop_at, count_max, size_max)
        assert (positions, end, record.WALK_STOPS[stop]) == tuple(expected)
        assert walk_records(log, start, limit, stop_at, count_max) == expected
    else:
        positions, end, stop = COMPILED.walk_records(log, start, limit, stop_at, count_max, size_max)
        assert all(position >= start for position in positions) and end <= max(start, limit)


def test_walk_records_refuses_a_limit_past_the_buffer() -> None:
    """Goal: the compiled walk never reads outside the buffer: a limit past its end is a ValueError
    (the reference would fail on struct.error at the first record it cannot read)."""
    assert COMPILED is not None
    log = _log_of_records(random.Random(7))
    with pytest.raises(ValueError, match="past the end"):
        COMPILED.walk_records(log, 0, len(log) + 100, len(log) + 100, 10, record_module_limits.RECORD_SIZE_MAX_BYTES)
    with pytest.raises(ValueError, match="position"):
        COMPILED.walk_records(log, -1, len(log), len(log), 10, record_module_limits.RECORD_SIZE_MAX_BYTES)


CHAIN_TOPICS = (b"orders", b"T%RETRY%g", "caf\u00e9".encode(), b"", b"bad\xff\xfe", b"x" * 127)
"""Topics of a chained log: one that does not decode as UTF-8 among them."""
CHAIN_PROPERTIES = (
    b"",
    b"UNIQ_KEY\x017F0000010001",
    b"TAGS\x01a\x02UNIQ_KEY\x01AC1100020002\x02",
    b"KEYS\x01k1 k2\x02UNIQ_KEY\x01AC1100020003",
    b"KEYS\x01\x02UNIQ_KEY\x01\xff\xfe",
    b"UNIQ_KEY\x01\x02TAGS\x01b",
)
"""Properties of a chained log's records: unique keys, KEYS (one empty), a key not UTF-8."""


def chained_log(rng: random.Random, base_offset: int, count: int) -> bytearray:
    """`count` records back to back, each at its expected PHYSICALOFFSET (`base_offset` + its
    position), of a few topics and queues, any transaction type, some with an empty body and a
    few with a wrong BODYCRC; then maybe a blank record, zeros or garbage."""
    log = bytearray()
    for _ in range(count):
        arguments = _arguments(rng, bytearray(), 0)
        arguments[2] = b"" if rng.random() < 0.1 else arguments[2]
        arguments[3] = rng.choice(CHAIN_TOPICS)
        arguments[4] = rng.choice(CHAIN_PROPERTIES) if rng.random() < 0.8 else arguments[4]
        arguments[5] = rng.randrange(4)
        arguments[8] = base_offset + len(log)
        arguments[9] |= rng.choice([0, 0x4, 0x8, 0xC])
        arguments[16] = body_crc(arguments[2]) if rng.random() < 0.95 else rng.randrange(0, 2**31)
        log += _encoded_record(arguments)
    return log + _log_ending(rng, 100)


def chained_log_record(rng: random.Random, physical_offset: int, properties: bytes) -> bytes:
    """One plain record of topic "orders" at PHYSICALOFFSET `physical_offset` with `properties`."""
    arguments = _arguments(rng, bytearray(), 0)
    arguments[3], arguments[4], arguments[8] = b"orders", properties, physical_offset
    arguments[5] = rng.randrange(4)
    return bytes(_encoded_record(arguments))


def damaged(log: bytearray, rng: random.Random, damage: bytes) -> bytearray:
    """`log` with `damage` written over it somewhere (or unchanged)."""
    if damage and log:
        at = rng.randrange(len(log))
        log[at : at + len(damage)] = damage[: len(log) - at]
    return log


@settings(max_examples=600, deadline=None)
@given(
    st.integers(min_value=0, max_value=2**32),
    st.integers(min_value=0, max_value=12),
    st.binary(max_size=8),
    st.booleans(),
    st.sampled_from([0, 4096, 2**40]),
)
def test_frame_messages_stops_where_the_python_scan_stops(
    seed: int, count: int, damage: bytes, check_crc: bool, base_offset: int
) -> None:
    """Goal: recovery's compiled scan frames exactly the records the reference frames (both stop
    before a wrong BODYCRC when checking it, a topic that is not UTF-8, a transaction type it does
    not know, damage anywhere, a cut, a blank record) and leaves the same topics cached."""
    assert COMPILED is not None
    rng = random.Random(seed)
    log = damaged(chained_log(rng, base_offset, count), rng, damage)
    start = rng.choice([0, rng.randrange(0, len(log) + 1)])
    limit = rng.choice([len(log), rng.randrange(start, len(log) + 1)])
    known = {b"orders"} if rng.random() < 0.5 else set()
    python_known, compiled_known = set(known), set(known)
    view = memoryview(log)
    expected = python_frame_messages(view, start, limit, base_offset, check_crc=check_crc, topics_valid=python_known)
    crc32 = zlib.crc32 if check_crc else None
    assert COMPILED.frame_messages(view, start, limit, base_offset, crc32, compiled_known) == expected
    assert compiled_known == python_known
    end, framed = expected
    for _ in range(framed):  # what it framed, the full check classifies as intact messages
        check = check_record(view, start, limit, check_crc=check_crc, expected_physical_offset=base_offset + start)
        assert check.kind is record.RecordKind.MESSAGE
        start += check.size
    assert start == end


def test_frame_messages_refuses_a_limit_past_the_buffer() -> None:
    """Goal: the compiled scan never reads outside the buffer: a limit past its end, or a negative
    position, is a ValueError, as in the reference."""
    assert COMPILED is not None
    log = chained_log(random.Random(3), 0, 3)
    for position, limit in ((0, len(log) + 1), (-1, len(log))):
        with pytest.raises(ValueError, match=r"not inside the buffer|position does not fit"):
            COMPILED.frame_messages(log, position, limit, 0, None, set())
        with pytest.raises(ValueError, match="not inside the buffer"):
            python_frame_messages(memoryview(log), position, limit, 0, check_crc=False, topics_valid=set())


def _index_file(rng: random.Random, hash_slots: int, entries: int) -> bytearray:
    """An IndexFile's bytes: garbage slots, `entries` entries of growing offsets, sometimes one
    going backwards or negative, then garbage past them."""
    buffer = bytearray(rng.randbytes(40 + hash_slots * 4))
    offset = rng.randrange(0, 1000)
    for _ in range(entries + 1):
        offset += rng.choice([0, 1, 500, -3]) if rng.random() < 0.1 else rng.randrange(0, 2000)
        key_hash = rng.randrange(-5, 2**31) if rng.random() < 0.05 else rng.randrange(0, 2**31)
        time_diff = rng.randrange(-2, 10) if rng.random() < 0.05 else rng.randrange(0, 10**6)
        buffer += index_entry.ENTRY.pack(key_hash, offset, time_diff, rng.randrange(-(2**31), 2**31))
    return buffer + rng.randbytes(rng.randrange(0, 60))


@settings(max_examples=400, deadline=None)
@given(
    st.integers(min_value=0, max_value=2**32),
    st.integers(min_value=1, max_value=64),
    st.integers(min_value=0, max_value=300),
)
def test_index_relink_rebuilds_the_slots_the_python_twin_rebuilds(seed: int, hash_slots: int, entries: int) -> None:
    """Goal: an IndexFile's slots rebuilt after a crash are the same bytes both ways, and so are the
    entries kept (up to the first offset going backwards, negative timeDiff or keyHash)."""
    assert COMPILED is not None
    rng = random.Random(seed)
    compiled_buffer = _index_file(rng, hash_slots, entries)
    python_buffer = bytearray(compiled_buffer)
    index_count = rng.randrange(1, entries + 2)
    begin_offset = rng.choice([0, 10**9, -1])
    expected = python_index_relink(python_buffer, hash_slots, index_count, begin_offset)
    assert COMPILED.index_relink(compiled_buffer, hash_slots, index_count, begin_offset) == expected
    assert compiled_buffer == python_buffer
    kept, used, _last_offset, _last_time_diff = expected
    slots = [index_entry.SLOT.unpack_from(python_buffer, 40 + 4 * i)[0] for i in range(hash_slots)]
    assert used == sum(1 for slot in slots if slot) and all(0 <= slot < kept for slot in slots)


def test_index_relink_refuses_entries_outside_the_buffer() -> None:
    assert COMPILED is not None
    buffer = bytearray(40 + 4 * 4 + 2 * 20)
    for relink in (COMPILED.index_relink, python_index_relink):
        with pytest.raises(ValueError, match="outside"):
            relink(buffer, 4, 3, 0)
    assert buffer == bytes(len(buffer))


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["orders", "T%RETRY%g", "caf\u00e9", "\U0001f600x"]),
            st.text(max_size=12),
            st.integers(min_value=0, max_value=2**40),
            st.integers(min_value=-(10**6), max_value=2**42),
        ),
        max_size=40,
    ),
    st.integers(min_value=1, max_value=16),
    st.integers(min_value=1, max_value=50),
    st.integers(min_value=0, max_value=3),
    st.sampled_from([0, -5, 10**6, 2**41]),
    st.integers(min_value=0, max_value=10),
)
def test_index_put_unique_keys_writes_what_the_python_twin_writes(
    entries: list[tuple[str, str, int, int]],
    hash_slots: int,
    entries_max: int,
    index_count: int,
    begin_timestamp: int,
    start: int,
) -> None:
    """Goal: indexing a run of unique keys in one call writes the same entries, slots and header
    fields as the reference: keys hashing with surrogate pairs, store times before the file's
    first, a file filling up mid-run, a run starting past its first entry."""
    assert COMPILED is not None
    compiled_buffer = bytearray(40 + hash_slots * 4 + entries_max * 20)
    python_buffer = bytearray(compiled_buffer)
    index_count = min(index_count, entries_max)
    arguments = (hash_slots, entries_max, index_count, 77, begin_timestamp, entries, start)
    expected = index_entry.python_index_put_unique_keys(python_buffer, *arguments)
    assert COMPILED.index_put_unique_keys(compiled_buffer, *arguments) == expected
    assert compiled_buffer == python_buffer
    position, count, _new_slots, _begin_offset, _begin_timestamp = expected
    assert count - index_count == max(0, position - start)


def test_index_put_unique_keys_refuses_a_short_buffer_and_bad_entries() -> None:
    assert COMPILED is not None
    for put in (COMPILED.index_put_unique_keys, index_entry.python_index_put_unique_keys):
        with pytest.raises(ValueError, match="outside"):
            put(bytearray(40 + 4 * 4 + 2 * 20), 4, 3, 1, 0, 0, [("t", "k", 1, 1)], 0)
    with pytest.raises(TypeError, match="entry"):
        COMPILED.index_put_unique_keys(bytearray(40 + 16 + 60), 4, 3, 1, 0, 0, [("t", b"k", 1, 1)], 0)  # type: ignore[list-item]
