"""Typed custom headers <-> `extFields` (spec §8.5, §8.8, §8.10, §8.11).

Java flattens each `…RequestHeader` / `…ResponseHeader` bean into `extFields`: one entry per
non-null field, key = Java field name, value = `toString()`. Here each header is a frozen
dataclass whose fields declare their Java name and Java type with `java(name, java_type)`:

    @dataclass(frozen=True, slots=True, kw_only=True)
    class GetRouteInfoRequestHeader(CustomHeader):
        topic: str = field(metadata=java("topic"))
        accept_standard_json_only: bool | None = field(default=None, metadata=java(...))

A field without a default is required (Java's `@CFNotNull`): `from_ext_fields` raises
`HeaderFieldError` naming it when it is missing, and for any value Java could not parse
(`Integer.parseInt` / `Long.parseLong` rules, with int/long ranges). Booleans follow
`Boolean.parseBoolean` (case-insensitive "true"), plus "1", which the C++ client sends
(real-clients.md §0.7). Unknown keys (`AccessKey`, `Signature`, `bname`, …) are ignored.
`to_ext_fields` writes every non-None field as a string.

Attribute names are the Java names in snake case, with the unit appended where Java leaves it
implicit (`bornTimestamp` -> `born_timestamp_ms`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, NamedTuple, Self

from shoal.formats.json_compat import parse_decimal
from shoal.formats.limits import LONG_MAX, LONG_MIN
from shoal.protocol.codes import RequestCode
from shoal.protocol.errors import EncodeError, HeaderFieldError
from shoal.protocol.limits import INT_MAX, INT_MIN


class JavaType(enum.Enum):
    """How a header field is written and parsed."""

    # Members are singletons compared by identity: the identity hash is consistent with that and is
    # computed in C (Enum's own hashes the name in Python; these are dict keys on every request).
    __hash__ = object.__hash__

    STRING = "String"
    INT = "int"
    LONG = "long"
    BOOLEAN = "boolean"


STRING = JavaType.STRING
INT = JavaType.INT
LONG = JavaType.LONG
BOOLEAN = JavaType.BOOLEAN

_RANGES = {INT: (INT_MIN, INT_MAX), LONG: (LONG_MIN, LONG_MAX)}
_FAST_DIGITS_MAX_COUNT = {INT: 9, LONG: 18}  # unsigned decimals this short always fit the type
_TRUE_TEXTS = frozenset({"true", "1"})
_METADATA_KEY = "shoal.protocol.java"


class FieldSpec(NamedTuple):
    """One header field: dataclass attribute, extFields key, Java type, `@CFNotNull`."""

    attribute: str
    java_name: str
    java_type: JavaType
    required: bool


def java(java_name: str, java_type: JavaType = STRING) -> dict[str, Any]:
    """Field metadata: the extFields key and the Java type of one header field."""
    return {_METADATA_KEY: (java_name, java_type)}


class CustomHeader:
    """Base of the typed headers: the generic extFields mapping, driven by field metadata."""

    __slots__ = ()
    _specs_cache: ClassVar[dict[type, tuple[FieldSpec, ...]]] = {}

    @classmethod
    def field_specs(cls) -> tuple[FieldSpec, ...]:
        """The (attribute, Java name, Java type, required) of each field, computed once."""
        specs = CustomHeader._specs_cache.get(cls)
        if specs is None:
            specs = tuple(_spec_of(item) for item in fields(cls))  # type: ignore[arg-type]
            CustomHeader._specs_cache[cls] = specs
        return specs

    @classmethod
    def from_ext_fields(cls, ext_fields: Mapping[str, str]) -> Self:
        """The header from a request's or response's extFields; HeaderFieldError if unusable."""
        return cls(**_parse_fields(cls.field_specs(), ext_fields, cls.__name__))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields entries of this header: every non-None field, as a string."""
        result: dict[str, str] = {}
        for attribute, java_name, java_type, _ in self.field_specs():
            value = getattr(self, attribute)
            if value is None:
                continue
            if java_type is STRING:
                result[java_name] = value
            elif java_type is BOOLEAN:
                result[java_name] = "true" if value else "false"
            else:
                low, high = _RANGES[java_type]
                if isinstance(value, bool) or not low <= value <= high:
                    name = f"{type(self).__name__}.{attribute}"
                    raise EncodeError(f"{name} = {value!r} is not a Java {java_type.value}")
                result[java_name] = str(int(value))
        return result


def _spec_of(item: Any) -> FieldSpec:
    java_name, java_type = item.metadata[_METADATA_KEY]
    required = item.default is MISSING and item.default_factory is MISSING
    return FieldSpec(item.name, java_name, java_type, required)


