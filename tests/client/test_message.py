"""Messages, property strings, record decoding and batch bodies (spec §1.2, §1.6, §1.7, §1.10, §1.11)."""

from __future__ import annotations

import dataclasses
import struct
import zlib
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal.client import limits
from shoal.client.errors import InvalidMessageError, MessageDecodeError, UnsupportedCompressionError
from shoal.client.message import (
    DECODED_FIELDS,
    Message,
    MessageExt,
    check_batch,
    check_message,
    check_topic,
    decode_messages,
    encode_batch,
    encode_properties,
    encode_wire_properties,
    is_plain,
    wire_properties_text,
)
from shoal.formats.batch import encode_batch_body
from shoal.formats.properties import decode_properties

SPEC_A1_RECORD = bytes.fromhex(
    "0000009cdaa320a777d18982000000000000000000000000000000000000000000000000000000000000018bcfe56800"
    "7f0000010000d4310000018bcfe5687bc0a8010a00002a9f000000000000000000000000000000054865"
    "6c6c6f09546f70696354657374003354414753015461674102554e49515f4b455901374630303030303130"
    "4531463138423441414332413442304632323730303030"
)
UNIQ = "7F0000010E1F18B4AAC2A4B0F2270000"


def test_spec_appendix_a1_record_decodes_every_field() -> None:
    """Goal: the spec's test vector decodes exactly. Method: decode A.1's bytes, compare fields."""
    [message] = decode_messages(SPEC_A1_RECORD)
    assert message.topic == "TopicTest"
    assert message.body == b"Hello"
    assert message.tags == "TagA"
    assert message.properties == {"TAGS": "TagA", "UNIQ_KEY": UNIQ}
    assert message.msg_id == UNIQ
    assert message.offset_msg_id == "C0A8010A00002A9F0000000000000000"
    assert (message.queue_id, message.queue_offset, message.commitlog_offset) == (0, 0, 0)
    assert message.born_timestamp_ms == 1700000000000
    assert message.store_timestamp_ms == 1700000000123
    assert message.born_host == "127.0.0.1:54321"
    assert message.store_host == "192.168.1.10:10911"
    assert message.body_crc == 2010220930
    assert message.store_size_bytes == 156
    assert message.reconsume_times == 0
    assert message.wait_store_msg_ok


def test_builder_matches_spec_vector(build_record: Callable[..., bytes]) -> None:
    """Goal: the tests' record builder is faithful. Method: rebuild A.1 and compare bytes."""
    assert build_record(properties=f"TAGS\x01TagA\x02UNIQ_KEY\x01{UNIQ}") == SPEC_A1_RECORD


def test_every_field_of_a_built_record_round_trips(build_record: Callable[..., bytes]) -> None:
    """Goal: no field is read from the wrong offset. Method: distinct values everywhere, decode."""
    record = build_record(
        topic="T1",
        body=b"payload",
        properties="KEYS\x01k1 k2\x02DELAY\x013\x02WAIT\x01false\x02RETRY_TOPIC\x01orig",
        queue_id=7,
        flag=-5,
        queue_offset=123456789012,
        physical_offset=987654321098,
        sysflag=0x2,
        born_timestamp=11,
        born_host=("10.1.2.3", 4567),
        store_timestamp=22,
        store_host=("10.9.8.7", 10911),
        reconsume_times=3,
        prepared_transaction_offset=44,
    )
    [message] = decode_messages(record, broker_name="broker-a")
    assert (message.topic, message.body, message.flag) == ("T1", b"payload", -5)
    assert message.keys == ("k1", "k2")
    assert message.delay_time_level == 3
    assert not message.wait_store_msg_ok
    assert message.retry_topic == "orig"
    assert (message.queue_id, message.queue_offset, message.commitlog_offset) == (7, 123456789012, 987654321098)
    assert (message.sysflag, message.born_timestamp_ms, message.store_timestamp_ms) == (0x2, 11, 22)
    assert (message.born_host, message.store_host) == ("10.1.2.3:4567", "10.9.8.7:10911")
    assert (message.reconsume_times, message.prepared_transaction_offset) == (3, 44)
    assert message.broker_name == "broker-a"
    assert message.msg_id == message.offset_msg_id  # no UNIQ_KEY: the offset id
    assert message.offset_msg_id == "0A090807" + "00002A9F" + f"{987654321098:016X}"


