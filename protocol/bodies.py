"""The JSON bodies clients exchange with a broker (spec §8.8, §8.9, §13) as dataclasses.

Every body has `to_json() -> bytes` and `from_json(data)`, plus `to_dict` / `from_dict` for
nesting (base class `JsonBody`). Field names on the wire are Java's; output is compact, fields in
alphabetical order, nulls omitted, enums by name (fastjson's bean form). Input is tolerant
(`json_compat`): bare numeric map keys, object map keys, numbers as strings, enum ordinals (the
C++ client), missing fields (Java's defaults) and unknown extra fields are all accepted; anything
else raises `BodyFormatError` naming the path of the bad value.

Maps keyed by a number (offset tables) are written with quoted keys, which every Java reader
accepts; maps keyed by a MessageQueue (TopicStatsTable, ConsumeStats) are written with fastjson's
object keys, the only form the Java admin tools can read (gotcha 9). Topic, route and
registration bodies are in `route_bodies`.
"""

from __future__ import annotations

import abc
import re
from dataclasses import dataclass, field
from typing import Self, TypeVar

from shoal.formats.json_compat import JsonKey, JsonValue, ObjectKey, dumps, dumps_fastjson
from shoal.protocol.codes import ConsumeFromWhere, ConsumeType, MessageModel
from shoal.protocol.errors import BodyFormatError
from shoal.protocol.json_compat import ObjectReader, coerce_int, loads, map_key_to_int, map_key_to_str

JsonObject = dict[JsonKey, JsonValue]
_B = TypeVar("_B", bound="JsonBody")


