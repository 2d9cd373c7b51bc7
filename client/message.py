"""Messages as applications see them, their property string, and the records pulls return.

`Message` is what a producer sends; `MessageExt` is a decoded CommitLog record (spec §1.2) as
pulls, VIEW_MESSAGE_BY_ID and QUERY_MESSAGE return them; `decode_messages` reads a body of
concatenated records. The record layout is declared once, below; offsets for IPv4 born and store
hosts, each IPv6 host (sysflag 0x10 / 0x20) is 20 bytes instead of 8 and shifts later fields:

    offset  size  field
    0       4     TOTALSIZE            whole record, this field included
    4       4     MAGICCODE            0xDAA320A7 (V1); 0xDAA320AB (V2, 5.x: TOPICLENGTH is a short)
    8       4     BODYCRC              CRC-32 of the stored body & 0x7FFFFFFF (not checked here)
    12      4     QUEUEID
    16      4     FLAG
    20      8     QUEUEOFFSET          logical offset in the ConsumeQueue
    28      8     PHYSICALOFFSET       CommitLog offset
    36      4     SYSFLAG              bit 0 compressed, bits 8-10 compression type
    40      8     BORNTIMESTAMP        ms
    48      8/20  BORNHOST             address (4/16) + int port
    56      8     STORETIMESTAMP       ms
    64      8/20  STOREHOST            address (4/16) + int port
    72      4     RECONSUMETIMES
    76      8     PREPARED_TX_OFFSET
    84      4     BODYLENGTH
    88      B     BODY                 possibly compressed (SYSFLAG bit 0)
    88+B    1/2   TOPICLENGTH          byte (V1) / short (V2)
    89+B    T     TOPIC                UTF-8
    89+B+T  2     PROPERTIESLENGTH     short
    91+B+T  P     PROPERTIES           `name \\x01 value` joined by `\\x02` (spec §1.6)

A batch body (SEND_BATCH_MESSAGE, spec §1.10) is a run of blocks, each:

    offset  size  field
    0       4     TOTALSIZE            this block
    4       4     MAGICCODE            0 (ignored)
    8       4     BODYCRC              0 (ignored)
    12      4     FLAG
    16      4     BODYLENGTH
    20      B     BODY
    20+B    2     PROPERTIESLENGTH
    22+B    P     PROPERTIES
"""

from __future__ import annotations

import io
import re
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from shoal.client import limits
from shoal.client.errors import InvalidMessageError, MessageDecodeError, UnsupportedCompressionError
from shoal.formats.message_id import format_host, offset_msg_id

# --- property keys (MessageConst, spec §1.7) ---
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
PROPERTY_CLUSTER = "CLUSTER"
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "

# --- sysflag bits (spec §1.3) ---
COMPRESSED_FLAG = 0x1
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
COMPRESSION_TYPE_MASK = 0x700
COMPRESSION_LZ4 = 1
COMPRESSION_ZSTD = 2
COMPRESSION_ZLIB = 3  # 0 also means zlib (before 4.9.4 there was no type)

MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB

# --- topics (spec §1.9, Validators / TopicValidator) ---
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
_TOPIC_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]+")
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "TBW102",
    }
)