def test_ipv6_born_and_store_hosts_shift_later_fields(build_record: Callable[..., bytes]) -> None:
    """Goal: v6 hosts (20 bytes each) decode. Method: records with one and both hosts IPv6."""
    both = build_record(born_host=("::1", 1), store_host=("fe80::2", 10911), physical_offset=5, body=b"x")
    born_only = build_record(born_host=("2001:db8::7", 2), body=b"y", properties="TAGS\x01a")
    first, second = decode_messages(both + born_only)
    assert first.born_host == "[::1]:1"
    assert first.store_host == "[fe80::2]:10911"
    assert first.sysflag & 0x30 == 0x30
    assert first.body == b"x"
    assert len(first.offset_msg_id) == 56
    assert first.offset_msg_id.endswith("00002A9F0000000000000005")
    assert second.born_host == "[2001:db8::7]:2"
    assert second.store_host == "192.168.1.10:10911"
    assert (second.body, second.tags) == (b"y", "a")


def test_v2_magic_reads_a_short_topic_length(build_record: Callable[..., bytes]) -> None:
    """Goal: 5.x records with a 2-byte TOPICLENGTH decode. Method: V2 record with a 200-char topic."""
    topic = "t" * 200
    [message] = decode_messages(build_record(topic=topic, magic=-626843477, properties="TAGS\x01x"))
    assert message.topic == topic
    assert message.tags == "x"


def test_several_concatenated_records_decode_in_order(build_record: Callable[..., bytes]) -> None:
    """Goal: a pull body of many records. Method: concatenate 5 built records, decode all."""
    body = b"".join(build_record(queue_offset=offset, body=f"m{offset}".encode()) for offset in range(5))
    messages = decode_messages(memoryview(body))
    assert [message.queue_offset for message in messages] == [0, 1, 2, 3, 4]
    assert [message.body for message in messages] == [b"m0", b"m1", b"m2", b"m3", b"m4"]


def test_decoding_fills_every_field_as_the_constructor_would(build_record: Callable[..., bytes]) -> None:
    """Goal: the slot-by-slot decode misses no MessageExt field and matches the dataclass.
    Method: compare DECODED_FIELDS with the fields, and a decoded record with one built by the constructor."""
    assert sorted(DECODED_FIELDS) == sorted(item.name for item in dataclasses.fields(MessageExt))
    properties = f"KEYS\x01k1 k2\x02TAGS\x01TagA\x02DELAY\x013\x02UNIQ_KEY\x01{UNIQ}"
    body = build_record(properties=properties, queue_offset=7, physical_offset=4096)
    [decoded] = decode_messages(body, broker_name="broker-a", extra_properties={"MIN_OFFSET": "0"})
    rebuilt = MessageExt(**{name: getattr(decoded, name) for name in DECODED_FIELDS})
    assert rebuilt == decoded
    assert (decoded.keys, decoded.tags, decoded.delay_time_level) == (("k1", "k2"), "TagA", 3)
    assert (decoded.broker_name, decoded.msg_id, decoded.properties["MIN_OFFSET"]) == ("broker-a", UNIQ, "0")


def test_empty_body_decodes_to_no_messages() -> None:
    """Goal: an empty pull body is no messages. Method: decode b''."""
    assert decode_messages(b"") == []


def test_zlib_compressed_body_is_inflated(build_record: Callable[..., bytes]) -> None:
    """Goal: COMPRESSED_FLAG bodies come out inflated (type 0 and 3 = zlib). Method: two records."""
    original = b"abc" * 3000
    legacy = build_record(body=zlib.compress(original, 5), sysflag=0x1)
    typed = build_record(body=zlib.compress(original, 9), sysflag=0x1 | 0x300)
    first, second = decode_messages(legacy + typed)
    assert first.body == original
    assert second.body == original