def _parse_fields(specs: tuple[FieldSpec, ...], ext_fields: Mapping[str, str], header_name: str) -> dict[str, Any]:
    """Constructor arguments from extFields; a hot path (every send and pull), hence inlined."""
    values: dict[str, Any] = {}
    get = ext_fields.get
    for attribute, java_name, java_type, required in specs:
        raw = get(java_name)
        if raw is None:
            if required:
                raise HeaderFieldError(java_name, f"the custom field <{java_name}> is null ({header_name})")
        elif java_type is STRING:
            values[attribute] = raw
        elif java_type is BOOLEAN:
            values[attribute] = raw == "true" or raw.lower() in _TRUE_TEXTS
        elif raw.isdigit() and raw.isascii() and len(raw) <= _FAST_DIGITS_MAX_COUNT[java_type]:
            values[attribute] = int(raw)
        else:
            values[attribute] = _parse_number(raw, java_name, java_type, header_name)
    return values


def _parse_number(raw: str, java_name: str, java_type: JavaType, header_name: str) -> int:
    """`Integer.parseInt` / `Long.parseLong` of `raw`, HeaderFieldError naming the field."""
    number = parse_decimal(raw)
    low, high = _RANGES[java_type]
    if number is None or not low <= number <= high:
        raise HeaderFieldError(
            java_name,
            f"the custom field <{java_name}> = {raw[:40]!r} is not a Java {java_type.value} ({header_name})",
        )
    return number


# --- send (spec §8.8 SEND_MESSAGE) ---


# Not frozen, like the other send and pull headers: one is built per message, and a frozen
# dataclass's __init__ (object.__setattr__ per field) costs 3.7x a plain one's (4.7 against 1.3 us).
@dataclass(slots=True, kw_only=True)
class SendMessageRequestHeader(CustomHeader):
    """SEND_MESSAGE (10), SEND_REPLY_MESSAGE (324); the form the broker works with."""

    producer_group: str = field(metadata=java("producerGroup"))
    topic: str = field(metadata=java("topic"))
    default_topic: str = field(metadata=java("defaultTopic"))
    default_topic_queue_nums: int = field(metadata=java("defaultTopicQueueNums", INT))
    queue_id: int = field(metadata=java("queueId", INT))
    sys_flag: int = field(metadata=java("sysFlag", INT))
    born_timestamp_ms: int = field(metadata=java("bornTimestamp", LONG))
    flag: int = field(metadata=java("flag", INT))
    properties: str | None = field(default=None, metadata=java("properties"))
    reconsume_times: int | None = field(default=None, metadata=java("reconsumeTimes", INT))
    unit_mode: bool = field(default=False, metadata=java("unitMode", BOOLEAN))
    max_reconsume_times: int | None = field(default=None, metadata=java("maxReconsumeTimes", INT))
    batch: bool = field(default=False, metadata=java("batch", BOOLEAN))
    bname: str | None = field(default=None, metadata=java("bname"))

    def to_v2(self) -> SendMessageRequestHeaderV2:
        """The compact single-letter form (SEND_MESSAGE_V2, SEND_BATCH_MESSAGE)."""
        return SendMessageRequestHeaderV2(**_attributes(self))


# Not frozen: built per message (see SendMessageRequestHeader).
@dataclass(slots=True, kw_only=True)
class SendMessageRequestHeaderV2(CustomHeader):
    """SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320), SEND_REPLY_MESSAGE_V2 (325): keys a..n."""

    producer_group: str = field(metadata=java("a"))
    topic: str = field(metadata=java("b"))
    default_topic: str = field(metadata=java("c"))
    default_topic_queue_nums: int = field(metadata=java("d", INT))
    queue_id: int = field(metadata=java("e", INT))
    sys_flag: int = field(metadata=java("f", INT))
    born_timestamp_ms: int = field(metadata=java("g", LONG))
    flag: int = field(metadata=java("h", INT))
    properties: str | None = field(default=None, metadata=java("i"))
    reconsume_times: int | None = field(default=None, metadata=java("j", INT))
    unit_mode: bool = field(default=False, metadata=java("k", BOOLEAN))
    max_reconsume_times: int | None = field(default=None, metadata=java("l", INT))
    batch: bool = field(default=False, metadata=java("m", BOOLEAN))
    bname: str | None = field(default=None, metadata=java("n"))

    def to_v1(self) -> SendMessageRequestHeader:
        """The long-named form, as the Java broker converts it before processing."""
        return SendMessageRequestHeader(**_attributes(self))


def _attributes(header: CustomHeader) -> dict[str, Any]:
    return {spec.attribute: getattr(header, spec.attribute) for spec in header.field_specs()}


