"""Topic, route and registration bodies: what brokers, nameservers and route lookups exchange.

Spec §7.3, §8.9, §8.10. Same conventions as `bodies` (Java field names, compact alphabetical
output, tolerant input). `brokerAddrs` is keyed by brokerId: written with quoted keys (standard
JSON, read by every Java and C++ client), read in either form.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Self

from shoal.formats.json_compat import JsonValue, dumps
from shoal.protocol.bodies import JsonBody, JsonObject, parse_each
from shoal.protocol.codes import PermName, TopicFilterType
from shoal.protocol.errors import BodyFormatError
from shoal.protocol.json_compat import ObjectReader, coerce_int, coerce_str, loads, map_key_to_int, map_key_to_str
from shoal.protocol.limits import INFLATED_BODY_SIZE_MAX_BYTES

# --- topics (spec §7.3) ---


@dataclass(frozen=True, slots=True)
class DataVersion(JsonBody):
    """`{"counter":n,"timestamp":ms}`; QUERY_DATA_VERSION body and part of topic wrappers."""

    timestamp_ms: int = 0
    counter: int = 0

    def to_dict(self) -> JsonObject:
        return {"counter": self.counter, "timestamp": self.timestamp_ms}

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        return cls(timestamp_ms=reader.integer("timestamp"), counter=reader.integer("counter"))


@dataclass(frozen=True, slots=True)
class TopicConfig(JsonBody):
    """One topic's configuration; defaults are Java's."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PermName.READ | PermName.WRITE
    topic_filter_type: TopicFilterType = TopicFilterType.SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict, hash=False)
    """RocketMQ 5's topic attributes (`message.type`, ...; formats/topic_attributes.py). Written
    only when set, so an untyped topic's JSON stays 4.9.7's byte for byte (4.9.7 ignores the field)."""

    def to_dict(self) -> JsonObject:
        result: JsonObject = {}
        if self.attributes:
            result["attributes"] = dict(sorted(self.attributes.items()))
        result.update(
            {
                "order": self.order,
                "perm": int(self.perm),
                "readQueueNums": self.read_queue_nums,
                "topicFilterType": self.topic_filter_type.value,
                "topicName": self.topic_name,
                "topicSysFlag": self.topic_sys_flag,
                "writeQueueNums": self.write_queue_nums,
            }
        )
        return result

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        return cls(
            topic_name=reader.text("topicName"),
            read_queue_nums=reader.integer("readQueueNums", 16),
            write_queue_nums=reader.integer("writeQueueNums", 16),
            perm=reader.integer("perm", 6),
            topic_filter_type=reader.enumeration("topicFilterType", TopicFilterType, TopicFilterType.SINGLE_TAG),
            topic_sys_flag=reader.integer("topicSysFlag"),
            order=reader.boolean("order"),
            attributes={
                map_key_to_str(key, reader.at("attributes")): coerce_str(raw, f"{reader.at('attributes')}.{key}")
                for key, raw in reader.mapping("attributes").items()
            },
        )

    def encode_line(self) -> str:
        """The space-separated line of a compressed REGISTER_BROKER body (loses sysFlag, order)."""
        return (
            f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} {int(self.perm)} "
            f"{self.topic_filter_type.value}"
        )

    @classmethod
    def decode_line(cls, line: str, path: str) -> Self:
        """The inverse of `encode_line`."""
        parts = line.split(" ")
        if len(parts) != 5:
            raise BodyFormatError(f"{path}: topic line {line[:80]!r} has {len(parts)} fields, not 5")
        name, read, write, perm, filter_type = parts
        try:
            topic_filter_type = TopicFilterType(filter_type)
        except ValueError:
            raise BodyFormatError(f"{path}: unknown topicFilterType {filter_type[:40]!r}") from None
        return cls(
            topic_name=name,
            read_queue_nums=coerce_int(read, f"{path}.readQueueNums"),
            write_queue_nums=coerce_int(write, f"{path}.writeQueueNums"),
            perm=coerce_int(perm, f"{path}.perm"),
            topic_filter_type=topic_filter_type,
        )


@dataclass(frozen=True, slots=True)
class TopicConfigSerializeWrapper(JsonBody):
    """topics.json / GET_ALL_TOPIC_CONFIG body: `{"dataVersion":…,"topicConfigTable":{…}}`."""

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = DataVersion()

    def to_dict(self) -> JsonObject:
        return {
            "dataVersion": self.data_version.to_dict(),
            "topicConfigTable": {name: config.to_dict() for name, config in self.topic_config_table.items()},
        }

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        table_path = reader.at("topicConfigTable")
        table: dict[str, TopicConfig] = {}
        for key, member in reader.mapping("topicConfigTable").items():
            name = map_key_to_str(key, table_path)
            table[name] = TopicConfig.from_dict(member, f"{table_path}[{name!r}]")
        return cls(
            topic_config_table=table,
            data_version=DataVersion.from_dict(reader.get("dataVersion") or {}, reader.at("dataVersion")),
        )