@pytest.mark.parametrize(("type_bits", "module"), [(0x100, "lz4"), (0x200, "zstandard")])
def test_lz4_or_zstd_body_without_the_module_raises_a_clear_error(
    build_record: Callable[..., bytes], type_bits: int, module: str
) -> None:
    """Goal: a clear error names the missing module. Method: flag the type; skip if installed."""
    try:
        __import__(module)
    except ImportError:
        pass
    else:
        pytest.skip(reason=f"{module} is installed, so the missing-module error cannot be shown")
    with pytest.raises(UnsupportedCompressionError, match=module):
        decode_messages(build_record(body=b"\x00\x01", sysflag=0x1 | type_bits))


def test_corrupt_zlib_body_raises_decode_error(build_record: Callable[..., bytes]) -> None:
    """Goal: a broken compressed body is reported, not passed on. Method: flag a plain body compressed."""
    with pytest.raises(MessageDecodeError, match="zlib"):
        decode_messages(build_record(body=b"not zlib", sysflag=0x1))


def test_zlib_bomb_is_refused(build_record: Callable[..., bytes]) -> None:
    """Goal: inflation is bounded. Method: a body inflating past INFLATED_BODY_SIZE_MAX_BYTES."""
    bomb = zlib.compress(b"\x00" * (limits.INFLATED_BODY_SIZE_MAX_BYTES + 1), 9)
    with pytest.raises(MessageDecodeError, match="beyond"):
        decode_messages(build_record(body=bomb, sysflag=0x1))


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda record: record[:4] + b"\x00\x00\x00\x00" + record[8:], "magic"),
        (lambda record: struct.pack(">i", len(record) + 1) + record[4:], "TOTALSIZE"),
        (lambda record: struct.pack(">i", len(record) - 1) + record[4:-1], "PROPERTIESLENGTH"),
        (lambda record: record[:-3], "bytes left|TOTALSIZE"),
        (lambda record: record[:84] + struct.pack(">i", 1000) + record[88:], "BODYLENGTH"),
    ],
)
def test_malformed_records_raise_decode_error(
    build_record: Callable[..., bytes], mutate: Callable[[bytes], bytes], match: str
) -> None:
    """Goal: damage is reported, never skipped. Method: break magic, sizes, lengths; expect errors."""
    record = build_record(properties="TAGS\x01a")
    with pytest.raises(MessageDecodeError, match=match):
        decode_messages(mutate(record))


def test_properties_encode_as_java_does() -> None:
    """Goal: `name\\x01value` joined by `\\x02`, no trailing separator. Method: encode a map."""
    assert encode_properties({"TAGS": "TagA", "KEYS": "k1 k2"}) == "TAGS\x01TagA\x02KEYS\x01k1 k2"
    assert encode_properties({}) == ""


def test_properties_decode_drops_invalid_segments_like_java() -> None:
    """Goal: string2messageProperties' rules. Method: empty keys/values, missing separators, dups."""
    text = "a\x011\x02\x01x\x02b\x01\x02c\x02ab\x02d\x01v\x01w\x02a\x012"
    assert decode_properties(text) == {"a": "2", "d": "v\x01w"}
    assert decode_properties("") == {}


@given(
    st.dictionaries(
        st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x01\x02"), min_size=1),
        st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x01\x02"), min_size=1),
        max_size=8,
    )
)
def test_properties_round_trip(properties: dict[str, str]) -> None:
    """Goal: any valid map survives encode/decode. Method: hypothesis maps without separators."""
    assert decode_properties(encode_properties(properties)) == properties


@pytest.mark.parametrize("bad", [{"": "v"}, {"k": ""}, {"k\x01": "v"}, {"k": "v\x02"}])
def test_properties_with_separators_or_empty_parts_are_refused(bad: dict[str, str]) -> None:
    """Goal: what Java would silently corrupt is refused. Method: encode bad maps."""
    with pytest.raises(InvalidMessageError):
        encode_properties(bad)


