"""Tests of shoal.formats.record: the CommitLog record codec, checked against rocketmq-spec.md A.1."""

from __future__ import annotations

import ipaddress
import random
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.formats import limits
from shoal.formats.message_id import decode_offset_msg_id, offset_msg_id
from shoal.formats.record import (
    BLANK_MAGIC_CODE,
    FIXED_LENGTH_V4,
    HEADER_V4,
    HEADERS,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    RecordCheck,
    RecordKind,
    body_crc,
    check_record,
    decode_header,
    decode_host,
    encode_blank_into,
    encode_host,
    encode_record_into,
    frame_messages,
    host_flags,
    record_length,
    store_timestamp_at,
)
from shoal.formats.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

# rocketmq-spec.md Appendix A.1, copied byte for byte.
A1_RECORD = bytes.fromhex(
    """
    00 00 00 9c da a3 20 a7 77 d1 89 82 00 00 00 00
    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    00 00 00 00 00 00 00 00 00 00 01 8b cf e5 68 00
    7f 00 00 01 00 00 d4 31 00 00 01 8b cf e5 68 7b
    c0 a8 01 0a 00 00 2a 9f 00 00 00 00 00 00 00 00
    00 00 00 00 00 00 00 05 48 65 6c 6c 6f 09 54 6f
    70 69 63 54 65 73 74 00 33 54 41 47 53 01 54 61
    67 41 02 55 4e 49 51 5f 4b 45 59 01 37 46 30 30
    30 30 30 31 30 45 31 46 31 38 42 34 41 41 43 32
    41 34 42 30 46 32 32 37 30 30 30 30
    """
)
A1_PROPERTIES = b"TAGS\x01TagA\x02UNIQ_KEY\x017F0000010E1F18B4AAC2A4B0F2270000"
A1_BORN_TIMESTAMP = 1_700_000_000_000
A1_STORE_TIMESTAMP = 1_700_000_000_123
A1_BORN_HOST = bytes.fromhex("7f000001") + struct.pack(">i", 54321)
A1_STORE_HOST = bytes.fromhex("c0a8010a") + struct.pack(">i", 10911)
A1_BODY_POSITION = 88
A1_TOPIC_LENGTH_POSITION = 93
A1_PROPERTIES_LENGTH_POSITION = 103
A1_PROPERTIES_POSITION = 105

IPV6_BORN = "2001:db8::1"
IPV6_STORE = "fe80::1234:5678"


def encode(
    *,
    body: bytes = b"Hello",
    topic: bytes = b"TopicTest",
    properties: bytes = A1_PROPERTIES,
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    sysflag: int = 0,
    born_timestamp: int = A1_BORN_TIMESTAMP,
    born_host: bytes = A1_BORN_HOST,
    store_timestamp: int = A1_STORE_TIMESTAMP,
    store_host: bytes = A1_STORE_HOST,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    crc: int | None = None,
    position: int = 0,
    trailing_bytes: int = 0,
) -> bytearray:
    """Encode one record at `position` of a zeroed buffer (A.1 defaults) and return the buffer."""
    size = record_length(len(body), len(topic), len(properties), len(born_host), len(store_host))
    buffer = bytearray(position + size + trailing_bytes)
    written = encode_record_into(
        buffer,
        position,
        body,
        topic,
        properties,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sysflag | host_flags(born_host, store_host),
        born_timestamp,
        born_host,
        store_timestamp,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        body_crc(body) if crc is None else crc,
    )
    assert written == size
    return buffer


def check(buffer: bytes | bytearray, *, check_crc: bool = True, **kwargs: int) -> RecordCheck:
    return check_record(buffer, 0, len(buffer), check_crc=check_crc, **kwargs)


def v2_record(topic: bytes, *, topic_length_field: int | None = None, body: bytes = b"Hello") -> bytearray:
    """A 5.x MESSAGE_MAGIC_CODE_V2 record: same layout, but TOPICLENGTH is a short."""
    topic_length = len(topic) if topic_length_field is None else topic_length_field
    total = HEADER_V4.size + len(body) + 2 + len(topic) + 2
    head = HEADER_V4.pack(
        total,
        MESSAGE_MAGIC_CODE_V2,
        body_crc(body),
        3,
        0,
        7,
        0,
        0,
        A1_BORN_TIMESTAMP,
        A1_BORN_HOST,
        A1_STORE_TIMESTAMP,
        A1_STORE_HOST,
        0,
        0,
        len(body),
    )
    return bytearray(head + body + struct.pack(">h", topic_length) + topic + struct.pack(">h", 0))