_INT_PREFIX = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody(JsonBody):
    """REGISTER_BROKER body: the broker's topics and filter servers (spec §8.9).

    `to_json`/`from_json` are the default uncompressed form; `encode`/`decode` also handle the
    zlib form a Java broker sends with `compressedRegister=true` (header `compressed`).
    """

    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = field(default_factory=TopicConfigSerializeWrapper)
    filter_server_list: tuple[str, ...] = ()

    def to_dict(self) -> JsonObject:
        return {
            "filterServerList": list(self.filter_server_list),
            "topicConfigSerializeWrapper": self.topic_config_serialize_wrapper.to_dict(),
        }

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        wrapper = reader.get("topicConfigSerializeWrapper")
        return cls(
            topic_config_serialize_wrapper=TopicConfigSerializeWrapper.from_dict(
                wrapper or {}, reader.at("topicConfigSerializeWrapper")
            ),
            filter_server_list=reader.texts("filterServerList"),
        )

    def encode(self, compressed: bool) -> bytes:
        """The body as sent, JSON or (compressed) zlib of length-prefixed parts."""
        if not compressed:
            return self.to_json()
        wrapper = self.topic_config_serialize_wrapper
        parts = [_length_prefixed(wrapper.data_version.to_json())]
        parts.append(_INT_PREFIX.pack(len(wrapper.topic_config_table)))
        parts += (
            _length_prefixed(config.encode_line().encode("utf-8")) for config in wrapper.topic_config_table.values()
        )
        parts.append(_length_prefixed(dumps(list(self.filter_server_list)).encode("utf-8")))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode(cls, data: bytes | memoryview, compressed: bool) -> Self:
        """Parse either form; the inflated size is bounded by INFLATED_BODY_SIZE_MAX_BYTES."""
        if not compressed:
            return cls.from_json(data)
        inflated = _inflate(data, "RegisterBrokerBody")
        reader = _PrefixedReader(inflated, "RegisterBrokerBody")
        data_version = DataVersion.from_json(reader.chunk("dataVersion"))
        table: dict[str, TopicConfig] = {}
        for index in range(reader.count("topic count")):
            line = reader.chunk(f"topic {index}")
            config = TopicConfig.decode_line(_utf8(line, reader.path), f"{reader.path}.topic[{index}]")
            table[config.topic_name] = config
        filter_servers = ObjectReader({"f": loads(reader.chunk("filterServerList"))}, reader.path)
        return cls(TopicConfigSerializeWrapper(table, data_version), filter_servers.texts("f"))


def _length_prefixed(data: bytes) -> bytes:
    return _INT_PREFIX.pack(len(data)) + data


def _inflate(data: bytes | memoryview, path: str) -> bytes:
    inflater = zlib.decompressobj()
    try:
        inflated = inflater.decompress(data, INFLATED_BODY_SIZE_MAX_BYTES)
    except zlib.error as error:
        raise BodyFormatError(f"{path}: not a zlib stream: {error}") from None
    if inflater.unconsumed_tail:
        raise BodyFormatError(f"{path}: inflates beyond {INFLATED_BODY_SIZE_MAX_BYTES} bytes")
    if not inflater.eof:
        raise BodyFormatError(f"{path}: zlib stream is truncated")
    return inflated