_V2_SEND_CODES = frozenset(
    {RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2}
)


def send_message_request_header_of(code: int, ext_fields: Mapping[str, str]) -> SendMessageRequestHeader:
    """The send header of any send request code, V2 letters read straight into the long form."""
    if code in _V2_SEND_CODES:
        specs = SendMessageRequestHeaderV2.field_specs()  # same attributes, letter keys
        return SendMessageRequestHeader(**_parse_fields(specs, ext_fields, "SendMessageRequestHeaderV2"))
    return SendMessageRequestHeader.from_ext_fields(ext_fields)


# Not frozen: built per message (see SendMessageRequestHeader).
@dataclass(slots=True, kw_only=True)
class SendMessageResponseHeader(CustomHeader):
    """Response to the send codes. `MSG_REGION` and `TRACE_ON` are not bean fields in Java but
    extFields every successful send response carries (the Java client reads them unchecked)."""

    msg_id: str = field(metadata=java("msgId"))
    queue_id: int = field(metadata=java("queueId", INT))
    queue_offset: int = field(metadata=java("queueOffset", LONG))
    transaction_id: str | None = field(default=None, metadata=java("transactionId"))
    msg_region: str | None = field(default=None, metadata=java("MSG_REGION"))
    trace_on: bool | None = field(default=None, metadata=java("TRACE_ON", BOOLEAN))


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplyMessageRequestHeader(CustomHeader):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326): the broker hands a request-reply answer to the requester."""

    producer_group: str = field(metadata=java("producerGroup"))
    topic: str = field(metadata=java("topic"))
    default_topic: str = field(metadata=java("defaultTopic"))
    default_topic_queue_nums: int = field(metadata=java("defaultTopicQueueNums", INT))
    queue_id: int = field(metadata=java("queueId", INT))
    sys_flag: int = field(metadata=java("sysFlag", INT))
    born_timestamp_ms: int = field(metadata=java("bornTimestamp", LONG))
    flag: int = field(metadata=java("flag", INT))
    properties: str | None = field(default=None, metadata=java("properties"))
    reconsume_times: int | None = field(default=None, metadata=java("reconsumeTimes", INT))
    unit_mode: bool = field(default=False, metadata=java("unitMode", BOOLEAN))
    born_host: str = field(metadata=java("bornHost"))
    """ip:port of the responder's connection."""
    store_host: str = field(metadata=java("storeHost"))
    store_timestamp_ms: int = field(metadata=java("storeTimestamp", LONG))


# --- pull and offsets ---


# Not frozen: built per message (see SendMessageRequestHeader).
@dataclass(slots=True, kw_only=True)
class PullMessageRequestHeader(CustomHeader):
    """PULL_MESSAGE (11); `sys_flag` bits are `codes.PullSysFlag`."""

    consumer_group: str = field(metadata=java("consumerGroup"))
    topic: str = field(metadata=java("topic"))
    queue_id: int = field(metadata=java("queueId", INT))
    queue_offset: int = field(metadata=java("queueOffset", LONG))
    max_msg_nums: int = field(metadata=java("maxMsgNums", INT))
    sys_flag: int = field(metadata=java("sysFlag", INT))
    commit_offset: int = field(metadata=java("commitOffset", LONG))
    suspend_timeout_ms: int = field(metadata=java("suspendTimeoutMillis", LONG))
    subscription: str | None = field(default=None, metadata=java("subscription"))
    sub_version: int = field(metadata=java("subVersion", LONG))
    expression_type: str | None = field(default=None, metadata=java("expressionType"))
    bname: str | None = field(default=None, metadata=java("bname"))


# Not frozen: built per message (see SendMessageRequestHeader).
@dataclass(slots=True, kw_only=True)
class PullMessageResponseHeader(CustomHeader):
    """Response to PULL_MESSAGE; remark = GetMessageStatus name, body = raw records."""

    suggest_which_broker_id: int = field(metadata=java("suggestWhichBrokerId", LONG))
    next_begin_offset: int = field(metadata=java("nextBeginOffset", LONG))
    min_offset: int = field(metadata=java("minOffset", LONG))
    max_offset: int = field(metadata=java("maxOffset", LONG))


