"""Messages as applications see them, their property string, and the records pulls return.

`Message` is what a producer sends; `MessageExt` is a decoded CommitLog record (spec §1.2) as
pulls, VIEW_MESSAGE_BY_ID and QUERY_MESSAGE return them; `decode_messages` reads a body of
concatenated records; `encode_batch` writes a SEND_BATCH_MESSAGE body (spec §1.10). The record
layout, the batch body, the property string, the sysflag bits and the topic rules are RocketMQ's
formats, declared once in `shoal.formats` (record, batch, properties, sysflag, topics); this module
checks and decodes with them and raises the client's errors.
"""

from __future__ import annotations

import functools
import io
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from shoal.client import limits
from shoal.client.errors import InvalidMessageError, MessageDecodeError, UnsupportedCompressionError
from shoal.formats import limits as formats_limits
from shoal.formats import properties as property_string
from shoal.formats import record, topics
from shoal.formats.batch import encode_batch_body, encode_batch_body_with_prefix
from shoal.formats.compiled import compiled_module
from shoal.formats.errors import PropertiesError
from shoal.formats.message_id import format_host, offset_msg_id
from shoal.formats.sysflag import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    CompressionType,
    compression_type,
)

# --- property keys (MessageConst, spec §1.7): shoal.formats.properties' under the client's names ---
PROPERTY_KEYS = property_string.KEYS
PROPERTY_TAGS = property_string.TAGS
PROPERTY_WAIT_STORE_MSG_OK = property_string.WAIT_STORE_MSG_OK
PROPERTY_DELAY_TIME_LEVEL = property_string.DELAY_TIME_LEVEL
PROPERTY_RETRY_TOPIC = property_string.RETRY_TOPIC
PROPERTY_REAL_TOPIC = property_string.REAL_TOPIC
PROPERTY_REAL_QUEUE_ID = property_string.REAL_QUEUE_ID
PROPERTY_TRANSACTION_PREPARED = property_string.TRANSACTION_PREPARED
PROPERTY_PRODUCER_GROUP = property_string.PRODUCER_GROUP
PROPERTY_MIN_OFFSET = property_string.MIN_OFFSET
PROPERTY_MAX_OFFSET = property_string.MAX_OFFSET
PROPERTY_ORIGIN_MESSAGE_ID = property_string.ORIGIN_MESSAGE_ID
PROPERTY_RECONSUME_TIME = property_string.RECONSUME_TIME
PROPERTY_MAX_RECONSUME_TIMES = property_string.MAX_RECONSUME_TIMES
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = property_string.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
PROPERTY_CONSUME_START_TIMESTAMP = property_string.CONSUME_START_TIMESTAMP
PROPERTY_CLUSTER = property_string.CLUSTER
KEY_SEPARATOR = property_string.KEY_SEPARATOR


def encode_properties(message_properties: Mapping[str, str]) -> str:
    """`messageProperties2String` (shoal.formats.properties); InvalidMessageError for an empty
    name or value, or one holding a separator."""
    try:
        return property_string.properties_to_string(message_properties)
    except PropertiesError as error:
        raise InvalidMessageError(str(error)) from None


def check_topic(topic: str, *, for_send: bool = True) -> None:
    """Validators.checkTopic (TopicValidator's rules); for a send, also the topics no client may
    send to (the broker's own, and TBW102). Topics a send passed are remembered (a producer sends
    to few), so the pattern match runs once per topic, not once per message."""
    if for_send and topic in _SENDABLE_TOPICS:
        return
    problem = topics.validate_topic_name(topic)
    if problem is not None:
        raise InvalidMessageError(f"topic {topic[:40]!r}: {problem}")
    if for_send and (topic in topics.NOT_ALLOWED_SEND_TOPICS or topic == topics.TBW102):
        raise InvalidMessageError(f"sending to topic {topic!r} is forbidden")
    if for_send:
        if len(_SENDABLE_TOPICS) >= limits.SENDABLE_TOPICS_REMEMBERED_MAX_COUNT:
            _SENDABLE_TOPICS.clear()
        _SENDABLE_TOPICS.add(topic)


_SENDABLE_TOPICS: set[str] = set()
"""Topic names `check_topic` has passed for a send."""


