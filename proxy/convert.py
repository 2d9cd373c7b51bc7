"""Pure conversions between RocketMQ 5's gRPC messages and what the remoting brokers store.

    send_request(message, queue_id, producer_group, now_ms) -> (SEND_MESSAGE_V2 extFields, body)
    delivered(message_ext, receipt, ...)                     -> a v2 Message for ReceiveMessage
    encode_receipt(Receipt(...)) / decode_receipt(text)      -> the receipt handle, both ways

A v2 message's system properties map onto RocketMQ's message properties the way RocketMQ 5's
proxy maps them: tag -> TAGS, keys -> KEYS (space-joined), message_id -> UNIQ_KEY, message_group
-> __SHARDINGKEY, delivery_timestamp -> TIMER_DELIVER_MS, a TRANSACTION message -> TRAN_MSG and
PGROUP. User properties are kept as they are; on delivery every property that is not a system one
comes back as a user property.
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp

from shoal.client.message import MessageExt
from shoal.formats.properties import (
    DELAY_TIME_LEVEL,
    KEY_SEPARATOR,
    KEYS,
    PRODUCER_GROUP,
    REAL_TOPIC,
    SHARDING_KEY,
    START_DELIVER_TIME,
    TAGS,
    TIMER_DELAY_MS,
    TIMER_DELAY_SEC,
    TIMER_DELIVER_MS,
    TRANSACTION_PREPARED,
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    properties_to_string,
)
from shoal.formats.sysflag import TransactionType
from shoal.protocol.headers import SendMessageRequestHeaderV2
from shoal.protocol.v2 import definition_pb2 as v2
from shoal.proxy.errors import ProxyError
from shoal.proxy.limits import MESSAGE_BODY_MAX_BYTES

SYSTEM_PROPERTY_NAMES = frozenset(
    {
        TAGS,
        KEYS,
        UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        SHARDING_KEY,
        TIMER_DELIVER_MS,
        TIMER_DELAY_MS,
        TIMER_DELAY_SEC,
        START_DELIVER_TIME,
        DELAY_TIME_LEVEL,
        TRANSACTION_PREPARED,
        PRODUCER_GROUP,
        "WAIT",
        "MIN_OFFSET",
        "MAX_OFFSET",
        "CLUSTER",
        "REAL_TOPIC",
        "REAL_QID",
        "RETRY_TOPIC",
        "ORIGIN_MESSAGE_ID",
        "RECONSUME_TIME",
        "MAX_RECONSUME_TIMES",
        "CONSUME_START_TIME",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "TRANSACTION_CHECK_TIMES",
        "CHECK_IMMUNITY_TIME_IN_SECONDS",
        "MSG_REGION",
        "TRACE_ON",
        "POP_CK",
    }
)
"""Properties RocketMQ or Shoal set (MessageConst): never handed back as user properties."""

TIMESTAMP_SECONDS_MAX = 253_402_300_799
"""The largest `Timestamp.seconds` protobuf allows (9999-12-31T23:59:59Z)."""
RECEIPT_SEPARATOR = " "
RECEIPT_VERSION = "s1"


@dataclass(frozen=True, slots=True)
class Receipt:
    """What a receipt handle names: a lease of one message on one broker."""

    broker_name: str
    topic: str
    queue_id: int
    queue_offset: int
    pop_ms: int
    invisible_ms: int
    commitlog_offset: int

    def extra_info(self) -> str:
        """The broker's `extraInfo` for this lease (field 1 is the pop time, as RocketMQ 5 reads it)."""
        offset = self.queue_offset
        return f"{offset} {self.pop_ms} {self.invisible_ms} 0 0 {self.broker_name} {self.queue_id} {offset}"


@dataclass(frozen=True, slots=True)
class TransactionHandle:
    """What a v5 transaction id names: the half message END_TRANSACTION needs to find."""

    broker_name: str
    queue_offset: int
    """tranStateTableOffset: the half message's offset in RMQ_SYS_TRANS_HALF_TOPIC."""
    commitlog_offset: int


TRANSACTION_VERSION = "x1"


def encode_transaction(handle: TransactionHandle) -> str:
    return RECEIPT_SEPARATOR.join(
        (TRANSACTION_VERSION, str(handle.queue_offset), str(handle.commitlog_offset), handle.broker_name)
    )