# --- encoding: the Appendix A.1 vector ---


def test_encoder_writes_the_appendix_a1_record_byte_for_byte() -> None:
    """The encoder reproduces A.1 exactly: encode its message and compare every byte."""
    assert bytes(encode()) == A1_RECORD


def test_encoder_writes_at_the_given_position_and_leaves_other_bytes_alone() -> None:
    """A record encoded mid-buffer starts there: encode at 100 and compare both slices."""
    buffer = encode(position=100, trailing_bytes=8)
    assert bytes(buffer[:100]) == bytes(100)
    assert bytes(buffer[100:256]) == A1_RECORD
    assert bytes(buffer[256:]) == bytes(8)


def test_record_length_is_91_plus_variable_parts_plus_12_per_ipv6_host() -> None:
    """calMsgLength: A.1 is 91+5+9+51 = 156; each IPv6 host adds 12 bytes."""
    assert FIXED_LENGTH_V4 == 91
    assert record_length(5, 9, 51) == 156 == len(A1_RECORD)
    assert record_length(5, 9, 51, 20, 8) == 168
    assert record_length(5, 9, 51, 8, 20) == 168
    assert record_length(5, 9, 51, 20, 20) == 180
    assert record_length(0, 0, 0) == 91


def test_header_structs_have_the_documented_sizes() -> None:
    """The TOTALSIZE..BODYLENGTH header is 88 bytes for IPv4/IPv4 and grows 12 per IPv6 host."""
    assert HEADERS[(8, 8)].size == 88
    assert HEADERS[(20, 8)].size == 100
    assert HEADERS[(8, 20)].size == 100
    assert HEADERS[(20, 20)].size == 112


def test_magic_codes_match_the_spec() -> None:
    """Magic numbers are the signed ints of 0xDAA320A7, 0xDAA320AB and 0xCBD43194."""
    assert struct.pack(">i", MESSAGE_MAGIC_CODE) == bytes.fromhex("daa320a7")
    assert struct.pack(">i", MESSAGE_MAGIC_CODE_V2) == bytes.fromhex("daa320ab")
    assert struct.pack(">i", BLANK_MAGIC_CODE) == bytes.fromhex("cbd43194")


def test_body_crc_of_hello_is_2010220930() -> None:
    """Spec §1.5 example: masked CRC32 of b'Hello'; compare with the literal."""
    assert body_crc(b"Hello") == 2010220930
    assert body_crc(b"Hello") == 0x77D18982
    assert body_crc(b"") == 0


def test_body_crc_clears_the_top_bit() -> None:
    """zlib's CRC of b'a' has its top bit set; the stored CRC must not (mask 0x7FFFFFFF)."""
    assert zlib.crc32(b"a") == 0xE8B7BE43
    assert body_crc(b"a") == 0x68B7BE43
    assert body_crc(memoryview(b"a")) == 0x68B7BE43


def test_blank_record_is_remaining_bytes_then_blank_magic() -> None:
    """The end-of-file record is 8 bytes: int remaining, int 0xCBD43194; encode and read raw bytes."""
    buffer = bytearray(16)
    encode_blank_into(buffer, 4, 1234)
    assert bytes(buffer) == bytes(4) + struct.pack(">i", 1234) + bytes.fromhex("cbd43194") + bytes(4)


# --- decoding every field ---


def test_decode_header_returns_every_field_of_the_appendix_record() -> None:
    """Decode A.1 and compare each field with the message it was built from."""
    header = decode_header(A1_RECORD, 0)
    assert header.total_size == 156
    assert header.magic == MESSAGE_MAGIC_CODE
    assert header.body_crc == 2010220930
    assert header.queue_id == 0
    assert header.flag == 0
    assert header.queue_offset == 0
    assert header.physical_offset == 0
    assert header.sysflag == 0
    assert header.born_timestamp == A1_BORN_TIMESTAMP
    assert header.born_host == A1_BORN_HOST
    assert decode_host(header.born_host) == ("127.0.0.1", 54321)
    assert header.store_timestamp == A1_STORE_TIMESTAMP
    assert header.store_host == A1_STORE_HOST
    assert decode_host(header.store_host) == ("192.168.1.10", 10911)
    assert header.reconsume_times == 0
    assert header.prepared_transaction_offset == 0
    assert header.body_position == A1_BODY_POSITION
    assert header.body_length == 5
    assert A1_RECORD[header.body_position : header.body_position + header.body_length] == b"Hello"
    assert header.topic == "TopicTest"
    assert header.properties_position == A1_PROPERTIES_POSITION
    assert header.properties_length == 51
    props = A1_RECORD[header.properties_position : header.properties_position + header.properties_length]
    assert props == A1_PROPERTIES


