"""`Admin`: topics, cluster, statistics and message lookups (the parts of `MQAdminImpl` /
`DefaultMQAdminExt` that operators and tests need).

Broker-wide requests go to the master of every broker that a route (or the cluster info) names,
and their answers are merged, as Java's admin tools do. Message lookups decode the records the
brokers return with `decode_messages` and filter by key on the client, because the broker's index
is a hash (keys can collide).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from shoal.client import limits
from shoal.client.broker_api import check_response, protocol_failure
from shoal.client.client_instance import ClientInstance
from shoal.client.errors import InvalidMessageError, MQBrokerError, NoRouteError
from shoal.client.lifecycle import InstanceLifecycle
from shoal.client.message import Message, MessageExt, check_topic, decode_messages
from shoal.client.producer import Producer, SendResult
from shoal.client.pull import PullStatus, pull_request_fields, pull_result_of
from shoal.client.route import master_address
from shoal.client.settings import ClientSettings
from shoal.client.subscription import Subscription
from shoal.formats.errors import MessageIdError
from shoal.formats.limits import LONG_MAX
from shoal.formats.message_id import decode_offset_msg_id, uniq_id_nearly_time_ms, wall_clock_ms
from shoal.formats.topics import DLQ_GROUP_TOPIC_PREFIX, retry_topic
from shoal.protocol import (
    ClusterInfo,
    ConsumerOffsetSerializeWrapper,
    ConsumeStats,
    ConsumeStatsList,
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumeStatsInBrokerRequestHeader,
    GetConsumeStatsRequestHeader,
    GetTopicStatsInfoRequestHeader,
    MessageQueue,
    OffsetWrapper,
    PermName,
    QueryMessageRequestHeader,
    RequestCode,
    ResponseCode,
    ShoalRequestCode,
    SubscriptionData,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicFilterType,
    TopicList,
    TopicOffset,
    TopicRouteData,
    TopicStatsTable,
    ViewMessageRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
)
from shoal.protocol.bodies import ConsumerRunningInfo, ProducerConnection, ResetOffsetBody
from shoal.protocol.errors import ProtocolError
from shoal.protocol.headers import (
    GetConsumerRunningInfoRequestHeader,
    GetProducerConnectionListRequestHeader,
    ResetOffsetRequestHeader,
)
from shoal.protocol.json_compat import ObjectReader, loads, map_key_to_str
from shoal.remoting.settings import parse_properties

_UNIQ_QUERY_MARGIN_MS = 24 * 3600 * 1000  # the UNIQ_KEY's time is local-time based: allow any zone
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"  # MixAll.TOOLS_CONSUMER_GROUP: built into every broker
DLQ_RESEND_PRODUCER_GROUP = "SHOAL_ADMIN_DLQ_RESEND"
DELETE_MARKER_FIELD = "shoalAdminAction"  # an extField brokers ignore (see delete_topic)
DLQ_PULL_BATCH_COUNT = 32
DLQ_RESEND_DROPPED_PROPERTIES = frozenset(
    {
        # Set again from the Message fields, or by the broker / the next consumer.
        "TAGS",
        "KEYS",
        "WAIT",
        "CLUSTER",
        "MIN_OFFSET",
        "MAX_OFFSET",
        "CONSUME_START_TIME",
        "RECONSUME_TIME",
        "MAX_RECONSUME_TIMES",
        "MSG_REGION",
        "TRACE_ON",
        # A dead letter is delivered at once, never delayed or parked again (spec §16 gotcha 17).
        "DELAY",
        "REAL_TOPIC",
        "REAL_QID",
        "TIMER_DELIVER_MS",
        "TIMER_DELAY_SEC",
        "TIMER_DELAY_MS",
        "__STARTDELIVERTIME",
        # Never a new half message.
        "TRAN_MSG",
        "PGROUP",
        "TRAN_PREPARED_QUEUE_OFFSET",
    }
)


@dataclass(frozen=True, slots=True)
class Connection:
    """One client connection of a consumer group, as a broker sees it."""

    client_id: str
    client_addr: str
    language: str
    version: int


@dataclass(frozen=True, slots=True)
class ConsumerConnection:
    """GET_CONSUMER_CONNECTION_LIST, merged over brokers."""

    connections: tuple[Connection, ...] = ()
    consume_type: str = ""
    message_model: str = ""
    consume_from_where: str = ""
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """How far a group is behind on one queue."""

    mq: MessageQueue
    broker_offset: int
    consumer_offset: int
    last_timestamp_ms: int

    @property
    def lag(self) -> int:
        return max(self.broker_offset - self.consumer_offset, 0)


@dataclass(frozen=True, slots=True)
class SlaveLink:
    """One slave connected to a master, as the master reports it."""

    address: str
    ack_offset: int
    lag_bytes: int
    lag_ms: int


@dataclass(frozen=True, slots=True)
class HaStatus:
    """A broker's replication state (the HA fields of GET_BROKER_RUNTIME_INFO).

    On a master `lag_bytes` is the best slave's lag (-1: no slave); on a slave it is its own lag
    behind the master (-1: not known, as while its HA link is down) and `master_connected` says
    whether the HA link is up.
    """

    role: str
    broker_id: int
    epoch: int
    commitlog_max_offset: int
    confirmed_offset: int
    lag_bytes: int
    lag_ms: int
    master_address: str = ""
    master_connected: bool = False
    slaves: tuple[SlaveLink, ...] = ()
    last_error: str = ""

    @property
    def is_master(self) -> bool:
        return self.role != "SLAVE"


@dataclass(frozen=True, slots=True)
class Promotion:
    """The answer to PROMOTE_TO_MASTER."""

    role: str
    epoch: int
    start_offset: int


def _int_field(table: dict[str, str], key: str, default: int = -1) -> int:
    try:
        return int(table.get(key, default))
    except ValueError:
        return default


def ha_status_of(table: dict[str, str]) -> HaStatus:
    """HaStatus from a runtime-info table; missing or malformed numbers read as -1."""
    try:
        raw_slaves = json.loads(table.get("haSlaves") or "[]")
    except ValueError:
        raw_slaves = []
    slaves = tuple(
        SlaveLink(
            address=str(item.get("address", "")),
            ack_offset=int(item.get("ackOffset", -1)),
            lag_bytes=int(item.get("lagBytes", -1)),
            lag_ms=int(item.get("lagMs", -1)),
        )
        for item in raw_slaves
        if isinstance(item, dict)
    )
    return HaStatus(
        role=table.get("brokerRole", ""),
        broker_id=_int_field(table, "brokerId"),
        epoch=_int_field(table, "haEpoch", 0),
        commitlog_max_offset=_int_field(table, "commitLogMaxOffset"),
        confirmed_offset=_int_field(table, "haConfirmedOffset"),
        lag_bytes=_int_field(table, "haLagBytes"),
        lag_ms=_int_field(table, "haLagMs"),
        master_address=table.get("haMasterAddress", ""),
        master_connected=table.get("haMasterConnected") == "true",
        slaves=slaves,
        last_error=table.get("haLastError", ""),
    )


def parse_consumer_connection(data: bytes | memoryview, address: str) -> ConsumerConnection:
    """The ConsumerConnection body (tolerant JSON)."""
    try:
        reader = ObjectReader(loads(data), "ConsumerConnection")
        connections = []
        for index, item in enumerate(reader.array("connectionSet")):
            entry = ObjectReader(item, f"ConsumerConnection.connectionSet[{index}]")
            connections.append(
                Connection(
                    client_id=entry.text("clientId"),
                    client_addr=entry.text("clientAddr"),
                    language=str(entry.get("language") or ""),
                    version=entry.integer("version"),
                )
            )
        table_path = reader.at("subscriptionTable")
        subscriptions = {
            map_key_to_str(key, table_path): SubscriptionData.from_dict(value, f"{table_path}[{key!r}]")
            for key, value in reader.mapping("subscriptionTable").items()
        }
        return ConsumerConnection(
            connections=tuple(connections),
            consume_type=str(reader.get("consumeType") or ""),
            message_model=str(reader.get("messageModel") or ""),
            consume_from_where=str(reader.get("consumeFromWhere") or ""),
            subscriptions=subscriptions,
        )
    except ProtocolError as error:
        raise protocol_failure(error, address) from None


class Admin(InstanceLifecycle):
    """Administration of a cluster through its nameservers."""

    def __init__(self, namesrv_addrs: str | Sequence[str], *, client_settings: ClientSettings | None = None) -> None:
        super().__init__("admin")
        self._instance = ClientInstance(namesrv_addrs, client_settings or ClientSettings())
        self._namesrv_addrs = namesrv_addrs

    @property
    def client_settings(self) -> ClientSettings:
        """The settings (credentials included) this admin's requests go with."""
        return self._instance.settings

    @property
    def _timeout_s(self) -> float:
        return self._instance.settings.request_timeout_s

    # --- nameserver ---

    async def cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO."""
        self._check_running()
        response = await self._instance.namesrv.invoke(RequestCode.GET_BROKER_CLUSTER_INFO)
        check_response(response, "nameserver")
        try:
            return ClusterInfo.from_json(response.body or b"{}")
        except ProtocolError as error:
            raise protocol_failure(error, "nameserver") from None

    async def topic_list(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER, sorted."""
        self._check_running()
        response = await self._instance.namesrv.invoke(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        check_response(response, "nameserver")
        try:
            return sorted(TopicList.from_json(response.body or b"{}").topic_list)
        except ProtocolError as error:
            raise protocol_failure(error, "nameserver") from None

    async def topic_route(self, topic: str) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC; MQBrokerError(TOPIC_NOT_EXIST) when there is none."""
        self._check_running()
        route = await self._instance.routes.refresh(topic)
        if route is None:
            raise MQBrokerError(ResponseCode.TOPIC_NOT_EXIST, f"no route info of topic {topic}", "nameserver")
        return route

    async def cluster_masters(self, cluster: str) -> list[str]:
        """Master addresses of the brokers of `cluster`."""
        info = await self.cluster_info()
        names = info.cluster_addr_table.get(cluster)
        if names is None:
            raise MQBrokerError(ResponseCode.SYSTEM_ERROR, f"cluster {cluster} is unknown", "nameserver")
        addresses = [master_address(info.broker_addr_table[name]) for name in names if name in info.broker_addr_table]
        return sorted(address for address in addresses if address is not None)

    async def _route_masters(self, topic: str) -> list[str]:
        route = await self.topic_route(topic)
        return sorted(address for broker in route.broker_datas if (address := master_address(broker)) is not None)

    # --- topics ---

    async def create_topic(
        self,
        topic: str,
        *,
        broker_addr: str | None = None,
        cluster: str | None = None,
        read_queue_nums: int = 8,
        write_queue_nums: int = 8,
        perm: int = PermName.READ | PermName.WRITE,
        order: bool = False,
        topic_filter_type: TopicFilterType = TopicFilterType.SINGLE_TAG,
        topic_sys_flag: int = 0,
        attributes: str | None = None,
    ) -> list[str]:
        """UPDATE_AND_CREATE_TOPIC on one broker or every master of a cluster; the addresses used.
        `attributes`: RocketMQ 5's modification string, `+message.type=FIFO` (brokers of 4.x ignore it)."""
        self._check_running()
        check_topic(topic, for_send=False)
        if (broker_addr is None) == (cluster is None):
            raise ValueError("give exactly one of broker_addr and cluster")
        addresses = [broker_addr] if broker_addr is not None else await self.cluster_masters(cluster or "")
        header = CreateTopicRequestHeader(
            topic=topic,
            default_topic="TBW102",
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=int(perm),
            topic_filter_type=topic_filter_type.value,
            topic_sys_flag=topic_sys_flag,
            order=order,
            attributes=attributes,
        )
        for address in addresses:
            await self._instance.api.call(address, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
        return addresses

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> None:
        """DELETE_TOPIC_IN_BROKER on the masters (of `cluster`, else of the topic's route), then
        DELETE_TOPIC_IN_NAMESRV on every nameserver."""
        self._check_running()
        addresses = await self.cluster_masters(cluster) if cluster else await self._route_masters(topic)
        fields = DeleteTopicRequestHeader(topic=topic).to_ext_fields()
        # A signature does not cover the request code, and GET_TOPIC_STATS_INFO of the topic carries
        # the same one field: a broker's replay guard refuses the delete within minutes of such a read
        # by the same account (docs/security.md §2). One more field, which brokers ignore, makes the
        # delete's content its own.
        delete_fields = {**fields, DELETE_MARKER_FIELD: "deleteTopic"}
        for address in addresses:
            await self._instance.api.call(address, RequestCode.DELETE_TOPIC_IN_BROKER, delete_fields)
        for namesrv in self._instance.namesrv.addresses:
            await self._instance.api.call(namesrv, RequestCode.DELETE_TOPIC_IN_NAMESRV, fields)
        self._instance.routes.routes.pop(topic, None)

    async def topic_stats(self, topic: str) -> TopicStatsTable:
        """GET_TOPIC_STATS_INFO from every master of the topic, merged."""
        self._check_running()
        fields = GetTopicStatsInfoRequestHeader(topic=topic).to_ext_fields()
        table: dict[MessageQueue, TopicOffset] = {}
        for address in await self._route_masters(topic):
            response = await self._instance.api.call(address, RequestCode.GET_TOPIC_STATS_INFO, fields)
            try:
                table.update(TopicStatsTable.from_json(response.body or b"{}").offset_table)
            except ProtocolError as error:
                raise protocol_failure(error, address) from None
        return TopicStatsTable(offset_table=dict(sorted(table.items())))

    # --- consumer groups ---

    async def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """GET_CONSUME_STATS from every master of `%RETRY%<group>`'s route, merged."""
        self._check_running()
        fields = GetConsumeStatsRequestHeader(consumer_group=group, topic=topic).to_ext_fields()
        table: dict[MessageQueue, OffsetWrapper] = {}
        tps = 0.0
        for address in await self._group_masters(group, topic):
            response = await self._instance.api.call(address, RequestCode.GET_CONSUME_STATS, fields)
            try:
                stats = ConsumeStats.from_json(response.body or b"{}")
            except ProtocolError as error:
                raise protocol_failure(error, address) from None
            table.update(stats.offset_table)
            tps += stats.consume_tps
        return ConsumeStats(offset_table=dict(sorted(table.items())), consume_tps=tps)

    async def _group_masters(self, group: str, topic: str | None) -> list[str]:
        """Masters serving `group`: its retry topic's route, or, while that route is not known yet
        (a group seconds old), the topic's route or every master of every cluster."""
        try:
            return await self._route_masters(retry_topic(group))
        except MQBrokerError as error:
            if error.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
        if topic is not None:
            return await self._route_masters(topic)
        info = await self.cluster_info()
        masters = (master_address(broker) for broker in info.broker_addr_table.values())
        return sorted(address for address in masters if address is not None)

    async def consumer_progress(self, group: str, topic: str | None = None) -> list[QueueProgress]:
        """Per queue: broker offset, consumed offset and lag (`mqadmin consumerProgress`)."""
        stats = await self.consume_stats(group, topic)
        return [
            QueueProgress(mq, wrapper.broker_offset, wrapper.consumer_offset, wrapper.last_timestamp_ms)
            for mq, wrapper in stats.offset_table.items()
        ]

    async def consumer_connections(self, group: str) -> ConsumerConnection:
        """GET_CONSUMER_CONNECTION_LIST from the masters of `%RETRY%<group>`, connections merged;
        MQBrokerError(CONSUMER_NOT_ONLINE) when no client of the group is connected."""
        self._check_running()
        merged: ConsumerConnection | None = None
        connections: dict[str, Connection] = {}
        for address in await self._route_masters(retry_topic(group)):
            response = await self._instance.api.call(
                address,
                RequestCode.GET_CONSUMER_CONNECTION_LIST,
                {"consumerGroup": group},
                ok=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE),
            )
            if response.code != ResponseCode.SUCCESS or not response.body:
                continue
            found = parse_consumer_connection(response.body, address)
            merged = merged or found
            connections.update({connection.client_id: connection for connection in found.connections})
        if merged is None or not connections:
            raise MQBrokerError(ResponseCode.CONSUMER_NOT_ONLINE, f"no connection of consumer group {group}")
        return ConsumerConnection(
            connections=tuple(sorted(connections.values(), key=lambda item: item.client_id)),
            consume_type=merged.consume_type,
            message_model=merged.message_model,
            consume_from_where=merged.consume_from_where,
            subscriptions=merged.subscriptions,
        )

    async def consumer_running_info(self, group: str, client_id: str) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO (mqadmin consumerStatus), relayed by a broker the consumer is
        connected to: its settings, subscriptions and per-queue state. MQBrokerError with the
        broker's reason when no broker reaches that client or the client does not answer."""
        self._check_running()
        fields = GetConsumerRunningInfoRequestHeader(consumer_group=group, client_id=client_id).to_ext_fields()
        refusal: MQBrokerError | None = None
        for address in await self._route_masters(retry_topic(group)):
            try:
                response = await self._instance.api.call(
                    address, RequestCode.GET_CONSUMER_RUNNING_INFO, fields, timeout_s=self._timeout_s * 3
                )
            except MQBrokerError as error:
                refusal = error  # not connected through this broker: try the next
                continue
            try:
                return ConsumerRunningInfo.from_json(response.body or b"{}")
            except ProtocolError as error:
                raise protocol_failure(error, address) from None
        raise refusal or MQBrokerError(ResponseCode.CONSUMER_NOT_ONLINE, f"no broker reaches consumer {client_id}")

    async def consumer_ids(self, group: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP at a broker of `%RETRY%<group>` (sorted client ids)."""
        self._check_running()
        addresses = await self._route_masters(retry_topic(group))
        if not addresses:
            return []
        return await self._instance.api.consumer_ids(addresses[0], group)

    # --- messages ---

    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """VIEW_MESSAGE_BY_ID: the record an offset message id names, from its store host."""
        self._check_running()
        try:
            address, offset = decode_offset_msg_id(offset_msg_id)
        except MessageIdError as error:
            raise InvalidMessageError(str(error)) from None
        fields = ViewMessageRequestHeader(offset=offset).to_ext_fields()
        response = await self._instance.api.call(address, RequestCode.VIEW_MESSAGE_BY_ID, fields)
        messages = decode_messages(response.body or b"")
        if not messages:
            raise MQBrokerError(ResponseCode.SYSTEM_ERROR, f"no message at offset {offset}", address)
        return messages[0]

    async def query_message(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = 32,
        begin_timestamp_ms: int = 0,
        end_timestamp_ms: int = LONG_MAX,
    ) -> list[MessageExt]:
        """QUERY_MESSAGE by a KEYS key on every broker of `topic`; exact key matches only."""
        found = await self._query(topic, key, max_num, begin_timestamp_ms, end_timestamp_ms, unique=False)
        return [message for message in found if key in message.keys]

    async def query_message_by_unique_key(self, topic: str, uniq_key: str, *, max_num: int = 32) -> list[MessageExt]:
        """Messages whose UNIQ_KEY is `uniq_key` (oldest first: [0] is what Java's lookup returns)."""
        begin_ms = max(uniq_id_nearly_time_ms(uniq_key) - _UNIQ_QUERY_MARGIN_MS, 0)
        found = await self._query(topic, uniq_key, max_num, begin_ms, LONG_MAX, unique=True)
        return [message for message in found if message.msg_id == uniq_key]

    async def _query(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int, *, unique: bool
    ) -> list[MessageExt]:
        self._check_running()
        route = await self.topic_route(topic)
        header = QueryMessageRequestHeader(
            topic=topic,
            key=key,
            max_num=max_num,
            begin_timestamp_ms=begin_ms,
            end_timestamp_ms=end_ms,
            unique_key_query=True if unique else None,
        )
        fields = header.to_ext_fields()
        addresses = []
        for broker in route.broker_datas:
            address = master_address(broker)
            if address is None and broker.broker_addrs:
                address = broker.broker_addrs[min(broker.broker_addrs)]
            if address is not None:
                addresses.append(address)
        responses = await asyncio.gather(
            *(
                self._instance.api.call(
                    address,
                    RequestCode.QUERY_MESSAGE,
                    fields,
                    timeout_s=self._timeout_s * 3,
                    ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
                )
                for address in addresses
            )
        )
        messages: dict[str, MessageExt] = {}
        for response in responses:
            if response.code == ResponseCode.SUCCESS and response.body:
                for message in decode_messages(response.body):
                    if message.topic == topic:
                        messages[message.offset_msg_id] = message
        return sorted(messages.values(), key=lambda message: (message.store_timestamp_ms, message.commitlog_offset))

    # --- one broker ---

    async def runtime_info(self, broker_addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO of one broker: its `table` of strings."""
        self._check_running()
        response = await self._instance.api.call(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        try:
            table = json.loads(bytes(response.body or b"{}")).get("table", {})
        except (ValueError, AttributeError) as error:
            raise protocol_failure(ProtocolError(f"runtime info is not a JSON object: {error}"), broker_addr) from None
        return {str(key): str(value) for key, value in table.items()}

    async def ha_status(self, broker_addr: str) -> HaStatus:
        """The replication state of one broker (role, epoch, lag, slaves)."""
        return ha_status_of(await self.runtime_info(broker_addr))

    async def promote(
        self, broker_addr: str, *, epoch: int | None = None, role: str = "ASYNC_MASTER", force: bool = False
    ) -> Promotion:
        """PROMOTE_TO_MASTER (Shoal's 9001) on the slave at `broker_addr`; `epoch` defaults to its
        epoch + 1. MQBrokerError with the broker's reason when it refuses (behind the acknowledged
        offset, or a live master still feeds it and `force` is off)."""
        self._check_running()
        if epoch is None:
            epoch = (await self.ha_status(broker_addr)).epoch + 1
        fields = {"epoch": str(epoch), "brokerRole": role, "force": str(force).lower()}
        response = await self._instance.api.call(
            broker_addr, ShoalRequestCode.PROMOTE_TO_MASTER, fields, timeout_s=limits.PROMOTE_TIMEOUT_S
        )
        answer = dict(response.ext_fields or {})
        return Promotion(
            role=answer.get("brokerRole", role),
            epoch=int(answer.get("epoch", epoch)),
            start_offset=int(answer.get("startOffset", -1)),
        )

    async def set_write_permission(self, broker_name: str, *, writable: bool) -> int:
        """WIPE_ / ADD_WRITE_PERM_OF_BROKER on every nameserver: producers stop (or resume) choosing
        `broker_name`'s queues. Returns the number of topic entries changed, summed."""
        self._check_running()
        code = RequestCode.ADD_WRITE_PERM_OF_BROKER if writable else RequestCode.WIPE_WRITE_PERM_OF_BROKER
        key = "addTopicCount" if writable else "wipeTopicCount"
        fields = WipeWritePermOfBrokerRequestHeader(broker_name=broker_name).to_ext_fields()
        changed = 0
        for namesrv in self._instance.namesrv.addresses:
            response = await self._instance.api.call(namesrv, code, fields)
            changed += int((response.ext_fields or {}).get(key, 0))
        return changed

    async def broker_topic_configs(self, broker_addr: str) -> dict[str, TopicConfig]:
        """GET_ALL_TOPIC_CONFIG of one broker."""
        self._check_running()
        response = await self._instance.api.call(broker_addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        try:
            return TopicConfigSerializeWrapper.from_json(response.body or b"{}").topic_config_table
        except ProtocolError as error:
            raise protocol_failure(error, broker_addr) from None

    async def broker_config(self, broker_addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG of one broker: every setting by its broker.conf name."""
        self._check_running()
        response = await self._instance.api.call(broker_addr, RequestCode.GET_BROKER_CONFIG)
        try:
            return parse_properties(bytes(response.body or b"").decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            raise protocol_failure(ProtocolError(f"config is not properties text: {error}"), broker_addr) from None

    async def update_broker_config(self, broker_addr: str, changes: dict[str, str]) -> None:
        """UPDATE_BROKER_CONFIG on one broker; MQBrokerError with the broker's reason when it refuses
        (a key that only applies at start, an unknown key, a value out of range)."""
        self._check_running()
        body = "".join(f"{key}={value}\n" for key, value in changes.items()).encode("utf-8")
        await self._instance.api.call(broker_addr, RequestCode.UPDATE_BROKER_CONFIG, body=body)

    async def subscription_groups(self, broker_addr: str) -> list[str]:
        """The names of one broker's subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), sorted."""
        self._check_running()
        response = await self._instance.api.call(broker_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        try:
            table = ObjectReader(loads(response.body or b"{}"), "subscriptionGroups").mapping("subscriptionGroupTable")
        except ProtocolError as error:
            raise protocol_failure(error, broker_addr) from None
        return sorted(str(name) for name in table)

    async def producer_connections(self, broker_addr: str, group: str) -> tuple[Connection, ...]:
        """GET_PRODUCER_CONNECTION_LIST of one broker: the live clients of a producer group (empty
        when none is connected there)."""
        self._check_running()
        fields = GetProducerConnectionListRequestHeader(producer_group=group).to_ext_fields()
        response = await self._instance.api.call(
            broker_addr,
            RequestCode.GET_PRODUCER_CONNECTION_LIST,
            fields,
            ok=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR),
        )
        if response.code != ResponseCode.SUCCESS or not response.body:
            return ()
        try:
            found = ProducerConnection.from_json(response.body)
        except ProtocolError as error:
            raise protocol_failure(error, broker_addr) from None
        return tuple(
            Connection(item.client_id, item.client_addr, item.language, item.version) for item in found.connection_set
        )

    async def reset_offset_by_time(
        self, topic: str, group: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET on every master of `topic` (mqadmin resetOffsetByTime): each
        queue's offset for `timestamp_ms` (-1: the max offset), pushed to the group's live consumers;
        `force` false only moves offsets backwards. MQBrokerError(CONSUMER_NOT_ONLINE) when the group
        has no live consumer there. Returns the new offset of every queue."""
        self._check_running()
        fields = ResetOffsetRequestHeader(topic=topic, group=group, timestamp_ms=timestamp_ms, is_force=force)
        table: dict[MessageQueue, int] = {}
        for address in await self._route_masters(topic):
            response = await self._instance.api.call(
                address, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields.to_ext_fields()
            )
            try:
                table.update(ResetOffsetBody.from_json(response.body or b"{}").offset_table)
            except ProtocolError as error:
                raise protocol_failure(error, address) from None
        return table

    async def broker_consume_stats(self, broker_addr: str, *, order_only: bool = False) -> ConsumeStatsList:
        """GET_BROKER_CONSUME_STATS of one broker (mqadmin brokerConsumeStats): each subscription
        group's ConsumeStats per topic it committed offsets on, and the lag summed over them;
        `order_only` keeps ordered topics only."""
        self._check_running()
        fields = GetConsumeStatsInBrokerRequestHeader(is_order=order_only).to_ext_fields()
        response = await self._instance.api.call(broker_addr, RequestCode.GET_BROKER_CONSUME_STATS, fields)
        try:
            return ConsumeStatsList.from_json(response.body or b"{}")
        except ProtocolError as error:
            raise protocol_failure(error, broker_addr) from None

    async def delete_expired_commitlog(self, broker_addr: str) -> None:
        """DELETE_EXPIRED_COMMITLOG on one broker (DefaultMQAdminExt.deleteExpiredCommitLogByAddr):
        its next cleaning rounds delete CommitLog segments older than fileReservedTime whatever the
        hour of deleteWhen. The broker answers at once; the deletion follows."""
        self._check_running()
        await self._instance.api.call(broker_addr, RequestCode.DELETE_EXPIRED_COMMITLOG)

    async def broker_consumer_lag(self, broker_addr: str, topic: str | None = None, min_queue_id: int = 0) -> int:
        """Messages on one broker that some consumer group has not consumed yet: the sum over its
        committed offsets (GET_ALL_CONSUMER_OFFSET) of the queue's max offset minus the offset.
        `topic` / `min_queue_id` narrow it to one topic's queues from that id on (a queue shrink
        waits for exactly those)."""
        self._check_running()
        response = await self._instance.api.call(broker_addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        try:
            offsets = ConsumerOffsetSerializeWrapper.from_json(response.body or b"{}").offset_table
        except ProtocolError as error:
            raise protocol_failure(error, broker_addr) from None
        lag = 0
        for key, committed in offsets.items():
            name = key.split("@", 1)[0]
            if topic is not None and name != topic:
                continue
            for queue_id, offset in committed.items():
                if queue_id >= min_queue_id:
                    # GET_MAX_OFFSET, not topic stats: stats cover only the writable queues, and a
                    # shrink waits on the queues that are no longer writable.
                    mq = MessageQueue(topic=name, broker_name="", queue_id=queue_id)
                    lag += max(await self._instance.api.max_offset(broker_addr, mq) - offset, 0)
        return lag

    # --- dead letters ---

    async def dlq_messages(self, group: str, max_count: int = DLQ_PULL_BATCH_COUNT) -> list[MessageExt]:
        """The oldest `max_count` dead letters of `group` (`%DLQ%<group>`), queue by queue.

        Pulled from each queue's minimum offset as TOOLS_CONSUMER without committing anything, so
        listing never moves a consumer. An empty list when the group has no DLQ yet."""
        self._check_running()
        if not 1 <= max_count <= limits.DLQ_LIST_MAX_COUNT:
            raise ValueError(f"max_count must be in [1, {limits.DLQ_LIST_MAX_COUNT}]")
        topic = DLQ_GROUP_TOPIC_PREFIX + group
        try:
            queues = await self._instance.routes.subscribe_queues(topic, refresh=True)
        except NoRouteError:
            return []
        found: list[MessageExt] = []
        for mq in sorted(queues):
            address = self._instance.routes.master_address(mq.broker_name)
            if address is None:
                continue
            offset = await self._instance.api.min_offset(address, mq)
            found.extend(await self._read_queue(address, mq, offset, max_count - len(found)))
        return found

    async def messages_between(
        self, topic: str, begin_ms: int, end_ms: int, *, max_count: int = DLQ_PULL_BATCH_COUNT
    ) -> list[MessageExt]:
        """Messages of `topic` stored in [begin_ms, end_ms], oldest first, at most `max_count`
        (rocketmq-dashboard's query by topic and time): each queue is read from the offset its
        ConsumeQueue gives for `begin_ms` as TOOLS_CONSUMER, committing nothing."""
        self._check_running()
        if not 1 <= max_count <= limits.DLQ_LIST_MAX_COUNT:
            raise ValueError(f"max_count must be in [1, {limits.DLQ_LIST_MAX_COUNT}]")
        queues = await self._instance.routes.subscribe_queues(topic, refresh=True)
        found: list[MessageExt] = []
        for mq in sorted(queues):
            address = self._instance.routes.master_address(mq.broker_name)
            if address is None:
                continue
            offset = await self._instance.api.search_offset(address, mq, begin_ms)
            read = await self._read_queue(address, mq, offset, max_count, until_ms=end_ms)
            found.extend(message for message in read if begin_ms <= message.store_timestamp_ms <= end_ms)
        found.sort(key=lambda message: (message.store_timestamp_ms, message.commitlog_offset))
        return found[:max_count]

    async def _read_queue(
        self, address: str, mq: MessageQueue, offset: int, max_count: int, *, until_ms: int | None = None
    ) -> list[MessageExt]:
        """Up to `max_count` messages of one queue from `offset`, pulled as TOOLS_CONSUMER without
        committing; stops at the queue's end or at the first message stored after `until_ms`."""
        subscription = Subscription.build(mq.topic, "*", wall_clock_ms())
        found: list[MessageExt] = []
        while len(found) < max_count:
            wanted = min(DLQ_PULL_BATCH_COUNT, max_count - len(found))
            fields = pull_request_fields(
                TOOLS_CONSUMER_GROUP, mq, subscription, offset, wanted, commit_offset=0, suspend_timeout_ms=None
            )
            response = await self._instance.remoting.invoke(
                address, RequestCode.PULL_MESSAGE, fields, timeout_s=self._timeout_s
            )
            result = pull_result_of(response, mq, subscription, address)
            for message in result.messages[:wanted]:
                if until_ms is not None and message.store_timestamp_ms > until_ms:
                    return found
                found.append(message)
            if result.status is not PullStatus.FOUND or result.next_begin_offset <= offset:
                break
            offset = result.next_begin_offset
        return found

    async def resend_dlq_message(self, group: str, offset_msg_id: str, *, to_retry_topic: bool = False) -> SendResult:
        """Send a dead letter of `group` again, with fresh reconsume times.

        By default to its original topic (RETRY_TOPIC), where *every* group subscribed to it gets
        it again; `to_retry_topic` sends it to `%RETRY%<group>` instead, so only `group` consumes
        it (shown under the original topic, as retries are). Body, tags, keys, flag, user
        properties and UNIQ_KEY (its msg id) are kept; delay and transaction properties are not.
        The dead letter itself stays in the DLQ."""
        self._check_running()
        dead = await self.view_message(offset_msg_id)
        dlq = DLQ_GROUP_TOPIC_PREFIX + group
        if dead.topic != dlq:
            raise ValueError(f"message {offset_msg_id} is in {dead.topic}, not in {dlq}")
        properties = {
            name: value for name, value in dead.properties.items() if name not in DLQ_RESEND_DROPPED_PROPERTIES
        }
        original_topic = dead.retry_topic or retry_topic(group)
        if to_retry_topic:
            properties["RETRY_TOPIC"] = original_topic
            target = retry_topic(group)
        else:
            properties.pop("RETRY_TOPIC", None)
            target = original_topic
        message = Message(target, dead.body, tags=dead.tags, keys=dead.keys, properties=properties, flag=dead.flag)
        producer = Producer(DLQ_RESEND_PRODUCER_GROUP, self._namesrv_addrs, client_settings=self._instance.settings)
        async with producer:
            return await producer.send(message)
