"""The compiled record decoder (client/_decode_speedups.c) against the Python reference
(`python_decode_messages`): the same messages, field for field, or None where the reference must
decide (and then the reference's answer, or its MessageDecodeError, is what `decode_messages` gives)."""

from __future__ import annotations

import os
import random
import struct
import zlib
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.client import message as client_message
from shoal.client.errors import MessageDecodeError
from shoal.client.message import DECODED_FIELDS, MessageExt, decode_messages, python_decode_messages
from shoal.formats.record import MESSAGE_MAGIC_CODE_V2

try:
    from shoal.client import _decode_speedups as COMPILED  # noqa: N812
except ImportError:
    COMPILED = None  # type: ignore[assignment]
pytestmark = pytest.mark.skipif(
    COMPILED is None and not os.environ.get("CI"),
    reason="shoal.client._decode_speedups was not built (no C compiler at install) and this is not CI; "
    "in CI these tests fail instead",
)

# build_record is a pure function behind a fixture: nothing to reset between examples.
PURE_FIXTURE = [HealthCheck.function_scoped_fixture]
SLOTS = tuple(getattr(MessageExt, name) for name in DECODED_FIELDS)
HOSTS_V4 = [("10.0.0.1", 10911), ("127.0.0.1", 54321), ("192.168.1.10", 10911)]
HOSTS_V6 = [("fe80::1", 10911), ("::1", 4000)]
NAMES = ["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "DELAY", "a", "é", "MIN_OFFSET", "x\x01y"]
VALUES = ["TagA", "k1 k2", "  k3  ", "", "false", "true", "3", "19", "0003", "1234567890", "²", "ü", "a\x01b"]


def _compiled(body: bytes, hosts: dict[bytes, tuple[str, str]], extra: dict[str, str] | None = None) -> object:
    assert COMPILED is not None
    return COMPILED.decode_records(body, MessageExt, SLOTS, hosts, "broker-a", extra)


def _property_string(rng: random.Random) -> str:
    """Java's property string with what a broker or a hostile peer may write: repeated names (the
    later wins), empty names or values, values holding \\x01, non-ASCII text, a dangling segment."""
    parts = []
    for _ in range(rng.randint(0, 7)):
        name, value = rng.choice(NAMES), rng.choice(VALUES)
        parts.append(rng.choice([f"{name}\x01{value}", f"{name}\x01{value}", "", name, f"\x01{value}"]))
    return "\x02".join(parts) + rng.choice(["", "\x02", "\x02\x02"])


def _body(rng: random.Random, build_record: Callable[..., bytes], count: int, *, v6: bool = False) -> bytes:
    topic = rng.choice(["TopicTest", "话题", "t" * 127])
    records = []
    offset = rng.randint(0, 2**40)
    for index in range(count):
        hosts = HOSTS_V6 + HOSTS_V4 if v6 else HOSTS_V4
        record = build_record(
            topic=topic if rng.random() < 0.8 else rng.choice(["Other", "%RETRY%g"]),
            body=rng.randbytes(rng.choice([0, 1, 100, 1024])),
            properties=_property_string(rng),
            queue_id=rng.randint(-(2**31), 2**31 - 1),
            flag=rng.randint(-(2**31), 2**31 - 1),
            queue_offset=rng.randint(0, 2**63 - 1),
            physical_offset=offset,
            sysflag=rng.choice([0, 0x4, 0x8, 0xC, 0x40 << 8]),
            born_timestamp=rng.randint(0, 2**63 - 1),
            born_host=rng.choice(hosts),
            store_timestamp=rng.randint(-(2**63), 2**63 - 1),
            store_host=rng.choice(hosts),
            reconsume_times=rng.randint(-(2**31), 2**31 - 1),
            prepared_transaction_offset=rng.randint(-(2**63), 2**63 - 1),
        )
        records.append(record)
        offset += len(record) if index % 3 else rng.randint(0, 2**50)
    return b"".join(records)


def _hosts_known_for(body: bytes) -> dict[bytes, tuple[str, str]]:
    """The reference's host table after it has decoded `body` (where the compiled decoder reads hosts)."""
    client_message._HOSTS.clear()
    python_decode_messages(body)
    return dict(client_message._HOSTS)


@settings(max_examples=300, deadline=None, suppress_health_check=PURE_FIXTURE)
@given(st.integers(min_value=0, max_value=2**32), st.integers(min_value=1, max_value=40), st.booleans())
def test_the_compiled_decoder_matches_the_reference(
    build_record: Callable[..., bytes], seed: int, count: int, v6: bool
) -> None:
    rng = random.Random(seed)
    body = _body(rng, build_record, count, v6=v6)
    hosts = _hosts_known_for(body)
    extra = {"MIN_OFFSET": "0", "MAX_OFFSET": str(rng.randint(0, 10**9))} if rng.random() < 0.5 else None
    expected = python_decode_messages(body, broker_name="broker-a", extra_properties=extra)
    decoded = _compiled(body, hosts, extra)
    assert decoded == expected
    assert isinstance(decoded, list)
    for message, reference in zip(decoded, expected, strict=True):
        for name in DECODED_FIELDS:  # the types too: True is not 1, a str is not bytes
            assert type(getattr(message, name)) is type(getattr(reference, name)), name
    # A body whose messages are edited does not change a later body's messages (no shared dicts).
    if decoded:
        decoded[0].properties["edited"] = "yes"
        assert _compiled(body, hosts, extra) == expected


def test_repeated_names_and_shared_text_stay_alive(build_record: Callable[..., bytes]) -> None:
    """A name repeated within a record replaces the value the decoder remembered from the record
    before; reusing that text must not outlive it (a freed str would crash or read garbage)."""
    records = [
        build_record(properties=f"A\x01{'v' * 40}{i}\x02A\x01w{i}\x02B\x01{'v' * 40}{i}", physical_offset=i * 500)
        for i in range(200)
    ]
    body = b"".join(records)
    hosts = _hosts_known_for(body)
    for _ in range(20):
        decoded = _compiled(body, hosts)
        assert isinstance(decoded, list)
        assert [m.properties for m in decoded] == [{"A": f"w{i}", "B": f"{'v' * 40}{i}"} for i in range(200)]
        del decoded


def test_the_reference_decides_what_the_compiled_decoder_leaves(build_record: Callable[..., bytes]) -> None:
    """None for an unknown host, a compressed body, a V2 record and text that is not UTF-8;
    decode_messages then answers as the reference does (and learns the host for the next body)."""
    plain = build_record(properties="TAGS\x01a")
    client_message._HOSTS.clear()
    assert _compiled(plain, {}) is None
    assert decode_messages(plain) == python_decode_messages(plain)
    assert _compiled(plain, dict(client_message._HOSTS)) == python_decode_messages(plain, broker_name="broker-a")
    hosts = _hosts_known_for(plain)
    compressed = build_record(body=zlib.compress(b"x" * 100), sysflag=0x1)
    v2 = build_record(magic=MESSAGE_MAGIC_CODE_V2, topic="T" * 200)
    bad_topic = plain.replace(b"TopicTest", b"Topic\xffest")
    bad_properties = build_record(properties="TAGS\x01a").replace(b"TAGS\x01a", b"TAGS\x01\xff")
    for body in (plain + compressed, v2, plain + bad_topic, bad_properties + plain):
        assert _compiled(body, hosts) is None
    assert decode_messages(plain + compressed)[1].body == b"x" * 100
    assert decode_messages(v2)[0].topic == "T" * 200
    for body in (bad_topic, bad_properties):
        with pytest.raises(MessageDecodeError, match="not UTF-8"):
            decode_messages(body)


@settings(max_examples=500, deadline=None, suppress_health_check=PURE_FIXTURE)
@given(st.integers(min_value=0, max_value=2**32))
def test_damaged_bodies_are_refused_or_decoded_as_the_reference_does(
    build_record: Callable[..., bytes], seed: int
) -> None:
    """Bytes changed, cut or added anywhere: the compiled decoder answers None or exactly the
    reference's messages; the reference answers or raises MessageDecodeError, nothing else."""
    rng = random.Random(seed)
    body = bytearray(_body(rng, build_record, rng.randint(1, 4)))
    hosts = _hosts_known_for(bytes(body))
    for _ in range(rng.randint(1, 4)):
        if not body:
            break
        where = rng.randrange(len(body))
        action = rng.random()
        if action < 0.6:
            body[where] = rng.randrange(256)
        elif action < 0.8:
            del body[where:]
        else:
            body[where:where] = rng.randbytes(rng.randint(1, 8))
    data = bytes(body)
    decoded = _compiled(data, hosts)
    try:
        expected = python_decode_messages(data, broker_name="broker-a")
    except MessageDecodeError:
        assert decoded is None
        return
    assert decoded is None or decoded == expected


def test_a_short_last_record_is_a_decode_error_not_an_index_error(build_record: Callable[..., bytes]) -> None:
    """A BODYLENGTH that runs to the record's end leaves no TOPICLENGTH: the reference names it."""
    record = bytearray(build_record(body=b"x" * 20, topic="T", properties=""))
    body_length_at = len(record) - 20 - 1 - 1 - 2 - 4
    struct.pack_into(">i", record, body_length_at, 20 + 1 + 1 + 2)
    with pytest.raises(MessageDecodeError, match="BODYLENGTH"):
        python_decode_messages(bytes(record))
    assert _compiled(bytes(record), _hosts_known_for(build_record())) is None


def test_delay_levels_read_ascii_digits_only(build_record: Callable[..., bytes]) -> None:
    """DELAY "²" is a digit to str.isdigit but not a number: level 0, as any other non-number."""
    for text, level in (("3", 3), ("²", 0), ("0003", 3), ("1234567890", 0), ("-1", 0), ("٣", 0)):
        body = build_record(properties=f"DELAY\x01{text}")
        hosts = _hosts_known_for(body)
        assert python_decode_messages(body)[0].delay_time_level == level
        decoded = _compiled(body, hosts)
        assert isinstance(decoded, list)
        assert decoded[0].delay_time_level == level


def test_wrong_arguments_are_type_errors() -> None:
    assert COMPILED is not None
    with pytest.raises(TypeError):
        COMPILED.decode_records(b"", MessageExt, SLOTS[:-1], {}, "", None)
    with pytest.raises(TypeError):
        COMPILED.decode_records(b"", MessageExt, (MessageExt.retry_topic,) * len(SLOTS), {}, "", None)
    with pytest.raises(TypeError):
        COMPILED.decode_records(b"", int, SLOTS, {}, "", None)
    with pytest.raises(TypeError):
        COMPILED.decode_records(b"", MessageExt, SLOTS, [], "", None)  # type: ignore[arg-type]
    assert COMPILED.decode_records(b"", MessageExt, SLOTS, {}, "", None) == []


def test_a_record_shorter_than_its_ipv6_header_is_a_decode_error(build_record: Callable[..., bytes]) -> None:
    """TOTALSIZE of at least the IPv4 header but less than an IPv6 one: found by the fuzz above
    (the reference read the header past the body and raised struct.error)."""
    record = bytearray(build_record(born_host=("fe80::1", 1), store_host=("fe80::2", 2), topic="T", body=b""))
    struct.pack_into(">i", record, 0, 100)  # at least FIXED_LENGTH_V4 (91), less than the 116-byte v6 header
    with pytest.raises(MessageDecodeError, match="shorter than its header"):
        python_decode_messages(bytes(record[:100]))
    assert _compiled(bytes(record[:100]), {}) is None