def test_decode_header_reads_non_default_values_of_every_fixed_field() -> None:
    """Encode distinct, negative and large values in each int/long field and decode them back."""
    buffer = encode(
        queue_id=7,
        flag=-3,
        queue_offset=2**40 + 5,
        physical_offset=2**50 + 3,
        sysflag=0x8 | 0x2,
        born_timestamp=-1,
        store_timestamp=2**62,
        reconsume_times=16,
        prepared_transaction_offset=123_456_789_012,
        position=10,
    )
    header = decode_header(buffer, 10)
    assert header.queue_id == 7
    assert header.flag == -3
    assert header.queue_offset == 2**40 + 5
    assert header.physical_offset == 2**50 + 3
    assert header.sysflag == 0xA
    assert header.born_timestamp == -1
    assert header.store_timestamp == 2**62
    assert header.reconsume_times == 16
    assert header.prepared_transaction_offset == 123_456_789_012
    assert header.body_position == 10 + 88


def test_check_record_classifies_the_appendix_record_as_a_message() -> None:
    """A.1 with CRC checking and the right physical offset is a MESSAGE of size 156."""
    result = check(A1_RECORD, expected_physical_offset=0)
    assert result.kind is RecordKind.MESSAGE
    assert result.size == 156
    assert result.header is not None
    assert result.header.topic == "TopicTest"
    assert result.reason == ""


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_check_record_reads_bytes_bytearray_and_memoryview(wrap: type) -> None:
    """Recovery passes mmap memoryviews, Spark bytes: A.1 classifies the same in each."""
    result = check_record(wrap(A1_RECORD), 0, len(A1_RECORD), check_crc=True)
    assert result.kind is RecordKind.MESSAGE
    assert result.header == decode_header(A1_RECORD, 0)


def test_store_timestamp_at_reads_offset_56_for_an_ipv4_born_host() -> None:
    """pickupStoreTimestamp on A.1 reads the long at 56."""
    assert store_timestamp_at(A1_RECORD, 0) == A1_STORE_TIMESTAMP
    assert struct.unpack_from(">q", A1_RECORD, 56)[0] == A1_STORE_TIMESTAMP


def test_store_timestamp_at_shifts_by_12_for_an_ipv6_born_host() -> None:
    """With BORNHOST_V6_FLAG the store timestamp moves to 68; encode an IPv6 born host and read it."""
    buffer = encode(born_host=encode_host(IPV6_BORN, 1), store_timestamp=42, position=5)
    assert store_timestamp_at(buffer, 5) == 42
    assert struct.unpack_from(">q", buffer, 5 + 68)[0] == 42


# --- hosts, IPv6 and message ids ---


def test_encode_host_packs_ipv4_as_4_bytes_and_a_port_int() -> None:
    """IPv4 host = 4 address bytes + big-endian int port (A.1 born host)."""
    assert encode_host("127.0.0.1", 54321) == bytes.fromhex("7f000001 0000d431")


def test_encode_host_packs_ipv6_as_16_bytes_and_a_port_int() -> None:
    """IPv6 host = 16 address bytes + int port = 20 bytes."""
    packed = encode_host(IPV6_BORN, 10911)
    assert len(packed) == 20
    assert packed == bytes.fromhex("20010db8000000000000000000000001 00002a9f")
    assert decode_host(packed) == (IPV6_BORN, 10911)


def test_ipv4_mapped_ipv6_peer_is_normalised_to_ipv4() -> None:
    """Gotcha 28: '::ffff:a.b.c.d' is stored as the 8-byte IPv4 host and sets no V6 flag."""
    packed = encode_host("::ffff:127.0.0.1", 54321)
    assert packed == A1_BORN_HOST
    assert host_flags(packed, packed) == 0


def test_host_flags_mark_each_ipv6_host() -> None:
    """host_flags sets 0x10 for a 20-byte born host and 0x20 for a 20-byte store host."""
    v4 = encode_host("10.0.0.1", 1)
    v6 = encode_host(IPV6_STORE, 1)
    assert host_flags(v4, v4) == 0
    assert host_flags(v6, v4) == BORNHOST_V6_FLAG == 0x10
    assert host_flags(v4, v6) == STOREHOSTADDRESS_V6_FLAG == 0x20
    assert host_flags(v6, v6) == 0x30