def decode_transaction(text: str) -> TransactionHandle:
    """ProxyError(INVALID_TRANSACTION_ID) for anything this proxy did not write."""
    fields = text.split(RECEIPT_SEPARATOR, 3)
    if len(fields) != 4 or fields[0] != TRANSACTION_VERSION:
        raise ProxyError(v2.INVALID_TRANSACTION_ID, f"transaction id {text[:80]!r} is not one this proxy gave")
    try:
        return TransactionHandle(fields[3], int(fields[1]), int(fields[2]))
    except ValueError:
        raise ProxyError(v2.INVALID_TRANSACTION_ID, f"transaction id {text[:80]!r} is malformed") from None


def encode_receipt(receipt: Receipt) -> str:
    """Opaque to clients; the broker name comes last so that it may hold the separator."""
    return RECEIPT_SEPARATOR.join(
        (
            RECEIPT_VERSION,
            str(receipt.queue_id),
            str(receipt.queue_offset),
            str(receipt.pop_ms),
            str(receipt.invisible_ms),
            str(receipt.commitlog_offset),
            receipt.topic,
            receipt.broker_name,
        )
    )


def decode_receipt(text: str) -> Receipt:
    """ProxyError(INVALID_RECEIPT_HANDLE) for anything this proxy did not write."""
    fields = text.split(RECEIPT_SEPARATOR, 7)
    if len(fields) != 8 or fields[0] != RECEIPT_VERSION:
        raise ProxyError(v2.INVALID_RECEIPT_HANDLE, f"receipt handle {text[:80]!r} is not one this proxy gave")
    try:
        queue_id, queue_offset, pop_ms, invisible_ms, commitlog_offset = (int(value) for value in fields[1:6])
    except ValueError:
        raise ProxyError(v2.INVALID_RECEIPT_HANDLE, f"receipt handle {text[:80]!r} is malformed") from None
    return Receipt(fields[7], fields[6], queue_id, queue_offset, pop_ms, invisible_ms, commitlog_offset)


def timestamp_ms(timestamp: Timestamp) -> int:
    """Milliseconds since the epoch. rocketmq-python-client 5.1.2 writes a delivery time's
    milliseconds into `seconds`; a value past protobuf's range can only be that, and reads as such."""
    if timestamp.seconds > TIMESTAMP_SECONDS_MAX:
        return int(timestamp.seconds)
    return int(timestamp.seconds) * 1000 + int(timestamp.nanos) // 1_000_000


def message_type_of(message: v2.Message) -> int:
    system = message.system_properties
    if system.message_type != v2.MESSAGE_TYPE_UNSPECIFIED:
        return int(system.message_type)
    if system.HasField("message_group"):
        return v2.FIFO
    if system.HasField("delivery_timestamp"):
        return v2.DELAY
    return v2.NORMAL


def body_of(message: v2.Message) -> bytes:
    body = message.body
    if message.system_properties.body_encoding == v2.GZIP:
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError, zlib.error) as failure:
            raise ProxyError(v2.MESSAGE_CORRUPTED, f"the GZIP body does not inflate: {failure}") from None
    if len(body) > MESSAGE_BODY_MAX_BYTES:
        raise ProxyError(
            v2.MESSAGE_BODY_TOO_LARGE, f"the body has {len(body)} bytes, more than {MESSAGE_BODY_MAX_BYTES}"
        )
    return body