def test_oversized_properties_are_refused() -> None:
    """Goal: PROPERTIESLENGTH is a signed short. Method: a 32768-byte property string."""
    with pytest.raises(InvalidMessageError, match="32767"):
        encode_wire_properties({"k": "x" * 32766})
    assert len(encode_wire_properties({"k": "x" * 32765})) == 32767


def test_wire_properties_carry_tags_keys_delay_wait_and_uniq_key() -> None:
    """Goal: the client puts TAGS, KEYS, DELAY, WAIT, UNIQ_KEY (spec §1.7). Method: one message."""
    message = Message("T", b"b", tags="TagA", keys=["k1", "k2"], properties={"user": "v"}, delay_time_level=3)
    properties = message.wire_properties("UNIQ1")
    assert properties == {
        "user": "v",
        "TAGS": "TagA",
        "KEYS": "k1 k2",
        "DELAY": "3",
        "WAIT": "true",
        "UNIQ_KEY": "UNIQ1",
    }
    plain = Message("T", b"b", wait_store_msg_ok=False).wire_properties()
    assert plain == {"WAIT": "false"}


def test_an_existing_uniq_key_is_kept() -> None:
    """Goal: a message that already has a UNIQ_KEY keeps it (MessageClientIDSetter). Method: set one."""
    message = Message("T", b"b", properties={"UNIQ_KEY": "MINE"})
    assert message.wire_properties("NEW")["UNIQ_KEY"] == "MINE"
    assert message.uniq_key == "MINE"


def test_keys_given_as_a_string_are_split_on_spaces() -> None:
    """Goal: `keys="a b"` means two keys. Method: construct, read keys."""
    assert Message("T", b"b", keys="a  b").keys == ("a", "b")
    assert Message("T", b"b", keys=["a"]).keys == ("a",)


@pytest.mark.parametrize(
    "topic", ["", "t" * 128, "bad topic", "中文", "SCHEDULE_TOPIC_XXXX", "TBW102", "RMQ_SYS_TRANS_HALF_TOPIC"]
)
def test_topics_the_broker_refuses_are_refused_before_sending(topic: str) -> None:
    """Goal: Validators.checkTopic and the forbidden system topics. Method: check bad names."""
    with pytest.raises(InvalidMessageError):
        check_topic(topic)


def test_valid_topics_pass() -> None:
    """Goal: legal names including retry/DLQ topics pass. Method: check them."""
    for topic in ("TopicTest", "%RETRY%group", "%DLQ%g", "a|b", "t" * 127):
        check_topic(topic)
    check_topic("TBW102", for_send=False)


def test_message_checks_refuse_empty_and_oversized_bodies() -> None:
    """Goal: body present and within maxMessageSize. Method: empty, limit, limit+1."""
    with pytest.raises(InvalidMessageError, match="empty"):
        check_message(Message("T", b""))
    check_message(Message("T", b"x" * 10), body_size_max_bytes=10)
    with pytest.raises(InvalidMessageError, match="more than"):
        check_message(Message("T", b"x" * 11), body_size_max_bytes=10)


def test_batch_body_has_the_spec_block_layout() -> None:
    """Goal: spec §1.10 blocks. Method: encode two messages, parse the blocks with struct."""
    messages = [Message("T", b"one", tags="A", flag=7), Message("T", b"second", keys=["k"])]
    body = encode_batch(messages, ["U1", "U2"])
    position = 0
    blocks = []
    while position < len(body):
        total, magic, crc, flag, body_length = struct.unpack_from(">iiiii", body, position)
        payload = body[position + 20 : position + 20 + body_length]
        (properties_length,) = struct.unpack_from(">h", body, position + 20 + body_length)
        start = position + 22 + body_length
        properties = body[start : start + properties_length].decode()
        assert total == 22 + body_length + properties_length
        assert (magic, crc) == (0, 0)
        blocks.append((flag, payload, decode_properties(properties)))
        position += total
    assert blocks == [
        (7, b"one", {"TAGS": "A", "WAIT": "true", "UNIQ_KEY": "U1"}),
        (0, b"second", {"KEYS": "k", "WAIT": "true", "UNIQ_KEY": "U2"}),
    ]