def test_ipv6_born_and_store_hosts_shift_every_later_field() -> None:
    """With both V6 flags the hosts are 20 bytes: check each field at its shifted offset."""
    born = encode_host(IPV6_BORN, 54321)
    store = encode_host(IPV6_STORE, 10911)
    buffer = encode(born_host=born, store_host=store, reconsume_times=9, prepared_transaction_offset=77)
    raw = bytes(buffer)
    assert len(raw) == 156 + 24
    assert struct.unpack_from(">i", raw, 0)[0] == 180
    assert struct.unpack_from(">i", raw, 36)[0] == 0x30
    assert raw[48:68] == born
    assert struct.unpack_from(">q", raw, 68)[0] == A1_STORE_TIMESTAMP
    assert raw[76:96] == store
    assert struct.unpack_from(">i", raw, 96)[0] == 9
    assert struct.unpack_from(">q", raw, 100)[0] == 77
    assert struct.unpack_from(">i", raw, 108)[0] == 5
    assert raw[112:117] == b"Hello"
    assert raw[117] == 9
    assert raw[118:127] == b"TopicTest"
    assert struct.unpack_from(">h", raw, 127)[0] == 51
    assert raw[129:] == A1_PROPERTIES
    result = check(raw)
    assert result.kind is RecordKind.MESSAGE
    assert result.header is not None
    assert decode_host(result.header.born_host) == (IPV6_BORN, 54321)
    assert decode_host(result.header.store_host) == (IPV6_STORE, 10911)
    assert result.header.body_position == 112


@pytest.mark.parametrize(
    ("born", "store", "body_position"),
    [(IPV6_BORN, "192.168.1.10", 100), ("127.0.0.1", IPV6_STORE, 100)],
)
def test_one_ipv6_host_shifts_fields_by_12(born: str, store: str, body_position: int) -> None:
    """A single IPv6 host makes the header 100 bytes; encode, check and decode the record."""
    buffer = encode(born_host=encode_host(born, 1), store_host=encode_host(store, 2))
    result = check(buffer)
    assert result.kind is RecordKind.MESSAGE
    assert result.size == 168
    assert result.header is not None
    assert result.header.body_position == body_position
    assert decode_host(result.header.born_host) == (born, 1)
    assert decode_host(result.header.store_host) == (store, 2)
    assert result.header.topic == "TopicTest"


def test_offset_message_id_of_the_appendix_record() -> None:
    """offsetMsgId = store host + port + offset in uppercase hex: C0A8010A00002A9F0000000000000000."""
    assert offset_msg_id(A1_STORE_HOST, 0) == "C0A8010A00002A9F0000000000000000"
    assert decode_offset_msg_id("C0A8010A00002A9F0000000000000000") == ("192.168.1.10:10911", 0)


def test_offset_message_id_round_trips_a_large_offset() -> None:
    """A 64-bit offset is the last 16 hex characters; encode and decode it."""
    msg_id = offset_msg_id(A1_STORE_HOST, 0x0123456789ABCDEF)
    assert msg_id == "C0A8010A00002A9F0123456789ABCDEF"
    assert decode_offset_msg_id(msg_id) == ("192.168.1.10:10911", 0x0123456789ABCDEF)


def test_ipv6_offset_message_id_is_56_hex_characters() -> None:
    """An IPv6 store host gives a 28-byte id (56 chars) that decodes back."""
    msg_id = offset_msg_id(encode_host(IPV6_STORE, 10911), 4096)
    assert len(msg_id) == 56
    assert msg_id == msg_id.upper()
    assert decode_offset_msg_id(msg_id) == (f"[{IPV6_STORE}]:10911", 4096)


@pytest.mark.parametrize("bad", ["", "C0A8010A", "C0A8010A00002A9F00000000000000000"])
def test_decode_message_id_refuses_ids_of_other_lengths(bad: str) -> None:
    """Only 32 (IPv4) or 56 (IPv6) characters are offset message ids; others raise ValueError."""
    with pytest.raises(ValueError, match=r"32|hex"):
        decode_offset_msg_id(bad)


# --- the 5.x V2 magic ---