def check_group(group: str) -> None:
    """Validators.checkGroup: a producer or consumer group name (1..255 characters)."""
    problem = topics.validate_group_name(group, formats_limits.GROUP_NAME_MAX_CHARS)
    if problem is not None:
        raise ValueError(problem)


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


# --- record decoding (the layout: shoal.formats.record) ---

_unpack_total_and_magic = record.TAIL.unpack_from
_unpack_int = record.INT.unpack_from
_unpack_short = record.SHORT.unpack_from


def decode_messages(
    body: bytes | bytearray | memoryview, *, broker_name: str = "", extra_properties: Mapping[str, str] | None = None
) -> list[MessageExt]:
    """Every record of a pull / query body, in order; MessageDecodeError if one is malformed.

    One pass over one memoryview; `extra_properties` (a pull's MIN_OFFSET / MAX_OFFSET) are added
    to each message's properties as it is decoded, not in a second loop. Compiled
    (`_decode_speedups.c`) when built; `python_decode_messages` is the reference."""
    if _compiled is not None:
        decoded: list[MessageExt] | None = _compiled.decode_records(
            body, MessageExt, _SLOTS, _HOSTS, broker_name, dict(extra_properties) if extra_properties else None
        )
        if decoded is not None:
            return decoded
    return python_decode_messages(body, broker_name=broker_name, extra_properties=extra_properties)


def python_decode_messages(
    body: bytes | bytearray | memoryview, *, broker_name: str = "", extra_properties: Mapping[str, str] | None = None
) -> list[MessageExt]:
    """`decode_messages` in Python: the reference, and the path for what the compiled decoder
    leaves to it (a malformed or compressed record, V2 or non-UTF-8 text, a host not seen yet)."""
    view = memoryview(body)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    messages: list[MessageExt] = []
    append = messages.append
    position = 0
    end = len(view)
    while position < end:
        message, position = decode_message(view, position, end, broker_name)
        if extra_properties:
            message.properties.update(extra_properties)
        append(message)
    return messages


_new_object = object.__new__


def decode_message(view: memoryview, position: int, end: int, broker_name: str = "") -> tuple[MessageExt, int]:
    """The record at `position` (readable up to `end`) and the position after it.

    The message is filled slot by slot rather than through the dataclass `__init__` (23 keyword
    arguments and `__post_init__` cost about a fifth of a record's decode); `DECODED_FIELDS`
    lists what is filled and `tests/client/test_message.py` checks it is every field."""
    if end - position < record.FIXED_LENGTH_V4:
        raise MessageDecodeError(f"only {end - position} bytes left at position {position}, not a record")
    total, magic = _unpack_total_and_magic(view, position)
    if magic != record.MESSAGE_MAGIC_CODE and magic != record.MESSAGE_MAGIC_CODE_V2:  # noqa: PLR1714 (hot path)
        raise MessageDecodeError(f"magic 0x{magic & 0xFFFFFFFF:08X} at position {position} is not a message")
    record_end = position + total
    if total < record.FIXED_LENGTH_V4 or record_end > end:
        raise MessageDecodeError(f"TOTALSIZE {total} at position {position} does not fit {end - position} bytes")
    sysflag = _unpack_int(view, position + record.SYSFLAG_OFFSET)[0]
    header = record.HEADERS[(20 if sysflag & BORNHOST_V6_FLAG else 8, 20 if sysflag & STOREHOSTADDRESS_V6_FLAG else 8)]
    if header.size > total:  # IPv6 hosts lengthen the header past FIXED_LENGTH_V4
        raise MessageDecodeError(f"TOTALSIZE {total} at position {position} is shorter than its header")
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
        born_host_bytes,
        store_timestamp_ms,
        store_host_bytes,
        reconsume_times,
        prepared_transaction_offset,
        body_length,
    ) = header.unpack_from(view, position)
    raw_body, topic, properties = _variable_part(
        view, position, header.size, body_length, magic == record.MESSAGE_MAGIC_CODE_V2, record_end
    )
    store_host = _HOSTS.get(store_host_bytes)
    if store_host is None:
        store_host = _remember_host(store_host_bytes)
    own_id = store_host[1] + f"{commitlog_offset & 0xFFFFFFFFFFFFFFFF:016X}"
    born_host = _HOSTS.get(born_host_bytes)
    if born_host is None:
        born_host = _remember_host(born_host_bytes)
    get = properties.get
    keys = get(PROPERTY_KEYS)
    message: MessageExt = _new_object(MessageExt)
    message.topic = topic
    message.body = decompress_body(raw_body, sysflag) if sysflag & COMPRESSED_FLAG else raw_body
    message.tags = get(PROPERTY_TAGS)
    message.keys = tuple(key for key in keys.split(KEY_SEPARATOR) if key) if keys else ()
    message.properties = properties
    message.delay_time_level = _delay_level(properties) if PROPERTY_DELAY_TIME_LEVEL in properties else 0
    message.flag = flag
    message.wait_store_msg_ok = get(PROPERTY_WAIT_STORE_MSG_OK) != "false"
    message.queue_id = queue_id
    message.queue_offset = queue_offset
    message.commitlog_offset = commitlog_offset
    message.sysflag = sysflag
    message.born_timestamp_ms = born_timestamp_ms
    message.born_host = born_host[0]
    message.store_timestamp_ms = store_timestamp_ms
    message.store_host = store_host[0]
    message.msg_id = get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or own_id
    message.offset_msg_id = own_id
    message.reconsume_times = reconsume_times
    message.prepared_transaction_offset = prepared_transaction_offset
    message.body_crc = body_crc
    message.store_size_bytes = total
    message.broker_name = broker_name
    return message, record_end