class JsonBody(abc.ABC):
    """Base of the bodies: JSON bytes <-> dataclass through `to_dict` / `from_dict`."""

    __slots__ = ()

    @abc.abstractmethod
    def to_dict(self) -> JsonObject:
        """The Java bean as a JSON object, fields in alphabetical order."""

    @classmethod
    @abc.abstractmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        """The body from a parsed JSON value; `path` prefixes error messages."""

    def to_json(self) -> bytes:
        """Compact UTF-8 JSON."""
        return dumps(self.to_dict()).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse a body as Java or the C++ client writes it."""
        return cls.from_dict(loads(data), cls.__name__)


def parse_each(reader: ObjectReader, name: str, body_type: type[_B]) -> tuple[_B, ...]:
    """Array `name` of the object in `reader`, each member parsed as `body_type`."""
    path = reader.at(name)
    return tuple(body_type.from_dict(member, f"{path}[{index}]") for index, member in enumerate(reader.array(name)))


# --- clients (HEART_BEAT, consumer lists) ---


@dataclass(frozen=True, slots=True)
class SubscriptionData(JsonBody):
    """One subscription of a consumer group; `code_set` holds Java `String.hashCode`s of tags
    (the C++ client sends `atoi(tag)` instead, so never trust it from that client)."""

    topic: str
    sub_string: str = "*"
    tags_set: tuple[str, ...] = ()
    code_set: tuple[int, ...] = ()
    sub_version: int = 0
    expression_type: str = "TAG"
    class_filter_mode: bool = False

    def to_dict(self) -> JsonObject:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": list(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": list(self.tags_set),
            "topic": self.topic,
        }

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        return cls(
            topic=reader.text("topic"),
            sub_string=reader.text("subString", "*"),
            tags_set=reader.texts("tagsSet"),
            code_set=reader.integers("codeSet"),
            sub_version=reader.integer("subVersion"),
            expression_type=reader.text("expressionType", "TAG") or "TAG",
            class_filter_mode=reader.boolean("classFilterMode"),
        )


@dataclass(frozen=True, slots=True)
class ConsumerData(JsonBody):
    """A consumer group as one client runs it."""

    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscription_data_set: tuple[SubscriptionData, ...] = ()
    unit_mode: bool = False

    def to_dict(self) -> JsonObject:
        return {
            "consumeFromWhere": self.consume_from_where.value,
            "consumeType": self.consume_type.value,
            "groupName": self.group_name,
            "messageModel": self.message_model.value,
            "subscriptionDataSet": [item.to_dict() for item in self.subscription_data_set],
            "unitMode": self.unit_mode,
        }

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        return cls(
            group_name=reader.text("groupName"),
            consume_type=reader.enumeration("consumeType", ConsumeType, ConsumeType.CONSUME_PASSIVELY),
            message_model=reader.enumeration("messageModel", MessageModel, MessageModel.CLUSTERING),
            consume_from_where=reader.enumeration(
                "consumeFromWhere", ConsumeFromWhere, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
            ),
            subscription_data_set=parse_each(reader, "subscriptionDataSet", SubscriptionData),
            unit_mode=reader.boolean("unitMode"),
        )


@dataclass(frozen=True, slots=True)
class ProducerData(JsonBody):
    """A producer group a client runs: `{"groupName":…}`."""

    group_name: str

    def to_dict(self) -> JsonObject:
        return {"groupName": self.group_name}

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        return cls(group_name=ObjectReader(value, path).text("groupName"))


@dataclass(frozen=True, slots=True)
class HeartbeatData(JsonBody):
    """HEART_BEAT body; the C++ client omits empty sets (they default to empty here)."""

    client_id: str
    producer_data_set: tuple[ProducerData, ...] = ()
    consumer_data_set: tuple[ConsumerData, ...] = ()

    def to_dict(self) -> JsonObject:
        return {
            "clientID": self.client_id,
            "consumerDataSet": [item.to_dict() for item in self.consumer_data_set],
            "producerDataSet": [item.to_dict() for item in self.producer_data_set],
        }

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        return cls(
            client_id=reader.text("clientID"),
            producer_data_set=parse_each(reader, "producerDataSet", ProducerData),
            consumer_data_set=parse_each(reader, "consumerDataSet", ConsumerData),
        )


@dataclass(frozen=True, slots=True)
class CheckClientRequestBody(JsonBody):
    """CHECK_CLIENT_CONFIG body: the subscription a consumer is about to use (sent for SQL92 ones)."""

    client_id: str = ""
    group: str = ""
    subscription_data: SubscriptionData | None = None

    def to_dict(self) -> JsonObject:
        result: JsonObject = {"clientId": self.client_id, "group": self.group}
        if self.subscription_data is not None:
            result["subscriptionData"] = self.subscription_data.to_dict()
        return result

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        subscription = reader.get("subscriptionData")
        return cls(
            client_id=reader.text("clientId"),
            group=reader.text("group"),
            subscription_data=None
            if subscription is None
            else SubscriptionData.from_dict(subscription, reader.at("subscriptionData")),
        )


@dataclass(frozen=True, slots=True)
class GetConsumerListByGroupResponseBody(JsonBody):
    """GET_CONSUMER_LIST_BY_GROUP response: `{"consumerIdList":[…]}`."""

    consumer_id_list: tuple[str, ...] = ()

    def to_dict(self) -> JsonObject:
        return {"consumerIdList": list(self.consumer_id_list)}

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        return cls(consumer_id_list=ObjectReader(value, path).texts("consumerIdList"))


# --- message queues, locks (spec §8.8, §13) ---

_MQ_TO_STRING = re.compile(r"MessageQueue \[topic=(.*), brokerName=(.*), queueId=(-?[0-9]+)\]")


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue(JsonBody):
    """A queue of a topic on a broker; ordered like Java's compareTo (topic, broker, queue)."""

    topic: str
    broker_name: str
    queue_id: int

    def to_dict(self) -> JsonObject:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        return cls(
            topic=reader.text("topic"),
            broker_name=reader.text("brokerName"),
            queue_id=reader.integer("queueId"),
        )

    def to_object_key(self) -> ObjectKey:
        """This queue as a fastjson map key."""
        return ObjectKey.from_dict(self.to_dict())

    @classmethod
    def from_map_key(cls, key: JsonKey, path: str) -> Self:
        """A queue from a map key: a fastjson object key, JSON text, or Java's `toString()`."""
        if isinstance(key, ObjectKey):
            return cls.from_dict(key.to_dict(), path)
        match = _MQ_TO_STRING.fullmatch(key)
        if match is not None:
            return cls(match.group(1), match.group(2), int(match.group(3)))
        if key.startswith("{"):
            return cls.from_dict(loads(key), path)
        raise BodyFormatError(f"{path}: map key {key[:80]!r} is not a MessageQueue")


@dataclass(frozen=True, slots=True)
class LockBatchRequestBody(JsonBody):
    """LOCK_BATCH_MQ body: `{"clientId","consumerGroup","mqSet":[…]}`."""

    consumer_group: str
    client_id: str
    mq_set: tuple[MessageQueue, ...] = ()

    def to_dict(self) -> JsonObject:
        return {
            "clientId": self.client_id,
            "consumerGroup": self.consumer_group,
            "mqSet": [queue.to_dict() for queue in self.mq_set],
        }

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        return cls(
            consumer_group=reader.text("consumerGroup"),
            client_id=reader.text("clientId"),
            mq_set=parse_each(reader, "mqSet", MessageQueue),
        )