def retry_topic(group: str) -> str:
    """`%RETRY%<group>`: where a group's failed messages come back."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def encode_properties(properties: Mapping[str, str]) -> str:
    """`messageProperties2String`; names and values must be non-empty and free of separators."""
    parts = []
    for name, value in properties.items():
        if not name or not value:
            raise InvalidMessageError(f"property {name!r} has an empty name or value")
        if _has_separator(name) or _has_separator(value):
            raise InvalidMessageError(f"property {name!r} contains a \\x01 or \\x02 separator")
        parts.append(f"{name}{NAME_VALUE_SEPARATOR}{value}")
    return PROPERTY_SEPARATOR.join(parts)


def _has_separator(text: str) -> bool:
    return NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text


def decode_properties(text: str) -> dict[str, str]:
    """`string2messageProperties`: segments without a key, a value or a separator are dropped."""
    result: dict[str, str] = {}
    if not text:
        return result
    for segment in text.split(PROPERTY_SEPARATOR):
        name, separator, value = segment.partition(NAME_VALUE_SEPARATOR)
        if separator and name and value:
            result[name] = value
    return result


def check_topic(topic: str, *, for_send: bool = True) -> None:
    """Validators.checkTopic; for a send, also the topics no client may send to."""
    if not topic:
        raise InvalidMessageError("the topic is empty")
    if len(topic) > limits.TOPIC_LENGTH_MAX_CHARS:
        raise InvalidMessageError(f"topic {topic[:40]!r}... is longer than {limits.TOPIC_LENGTH_MAX_CHARS} characters")
    if _TOPIC_PATTERN.fullmatch(topic) is None:
        raise InvalidMessageError(f"topic {topic!r} has characters outside [%|a-zA-Z0-9_-]")
    if for_send and topic in NOT_ALLOWED_SEND_TOPICS:
        raise InvalidMessageError(f"sending to topic {topic!r} is forbidden")


GROUP_NAME_MAX_CHARS = 255  # Validators.CHARACTER_MAX_LENGTH


def check_group(group: str) -> None:
    """Validators.checkGroup: a producer or consumer group name."""
    if not group or len(group) > GROUP_NAME_MAX_CHARS or _TOPIC_PATTERN.fullmatch(group) is None:
        raise ValueError(f"group {group!r} must be 1..{GROUP_NAME_MAX_CHARS} characters of [%|a-zA-Z0-9_-]")


@dataclass(slots=True)
class Message:
    """A message to send. `properties` holds user properties; the fields below it are written
    into the property string as TAGS, KEYS (space-joined), DELAY and WAIT when sent.

    `keys` may be given as one string: it is split on spaces (a key can hold no space).
    """

    topic: str
    body: bytes
    tags: str | None = None
    keys: Sequence[str] = ()
    properties: dict[str, str] = field(default_factory=dict)
    delay_time_level: int = 0
    flag: int = 0
    wait_store_msg_ok: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.keys, str):
            self.keys = tuple(key for key in self.keys.split(KEY_SEPARATOR) if key)
        elif not isinstance(self.keys, tuple):
            self.keys = tuple(self.keys)

    @property
    def uniq_key(self) -> str | None:
        """The UNIQ_KEY property, if the message carries one."""
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    def wire_properties(self, uniq_key: str | None = None) -> dict[str, str]:
        """The property map as sent: user properties overlaid with the message's fields.

        WAIT is always present (Java's Message constructor sets it); `uniq_key` is added when
        the message has no UNIQ_KEY yet.
        """
        properties = dict(self.properties)
        if self.tags:
            properties[PROPERTY_TAGS] = self.tags
        if self.keys:
            properties[PROPERTY_KEYS] = KEY_SEPARATOR.join(self.keys)
        if self.delay_time_level > 0:
            properties[PROPERTY_DELAY_TIME_LEVEL] = str(self.delay_time_level)
        properties[PROPERTY_WAIT_STORE_MSG_OK] = "true" if self.wait_store_msg_ok else "false"
        if uniq_key is not None:
            properties.setdefault(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, uniq_key)
        return properties


@dataclass(slots=True, kw_only=True)
class MessageExt(Message):
    """A stored message: every field of its record. `properties` holds the whole property map.

    `msg_id` is the UNIQ_KEY when the producer set one, else the offset message id;
    `offset_msg_id` names the record by store host and CommitLog offset (VIEW_MESSAGE_BY_ID).
    Bodies arrive decompressed. Hosts are "ip:port" ("[ip]:port" for IPv6).
    """

    queue_id: int = 0
    queue_offset: int = 0
    commitlog_offset: int = 0
    sysflag: int = 0
    born_timestamp_ms: int = 0
    born_host: str = ""
    store_timestamp_ms: int = 0
    store_host: str = ""
    msg_id: str = ""
    offset_msg_id: str = ""
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    body_crc: int = 0
    store_size_bytes: int = 0
    broker_name: str = ""

    @property
    def retry_topic(self) -> str | None:
        """RETRY_TOPIC: the original topic of a message that came back through `%RETRY%<group>`."""
        return self.properties.get(PROPERTY_RETRY_TOPIC)


# --- record decoding ---

_TOTAL_AND_MAGIC = struct.Struct(">ii")
_SYSFLAG = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_SYSFLAG_OFFSET = 36
_HOST_LENGTHS = {False: 4, True: 16}


def _header_struct(born_address_length: int, store_address_length: int) -> struct.Struct:
    """TOTALSIZE .. BODYLENGTH with hosts split into address bytes and port."""
    return struct.Struct(f">iiiiiqqiq{born_address_length}siq{store_address_length}siiqi")


HEADERS: dict[tuple[bool, bool], struct.Struct] = {
    (born_v6, store_v6): _header_struct(_HOST_LENGTHS[born_v6], _HOST_LENGTHS[store_v6])
    for born_v6 in (False, True)
    for store_v6 in (False, True)
}
"""Record header structs keyed by (born host is IPv6, store host is IPv6)."""
assert HEADERS[(False, False)].size == 88
assert HEADERS[(True, True)].size == 88 + 24
RECORD_SIZE_MIN_BYTES = 91  # V1, IPv4 hosts, empty body, topic and properties


def decode_messages(body: bytes | bytearray | memoryview, *, broker_name: str = "") -> list[MessageExt]:
    """Every record of a pull / query body, in order; MessageDecodeError if one is malformed."""
    view = memoryview(body)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    messages: list[MessageExt] = []
    position = 0
    end = len(view)
    while position < end:
        message, position = decode_message(view, position, end)
        if broker_name:
            message.broker_name = broker_name
        messages.append(message)
    return messages


def decode_message(view: memoryview, position: int, end: int) -> tuple[MessageExt, int]:
    """The record at `position` (readable up to `end`) and the position after it."""
    if end - position < RECORD_SIZE_MIN_BYTES:
        raise MessageDecodeError(f"only {end - position} bytes left at position {position}, not a record")
    total, magic = _TOTAL_AND_MAGIC.unpack_from(view, position)
    if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
        raise MessageDecodeError(f"magic 0x{magic & 0xFFFFFFFF:08X} at position {position} is not a message")
    record_end = position + total
    if total < RECORD_SIZE_MIN_BYTES or record_end > end:
        raise MessageDecodeError(f"TOTALSIZE {total} at position {position} does not fit {end - position} bytes")
    sysflag = _SYSFLAG.unpack_from(view, position + _SYSFLAG_OFFSET)[0]
    header = HEADERS[(bool(sysflag & BORNHOST_V6_FLAG), bool(sysflag & STOREHOSTADDRESS_V6_FLAG))]
    (
        _total,
        _magic,
        body_crc,
        queue_id,
        flag,
        queue_offset,
        commitlog_offset,
        _sysflag,
        born_timestamp_ms,
        born_address,
        born_port,
        store_timestamp_ms,
        store_address,
        store_port,
        reconsume_times,
        prepared_transaction_offset,
        body_length,
    ) = header.unpack_from(view, position)
    raw_body, topic, properties = _variable_part(
        view, position, header.size, body_length, magic == MESSAGE_MAGIC_CODE_V2, record_end
    )
    store_key = (store_address, store_port)
    store_host = _HOSTS.get(store_key)
    if store_host is None:
        store_host = _remember_host(store_key)
    own_id = store_host[1] + f"{commitlog_offset & 0xFFFFFFFFFFFFFFFF:016X}"
    born_key = (born_address, born_port)
    born_host = _HOSTS.get(born_key)
    if born_host is None:
        born_host = _remember_host(born_key)
    keys = properties.get(PROPERTY_KEYS)
    message = MessageExt(
        topic=topic,
        body=decompress_body(raw_body, sysflag) if sysflag & COMPRESSED_FLAG else raw_body,
        tags=properties.get(PROPERTY_TAGS),
        keys=tuple(key for key in keys.split(KEY_SEPARATOR) if key) if keys else (),
        properties=properties,
        delay_time_level=_delay_level(properties),
        flag=flag,
        wait_store_msg_ok=properties.get(PROPERTY_WAIT_STORE_MSG_OK) != "false",
        queue_id=queue_id,
        queue_offset=queue_offset,
        commitlog_offset=commitlog_offset,
        sysflag=sysflag,
        born_timestamp_ms=born_timestamp_ms,
        born_host=born_host[0],
        store_timestamp_ms=store_timestamp_ms,
        store_host=store_host[0],
        msg_id=properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or own_id,
        offset_msg_id=own_id,
        reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset,
        body_crc=body_crc,
        store_size_bytes=total,
    )
    return message, record_end


_HOSTS: dict[tuple[bytes, int], tuple[str, str]] = {}
"""(address, port) -> ("ip:port", uppercase-hex id prefix): a pull brings many records from few hosts."""
_HOSTS_MAX_COUNT = 4096


def _remember_host(key: tuple[bytes, int]) -> tuple[str, str]:
    address, port = key
    entry = (format_host(address, port), offset_msg_id(address + port.to_bytes(4, "big", signed=True), 0)[:-16])
    if len(_HOSTS) >= _HOSTS_MAX_COUNT:
        _HOSTS.clear()
    _HOSTS[key] = entry
    return entry


def _variable_part(
    view: memoryview, position: int, header_size: int, body_length: int, v2: bool, record_end: int
) -> tuple[bytes, str, dict[str, str]]:
    """BODY, TOPIC and PROPERTIES of the record at `position`, each checked against its end."""
    at = position + header_size
    if body_length < 0 or at + body_length > record_end:
        raise MessageDecodeError(f"BODYLENGTH {body_length} overruns the record at position {position}")
    raw_body = bytes(view[at : at + body_length])
    at += body_length
    if v2:
        topic_length = _SHORT.unpack_from(view, at)[0]
        at += 2
    else:
        topic_length = view[at]
        at += 1
    if (topic_length > 127 and not v2) or topic_length < 0 or at + topic_length + 2 > record_end:
        raise MessageDecodeError(f"TOPICLENGTH {topic_length} is invalid in the record at position {position}")
    topic = _utf8(view[at : at + topic_length], position)
    at += topic_length
    properties_length = _SHORT.unpack_from(view, at)[0]
    at += 2
    if properties_length < 0 or at + properties_length != record_end:
        raise MessageDecodeError(
            f"PROPERTIESLENGTH {properties_length} does not end the record of TOTALSIZE "
            f"{record_end - position} at position {position}"
        )
    return raw_body, topic, decode_properties(_utf8(view[at:record_end], position))


def _utf8(data: memoryview, position: int) -> str:
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError as error:
        raise MessageDecodeError(f"record at position {position}: text is not UTF-8: {error}") from None


def _delay_level(properties: Mapping[str, str]) -> int:
    text = properties.get(PROPERTY_DELAY_TIME_LEVEL)
    if text is None or not text.isdigit() or len(text) > 9:
        return 0
    return int(text)


# --- compression (spec §1.11) ---


def compress_body(body: bytes) -> bytes:
    """zlib stream at DefaultMQProducer's level (the producer sets COMPRESSED_FLAG)."""
    return zlib.compress(body, limits.ZLIB_COMPRESSION_LEVEL)


def decompress_body(data: bytes, sysflag: int) -> bytes:
    """Inflate a body by the compression type in `sysflag`, at most INFLATED_BODY_SIZE_MAX_BYTES."""
    kind = (sysflag & COMPRESSION_TYPE_MASK) >> 8
    if kind in (0, COMPRESSION_ZLIB):
        return _inflate_zlib(data)
    if kind == COMPRESSION_LZ4:
        return _inflate_lz4(data)
    if kind == COMPRESSION_ZSTD:
        return _inflate_zstd(data)
    raise MessageDecodeError(f"unknown compression type {kind} in sysflag 0x{sysflag:X}")


def _inflate_zlib(data: bytes) -> bytes:
    inflater = zlib.decompressobj()
    try:
        inflated = inflater.decompress(data, limits.INFLATED_BODY_SIZE_MAX_BYTES)
    except zlib.error as error:
        raise MessageDecodeError(f"compressed body is not a zlib stream: {error}") from None
    if inflater.unconsumed_tail:
        raise MessageDecodeError(f"compressed body inflates beyond {limits.INFLATED_BODY_SIZE_MAX_BYTES} bytes")
    if not inflater.eof:
        raise MessageDecodeError("compressed body is a truncated zlib stream")
    return inflated


def _inflate_lz4(data: bytes) -> bytes:
    try:
        import lz4.frame  # noqa: PLC0415 - optional dependency
    except ImportError:
        raise UnsupportedCompressionError(
            "the message body is LZ4-compressed; install the 'lz4' package to read it"
        ) from None
    try:
        with lz4.frame.LZ4FrameFile(io.BytesIO(data)) as reader:
            inflated: bytes = reader.read(limits.INFLATED_BODY_SIZE_MAX_BYTES + 1)
    except (RuntimeError, OSError, EOFError) as error:
        raise MessageDecodeError(f"compressed body is not an LZ4 frame: {error}") from None
    return _bounded(inflated)


def _inflate_zstd(data: bytes) -> bytes:
    try:
        import zstandard  # noqa: PLC0415 - optional dependency
    except ImportError:
        raise UnsupportedCompressionError(
            "the message body is ZSTD-compressed; install the 'zstandard' package to read it"
        ) from None
    try:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as reader:
            inflated: bytes = reader.read(limits.INFLATED_BODY_SIZE_MAX_BYTES + 1)
    except zstandard.ZstdError as error:
        raise MessageDecodeError(f"compressed body is not a zstd frame: {error}") from None
    return _bounded(inflated)


def _bounded(inflated: bytes) -> bytes:
    if len(inflated) > limits.INFLATED_BODY_SIZE_MAX_BYTES:
        raise MessageDecodeError(f"compressed body inflates beyond {limits.INFLATED_BODY_SIZE_MAX_BYTES} bytes")
    return inflated


# --- what goes on the wire ---


def check_message(message: Message, body_size_max_bytes: int = limits.MESSAGE_BODY_SIZE_MAX_BYTES) -> None:
    """Validators.checkMessage: topic, a non-empty body within the size limit, a sane delay level."""
    check_topic(message.topic)
    if not message.body:
        raise InvalidMessageError("the message body is empty")
    if len(message.body) > body_size_max_bytes:
        raise InvalidMessageError(f"the message body is {len(message.body)} bytes, more than {body_size_max_bytes}")
    if message.delay_time_level < 0:
        raise InvalidMessageError(f"delay_time_level {message.delay_time_level} is negative")


def encode_wire_properties(properties: Mapping[str, str]) -> str:
    """The property string of a send, checked against PROPERTIES_LENGTH_MAX_BYTES."""
    text = encode_properties(properties)
    size = len(text.encode("utf-8")) if not text.isascii() else len(text)
    if size > limits.PROPERTIES_LENGTH_MAX_BYTES:
        raise InvalidMessageError(f"the properties are {size} bytes, more than {limits.PROPERTIES_LENGTH_MAX_BYTES}")
    return text


_BATCH_BLOCK_HEADER = struct.Struct(">iiiii")  # TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG, BODYLENGTH
assert _BATCH_BLOCK_HEADER.size == 20


def check_batch(messages: Sequence[Message]) -> None:
    """DefaultMQProducer.batch's rules: one topic, one WAIT value, no delay, no retry topic."""
    if not messages:
        raise InvalidMessageError("a batch needs at least one message")
    if len(messages) > limits.BATCH_MESSAGES_MAX_COUNT:
        raise InvalidMessageError(f"a batch holds at most {limits.BATCH_MESSAGES_MAX_COUNT} messages")
    first = messages[0]
    for message in messages:
        if message.topic != first.topic:
            raise InvalidMessageError("every message of a batch must have the same topic")
        if message.wait_store_msg_ok != first.wait_store_msg_ok:
            raise InvalidMessageError("every message of a batch must have the same wait_store_msg_ok")
        if message.delay_time_level > 0:
            raise InvalidMessageError("delayed messages cannot be sent in a batch")
        if message.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise InvalidMessageError("retry-topic messages cannot be sent in a batch")


def encode_batch(messages: Sequence[Message], uniq_keys: Sequence[str]) -> bytes:
    """The SEND_BATCH_MESSAGE body: one block per message, its own properties with its UNIQ_KEY."""
    assert len(messages) == len(uniq_keys)
    parts: list[bytes] = []
    for message, uniq_key in zip(messages, uniq_keys, strict=True):
        properties = encode_wire_properties(message.wire_properties(uniq_key)).encode("utf-8")
        body = message.body
        total = _BATCH_BLOCK_HEADER.size + len(body) + 2 + len(properties)
        parts.append(_BATCH_BLOCK_HEADER.pack(total, 0, 0, message.flag, len(body)))
        parts.append(body)
        parts.append(_SHORT.pack(len(properties)))
        parts.append(properties)
    return b"".join(parts)