@dataclass(frozen=True, slots=True, kw_only=True)
class PopMessageRequestHeader(CustomHeader):
    """POP_MESSAGE (200050, RocketMQ 5.x): lease up to `max_msg_nums` messages of one queue (or
    every readable queue with `queue_id` -1) for `invisible_time_ms`, holding up to `poll_time_ms`
    for one to arrive. `exp_type`/`exp` filter as a subscription does (TAG or SQL92); `order`
    leases a queue's messages one batch at a time (FIFO groups)."""

    consumer_group: str = field(metadata=java("consumerGroup"))
    topic: str = field(metadata=java("topic"))
    queue_id: int = field(metadata=java("queueId", INT))
    max_msg_nums: int = field(metadata=java("maxMsgNums", INT))
    invisible_time_ms: int = field(metadata=java("invisibleTime", LONG))
    poll_time_ms: int = field(metadata=java("pollTime", LONG))
    born_time_ms: int = field(metadata=java("bornTime", LONG))
    init_mode: int = field(default=0, metadata=java("initMode", INT))
    exp_type: str | None = field(default=None, metadata=java("expType"))
    exp: str | None = field(default=None, metadata=java("exp"))
    order: bool = field(default=False, metadata=java("order", BOOLEAN))


@dataclass(frozen=True, slots=True, kw_only=True)
class PopMessageResponseHeader(CustomHeader):
    """Response to POP_MESSAGE; body = the leased records, each with its reconsume times set to
    its delivery attempt - 1. `msg_offset_info` lists `queueId offset attempt` per record
    (`;`-separated), the lease's identity is `pop_time_ms`."""

    pop_time_ms: int = field(metadata=java("popTime", LONG))
    invisible_time_ms: int = field(metadata=java("invisibleTime", LONG))
    revive_qid: int = field(default=0, metadata=java("reviveQid", INT))
    rest_num: int = field(default=0, metadata=java("restNum", LONG))
    msg_offset_info: str | None = field(default=None, metadata=java("msgOffsetInfo"))


@dataclass(frozen=True, slots=True, kw_only=True)
class AckMessageRequestHeader(CustomHeader):
    """ACK_MESSAGE (200051): end the lease `extra_info` names (its pop time is field 1, as in
    RocketMQ's ExtraInfoUtil) of the message at `offset`."""

    consumer_group: str = field(metadata=java("consumerGroup"))
    topic: str = field(metadata=java("topic"))
    queue_id: int = field(metadata=java("queueId", INT))
    extra_info: str = field(metadata=java("extraInfo"))
    offset: int = field(metadata=java("offset", LONG))


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeInvisibleTimeRequestHeader(CustomHeader):
    """CHANGE_MESSAGE_INVISIBLETIME (200053): make the leased message visible again in
    `invisible_time_ms`; the answer names the new lease (`popTime`), the old one ends."""

    consumer_group: str = field(metadata=java("consumerGroup"))
    topic: str = field(metadata=java("topic"))
    queue_id: int = field(metadata=java("queueId", INT))
    extra_info: str = field(metadata=java("extraInfo"))
    offset: int = field(metadata=java("offset", LONG))
    invisible_time_ms: int = field(metadata=java("invisibleTime", LONG))


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeInvisibleTimeResponseHeader(CustomHeader):
    """Response to CHANGE_MESSAGE_INVISIBLETIME."""

    pop_time_ms: int = field(metadata=java("popTime", LONG))
    invisible_time_ms: int = field(metadata=java("invisibleTime", LONG))
    revive_qid: int = field(default=0, metadata=java("reviveQid", INT))


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryConsumerOffsetRequestHeader(CustomHeader):
    """QUERY_CONSUMER_OFFSET (14)."""

    consumer_group: str = field(metadata=java("consumerGroup"))
    topic: str = field(metadata=java("topic"))
    queue_id: int = field(metadata=java("queueId", INT))


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryConsumerOffsetResponseHeader(CustomHeader):
    """Response to QUERY_CONSUMER_OFFSET: the next logical offset to consume."""

    offset: int = field(metadata=java("offset", LONG))


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateConsumerOffsetRequestHeader(CustomHeader):
    """UPDATE_CONSUMER_OFFSET (15), usually oneway; the response has no header fields."""

    consumer_group: str = field(metadata=java("consumerGroup"))
    topic: str = field(metadata=java("topic"))
    queue_id: int = field(metadata=java("queueId", INT))
    commit_offset: int = field(metadata=java("commitOffset", LONG))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetMaxOffsetRequestHeader(CustomHeader):
    """GET_MAX_OFFSET (30)."""

    topic: str = field(metadata=java("topic"))
    queue_id: int = field(metadata=java("queueId", INT))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetMaxOffsetResponseHeader(CustomHeader):
    """Response to GET_MAX_OFFSET: the ConsumeQueue's next offset."""

    offset: int = field(metadata=java("offset", LONG))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetMinOffsetRequestHeader(CustomHeader):
    """GET_MIN_OFFSET (31)."""

    topic: str = field(metadata=java("topic"))
    queue_id: int = field(metadata=java("queueId", INT))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetMinOffsetResponseHeader(CustomHeader):
    """Response to GET_MIN_OFFSET."""

    offset: int = field(metadata=java("offset", LONG))


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchOffsetRequestHeader(CustomHeader):
    """SEARCH_OFFSET_BY_TIMESTAMP (29)."""

    topic: str = field(metadata=java("topic"))
    queue_id: int = field(metadata=java("queueId", INT))
    timestamp_ms: int = field(metadata=java("timestamp", LONG))


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchOffsetResponseHeader(CustomHeader):
    """Response to SEARCH_OFFSET_BY_TIMESTAMP."""

    offset: int = field(metadata=java("offset", LONG))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetEarliestMsgStoretimeRequestHeader(CustomHeader):
    """GET_EARLIEST_MSG_STORETIME (32)."""

    topic: str = field(metadata=java("topic"))
    queue_id: int = field(metadata=java("queueId", INT))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetEarliestMsgStoretimeResponseHeader(CustomHeader):
    """Response to GET_EARLIEST_MSG_STORETIME (-1 for an empty or unknown queue)."""

    timestamp_ms: int = field(metadata=java("timestamp", LONG))