@dataclass(frozen=True, slots=True)
class UnlockBatchRequestBody(LockBatchRequestBody):
    """UNLOCK_BATCH_MQ body: the same shape as the lock request."""


@dataclass(frozen=True, slots=True)
class LockBatchResponseBody(JsonBody):
    """LOCK_BATCH_MQ response: the queues now locked by the caller."""

    lock_ok_mq_set: tuple[MessageQueue, ...] = ()

    def to_dict(self) -> JsonObject:
        return {"lockOKMQSet": [queue.to_dict() for queue in self.lock_ok_mq_set]}

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        return cls(lock_ok_mq_set=parse_each(ObjectReader(value, path), "lockOKMQSet", MessageQueue))


# --- offsets and admin statistics (spec §7.4, §7.6, §8.8) ---


@dataclass(frozen=True, slots=True)
class ConsumerOffsetSerializeWrapper(JsonBody):
    """GET_ALL_CONSUMER_OFFSET body / consumerOffset.json: `{"offsetTable":{"t@g":{0:5}}}`."""

    offset_table: dict[str, dict[int, int]] = field(default_factory=dict)

    def to_dict(self) -> JsonObject:
        return {"offsetTable": {key: _int_map_out(offsets) for key, offsets in self.offset_table.items()}}

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        table_path = reader.at("offsetTable")
        table: dict[str, dict[int, int]] = {}
        for key, offsets in reader.mapping("offsetTable").items():
            name = map_key_to_str(key, table_path)
            table[name] = _int_map_in(offsets, f"{table_path}[{name!r}]")
        return cls(offset_table=table)


@dataclass(frozen=True, slots=True)
class DelayOffsetSerializeWrapper(JsonBody):
    """GET_ALL_DELAY_OFFSET body / delayOffset.json: `{"offsetTable":{level:offset}}`."""

    offset_table: dict[int, int] = field(default_factory=dict)

    def to_dict(self) -> JsonObject:
        return {"offsetTable": _int_map_out(self.offset_table)}

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        return cls(offset_table=_int_map_in(reader.get("offsetTable") or {}, reader.at("offsetTable")))


def _int_map_out(table: dict[int, int]) -> JsonObject:
    return {str(key): value for key, value in table.items()}


def _int_map_in(value: JsonValue, path: str) -> dict[int, int]:
    if not isinstance(value, dict):
        raise BodyFormatError(f"{path}: expected an object")
    return {map_key_to_int(key, path): coerce_int(member, f"{path}[{key!r}]") for key, member in value.items()}


@dataclass(frozen=True, slots=True)
class TopicOffset(JsonBody):
    """Offsets of one queue in GET_TOPIC_STATS_INFO."""

    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp_ms: int = 0

    def to_dict(self) -> JsonObject:
        return {
            "lastUpdateTimestamp": self.last_update_timestamp_ms,
            "maxOffset": self.max_offset,
            "minOffset": self.min_offset,
        }

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        return cls(
            min_offset=reader.integer("minOffset"),
            max_offset=reader.integer("maxOffset"),
            last_update_timestamp_ms=reader.integer("lastUpdateTimestamp"),
        )


@dataclass(frozen=True, slots=True)
class TopicStatsTable(JsonBody):
    """GET_TOPIC_STATS_INFO body; written with fastjson object keys (Java can read no other)."""

    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)

    def to_dict(self) -> JsonObject:
        return {"offsetTable": {mq.to_object_key(): offset.to_dict() for mq, offset in self.offset_table.items()}}

    def to_json(self) -> bytes:
        return dumps_fastjson(self.to_dict()).encode("utf-8")

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        table_path = reader.at("offsetTable")
        table: dict[MessageQueue, TopicOffset] = {}
        for key, member in reader.mapping("offsetTable").items():
            mq = MessageQueue.from_map_key(key, f"{table_path} key")
            table[mq] = TopicOffset.from_dict(member, f"{table_path}[{mq}]")
        return cls(offset_table=table)


@dataclass(frozen=True, slots=True)
class OffsetWrapper(JsonBody):
    """Offsets of one queue for one group in GET_CONSUME_STATS."""

    broker_offset: int = 0
    consumer_offset: int = 0
    last_timestamp_ms: int = 0

    def to_dict(self) -> JsonObject:
        return {
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "lastTimestamp": self.last_timestamp_ms,
        }

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        return cls(
            broker_offset=reader.integer("brokerOffset"),
            consumer_offset=reader.integer("consumerOffset"),
            last_timestamp_ms=reader.integer("lastTimestamp"),
        )


