"""The CommitLog record: one declaration used by the encoder, the decoder, recovery, the client and Spark.

Spec §1.2-§1.5. Big-endian. Offsets for IPv4 born and store hosts; an IPv6 host (sysflag bits
0x10 / 0x20) is 20 bytes instead of 8 and shifts every later field by 12.

    offset  size  field
    0       4     TOTALSIZE            whole record, this field included
    4       4     MAGICCODE            0xDAA320A7 (V1); 0xDAA320AB (V2, 5.x: TOPICLENGTH is a short)
    8       4     BODYCRC              zlib CRC-32 of the stored body & 0x7FFFFFFF
    12      4     QUEUEID
    16      4     FLAG                 the producer's opaque int
    20      8     QUEUEOFFSET          logical ConsumeQueue index (0 for PREPARED/ROLLBACK)
    28      8     PHYSICALOFFSET       global CommitLog offset of this record
    36      4     SYSFLAG              shoal.formats.sysflag
    40      8     BORNTIMESTAMP        ms
    48      8/20  BORNHOST             address (4/16) + port (int)
    56      8     STORETIMESTAMP       ms, broker clock
    64      8/20  STOREHOST            address (4/16) + port (int)
    72      4     RECONSUMETIMES
    76      8     PREPARED_TX_OFFSET
    84      4     BODYLENGTH
    88      B     BODY                 as the client sent it (possibly compressed)
    88+B    1/2   TOPICLENGTH          signed byte (V1) / short (V2)
    89+B    T     TOPIC                UTF-8
    89+B+T  2     PROPERTIESLENGTH     signed short
    91+B+T  P     PROPERTIES           shoal.formats.properties

The end-of-file blank record is 8 bytes: `int remaining_bytes, int BLANK_MAGIC_CODE`.
"""

from __future__ import annotations

import enum
import ipaddress
import re
import struct
import zlib
from dataclasses import dataclass
from typing import NamedTuple

from shoal.formats import limits
from shoal.formats.compiled import compiled_module
from shoal.formats.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194

TOTAL_SIZE_OFFSET = 0
MAGIC_OFFSET = 4
BODY_CRC_OFFSET = 8
QUEUE_ID_OFFSET = 12
FLAG_OFFSET = 16
QUEUE_OFFSET_OFFSET = 20
PHYSICAL_OFFSET_OFFSET = 28
SYSFLAG_OFFSET = 36
BORN_TIMESTAMP_OFFSET = 40
BORN_HOST_OFFSET = 48

PREFIX = struct.Struct(">iiiiiqqi")
"""TOTALSIZE .. SYSFLAG: the part whose layout never moves."""
assert PREFIX.size == BORN_TIMESTAMP_OFFSET


def _header_struct(born_host_len: int, store_host_len: int) -> struct.Struct:
    return struct.Struct(f">iiiiiqqiq{born_host_len}sq{store_host_len}siqi")


HEADERS: dict[tuple[int, int], struct.Struct] = {
    (born, store): _header_struct(born, store) for born in (8, 20) for store in (8, 20)
}
"""TOTALSIZE .. BODYLENGTH, keyed by (born host length, store host length)."""
HEADER_V4 = HEADERS[(8, 8)]
assert HEADER_V4.size == 88

END_OF_FILE_MIN_BLANK_LENGTH = limits.END_FILE_MIN_BLANK_LENGTH_BYTES
TAIL = struct.Struct(">ii")
"""The blank record: remaining bytes of the segment, BLANK_MAGIC_CODE."""
TIMESTAMP = struct.Struct(">q")
INT = struct.Struct(">i")
SHORT = struct.Struct(">h")
BODY_OFFSET_WITHOUT_HOSTS = 72  # BODY starts at 72 + born host length + store host length
HOST_V6_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
BODY_OFFSET_OF_HOST_FLAGS: dict[int, int] = {
    flags: BODY_OFFSET_WITHOUT_HOSTS
    + (20 if flags & BORNHOST_V6_FLAG else 8)
    + (20 if flags & STOREHOSTADDRESS_V6_FLAG else 8)
    for flags in (0, BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, HOST_V6_FLAGS)
}
"""Where BODY starts in a record, by its sysflag's IPv6 host bits (`sysflag & HOST_V6_FLAGS`): the
scans look it up rather than add the host lengths per record."""
FIXED_LENGTH_V4 = limits.RECORD_FIXED_LENGTH_V4_BYTES  # all of a V1 IPv4/IPv4 record but body, topic, properties