# --- lookups ---


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewMessageRequestHeader(CustomHeader):
    """VIEW_MESSAGE_BY_ID (33): a physical CommitLog offset."""

    offset: int = field(metadata=java("offset", LONG))


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryMessageRequestHeader(CustomHeader):
    """QUERY_MESSAGE (12); `_UNIQUE_KEY_QUERY` is an extra extField, not a Java bean field."""

    topic: str = field(metadata=java("topic"))
    key: str = field(metadata=java("key"))
    max_num: int = field(metadata=java("maxNum", INT))
    begin_timestamp_ms: int = field(metadata=java("beginTimestamp", LONG))
    end_timestamp_ms: int = field(metadata=java("endTimestamp", LONG))
    unique_key_query: bool | None = field(default=None, metadata=java("_UNIQUE_KEY_QUERY", BOOLEAN))


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryMessageResponseHeader(CustomHeader):
    """Response to QUERY_MESSAGE; body = concatenated raw records."""

    index_last_update_timestamp_ms: int = field(metadata=java("indexLastUpdateTimestamp", LONG))
    index_last_update_phyoffset: int = field(metadata=java("indexLastUpdatePhyoffset", LONG))


# --- clients, consumers, transactions ---


@dataclass(frozen=True, slots=True, kw_only=True)
class GetConsumerListByGroupRequestHeader(CustomHeader):
    """GET_CONSUMER_LIST_BY_GROUP (38)."""

    consumer_group: str = field(metadata=java("consumerGroup"))


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterClientRequestHeader(CustomHeader):
    """UNREGISTER_CLIENT (35); the C++ client sends the unused group as ""."""

    client_id: str = field(metadata=java("clientID"))
    producer_group: str | None = field(default=None, metadata=java("producerGroup"))
    consumer_group: str | None = field(default=None, metadata=java("consumerGroup"))


@dataclass(frozen=True, slots=True, kw_only=True)
class NotifyConsumerIdsChangedRequestHeader(CustomHeader):
    """NOTIFY_CONSUMER_IDS_CHANGED (40), broker -> client, oneway."""

    consumer_group: str = field(metadata=java("consumerGroup"))


@dataclass(frozen=True, slots=True, kw_only=True)
class LockBatchMqRequestHeader(CustomHeader):
    """LOCK_BATCH_MQ (41): everything is in the body; 4.9.x sends no header fields at all."""

    bname: str | None = field(default=None, metadata=java("bname"))