def send_request(message: v2.Message, queue_id: int, producer_group: str, now_ms: int) -> tuple[dict[str, str], bytes]:
    """SEND_MESSAGE_V2's extFields and body for one v2 message."""
    system = message.system_properties
    properties: dict[str, str] = {}
    for name, value in message.user_properties.items():
        if name in SYSTEM_PROPERTY_NAMES:
            raise ProxyError(v2.ILLEGAL_MESSAGE_PROPERTY_KEY, f"user property {name!r} is a system property name")
        properties[name] = value
    if system.HasField("tag"):
        if not system.tag or "|" in system.tag:
            raise ProxyError(v2.ILLEGAL_MESSAGE_TAG, f"tag {system.tag!r} is empty or holds '|'")
        properties[TAGS] = system.tag
    if system.keys:
        if any(not key or KEY_SEPARATOR in key for key in system.keys):
            raise ProxyError(v2.ILLEGAL_MESSAGE_KEY, "a key is empty or holds a space")
        properties[KEYS] = KEY_SEPARATOR.join(system.keys)
    if system.message_id:
        properties[UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = system.message_id
    kind = message_type_of(message)
    if system.HasField("message_group"):
        if kind != v2.FIFO:
            raise ProxyError(v2.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "only a FIFO message has a message group")
        properties[SHARDING_KEY] = system.message_group
    elif kind == v2.FIFO:
        raise ProxyError(v2.ILLEGAL_MESSAGE_GROUP, "a FIFO message needs a message group")
    if system.HasField("delivery_timestamp"):
        if kind != v2.DELAY:
            raise ProxyError(v2.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "only a DELAY message has a delivery timestamp")
        deliver_ms = timestamp_ms(system.delivery_timestamp)
        if deliver_ms > now_ms:
            properties[TIMER_DELIVER_MS] = str(deliver_ms)
    elif kind == v2.DELAY:
        raise ProxyError(v2.ILLEGAL_DELIVERY_TIME, "a DELAY message needs a delivery timestamp")
    sys_flag = 0
    if kind == v2.TRANSACTION:
        properties[TRANSACTION_PREPARED] = "true"
        properties[PRODUCER_GROUP] = producer_group
        sys_flag |= TransactionType.PREPARED_TYPE
    born_ms = timestamp_ms(system.born_timestamp) if system.HasField("born_timestamp") else now_ms
    try:
        encoded = properties_to_string(properties)
    except ValueError as failure:
        raise ProxyError(v2.ILLEGAL_MESSAGE_PROPERTY_KEY, str(failure)) from None
    header = SendMessageRequestHeaderV2(
        producer_group=producer_group,
        topic=message.topic.name,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=queue_id,
        sys_flag=sys_flag,
        born_timestamp_ms=born_ms,
        flag=0,
        properties=encoded,
        reconsume_times=0,
    )
    return header.to_ext_fields(), body_of(message)


def delivered(ext: MessageExt, receipt: Receipt | None, attempt: int, namespace: str) -> v2.Message:
    """The v2 message ReceiveMessage hands out for one leased record (`receipt`), or an orphaned
    transaction check shows its producer (no receipt: the half message's real topic)."""
    properties = ext.properties
    message = v2.Message()
    message.topic.name = properties.get(REAL_TOPIC, ext.topic) if receipt is None else ext.topic
    message.topic.resource_namespace = namespace
    for name, value in properties.items():
        if name not in SYSTEM_PROPERTY_NAMES:
            message.user_properties[name] = value
    system = message.system_properties
    tag = properties.get(TAGS)
    if tag:
        system.tag = tag
    keys = properties.get(KEYS)
    if keys:
        system.keys.extend(key for key in keys.split(KEY_SEPARATOR) if key)
    system.message_id = properties.get(UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or ext.msg_id
    system.body_encoding = v2.IDENTITY
    group = properties.get(SHARDING_KEY)
    deliver_at = properties.get(TIMER_DELIVER_MS)
    if group:
        system.message_type = v2.FIFO
        system.message_group = group
    elif deliver_at:
        system.message_type = v2.DELAY
        system.delivery_timestamp.FromMilliseconds(int(deliver_at))
    elif properties.get(TRANSACTION_PREPARED) == "true":
        system.message_type = v2.TRANSACTION
    else:
        system.message_type = v2.NORMAL
    system.born_timestamp.FromMilliseconds(ext.born_timestamp_ms)
    system.born_host = ext.born_host.rsplit(":", 1)[0]
    system.store_timestamp.FromMilliseconds(ext.store_timestamp_ms)
    system.store_host = ext.store_host
    system.queue_id = ext.queue_id
    system.queue_offset = ext.queue_offset
    if receipt is not None:
        system.receipt_handle = encode_receipt(receipt)
        system.invisible_duration.FromMilliseconds(receipt.invisible_ms)
        system.delivery_attempt = attempt
    system.body_digest.type = v2.CRC32
    system.body_digest.checksum = f"{zlib.crc32(ext.body) & 0xFFFFFFFF:08X}"
    message.body = ext.body
    return message