DECODED_FIELDS = (
    *("topic", "body", "tags", "keys", "properties", "delay_time_level", "flag", "wait_store_msg_ok"),
    *("queue_id", "queue_offset", "commitlog_offset", "sysflag", "born_timestamp_ms", "born_host"),
    *("store_timestamp_ms", "store_host", "msg_id", "offset_msg_id", "reconsume_times"),
    *("prepared_transaction_offset", "body_crc", "store_size_bytes", "broker_name"),
)
"""The fields `decode_message` fills: all of MessageExt's (a slots dataclass has no defaults to fall back on)."""

_compiled = compiled_module("shoal.client._decode_speedups")
COMPILED = _compiled is not None
"""Whether `decode_messages` runs the compiled decoder first."""

_SLOTS = tuple(getattr(MessageExt, name) for name in DECODED_FIELDS)
"""DECODED_FIELDS' member descriptors: where the compiled decoder stores each field."""


_HOSTS: dict[bytes, tuple[str, str]] = {}
"""BORNHOST/STOREHOST bytes -> ("ip:port", uppercase-hex id prefix): a pull brings many records from few hosts."""
_HOSTS_MAX_COUNT = 4096


def _remember_host(key: bytes) -> tuple[str, str]:
    entry = (format_host(key[:-4], int.from_bytes(key[-4:], "big", signed=True)), offset_msg_id(key, 0)[:-16])
    if len(_HOSTS) >= _HOSTS_MAX_COUNT:
        _HOSTS.clear()
    _HOSTS[key] = entry
    return entry


def _variable_part(
    view: memoryview, position: int, header_size: int, body_length: int, v2: bool, record_end: int
) -> tuple[bytes, str, dict[str, str]]:
    """BODY, TOPIC and PROPERTIES of the record at `position`, each checked against its end."""
    at = position + header_size
    if body_length < 0 or at + body_length + (2 if v2 else 1) + 2 > record_end:
        raise MessageDecodeError(f"BODYLENGTH {body_length} overruns the record at position {position}")
    raw_body = bytes(view[at : at + body_length])
    at += body_length
    if v2:
        topic_length = _unpack_short(view, at)[0]
        at += 2
    else:
        topic_length = view[at]
        at += 1
    if (
        (topic_length > formats_limits.TOPIC_LENGTH_MAX_BYTES and not v2)
        or topic_length < 0
        or at + topic_length + 2 > record_end
    ):
        raise MessageDecodeError(f"TOPICLENGTH {topic_length} is invalid in the record at position {position}")
    topic = _utf8(view[at : at + topic_length], position)
    at += topic_length
    properties_length = _unpack_short(view, at)[0]
    at += 2
    if properties_length < 0 or at + properties_length != record_end:
        raise MessageDecodeError(
            f"PROPERTIESLENGTH {properties_length} does not end the record of TOTALSIZE "
            f"{record_end - position} at position {position}"
        )
    return raw_body, topic, property_string.decode_properties(_utf8(view[at:record_end], position))