def test_v2_magic_record_with_a_short_topic_length_decodes() -> None:
    """MESSAGE_MAGIC_CODE_V2 reads TOPICLENGTH as a short: a 200-byte topic decodes."""
    topic = b"T" * 200
    buffer = v2_record(topic)
    result = check(buffer)
    assert result.kind is RecordKind.MESSAGE
    assert result.size == len(buffer) == 88 + 5 + 2 + 200 + 2
    assert result.header is not None
    assert result.header.magic == MESSAGE_MAGIC_CODE_V2
    assert result.header.topic == "T" * 200
    assert result.header.queue_id == 3
    assert result.header.queue_offset == 7
    assert result.header.properties_length == 0


def test_v2_magic_record_with_a_short_topic_also_decodes() -> None:
    """V2 with a 9-byte topic (short length 0x0009) decodes to the same topic as V1 would."""
    result = check(v2_record(b"TopicTest"))
    assert result.kind is RecordKind.MESSAGE
    assert result.header is not None
    assert result.header.topic == "TopicTest"


def test_v2_record_with_negative_topic_length_is_invalid() -> None:
    """A V2 TOPICLENGTH of -4 (body ending in 00 02) must not pass: craft it and check it."""
    buffer = bytearray(v2_record(b"", topic_length_field=-4, body=b"\x00\x00\x00\x02"))
    # make TOTALSIZE agree with what the decoder would compute from the overlapping fields
    struct.pack_into(">i", buffer, 0, 88 + 4 + 2)
    result = check_record(buffer, 0, 88 + 4 + 2, check_crc=True)
    assert result.kind is RecordKind.INVALID


# --- check_record: every classification ---


def test_blank_record_is_end_of_file_with_size_zero() -> None:
    """A blank record classifies END_OF_FILE (size 0) whatever its remaining-bytes field."""
    buffer = bytearray(4096)
    encode_blank_into(buffer, 100, 3996)
    result = check_record(buffer, 100, len(buffer), check_crc=True)
    assert result == RecordCheck(RecordKind.END_OF_FILE, 0)


def test_unwritten_zeros_are_invalid() -> None:
    """Zeros (unwritten space) have no known magic: INVALID with size -1."""
    result = check(bytes(200))
    assert result.kind is RecordKind.INVALID
    assert result.size == -1
    assert "magic" in result.reason


@pytest.mark.parametrize("left", range(8))
def test_fewer_than_eight_bytes_left_is_invalid(left: int) -> None:
    """Less room than TOTALSIZE+MAGIC is INVALID, even if those bytes start a blank record."""
    buffer = bytearray(8)
    encode_blank_into(buffer, 0, 8)
    result = check_record(buffer, 0, left, check_crc=False)
    assert result.kind is RecordKind.INVALID
    assert result.size == -1


def test_wrong_magic_is_invalid() -> None:
    """Replace A.1's magic with 0xDEADBEEF: INVALID and the reason names the magic."""
    buffer = bytearray(A1_RECORD)
    buffer[4:8] = bytes.fromhex("deadbeef")
    result = check(buffer)
    assert result.kind is RecordKind.INVALID
    assert result.size == -1
    assert "DEADBEEF" in result.reason


def test_totalsize_larger_than_the_bytes_left_is_invalid() -> None:
    """TOTALSIZE 157 in a 156-byte readable window is INVALID (size -1)."""
    buffer = bytearray(A1_RECORD) + bytes(100)
    struct.pack_into(">i", buffer, 0, 157)
    result = check_record(buffer, 0, 156, check_crc=True)
    assert result.kind is RecordKind.INVALID
    assert result.size == -1
    assert "TOTALSIZE" in result.reason


@pytest.mark.parametrize("total", [-1, 0, 8, 90])
def test_totalsize_smaller_than_the_fixed_part_is_invalid(total: int) -> None:
    """TOTALSIZE below 91 cannot hold a record: INVALID."""
    buffer = bytearray(A1_RECORD)
    struct.pack_into(">i", buffer, 0, total)
    result = check(buffer)
    assert result.kind is RecordKind.INVALID
    assert result.size == -1


def test_length_mismatch_is_invalid_with_the_totalsize() -> None:
    """TOTALSIZE 157 over fields adding to 156: INVALID, size = TOTALSIZE (the dispatcher skips it)."""
    buffer = bytearray(A1_RECORD) + bytes(1)
    struct.pack_into(">i", buffer, 0, 157)
    result = check(buffer)
    assert result.kind is RecordKind.INVALID
    assert result.size == 157
    assert result.header is not None
    assert "157" in result.reason