def _utf8(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BodyFormatError(f"{path}: not valid UTF-8: {error}") from None


class _PrefixedReader:
    """Reads `int length, bytes` chunks of an inflated register body, bounds-checked."""

    __slots__ = ("_data", "_position", "path")

    def __init__(self, data: bytes, path: str) -> None:
        self._data = data
        self._position = 0
        self.path = path

    def count(self, what: str) -> int:
        if len(self._data) - self._position < _INT_PREFIX.size:
            raise BodyFormatError(f"{self.path}: cut off before the {what}")
        value: int = _INT_PREFIX.unpack_from(self._data, self._position)[0]
        self._position += _INT_PREFIX.size
        if value < 0:
            raise BodyFormatError(f"{self.path}: negative {what} {value}")
        return value

    def chunk(self, what: str) -> bytes:
        size = self.count(f"length of {what}")
        end = self._position + size
        if end > len(self._data):
            raise BodyFormatError(f"{self.path}: {what} of {size} bytes is cut off")
        chunk = self._data[self._position : end]
        self._position = end
        return chunk


def register_body_crc32(body: bytes | memoryview) -> int:
    """REGISTER_BROKER `bodyCrc32`: CRC32 masked to a non-negative int (gotcha 3)."""
    return zlib.crc32(body) & 0x7FFFFFFF


# --- routes (spec §8.9, §8.10) ---


@dataclass(frozen=True, slots=True)
class QueueData(JsonBody):
    """One broker's queues of a topic."""

    broker_name: str
    read_queue_nums: int = 0
    write_queue_nums: int = 0
    perm: int = PermName.READ | PermName.WRITE
    topic_sys_flag: int = 0

    def to_dict(self) -> JsonObject:
        return {
            "brokerName": self.broker_name,
            "perm": int(self.perm),
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        return cls(
            broker_name=reader.text("brokerName"),
            read_queue_nums=reader.integer("readQueueNums"),
            write_queue_nums=reader.integer("writeQueueNums"),
            perm=reader.integer("perm"),
            topic_sys_flag=reader.integer("topicSysFlag"),
        )


@dataclass(frozen=True, slots=True)
class BrokerData(JsonBody):
    """A broker group: `broker_addrs` maps brokerId (0 = master) to "ip:port"."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_dict(self) -> JsonObject:
        return {
            "brokerAddrs": {str(broker_id): addr for broker_id, addr in self.broker_addrs.items()},
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        addrs_path = reader.at("brokerAddrs")
        addrs: dict[int, str] = {}
        for key, addr in reader.mapping("brokerAddrs").items():
            broker_id = map_key_to_int(key, addrs_path)
            if not isinstance(addr, str):
                raise BodyFormatError(f"{addrs_path}[{broker_id}]: expected an address string")
            addrs[broker_id] = addr
        return cls(cluster=reader.text("cluster"), broker_name=reader.text("brokerName"), broker_addrs=addrs)


@dataclass(frozen=True, slots=True)
class TopicRouteData(JsonBody):
    """GET_ROUTEINFO_BY_TOPIC body."""

    queue_datas: tuple[QueueData, ...] = ()
    broker_datas: tuple[BrokerData, ...] = ()
    filter_server_table: dict[str, tuple[str, ...]] = field(default_factory=dict)
    order_topic_conf: str | None = None

    def to_dict(self) -> JsonObject:
        result: JsonObject = {
            "brokerDatas": [broker.to_dict() for broker in self.broker_datas],
            "filterServerTable": {addr: list(servers) for addr, servers in self.filter_server_table.items()},
        }
        if self.order_topic_conf is not None:
            result["orderTopicConf"] = self.order_topic_conf
        result["queueDatas"] = [queue.to_dict() for queue in self.queue_datas]
        return result

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        table_path = reader.at("filterServerTable")
        table: dict[str, tuple[str, ...]] = {}
        for key, servers in reader.mapping("filterServerTable").items():
            addr = map_key_to_str(key, table_path)
            table[addr] = ObjectReader({"s": servers}, f"{table_path}[{addr!r}]").texts("s")
        return cls(
            queue_datas=parse_each(reader, "queueDatas", QueueData),
            broker_datas=parse_each(reader, "brokerDatas", BrokerData),
            filter_server_table=table,
            order_topic_conf=reader.optional_text("orderTopicConf"),
        )


@dataclass(frozen=True, slots=True)
class ClusterInfo(JsonBody):
    """GET_BROKER_CLUSTER_INFO body: broker groups by name, broker names by cluster."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def to_dict(self) -> JsonObject:
        return {
            "brokerAddrTable": {name: broker.to_dict() for name, broker in self.broker_addr_table.items()},
            "clusterAddrTable": {name: list(brokers) for name, brokers in self.cluster_addr_table.items()},
        }

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        brokers_path = reader.at("brokerAddrTable")
        brokers: dict[str, BrokerData] = {}
        for key, broker in reader.mapping("brokerAddrTable").items():
            name = map_key_to_str(key, brokers_path)
            brokers[name] = BrokerData.from_dict(broker, f"{brokers_path}[{name!r}]")
        clusters_path = reader.at("clusterAddrTable")
        clusters: dict[str, tuple[str, ...]] = {}
        for key, names in reader.mapping("clusterAddrTable").items():
            cluster = map_key_to_str(key, clusters_path)
            clusters[cluster] = ObjectReader({"n": names}, f"{clusters_path}[{cluster!r}]").texts("n")
        return cls(broker_addr_table=brokers, cluster_addr_table=clusters)


@dataclass(frozen=True, slots=True)
class TopicList(JsonBody):
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER and similar: `{"topicList":[…]}` (+ brokerAddr)."""

    topic_list: tuple[str, ...] = ()
    broker_addr: str | None = None

    def to_dict(self) -> JsonObject:
        result: JsonObject = {}
        if self.broker_addr is not None:
            result["brokerAddr"] = self.broker_addr
        result["topicList"] = list(self.topic_list)
        return result

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        return cls(topic_list=reader.texts("topicList"), broker_addr=reader.optional_text("brokerAddr"))


@dataclass(frozen=True, slots=True)
class KVTable(JsonBody):
    """`{"table":{"k":"v"}}` (REGISTER_BROKER response, GET_KVLIST_BY_NAMESPACE)."""

    table: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> JsonObject:
        table: JsonObject = {key: value for key, value in self.table.items()}
        return {"table": table}

    @classmethod
    def from_dict(cls, value: JsonValue, path: str) -> Self:
        reader = ObjectReader(value, path)
        table_path = reader.at("table")
        table = {}
        for key, member in reader.mapping("table").items():
            name = map_key_to_str(key, table_path)
            text = ObjectReader({"v": member}, f"{table_path}[{name!r}]").optional_text("v")
            if text is not None:
                table[name] = text
        return cls(table=table)