def _utf8(data: memoryview, position: int) -> str:
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError as error:
        raise MessageDecodeError(f"record at position {position}: text is not UTF-8: {error}") from None


def _delay_level(properties: Mapping[str, str]) -> int:
    text = properties.get(PROPERTY_DELAY_TIME_LEVEL)
    if text is None or not text.isascii() or not text.isdigit() or len(text) > limits.DELAY_DIGITS_MAX:
        return 0
    return int(text)


# --- compression (spec §1.11) ---


def compress_body(body: bytes) -> bytes:
    """zlib stream at DefaultMQProducer's level (the producer sets COMPRESSED_FLAG)."""
    return zlib.compress(body, limits.ZLIB_COMPRESSION_LEVEL)


def decompress_body(data: bytes, sysflag: int) -> bytes:
    """Inflate a body by the compression type in `sysflag`, at most INFLATED_BODY_SIZE_MAX_BYTES."""
    try:
        kind = compression_type(sysflag | COMPRESSED_FLAG)
    except ValueError:
        raise MessageDecodeError(f"unknown compression type in sysflag 0x{sysflag:X}") from None
    if kind == CompressionType.ZLIB:
        return _inflate_zlib(data)
    if kind == CompressionType.LZ4:
        return _inflate_lz4(data)
    return _inflate_zstd(data)


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
        if message.topic.startswith(topics.RETRY_GROUP_TOPIC_PREFIX):
            raise InvalidMessageError("retry-topic messages cannot be sent in a batch")


def is_plain(message: Message) -> bool:
    """Whether the message's property string is only its tags, WAIT and a UNIQ_KEY to be given
    (`plain_properties_prefix` writes it)."""
    return not message.properties and not message.keys and message.delay_time_level <= 0


@functools.lru_cache(maxsize=limits.TAGGED_PROPERTY_PREFIXES_REMEMBERED_MAX_COUNT)
def plain_properties_prefix(tags: str | None, wait_store_msg_ok: bool) -> str:
    """The property string of a plain message (`is_plain`) up to its UNIQ_KEY's value: what
    `encode_wire_properties` writes, and checked by it (a tag with a separator raises), once per
    tag (a producer sends few) instead of once per message."""
    placeholder = "x"
    message = Message(topic="", body=b"", tags=tags, wait_store_msg_ok=wait_store_msg_ok)
    text = encode_wire_properties(message.wire_properties(placeholder))
    assert text.endswith(placeholder)
    return text[: -len(placeholder)]


def wire_properties_text(message: Message, uniq_key: str) -> str:
    """The property string a send carries (`encode_wire_properties` of `wire_properties`), a plain
    message's from its remembered prefix; InvalidMessageError as `encode_wire_properties`."""
    if is_plain(message):
        text = plain_properties_prefix(message.tags or None, message.wait_store_msg_ok) + uniq_key
        if len(text) * 4 <= limits.PROPERTIES_LENGTH_MAX_BYTES:  # short enough in any encoding
            return text
    return encode_wire_properties(message.wire_properties(uniq_key))


def encode_batch(messages: Sequence[Message], uniq_keys: Sequence[str]) -> bytes:
    """The SEND_BATCH_MESSAGE body: one block per message, its own properties with its UNIQ_KEY."""
    assert len(messages) == len(uniq_keys)
    first = messages[0]
    tags, wait = first.tags, first.wait_store_msg_ok
    if all(is_plain(message) and message.tags == tags and message.wait_store_msg_ok == wait for message in messages):
        # What a batch usually is: every property string is one prefix and a fresh key.
        prefix = plain_properties_prefix(tags or None, wait).encode("utf-8")
        if all(uniq_key.isascii() for uniq_key in uniq_keys):
            longest = len(prefix) + max(len(uniq_key) for uniq_key in uniq_keys)
            if longest <= limits.PROPERTIES_LENGTH_MAX_BYTES:
                return encode_batch_body_with_prefix(
                    [(message.flag, message.body) for message in messages], prefix, uniq_keys
                )
    return encode_batch_body(
        (message.flag, message.body, wire_properties_text(message, uniq_key).encode("utf-8"))
        for message, uniq_key in zip(messages, uniq_keys, strict=True)
    )