@dataclass(frozen=True, slots=True, kw_only=True)
class UnlockBatchMqRequestHeader(CustomHeader):
    """UNLOCK_BATCH_MQ (42): everything is in the body."""

    bname: str | None = field(default=None, metadata=java("bname"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerSendMsgBackRequestHeader(CustomHeader):
    """CONSUMER_SEND_MSG_BACK (36): `offset` is the physical offset of the consumed message."""

    offset: int = field(metadata=java("offset", LONG))
    group: str = field(metadata=java("group"))
    delay_level: int = field(metadata=java("delayLevel", INT))
    origin_msg_id: str | None = field(default=None, metadata=java("originMsgId"))
    origin_topic: str | None = field(default=None, metadata=java("originTopic"))
    unit_mode: bool = field(default=False, metadata=java("unitMode", BOOLEAN))
    max_reconsume_times: int | None = field(default=None, metadata=java("maxReconsumeTimes", INT))


@dataclass(frozen=True, slots=True, kw_only=True)
class EndTransactionRequestHeader(CustomHeader):
    """END_TRANSACTION (37); commit_or_rollback: 0 unknown, 8 commit, 12 rollback."""

    producer_group: str = field(metadata=java("producerGroup"))
    tran_state_table_offset: int = field(metadata=java("tranStateTableOffset", LONG))
    commit_log_offset: int = field(metadata=java("commitLogOffset", LONG))
    commit_or_rollback: int = field(metadata=java("commitOrRollback", INT))
    from_transaction_check: bool = field(default=False, metadata=java("fromTransactionCheck", BOOLEAN))
    msg_id: str = field(metadata=java("msgId"))
    transaction_id: str | None = field(default=None, metadata=java("transactionId"))


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckTransactionStateRequestHeader(CustomHeader):
    """CHECK_TRANSACTION_STATE (39), broker -> producer, oneway; body = the half message."""

    tran_state_table_offset: int = field(metadata=java("tranStateTableOffset", LONG))
    commit_log_offset: int = field(metadata=java("commitLogOffset", LONG))
    msg_id: str | None = field(default=None, metadata=java("msgId"))
    transaction_id: str | None = field(default=None, metadata=java("transactionId"))
    offset_msg_id: str | None = field(default=None, metadata=java("offsetMsgId"))


# --- topics and admin ---


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicRequestHeader(CustomHeader):
    """UPDATE_AND_CREATE_TOPIC (17)."""

    topic: str = field(metadata=java("topic"))
    default_topic: str = field(metadata=java("defaultTopic"))
    read_queue_nums: int = field(metadata=java("readQueueNums", INT))
    write_queue_nums: int = field(metadata=java("writeQueueNums", INT))
    perm: int = field(metadata=java("perm", INT))
    topic_filter_type: str = field(metadata=java("topicFilterType"))
    topic_sys_flag: int | None = field(default=None, metadata=java("topicSysFlag", INT))
    order: bool = field(default=False, metadata=java("order", BOOLEAN))
    attributes: str | None = field(default=None, metadata=java("attributes"))
    """5.x: `+message.type=FIFO,-key` (formats/topic_attributes.py); absent from 4.x admins."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicRequestHeader(CustomHeader):
    """DELETE_TOPIC_IN_BROKER (215), DELETE_TOPIC_IN_NAMESRV (216)."""

    topic: str = field(metadata=java("topic"))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetTopicConfigRequestHeader(CustomHeader):
    """GET_TOPIC_CONFIG (351, RocketMQ 5.x): one topic's config; body = its TopicConfig JSON."""

    topic: str = field(metadata=java("topic"))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetSubscriptionGroupConfigRequestHeader(CustomHeader):
    """GET_SUBSCRIPTIONGROUP_CONFIG (352, RocketMQ 5.x): one group's config; body = its JSON."""

    group: str = field(metadata=java("group"))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetTopicStatsInfoRequestHeader(CustomHeader):
    """GET_TOPIC_STATS_INFO (202)."""

    topic: str = field(metadata=java("topic"))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetConsumeStatsRequestHeader(CustomHeader):
    """GET_CONSUME_STATS (208)."""

    consumer_group: str = field(metadata=java("consumerGroup"))
    topic: str | None = field(default=None, metadata=java("topic"))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetConsumeStatsInBrokerRequestHeader(CustomHeader):
    """GET_BROKER_CONSUME_STATS (317), Java's GetConsumeStatsInBrokerHeader: `isOrder` keeps only
    order topics (mqadmin brokerConsumeStats -o true)."""

    is_order: bool = field(metadata=java("isOrder", BOOLEAN))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetBrokerConfigResponseHeader(CustomHeader):
    """GET_BROKER_CONFIG (26) response: the configuration's DataVersion as JSON."""

    version: str = field(metadata=java("version"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewBrokerStatsDataRequestHeader(CustomHeader):
    """VIEW_BROKER_STATS_DATA (315): one BrokerStatsManager item (e.g. TOPIC_PUT_NUMS, topic)."""

    stats_name: str = field(metadata=java("statsName"))
    stats_key: str = field(metadata=java("statsKey"))


# --- nameserver (spec §8.10) ---


@dataclass(frozen=True, slots=True, kw_only=True)
class GetRouteInfoRequestHeader(CustomHeader):
    """GET_ROUTEINFO_BY_TOPIC (105)."""

    topic: str = field(metadata=java("topic"))
    accept_standard_json_only: bool | None = field(default=None, metadata=java("acceptStandardJsonOnly", BOOLEAN))


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerRequestHeader(CustomHeader):
    """REGISTER_BROKER (103); body = RegisterBrokerBody (zlib-compressed when `compressed`)."""

    broker_name: str = field(metadata=java("brokerName"))
    broker_addr: str = field(metadata=java("brokerAddr"))
    cluster_name: str = field(metadata=java("clusterName"))
    ha_server_addr: str = field(metadata=java("haServerAddr"))
    broker_id: int = field(metadata=java("brokerId", LONG))
    compressed: bool = field(default=False, metadata=java("compressed", BOOLEAN))
    body_crc32: int = field(default=0, metadata=java("bodyCrc32", INT))


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerResponseHeader(CustomHeader):
    """Response to REGISTER_BROKER: set for a slave whose master is registered."""

    ha_server_addr: str | None = field(default=None, metadata=java("haServerAddr"))
    master_addr: str | None = field(default=None, metadata=java("masterAddr"))


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterBrokerRequestHeader(CustomHeader):
    """UNREGISTER_BROKER (104)."""

    broker_name: str = field(metadata=java("brokerName"))
    broker_addr: str = field(metadata=java("brokerAddr"))
    cluster_name: str = field(metadata=java("clusterName"))
    broker_id: int = field(metadata=java("brokerId", LONG))


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryDataVersionRequestHeader(CustomHeader):
    """QUERY_DATA_VERSION (322); body = the broker's DataVersion."""

    broker_name: str = field(metadata=java("brokerName"))
    broker_addr: str = field(metadata=java("brokerAddr"))
    cluster_name: str = field(metadata=java("clusterName"))
    broker_id: int = field(metadata=java("brokerId", LONG))


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryDataVersionResponseHeader(CustomHeader):
    """Response to QUERY_DATA_VERSION."""

    changed: bool = field(metadata=java("changed", BOOLEAN))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetKVConfigRequestHeader(CustomHeader):
    """GET_KV_CONFIG (101)."""

    namespace: str = field(metadata=java("namespace"))
    key: str = field(metadata=java("key"))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetKVConfigResponseHeader(CustomHeader):
    """Response to GET_KV_CONFIG."""

    value: str | None = field(default=None, metadata=java("value"))


@dataclass(frozen=True, slots=True, kw_only=True)
class PutKVConfigRequestHeader(CustomHeader):
    """PUT_KV_CONFIG (100)."""

    namespace: str = field(metadata=java("namespace"))
    key: str = field(metadata=java("key"))
    value: str = field(metadata=java("value"))


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteKVConfigRequestHeader(CustomHeader):
    """DELETE_KV_CONFIG (102)."""

    namespace: str = field(metadata=java("namespace"))
    key: str = field(metadata=java("key"))


@dataclass(frozen=True, slots=True, kw_only=True)
class WipeWritePermOfBrokerRequestHeader(CustomHeader):
    """WIPE_WRITE_PERM_OF_BROKER (205), ADD_WRITE_PERM_OF_BROKER (327)."""

    broker_name: str = field(metadata=java("brokerName"))


@dataclass(frozen=True, slots=True, kw_only=True)
class WipeWritePermOfBrokerResponseHeader(CustomHeader):
    """Response to WIPE_WRITE_PERM_OF_BROKER."""

    wipe_topic_count: int = field(metadata=java("wipeTopicCount", INT))


@dataclass(frozen=True, slots=True, kw_only=True)
class AddWritePermOfBrokerResponseHeader(CustomHeader):
    """Response to ADD_WRITE_PERM_OF_BROKER."""

    add_topic_count: int = field(metadata=java("addTopicCount", INT))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetTopicsByClusterRequestHeader(CustomHeader):
    """GET_TOPICS_BY_CLUSTER (224)."""

    cluster: str = field(metadata=java("cluster"))


# --- subscription groups, connections and offset resets ---


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteSubscriptionGroupRequestHeader(CustomHeader):
    """DELETE_SUBSCRIPTIONGROUP (207): `removeOffset` also forgets the group's committed offsets."""

    group_name: str = field(metadata=java("groupName"))
    remove_offset: bool = field(default=False, metadata=java("removeOffset", BOOLEAN))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetProducerConnectionListRequestHeader(CustomHeader):
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producer_group: str = field(metadata=java("producerGroup"))


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryTopicConsumeByWhoRequestHeader(CustomHeader):
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""

    topic: str = field(metadata=java("topic"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ResetOffsetRequestHeader(CustomHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220, broker to client).

    `timestamp` -1 means each queue's max offset; `isForce` false moves offsets backwards only."""

    topic: str = field(metadata=java("topic"))
    group: str = field(metadata=java("group"))
    timestamp_ms: int = field(metadata=java("timestamp", LONG))
    is_force: bool = field(metadata=java("isForce", BOOLEAN))


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumeMessageDirectlyResultRequestHeader(CustomHeader):
    """CONSUME_MESSAGE_DIRECTLY (309): admin -> broker -> one consumer; `msgId` is an offset message id."""

    consumer_group: str = field(metadata=java("consumerGroup"))
    client_id: str | None = field(default=None, metadata=java("clientId"))
    msg_id: str | None = field(default=None, metadata=java("msgId"))
    broker_name: str | None = field(default=None, metadata=java("brokerName"))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetConsumerRunningInfoRequestHeader(CustomHeader):
    """GET_CONSUMER_RUNNING_INFO (307): admin -> broker -> one consumer (mqadmin consumerStatus)."""

    consumer_group: str = field(metadata=java("consumerGroup"))
    client_id: str = field(metadata=java("clientId"))
    jstack_enable: bool = field(default=False, metadata=java("jstackEnable", BOOLEAN))


REQUEST_HEADER_OF_CODE: dict[RequestCode, type[CustomHeader]] = {
    RequestCode.SEND_MESSAGE: SendMessageRequestHeader,
    RequestCode.SEND_REPLY_MESSAGE: SendMessageRequestHeader,
    RequestCode.SEND_MESSAGE_V2: SendMessageRequestHeaderV2,
    RequestCode.SEND_BATCH_MESSAGE: SendMessageRequestHeaderV2,
    RequestCode.SEND_REPLY_MESSAGE_V2: SendMessageRequestHeaderV2,
    RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT: ReplyMessageRequestHeader,
    RequestCode.PULL_MESSAGE: PullMessageRequestHeader,
    RequestCode.QUERY_MESSAGE: QueryMessageRequestHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetRequestHeader,
    RequestCode.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetRequestHeader,
    RequestCode.UPDATE_AND_CREATE_TOPIC: CreateTopicRequestHeader,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetRequestHeader,
    RequestCode.GET_MAX_OFFSET: GetMaxOffsetRequestHeader,
    RequestCode.GET_MIN_OFFSET: GetMinOffsetRequestHeader,
    RequestCode.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeRequestHeader,
    RequestCode.VIEW_MESSAGE_BY_ID: ViewMessageRequestHeader,
    RequestCode.UNREGISTER_CLIENT: UnregisterClientRequestHeader,
    RequestCode.CONSUMER_SEND_MSG_BACK: ConsumerSendMsgBackRequestHeader,
    RequestCode.END_TRANSACTION: EndTransactionRequestHeader,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupRequestHeader,
    RequestCode.CHECK_TRANSACTION_STATE: CheckTransactionStateRequestHeader,
    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: NotifyConsumerIdsChangedRequestHeader,
    RequestCode.LOCK_BATCH_MQ: LockBatchMqRequestHeader,
    RequestCode.UNLOCK_BATCH_MQ: UnlockBatchMqRequestHeader,
    RequestCode.PUT_KV_CONFIG: PutKVConfigRequestHeader,
    RequestCode.GET_KV_CONFIG: GetKVConfigRequestHeader,
    RequestCode.DELETE_KV_CONFIG: DeleteKVConfigRequestHeader,
    RequestCode.REGISTER_BROKER: RegisterBrokerRequestHeader,
    RequestCode.UNREGISTER_BROKER: UnregisterBrokerRequestHeader,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: GetRouteInfoRequestHeader,
    RequestCode.GET_TOPIC_STATS_INFO: GetTopicStatsInfoRequestHeader,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerRequestHeader,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerRequestHeader,
    RequestCode.GET_CONSUME_STATS: GetConsumeStatsRequestHeader,
    RequestCode.GET_BROKER_CONSUME_STATS: GetConsumeStatsInBrokerRequestHeader,
    RequestCode.VIEW_BROKER_STATS_DATA: ViewBrokerStatsDataRequestHeader,
    RequestCode.DELETE_TOPIC_IN_BROKER: DeleteTopicRequestHeader,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: DeleteTopicRequestHeader,
    RequestCode.GET_TOPICS_BY_CLUSTER: GetTopicsByClusterRequestHeader,
    RequestCode.QUERY_DATA_VERSION: QueryDataVersionRequestHeader,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: DeleteSubscriptionGroupRequestHeader,
    RequestCode.GET_PRODUCER_CONNECTION_LIST: GetProducerConnectionListRequestHeader,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: QueryTopicConsumeByWhoRequestHeader,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: ResetOffsetRequestHeader,
    RequestCode.RESET_CONSUMER_CLIENT_OFFSET: ResetOffsetRequestHeader,
    RequestCode.CONSUME_MESSAGE_DIRECTLY: ConsumeMessageDirectlyResultRequestHeader,
    RequestCode.GET_CONSUMER_RUNNING_INFO: GetConsumerRunningInfoRequestHeader,
}
"""The request header class of each request code that has one (Java's processor mapping)."""