def body_crc(body: bytes | memoryview) -> int:
    """RocketMQ's body CRC: zlib CRC-32 with the top bit cleared (spec §1.5)."""
    return zlib.crc32(body) & 0x7FFFFFFF


def record_length(
    body_len: int, topic_len: int, properties_len: int, born_host_len: int = 8, store_host_len: int = 8
) -> int:
    """`calMsgLength` for a V1 record."""
    return FIXED_LENGTH_V4 + body_len + topic_len + properties_len + (born_host_len - 8) + (store_host_len - 8)


def encode_host(address: str, port: int) -> bytes:
    """BORNHOST/STOREHOST bytes; IPv4-mapped IPv6 peers are stored as IPv4 (spec gotcha 28)."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.packed + INT.pack(port)


def decode_host(data: bytes | memoryview) -> tuple[str, int]:
    raw = bytes(data)
    return str(ipaddress.ip_address(raw[:-4])), INT.unpack(raw[-4:])[0]


def host_flags(born_host: bytes, store_host: bytes) -> int:
    """The sysflag bits that say which host is IPv6."""
    return (BORNHOST_V6_FLAG if len(born_host) == 20 else 0) | (
        STOREHOSTADDRESS_V6_FLAG if len(store_host) == 20 else 0
    )


def with_host_flags(sysflag: int, born_host: bytes, store_host: bytes) -> int:
    """`sysflag` with its v6 bits taken from the hosts actually written, whatever the caller set:
    those two bits decide where every later field lies, so only the hosts may decide them."""
    return sysflag & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG) | host_flags(born_host, store_host)


def python_encode_record_into(
    buffer: bytearray | memoryview,
    position: int,
    body: bytes | memoryview,
    topic: bytes,
    properties: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sysflag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    crc: int,
) -> int:
    """Write one V1 record at `position`; returns its length. Limits are checked by the caller.
    The reference for the compiled `encode_record_into` (`_record_speedups.c`)."""
    body_len = len(body)
    topic_len = len(topic)
    properties_len = len(properties)
    born_len = len(born_host)
    store_len = len(store_host)
    total = record_length(body_len, topic_len, properties_len, born_len, store_len)
    header = HEADERS[(born_len, store_len)]
    header.pack_into(
        buffer,
        position,
        total,
        MESSAGE_MAGIC_CODE,
        crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sysflag,
        born_timestamp,
        born_host,
        store_timestamp,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        body_len,
    )
    at = position + header.size
    buffer[at : at + body_len] = body
    at += body_len
    buffer[at] = topic_len
    buffer[at + 1 : at + 1 + topic_len] = topic
    at += 1 + topic_len
    SHORT.pack_into(buffer, at, properties_len)
    buffer[at + 2 : at + 2 + properties_len] = properties
    return total


def encoded_record_problem(
    buffer: bytearray | memoryview, position: int, length: int, physical_offset: int
) -> str | None:
    """What keeps the decoder from framing the record just encoded at `position` as `length`
    bytes, or None. Re-reads only the fields framing depends on (TOTALSIZE, MAGICCODE,
    PHYSICALOFFSET, the SYSFLAG host bits, BODYLENGTH, TOPICLENGTH, PROPERTIESLENGTH) the way
    `decode_header` does: a cheap check of the encoder before the write becomes visible (on
    every append: three unpacks and a byte, no allocation unless something is wrong)."""
    total, magic, _crc, _queue, _flag, _offset, physical, sysflag = _unpack_prefix(buffer, position)
    if magic != MESSAGE_MAGIC_CODE or total != length or physical != physical_offset:
        return (
            f"TOTALSIZE {total}, MAGICCODE 0x{magic & 0xFFFFFFFF:08X}, PHYSICALOFFSET {physical}; "
            f"expected {length}, 0xDAA320A7, {physical_offset}"
        )
    body_at = position + BODY_OFFSET_OF_HOST_FLAGS[sysflag & HOST_V6_FLAGS]
    end = position + length
    body_len = _unpack_int(buffer, body_at - 4)[0]
    at = body_at + body_len
    if body_len < 0 or at + 3 > end:
        return f"BODYLENGTH {body_len} (SYSFLAG 0x{sysflag & 0xFFFFFFFF:X} places it) overruns TOTALSIZE {length}"
    topic_len = buffer[at]
    at += 1 + topic_len
    if topic_len > limits.TOPIC_LENGTH_MAX_BYTES or at + 2 > end:
        return f"TOPICLENGTH {topic_len} overruns TOTALSIZE {length}"
    properties_len = _unpack_short(buffer, at)[0]
    if properties_len < 0 or at + 2 + properties_len != end:
        return f"the fields add up to {at + 2 + properties_len - position} bytes, TOTALSIZE is {length}"
    return None


_unpack_prefix = PREFIX.unpack_from
_unpack_int = INT.unpack_from
_unpack_short = SHORT.unpack_from


DispatchFields = tuple[int, int, int, int, int, int, bytes, bytes]
"""TOTALSIZE, QUEUEID, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, STORETIMESTAMP, TOPIC, PROPERTIES."""


def python_dispatch_fields(
    view: bytes | bytearray | memoryview, position: int, limit: int, expected_offset: int
) -> DispatchFields | None:
    """The fields dispatch needs from a well-formed V1 record at `position` (ending by `limit`,
    its PHYSICALOFFSET `expected_offset`), or None for anything else: then `check_record` names
    the problem. The reference for the compiled `dispatch_fields` (`_record_speedups.c`)."""
    if limit - position < FIXED_LENGTH_V4:
        return None
    total, magic, _crc, queue_id, _flag, queue_offset, physical, sysflag = _unpack_prefix(view, position)
    if magic != MESSAGE_MAGIC_CODE or physical != expected_offset or total > limit - position:
        return None
    born_len = 20 if sysflag & BORNHOST_V6_FLAG else 8
    body_at = position + BODY_OFFSET_OF_HOST_FLAGS[sysflag & HOST_V6_FLAGS]
    end = position + total
    if body_at + 3 > end:
        return None
    store_timestamp = TIMESTAMP.unpack_from(view, position + BORN_HOST_OFFSET + born_len)[0]
    body_len = _unpack_int(view, body_at - 4)[0]
    topic_at = body_at + body_len
    if body_len < 0 or topic_at + 3 > end:
        return None
    topic_len = view[topic_at]
    props_at = topic_at + 1 + topic_len
    if topic_len > limits.TOPIC_LENGTH_MAX_BYTES or props_at + 2 > end:
        return None
    props_len = _unpack_short(view, props_at)[0]
    if props_len < 0 or props_at + 2 + props_len != end:
        return None
    return (
        total,
        queue_id,
        queue_offset,
        physical,
        sysflag,
        store_timestamp,
        bytes(view[topic_at + 1 : props_at]),
        bytes(view[props_at + 2 : end]),
    )


_compiled = compiled_module("shoal.formats._record_speedups")
COMPILED = _compiled is not None
"""Whether `encode_record_into` and `dispatch_fields` (and java_hash's `java_string_hash`) are compiled."""
encode_record_into = python_encode_record_into
"""Write one V1 record at a position of a writable buffer; returns its length (compiled when built)."""
dispatch_fields = python_dispatch_fields
"""The dispatch fields of a well-formed V1 record, or None (compiled when built)."""
COMPILED_ENCODE_RECORD_INTO = None if _compiled is None else _compiled.encode_record_into
"""The compiled encoder, which refuses what would not frame (so its writes need no re-read by
`encoded_record_problem`); None when not built."""
if _compiled is not None:
    encode_record_into = _compiled.encode_record_into
    dispatch_fields = _compiled.dispatch_fields


def encode_blank_into(buffer: bytearray | memoryview, position: int, remaining_bytes: int) -> None:
    TAIL.pack_into(buffer, position, remaining_bytes, BLANK_MAGIC_CODE)


class RecordHeader(NamedTuple):
    """Every field of a decoded record; the body and properties stay in the buffer (offsets)."""

    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sysflag: int
    born_timestamp: int
    born_host: bytes
    store_timestamp: int
    store_host: bytes
    reconsume_times: int
    prepared_transaction_offset: int
    body_position: int
    body_length: int
    topic: str
    properties_position: int
    properties_length: int


class RecordKind(enum.Enum):
    MESSAGE = "message"
    END_OF_FILE = "end of file"
    INVALID = "invalid"


@dataclass(frozen=True, slots=True)
class RecordCheck:
    """What lies at a position: a message (with its header), the blank record, or damage."""

    kind: RecordKind
    size: int
    header: RecordHeader | None = None
    reason: str = ""


def check_record(
    buffer: bytes | bytearray | memoryview,
    position: int,
    limit: int,
    *,
    check_crc: bool,
    expected_physical_offset: int | None = None,
) -> RecordCheck:
    """`checkMessageAndReturnSize`: classify the bytes at `position` (readable up to `limit`).

    Beyond RocketMQ, when `expected_physical_offset` is given the record's PHYSICALOFFSET field
    must match it: stale records left behind a truncation can never be mistaken for new ones.
    """
    if limit - position < TAIL.size:
        return RecordCheck(RecordKind.INVALID, -1, reason=f"only {limit - position} bytes left")
    total, magic = TAIL.unpack_from(buffer, position)
    if magic == BLANK_MAGIC_CODE:
        return RecordCheck(RecordKind.END_OF_FILE, 0)
    if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
        return RecordCheck(
            RecordKind.INVALID, -1, reason=f"magic 0x{magic & 0xFFFFFFFF:08X} is neither message nor blank"
        )
    if total < FIXED_LENGTH_V4 or total > limit - position:
        return RecordCheck(
            RecordKind.INVALID, -1, reason=f"TOTALSIZE {total} does not fit the {limit - position} bytes left"
        )
    try:
        header = decode_header(buffer, position)
    except (struct.error, ValueError, IndexError) as exc:
        return RecordCheck(RecordKind.INVALID, -1, reason=f"undecodable record: {exc}")
    end = header.properties_position + header.properties_length
    if end - position != total:
        return RecordCheck(
            RecordKind.INVALID,
            total,
            header,
            reason=f"TOTALSIZE {total} but the fields add up to {end - position}",
        )
    if expected_physical_offset is not None and header.physical_offset != expected_physical_offset:
        return RecordCheck(
            RecordKind.INVALID,
            -1,
            header,
            reason=f"PHYSICALOFFSET field {header.physical_offset} != position {expected_physical_offset}",
        )
    if check_crc and header.body_length > 0:
        body = memoryview(buffer)[header.body_position : header.body_position + header.body_length]
        actual = body_crc(body)
        body.release()
        if actual != header.body_crc:
            return RecordCheck(RecordKind.INVALID, -1, header, reason=f"body CRC {actual} != stored {header.body_crc}")
    return RecordCheck(RecordKind.MESSAGE, total, header)


def decode_header(buffer: bytes | bytearray | memoryview, position: int) -> RecordHeader:
    """Decode every field of the record at `position` (no validation beyond struct bounds)."""
    total, magic, crc, queue_id, flag, queue_offset, physical_offset, sysflag = PREFIX.unpack_from(buffer, position)
    born_len = 20 if sysflag & BORNHOST_V6_FLAG else 8
    store_len = 20 if sysflag & STOREHOSTADDRESS_V6_FLAG else 8
    (
        _total,
        _magic,
        _crc,
        _qid,
        _flag,
        _qoff,
        _phys,
        _sysflag,
        born_ts,
        born_host,
        store_ts,
        store_host,
        reconsume,
        prepared,
        body_len,
    ) = HEADERS[(born_len, store_len)].unpack_from(buffer, position)
    if body_len < 0:
        raise ValueError(f"negative BODYLENGTH {body_len}")
    body_pos = position + HEADERS[(born_len, store_len)].size
    at = body_pos + body_len
    if magic == MESSAGE_MAGIC_CODE_V2:
        topic_len = SHORT.unpack_from(buffer, at)[0]
        at += 2
    else:
        topic_len = buffer[at]
        at += 1
    if topic_len < 0 or (topic_len > limits.TOPIC_LENGTH_MAX_BYTES and magic == MESSAGE_MAGIC_CODE):
        raise ValueError(f"TOPICLENGTH {topic_len} is negative as a signed byte or short")
    topic = bytes(buffer[at : at + topic_len]).decode("utf-8")
    at += topic_len
    properties_len = SHORT.unpack_from(buffer, at)[0]
    if properties_len < 0:
        raise ValueError(f"negative PROPERTIESLENGTH {properties_len}")
    return RecordHeader(
        total,
        magic,
        crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sysflag,
        born_ts,
        born_host,
        store_ts,
        store_host,
        reconsume,
        prepared,
        body_pos,
        body_len,
        topic,
        at + 2,
        properties_len,
    )


def store_timestamp_at(buffer: bytes | bytearray | memoryview, position: int) -> int:
    """`pickupStoreTimestamp`: the STORETIMESTAMP of the record at `position`."""
    sysflag = INT.unpack_from(buffer, position + SYSFLAG_OFFSET)[0]
    born_len = 20 if sysflag & BORNHOST_V6_FLAG else 8
    return int(TIMESTAMP.unpack_from(buffer, position + BORN_HOST_OFFSET + born_len)[0])


# --- columnar readers (Spark): the same layout, exposed as data, and a framing-only walk ---

HEADER_FIELD_NAMES = (
    "total_size",
    "magic",
    "body_crc",
    "queue_id",
    "flag",
    "queue_offset",
    "physical_offset",
    "sysflag",
    "born_timestamp",
    "born_host",
    "store_timestamp",
    "store_host",
    "reconsume_times",
    "prepared_transaction_offset",
    "body_length",
)
"""The fields of HEADERS, in order (RecordHeader's names)."""
TOPIC_LENGTH_V1 = struct.Struct(">b")
TOPIC_LENGTH_V2 = SHORT
PROPERTIES_LENGTH = SHORT


class FieldSpan(NamedTuple):
    """Where one header field lies in a record, and its struct code ('i', 'q' or 's')."""

    offset: int
    size: int
    code: str


def header_layout(born_host_len: int, store_host_len: int) -> dict[str, FieldSpan]:
    """Offset and size of every header field, read off the HEADERS declaration itself, so a
    columnar decoder (which slices one field out of many records at once) cannot drift from it."""
    header = HEADERS[(born_host_len, store_host_len)]
    spans: dict[str, FieldSpan] = {}
    at = 0
    tokens = re.findall(r"(\d*)([a-z])", header.format.lstrip(">"))
    assert len(tokens) == len(HEADER_FIELD_NAMES)
    for name, (count, code) in zip(HEADER_FIELD_NAMES, tokens, strict=True):
        size = struct.calcsize(f">{count}{code}")
        spans[name] = FieldSpan(at, size, code)
        at += size
    assert at == header.size
    return spans


class WalkStop(enum.Enum):
    """Why `walk_records` stopped."""

    COUNT = "count_max records framed"
    STOP_AT = "the next record starts at or after stop_at"
    LIMIT = "the next record does not fit before limit"
    END_OF_FILE = "the blank record"
    INVALID = "neither message nor blank magic, or an impossible TOTALSIZE"


class RecordWalk(NamedTuple):
    positions: list[int]
    """Start of each framed record; record i ends where record i+1 starts (or at `end`)."""
    end: int
    """Position after the last framed record: where the walk stopped."""
    stop: WalkStop


WALK_STOPS = (WalkStop.COUNT, WalkStop.STOP_AT, WalkStop.LIMIT, WalkStop.END_OF_FILE, WalkStop.INVALID)
"""The compiled walk's stop codes, in order (`_record_speedups.c`)."""


def walk_records(
    buffer: bytes | bytearray | memoryview, position: int, limit: int, stop_at: int, count_max: int
) -> RecordWalk:
    """Frame consecutive records from `position` by MAGICCODE and TOTALSIZE alone: the only
    per-record loop of a columnar reader, which then checks every other field in bulk (the
    PHYSICALOFFSET, that the fields add up to TOTALSIZE, the CRC). Never reads at or past `limit`
    (which is within the buffer); a record that starts at or after `stop_at` is left to the next
    walk. Compiled when built (`python_walk_records` is the reference)."""
    if _compiled is None:
        return python_walk_records(buffer, position, limit, stop_at, count_max)
    positions, end, stop = _compiled.walk_records(
        buffer, position, limit, stop_at, count_max, limits.RECORD_SIZE_MAX_BYTES
    )
    return RecordWalk(positions, end, WALK_STOPS[stop])


def python_walk_records(
    buffer: bytes | bytearray | memoryview, position: int, limit: int, stop_at: int, count_max: int
) -> RecordWalk:
    """`walk_records` in Python: the reference the compiled walk is tested against."""
    positions: list[int] = []
    append = positions.append
    unpack_from = TAIL.unpack_from
    size_max = limits.RECORD_SIZE_MAX_BYTES
    edge = min(stop_at, limit - TAIL.size + 1)  # one comparison per record for both bounds
    count = 0
    stop = WalkStop.COUNT
    while count < count_max:
        if position >= edge:
            stop = WalkStop.STOP_AT if position >= stop_at else WalkStop.LIMIT
            break
        total, magic = unpack_from(buffer, position)
        if magic != MESSAGE_MAGIC_CODE and magic != MESSAGE_MAGIC_CODE_V2:  # noqa: PLR1714 (hot loop)
            stop = WalkStop.END_OF_FILE if magic == BLANK_MAGIC_CODE else WalkStop.INVALID
            break
        if total < FIXED_LENGTH_V4 or total > size_max:
            stop = WalkStop.INVALID
            break
        if total > limit - position:
            stop = WalkStop.LIMIT
            break
        append(position)
        position += total
        count += 1
    return RecordWalk(positions, position, stop)


def frame_messages(
    buffer: memoryview,
    position: int,
    limit: int,
    base_offset: int,
    *,
    check_crc: bool,
    topics_valid: set[bytes],
) -> tuple[int, int]:
    """Walk the consecutive V1 messages from `position` that `check_record` would classify as
    MESSAGE with `expected_physical_offset=base_offset + position` (CRC included when
    `check_crc`): (position after the last, how many). Recovery's scan of a whole CommitLog, one
    call per segment: it stops before anything it is not sure of (a V2 record, a blank record,
    damage), which the caller then classifies with `check_record`. `topics_valid` caches the topic
    bytes already known to decode as UTF-8 (`decode_header`'s test). Compiled when built
    (`python_frame_messages` is the reference); ValueError when [position, limit) is not inside
    the buffer."""
    if _compiled is None:
        return python_frame_messages(
            buffer, position, limit, base_offset, check_crc=check_crc, topics_valid=topics_valid
        )
    end, count = _compiled.frame_messages(
        buffer, position, limit, base_offset, zlib.crc32 if check_crc else None, topics_valid
    )
    return end, count


def python_frame_messages(
    buffer: memoryview,
    position: int,
    limit: int,
    base_offset: int,
    *,
    check_crc: bool,
    topics_valid: set[bytes],
) -> tuple[int, int]:
    """`frame_messages` in Python: the reference the compiled scan is tested against. Each record
    costs a few `unpack_from`s and, with `check_crc`, a CRC over a zero-copy slice of the body."""
    if position < 0 or (position < limit and limit > len(buffer)):
        raise ValueError("frame_messages: [position, limit) is not inside the buffer")
    unpack_prefix = PREFIX.unpack_from
    unpack_int = INT.unpack_from
    unpack_short = SHORT.unpack_from
    crc32 = zlib.crc32
    topic_length_max = limits.TOPIC_LENGTH_MAX_BYTES
    count = 0
    while limit - position >= FIXED_LENGTH_V4:
        total, magic, crc, _queue_id, _flag, _queue_offset, physical, sysflag = unpack_prefix(buffer, position)
        end = position + total
        if magic != MESSAGE_MAGIC_CODE or total < FIXED_LENGTH_V4 or end > limit:
            break
        if physical != base_offset + position:
            break
        body_at = position + BODY_OFFSET_OF_HOST_FLAGS[sysflag & HOST_V6_FLAGS]
        if body_at > end:
            break
        body_len = unpack_int(buffer, body_at - 4)[0]
        topic_at = body_at + body_len
        if body_len < 0 or topic_at + 3 > end:
            break
        topic_len = buffer[topic_at]
        properties_at = topic_at + 1 + topic_len
        if topic_len > topic_length_max or properties_at + 2 > end:
            break
        if unpack_short(buffer, properties_at)[0] != end - properties_at - 2:  # also rejects a negative length
            break
        topic = buffer[topic_at + 1 : properties_at].tobytes()
        if topic not in topics_valid:
            try:
                topic.decode("utf-8")
            except UnicodeDecodeError:
                break
            topics_valid.add(topic)
        if check_crc and body_len > 0 and crc32(buffer[body_at:topic_at]) & 0x7FFFFFFF != crc:
            break
        position = end
        count += 1
    return position, count


def reconsume_times_offset(sysflag: int) -> int:
    """Where RECONSUMETIMES lies in a record with this sysflag (IPv6 hosts move it)."""
    born = 20 if sysflag & BORNHOST_V6_FLAG else 8
    stored = 20 if sysflag & STOREHOSTADDRESS_V6_FLAG else 8
    return header_layout(born, stored)["reconsume_times"].offset