def test_crc_mismatch_is_invalid_only_when_crc_is_checked() -> None:
    """Flip a body byte: INVALID with check_crc, still a MESSAGE without it."""
    buffer = bytearray(A1_RECORD)
    buffer[A1_BODY_POSITION] ^= 0x01
    checked = check(buffer, check_crc=True)
    assert checked.kind is RecordKind.INVALID
    assert checked.size == -1
    assert "CRC" in checked.reason
    assert check(buffer, check_crc=False).kind is RecordKind.MESSAGE


def test_stored_crc_mismatch_is_invalid() -> None:
    """Change the BODYCRC field instead of the body: INVALID with check_crc."""
    buffer = bytearray(A1_RECORD)
    struct.pack_into(">i", buffer, 8, 2010220931)
    assert check(buffer).kind is RecordKind.INVALID


def test_crc_is_not_checked_for_an_empty_body() -> None:
    """Java skips the CRC when BODYLENGTH is 0: a record with body b'' and CRC 99 is a MESSAGE."""
    buffer = encode(body=b"", crc=99)
    result = check(buffer)
    assert result.kind is RecordKind.MESSAGE
    assert result.size == 151


def test_physical_offset_mismatch_is_invalid() -> None:
    """A record whose PHYSICALOFFSET names another position is INVALID when the position is known."""
    buffer = encode(physical_offset=4096)
    assert check(buffer, expected_physical_offset=4096).kind is RecordKind.MESSAGE
    stale = check(buffer, expected_physical_offset=0)
    assert stale.kind is RecordKind.INVALID
    assert stale.size == -1
    assert "PHYSICALOFFSET" in stale.reason
    assert check(buffer).kind is RecordKind.MESSAGE


def test_v1_topic_length_above_127_is_invalid() -> None:
    """TOPICLENGTH is a signed byte: 0x80 (negative in Java) is INVALID."""
    buffer = bytearray(A1_RECORD)
    buffer[A1_TOPIC_LENGTH_POSITION] = 0x80
    assert check(buffer).kind is RecordKind.INVALID


def test_negative_body_length_is_invalid() -> None:
    """BODYLENGTH -1 is INVALID rather than an exception."""
    buffer = bytearray(A1_RECORD)
    struct.pack_into(">i", buffer, 84, -1)
    assert check(buffer).kind is RecordKind.INVALID


def test_negative_properties_length_is_invalid() -> None:
    """PROPERTIESLENGTH 0xFFFF (-1 as a short) is INVALID."""
    buffer = bytearray(A1_RECORD)
    struct.pack_into(">h", buffer, A1_PROPERTIES_LENGTH_POSITION, -1)
    assert check(buffer).kind is RecordKind.INVALID


def test_topic_that_is_not_utf8_is_invalid() -> None:
    """A topic byte 0xFF cannot be UTF-8: INVALID, not UnicodeDecodeError."""
    buffer = bytearray(A1_RECORD)
    buffer[A1_TOPIC_LENGTH_POSITION + 1] = 0xFF
    result = check(buffer)
    assert result.kind is RecordKind.INVALID
    assert "undecodable" in result.reason


def test_records_are_checked_back_to_back() -> None:
    """Two records then a blank: walk them by size as recovery does."""
    first = encode(physical_offset=0)
    second = encode(physical_offset=len(first), body=b"World!")
    buffer = bytearray(first + second + bytes(64))
    encode_blank_into(buffer, len(first) + len(second), 64)
    position = 0
    kinds = []
    while True:
        result = check_record(buffer, position, len(buffer), check_crc=True, expected_physical_offset=position)
        kinds.append(result.kind)
        if result.kind is not RecordKind.MESSAGE:
            break
        position += result.size
    assert kinds == [RecordKind.MESSAGE, RecordKind.MESSAGE, RecordKind.END_OF_FILE]
    assert position == 156 + 157


# --- corruption: every byte, every cut ---

_CHECKED_FIELDS = [
    *range(0, 12),
    *range(28, 36),
    *range(84, 88),
    *range(A1_BODY_POSITION, A1_BODY_POSITION + 5),
    A1_TOPIC_LENGTH_POSITION,
    A1_PROPERTIES_LENGTH_POSITION,
    A1_PROPERTIES_LENGTH_POSITION + 1,
]
"""Bytes of A.1 that check_record verifies: TOTALSIZE, MAGIC, BODYCRC, PHYSICALOFFSET, BODYLENGTH,
the body, TOPICLENGTH and PROPERTIESLENGTH."""