@dataclass(frozen=True, slots=True)
class ConsumeStats(JsonBody):
    """GET_CONSUME_STATS body; written with fastjson object keys (Java can read no other)."""

    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def to_dict(self) -> JsonObject:
        return {
            "consumeTps": self.consume_tps,
            "offsetTable": {mq.to_object_key(): offset.to_dict() for mq, offset in self.offset_table.items()},
        }

    def to_json(self) -> bytes:
        return dumps_fastjson(self.to_dict()).encode("utf-8")

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        table_path = reader.at("offsetTable")
        table: dict[MessageQueue, OffsetWrapper] = {}
        for key, member in reader.mapping("offsetTable").items():
            mq = MessageQueue.from_map_key(key, f"{table_path} key")
            table[mq] = OffsetWrapper.from_dict(member, f"{table_path}[{mq}]")
        return cls(offset_table=table, consume_tps=reader.number("consumeTps"))


@dataclass(frozen=True, slots=True)
class ConsumeStatsList(JsonBody):
    """GET_BROKER_CONSUME_STATS (317) body (mqadmin brokerConsumeStats): for each subscription group,
    `{group: [ConsumeStats of each topic it committed offsets on]}`, and the lag summed over all.
    Written with fastjson object keys, as ConsumeStats."""

    broker_addr: str = ""
    consume_stats_list: tuple[dict[str, tuple[ConsumeStats, ...]], ...] = ()
    total_diff: int = 0

    def to_dict(self) -> JsonObject:
        return {
            "brokerAddr": self.broker_addr,
            "consumeStatsList": [
                {group: [stats.to_dict() for stats in per_topic] for group, per_topic in entry.items()}
                for entry in self.consume_stats_list
            ],
            "totalDiff": self.total_diff,
        }

    def to_json(self) -> bytes:
        return dumps_fastjson(self.to_dict()).encode("utf-8")

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        list_path = reader.at("consumeStatsList")
        entries: list[dict[str, tuple[ConsumeStats, ...]]] = []
        for index, member in enumerate(reader.array("consumeStatsList")):
            entry_path = f"{list_path}[{index}]"
            if not isinstance(member, dict):
                raise BodyFormatError(f"{entry_path}: expected an object of group -> [ConsumeStats]")
            entry: dict[str, tuple[ConsumeStats, ...]] = {}
            for key, per_topic in member.items():
                group = map_key_to_str(key, entry_path)
                if not isinstance(per_topic, list):
                    raise BodyFormatError(f"{entry_path}[{group}]: expected an array of ConsumeStats")
                entry[group] = tuple(
                    ConsumeStats.from_dict(stats, f"{entry_path}[{group}][{position}]")
                    for position, stats in enumerate(per_topic)
                )
            entries.append(entry)
        return cls(
            broker_addr=reader.text("brokerAddr"),
            consume_stats_list=tuple(entries),
            total_diff=reader.integer("totalDiff"),
        )


# --- subscription groups, connections and offset resets (AdminBrokerProcessor, Broker2Client) ---


@dataclass(frozen=True, slots=True)
class GroupList(JsonBody):
    """QUERY_TOPIC_CONSUME_BY_WHO response: `{"groupList":[…]}`."""

    group_list: tuple[str, ...] = ()

    def to_dict(self) -> JsonObject:
        return {"groupList": list(self.group_list)}

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        return cls(group_list=ObjectReader(value, path).texts("groupList"))


@dataclass(frozen=True, slots=True)
class ClientConnection(JsonBody):
    """One client connection (Java's `Connection`): id, `ip:port`, language name, MQVersion ordinal."""

    client_id: str
    client_addr: str
    language: str
    version: int

    def to_dict(self) -> JsonObject:
        return {
            "clientAddr": self.client_addr,
            "clientId": self.client_id,
            "language": self.language,
            "version": self.version,
        }

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        return cls(
            client_id=reader.text("clientId"),
            client_addr=reader.text("clientAddr"),
            language=reader.text("language"),
            version=reader.integer("version"),
        )