_TAGS = st.text(st.characters(codec="utf-8"), max_size=40)  # surrogates cannot be sent


@given(tags=st.one_of(st.none(), _TAGS), wait=st.booleans())
def test_a_plain_messages_property_string_is_the_references(tags: str | None, wait: bool) -> None:
    """Goal: the remembered per-tag prefix writes what `encode_wire_properties` writes, and refuses
    what it refuses. Method: generated tags (separators, non-ASCII, empty), both WAIT values."""
    message = Message("T", b"x", tags=tags, wait_store_msg_ok=wait)
    assert is_plain(message)
    try:
        expected = encode_wire_properties(message.wire_properties(UNIQ))
    except InvalidMessageError:
        with pytest.raises(InvalidMessageError):
            wire_properties_text(message, UNIQ)
        return
    assert wire_properties_text(message, UNIQ) == expected


@pytest.mark.parametrize(
    "message",
    [
        Message("T", b"x", keys=["k"]),
        Message("T", b"x", properties={"a": "b"}),
        Message("T", b"x", tags="A", delay_time_level=3),
        Message("T", b"x", properties={"UNIQ_KEY": "MINE"}),
    ],
)
def test_other_messages_take_the_reference_property_string(message: Message) -> None:
    """Goal: keys, user properties, delay or an own UNIQ_KEY never use the plain prefix."""
    assert not is_plain(message)
    assert wire_properties_text(message, UNIQ) == encode_wire_properties(message.wire_properties(UNIQ))


@pytest.mark.parametrize(
    "messages",
    [
        [Message("T", b"a", tags="A"), Message("T", b"bb", tags="A", flag=3), Message("T", b"c" * 300, tags="A")],
        [Message("T", b"a"), Message("T", b"b")],
        [Message("T", b"a", tags="\u00e9t\u00e9", wait_store_msg_ok=False)],
        [Message("T", b"a", tags="A"), Message("T", b"b", tags="B")],
        [Message("T", b"a", tags="A"), Message("T", b"b", tags="A", keys=["k"])],
        [Message("T", b"a", tags="A"), Message("T", b"b", tags="A", properties={"UNIQ_KEY": "MINE"})],
    ],
)
def test_a_batch_body_is_each_messages_block_whichever_way_it_is_written(messages: list[Message]) -> None:
    """Goal: a batch of plain messages sharing tags (written from one prefix) and any other batch
    give the blocks of each message's own property string. Method: the reference, block by block."""
    uniq_keys = [
        message.uniq_key or f"7F0000010E1F18B4AAC2A4B0F22700{index:02X}" for index, message in enumerate(messages)
    ]
    expected = encode_batch_body(
        (message.flag, message.body, encode_wire_properties(message.wire_properties(key)).encode())
        for message, key in zip(messages, uniq_keys, strict=True)
    )
    assert encode_batch(messages, uniq_keys) == expected


def test_a_tag_too_long_for_the_property_string_is_refused_in_a_batch() -> None:
    """Goal: the length limit holds on the plain path too. Method: a tag at the limit."""
    long_tag = "t" * limits.PROPERTIES_LENGTH_MAX_BYTES
    with pytest.raises(InvalidMessageError, match="more than"):
        encode_batch([Message("T", b"x", tags=long_tag)], [UNIQ])


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        ([], "at least one"),
        ([Message("A", b"1"), Message("B", b"2")], "same topic"),
        ([Message("A", b"1"), Message("A", b"2", wait_store_msg_ok=False)], "wait_store_msg_ok"),
        ([Message("A", b"1", delay_time_level=2)], "delayed"),
        ([Message("%RETRY%g", b"1")], "retry"),
    ],
)
def test_batches_java_refuses_are_refused(messages: list[Message], match: str) -> None:
    """Goal: DefaultMQProducer.batch's rules. Method: each broken rule raises."""
    with pytest.raises(InvalidMessageError, match=match):
        check_batch(messages)