def test_any_change_of_a_checked_byte_makes_the_record_invalid() -> None:
    """Replace each checked byte of A.1 with every other value: always INVALID, never an exception."""
    for position in _CHECKED_FIELDS:
        buffer = bytearray(A1_RECORD)
        original = buffer[position]
        for value in range(256):
            if value == original:
                continue
            buffer[position] = value
            result = check_record(buffer, 0, len(buffer), check_crc=True, expected_physical_offset=0)
            assert result.kind is RecordKind.INVALID, (position, value, result)


def test_any_change_of_any_byte_never_raises() -> None:
    """Replace every byte of A.1 with every value: check_record returns, and a MESSAGE keeps size 156."""
    buffer = bytearray(A1_RECORD)
    for position in range(len(buffer)):
        original = buffer[position]
        for value in range(256):
            buffer[position] = value
            result = check_record(buffer, 0, len(buffer), check_crc=True)
            assert isinstance(result, RecordCheck)
            if result.kind is RecordKind.MESSAGE:
                assert result.size == 156
        buffer[position] = original


def test_record_cut_at_every_offset_is_invalid() -> None:
    """A.1 cut at each offset: INVALID by window limit always, and by content up to the properties."""
    for cut in range(len(A1_RECORD)):
        assert check_record(A1_RECORD, 0, cut, check_crc=True).kind is RecordKind.INVALID, cut
        torn = A1_RECORD[:cut] + bytes(len(A1_RECORD) - cut)
        expected = RecordKind.INVALID if cut < A1_PROPERTIES_POSITION else RecordKind.MESSAGE
        assert check_record(torn, 0, len(torn), check_crc=True).kind is expected, cut


def test_zeroed_properties_tail_is_not_detectable() -> None:
    """The format has no checksum over topic/properties: a record torn inside them still passes."""
    torn = A1_RECORD[: A1_PROPERTIES_POSITION + 10] + bytes(len(A1_RECORD) - A1_PROPERTIES_POSITION - 10)
    result = check_record(torn, 0, len(torn), check_crc=True, expected_physical_offset=0)
    assert result.kind is RecordKind.MESSAGE
    assert result.size == 156


@settings(deadline=None, max_examples=300)
@given(data=st.binary(min_size=0, max_size=400), position=st.integers(0, 40), check_crc=st.booleans())
def test_random_bytes_never_raise(data: bytes, position: int, check_crc: bool) -> None:
    """Any bytes at any position classify without raising; a MESSAGE fits in the window."""
    result = check_record(data, min(position, len(data)), len(data), check_crc=check_crc)
    assert result.kind in RecordKind
    if result.kind is RecordKind.MESSAGE:
        assert FIXED_LENGTH_V4 <= result.size <= len(data) - min(position, len(data))