@dataclass(frozen=True, slots=True)
class ProducerConnection(JsonBody):
    """GET_PRODUCER_CONNECTION_LIST response: `{"connectionSet":[…]}`."""

    connection_set: tuple[ClientConnection, ...] = ()

    def to_dict(self) -> JsonObject:
        return {"connectionSet": [item.to_dict() for item in self.connection_set]}

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        return cls(connection_set=parse_each(ObjectReader(value, path), "connectionSet", ClientConnection))


@dataclass(frozen=True, slots=True)
class ResetOffsetBody(JsonBody):
    """RESET_CONSUMER_CLIENT_OFFSET request and INVOKE_BROKER_TO_RESET_OFFSET response body:
    `{"offsetTable":{<MessageQueue>:offset}}`, written with fastjson object keys (Java can read no other)."""

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)

    def to_dict(self) -> JsonObject:
        return {"offsetTable": {mq.to_object_key(): offset for mq, offset in self.offset_table.items()}}

    def to_json(self) -> bytes:
        return dumps_fastjson(self.to_dict()).encode("utf-8")

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        table_path = reader.at("offsetTable")
        table: dict[MessageQueue, int] = {}
        for key, member in reader.mapping("offsetTable").items():
            mq = MessageQueue.from_map_key(key, f"{table_path} key")
            table[mq] = coerce_int(member, f"{table_path}[{mq}]")
        return cls(offset_table=table)


@dataclass(frozen=True, slots=True)
class ResetOffsetBodyForC(JsonBody):
    """RESET_CONSUMER_CLIENT_OFFSET body for C++ clients (`isC`): `{"offsetTable":[{topic,
    brokerName, queueId, offset}]}`, a list because the C++ client cannot read object keys."""

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)

    def to_dict(self) -> JsonObject:
        rows: list[JsonValue] = [{**mq.to_dict(), "offset": offset} for mq, offset in sorted(self.offset_table.items())]
        return {"offsetTable": rows}

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        table_path = reader.at("offsetTable")
        table: dict[MessageQueue, int] = {}
        for index, row in enumerate(reader.array("offsetTable")):
            where = f"{table_path}[{index}]"
            table[MessageQueue.from_dict(row, where)] = ObjectReader(row, where).integer("offset")
        return cls(offset_table=table)


@dataclass(frozen=True, slots=True)
class ConsumerRunningInfo(JsonBody):
    """GET_CONSUMER_RUNNING_INFO response (mqadmin consumerStatus), Java's ConsumerRunningInfo: the
    client's properties, its subscriptions, per queue its ProcessQueueInfo and per topic its consume
    status. The per-queue and per-topic figures are kept as name -> value, as the JSON gave them:
    their fields differ between client versions, and readers only show them."""

    properties: dict[str, str] = field(default_factory=dict)
    subscriptions: tuple[SubscriptionData, ...] = ()
    queues: dict[MessageQueue, dict[str, JsonValue]] = field(default_factory=dict)
    status: dict[str, dict[str, JsonValue]] = field(default_factory=dict)

    def to_dict(self) -> JsonObject:
        return {
            "properties": _object(dict(self.properties)),
            "subscriptionSet": [item.to_dict() for item in self.subscriptions],
            "mqTable": {mq.to_object_key(): _object(figures) for mq, figures in self.queues.items()},
            "statusTable": {topic: _object(figures) for topic, figures in self.status.items()},
        }

    def to_json(self) -> bytes:
        return dumps_fastjson(self.to_dict()).encode("utf-8")

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        properties = {
            map_key_to_str(key, reader.at("properties")): "" if item is None else str(item)
            for key, item in reader.mapping("properties").items()
        }
        queues: dict[MessageQueue, dict[str, JsonValue]] = {}
        for key, figures in reader.mapping("mqTable").items():
            where = f"{reader.at('mqTable')}[{key!r:.60}]"
            queues[MessageQueue.from_map_key(key, where)] = _figures(figures, where)
        status = {
            map_key_to_str(key, reader.at("statusTable")): _figures(figures, reader.at("statusTable"))
            for key, figures in reader.mapping("statusTable").items()
        }
        return cls(
            properties=properties,
            subscriptions=parse_each(reader, "subscriptionSet", SubscriptionData),
            queues=queues,
            status=status,
        )


def _object(figures: dict[str, JsonValue] | dict[str, str]) -> JsonObject:
    result: JsonObject = {}
    for name, value in figures.items():
        result[name] = value
    return result


def _figures(value: JsonValue, path: str) -> dict[str, JsonValue]:
    if not isinstance(value, dict):
        raise BodyFormatError(f"{path}: expected an object of figures")
    return {map_key_to_str(key, path): item for key, item in value.items()}