@settings(deadline=None, max_examples=300)
@given(corruption=st.lists(st.tuples(st.integers(0, len(A1_RECORD) - 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_random_corruption_of_the_record_never_raises(corruption: list[tuple[int, int]]) -> None:
    """Overwrite random bytes of A.1: no exception; a MESSAGE result is still self-consistent."""
    buffer = bytearray(A1_RECORD)
    for position, value in corruption:
        buffer[position] = value
    result = check_record(buffer, 0, len(buffer), check_crc=True, expected_physical_offset=0)
    assert result.kind in RecordKind
    if result.kind is RecordKind.MESSAGE:
        header = result.header
        assert header is not None
        assert result.size == header.total_size
        assert header.properties_position + header.properties_length == result.size
        assert header.physical_offset == 0
    if all(buffer[p] == A1_RECORD[p] for p in _CHECKED_FIELDS):
        assert result.kind is not RecordKind.END_OF_FILE


def _real_ipv6(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is None


hosts = st.one_of(st.ip_addresses(v=4).map(str), st.ip_addresses(v=6).filter(_real_ipv6).map(str))


@settings(deadline=None, max_examples=200)
@given(
    body=st.binary(max_size=300),
    topic=st.text(st.characters(codec="utf-8"), min_size=1, max_size=30).filter(
        lambda t: len(t.encode()) <= limits.TOPIC_LENGTH_MAX_BYTES
    ),
    properties=st.binary(max_size=200),
    ints=st.tuples(*(st.integers(-(2**31), 2**31 - 1) for _ in range(3))),
    longs=st.tuples(*(st.integers(-(2**63), 2**63 - 1) for _ in range(5))),
    born=st.tuples(hosts, st.integers(0, 65535)),
    store=st.tuples(hosts, st.integers(0, 65535)),
    position=st.integers(0, 16),
)
def test_encode_then_decode_round_trips_every_field(
    body: bytes,
    topic: str,
    properties: bytes,
    ints: tuple[int, int, int],
    longs: tuple[int, int, int, int, int],
    born: tuple[str, int],
    store: tuple[str, int],
    position: int,
) -> None:
    """Random messages with IPv4/IPv6 hosts: encode, check_record, compare every decoded field."""
    queue_id, flag, reconsume = ints
    queue_offset, physical_offset, born_ts, store_ts, prepared = longs
    born_host, store_host = encode_host(*born), encode_host(*store)
    buffer = encode(
        body=body,
        topic=topic.encode(),
        properties=properties,
        queue_id=queue_id,
        flag=flag,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
        born_timestamp=born_ts,
        born_host=born_host,
        store_timestamp=store_ts,
        store_host=store_host,
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
        position=position,
    )
    result = check_record(buffer, position, len(buffer), check_crc=True, expected_physical_offset=physical_offset)
    assert result.kind is RecordKind.MESSAGE
    header = result.header
    assert header is not None
    assert result.size == header.total_size == len(buffer) - position
    assert header.sysflag == host_flags(born_host, store_host)
    assert (header.queue_id, header.flag, header.reconsume_times) == ints
    assert (
        header.queue_offset,
        header.physical_offset,
        header.born_timestamp,
        header.store_timestamp,
        header.prepared_transaction_offset,
    ) == longs
    assert decode_host(header.born_host) == born
    assert decode_host(header.store_host) == store
    assert buffer[header.body_position : header.body_position + header.body_length] == body
    assert header.topic == topic
    assert buffer[header.properties_position : header.properties_position + header.properties_length] == (properties)
    assert store_timestamp_at(buffer, position) == store_ts


def _records_buffer(rng: random.Random, count: int) -> bytearray:
    """`count` V1 records back to back (random bodies, two topics, some IPv6 hosts), then zeros."""
    v6_host = ipaddress.ip_address("::1").packed + struct.pack(">i", 9876)
    v4_host = encode_host("10.0.0.1", 10911)
    buffer = bytearray(200_000)
    at = 0
    for number in range(count):
        body = rng.randbytes(rng.randrange(0, 300))
        born = v6_host if number % 5 == 1 else v4_host
        topic = b"TopicA" if number % 2 else "Topic\u00e9".encode()
        properties = b"KEYS\x01k%d\x02" % number
        at += encode_record_into(
            buffer, at, body, topic, properties, 1, 0, number, at, host_flags(born, v4_host),
            1, born, 2, v4_host, 0, 0, body_crc(body),
        )  # fmt: skip
    return buffer


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("check_crc", [True, False])
def test_frame_messages_accepts_exactly_the_records_check_record_calls_messages(seed: int, check_crc: bool) -> None:
    """Goal: recovery's fast walk never accepts what `check_record` rejects, nor stops before what it
    accepts. Method: 30 records, one to three random bytes changed (or none); both walks from 0."""
    rng = random.Random(seed)
    buffer = _records_buffer(rng, 30)
    written = next(i for i in range(len(buffer) - 1, -1, -1) if buffer[i]) + 1
    for _ in range(seed % 4):
        buffer[rng.randrange(written)] = rng.randrange(256)
    view = memoryview(buffer)
    expected_position, expected_count = 0, 0
    while True:
        check = check_record(
            view, expected_position, len(view), check_crc=check_crc, expected_physical_offset=expected_position
        )
        if check.kind is not RecordKind.MESSAGE or check.header is None or check.header.magic != MESSAGE_MAGIC_CODE:
            break
        expected_position += check.size
        expected_count += 1
    found = frame_messages(view, 0, len(view), 0, check_crc=check_crc, topics_valid=set())
    assert found == (expected_position, expected_count)


def test_frame_messages_checks_the_physical_offset_against_the_base() -> None:
    """Goal: records are framed at their CommitLog offset (segment base + position). Method: base 0 and 1000."""
    view = memoryview(_records_buffer(random.Random(7), 3))
    assert frame_messages(view, 0, len(view), 0, check_crc=True, topics_valid=set())[1] == 3
    assert frame_messages(view, 0, len(view), 1000, check_crc=True, topics_valid=set()) == (0, 0)
