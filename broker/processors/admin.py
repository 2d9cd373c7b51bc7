"""Offsets, lookups and administration: GET_MAX/MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP,
GET_EARLIEST_MSG_STORETIME, VIEW_MESSAGE_BY_ID, QUERY_MESSAGE, topic create/update/delete, config
bodies, topic and consume stats, and every group's consume stats (GET_BROKER_CONSUME_STATS, mqadmin
brokerConsumeStats) (spec §8.8). Broker-level requests (runtime info, broker config, stats,
cleaning) are in `broker_admin`."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from shoal.broker import limits
from shoal.broker.broker_stats import GROUP_GET_NUMS
from shoal.formats.json_compat import dumps
from shoal.formats.topic_attributes import MixedMessageTypeError, TopicAttributeError, alter, parse_modification
from shoal.formats.topics import validate_topic_name
from shoal.protocol import RemotingCommand, ResponseCode, make_response
from shoal.protocol.bodies import (
    ConsumeStats,
    ConsumeStatsList,
    MessageQueue,
    OffsetWrapper,
    TopicOffset,
    TopicStatsTable,
)
from shoal.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumeStatsInBrokerRequestHeader,
    GetConsumeStatsRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    GetSubscriptionGroupConfigRequestHeader,
    GetTopicConfigRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    ViewMessageRequestHeader,
)
from shoal.remoting.server import ServerConnection
from shoal.store.limits import QUERY_MESSAGES_MAX_COUNT, QUERY_UNIQUE_KEY_MAX_COUNT
from shoal.store.metadata import TopicConfig

if TYPE_CHECKING:
    from collections.abc import Callable

    from shoal.broker.broker_stats import BrokerStats
    from shoal.broker.client_manager import ConsumerManager
    from shoal.broker.config import BrokerConfig
    from shoal.broker.group_manager import SubscriptionGroupManager
    from shoal.broker.replication.role import BrokerRoleState
    from shoal.broker.topic_manager import TopicManager
    from shoal.store import MessageStore
    from shoal.store.metadata import ConsumerOffsetTable


class AdminProcessors:
    """Given only what these requests touch: the broker's config and role, topics, groups,
    offsets, the online consumers and the sampled stats (consume stats), the store,
    `register_all` (tell the NameServers now) and `broker_address` (ip:port, as registered)."""

    def __init__(
        self,
        *,
        config: BrokerConfig,
        role: BrokerRoleState,
        topics: TopicManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetTable,
        consumers: ConsumerManager,
        stats: BrokerStats,
        store: MessageStore,
        register_all: Callable[[], Awaitable[None]],
        broker_address: Callable[[], str],
    ) -> None:
        self.config = config
        self.role = role
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.consumers = consumers
        self.stats = stats
        self.store = store
        self.register_all = register_all
        self.broker_address = broker_address

    # --- offsets ---
    def max_offset(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = GetMaxOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self.store.max_offset_in_queue(header.topic, header.queue_id)
        return make_response(
            request, ResponseCode.SUCCESS, ext_fields=GetMaxOffsetResponseHeader(offset=offset).to_ext_fields()
        )

    def min_offset(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = GetMinOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self.store.min_offset_in_queue(header.topic, header.queue_id)
        return make_response(
            request, ResponseCode.SUCCESS, ext_fields=GetMinOffsetResponseHeader(offset=offset).to_ext_fields()
        )

    def search_offset(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = SearchOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self.store.offset_by_time(header.topic, header.queue_id, header.timestamp_ms)
        return make_response(
            request, ResponseCode.SUCCESS, ext_fields=SearchOffsetResponseHeader(offset=offset).to_ext_fields()
        )

    def earliest_time(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = GetEarliestMsgStoretimeRequestHeader.from_ext_fields(request.ext_fields)
        stamp = self.store.earliest_message_time(header.topic, header.queue_id)
        return make_response(
            request,
            ResponseCode.SUCCESS,
            ext_fields=GetEarliestMsgStoretimeResponseHeader(timestamp_ms=stamp).to_ext_fields(),
        )

    # --- lookups ---
    def view_message(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand | None:
        header = ViewMessageRequestHeader.from_ext_fields(request.ext_fields)
        found = self.store.message_at(header.offset)
        if found is None:
            return make_response(
                request, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {header.offset}"
            )
        _record, view = found
        connection.send(make_response(request, ResponseCode.SUCCESS), [view])
        view.release()
        return None

    def query_message(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand | None:
        header = QueryMessageRequestHeader.from_ext_fields(request.ext_fields)
        count = min(header.max_num, QUERY_MESSAGES_MAX_COUNT)
        if header.unique_key_query:
            count = QUERY_UNIQUE_KEY_MAX_COUNT
        store = self.store
        if not store.index_enabled:
            return make_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                "message index is disabled on this broker (messageIndexEnable=false)",
            )
        offsets, stamp, physical = store.index_query(
            header.topic, header.key, count, header.begin_timestamp_ms, header.end_timestamp_ms
        )
        response_header = QueryMessageResponseHeader(
            index_last_update_timestamp_ms=stamp, index_last_update_phyoffset=physical
        )
        views = []
        for offset in offsets:
            found = store.message_at(offset)
            if found is not None:
                views.append(found[1])
        if not views:
            return make_response(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                "can not find message, maybe time range not correct",
                ext_fields=response_header.to_ext_fields(),
            )
        connection.send(make_response(request, ResponseCode.SUCCESS, ext_fields=response_header.to_ext_fields()), views)
        for view in views:
            view.release()
        return None

    # --- topics ---
    def create_topic(
        self, connection: ServerConnection, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        header = CreateTopicRequestHeader.from_ext_fields(request.ext_fields)
        if not self.role.is_master:
            return make_response(request, ResponseCode.SYSTEM_ERROR, "a slave does not accept topic changes")
        problem = validate_topic_name(header.topic)
        if problem is not None:
            return make_response(request, ResponseCode.SYSTEM_ERROR, problem)
        if header.topic == header.default_topic or self.topics.is_system(header.topic):
            return make_response(
                request, ResponseCode.SYSTEM_ERROR, f"the topic[{header.topic}] is conflict with system topic."
            )
        queues_max = limits.TOPIC_QUEUES_MAX_COUNT
        if not (0 < header.read_queue_nums <= queues_max and 0 < header.write_queue_nums <= queues_max):
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"queue numbers must be within 1..{queues_max}")
        if header.topic_filter_type not in ("SINGLE_TAG", "MULTI_TAG"):
            return make_response(
                request, ResponseCode.SYSTEM_ERROR, f"unknown topicFilterType {header.topic_filter_type!r}"
            )
        current = self.topics.get(header.topic)
        try:
            attributes = alter(
                current.attributes if current is not None else {},
                parse_modification(header.attributes or ""),
                create=current is None,
                mixed_allowed=self.config.enable_mixed_message_type,
            )
        except MixedMessageTypeError as refused:
            return make_response(request, ResponseCode.INVALID_PARAMETER, str(refused))
        except TopicAttributeError as refused:  # RocketMQ's AttributeUtil throws; the processor answers SYSTEM_ERROR
            return make_response(request, ResponseCode.SYSTEM_ERROR, str(refused))
        self.topics.update(
            TopicConfig(
                header.topic,
                read_queue_nums=header.read_queue_nums,
                write_queue_nums=header.write_queue_nums,
                perm=header.perm,
                topic_filter_type=header.topic_filter_type,
                topic_sys_flag=header.topic_sys_flag or 0,
                order=header.order,
            ).with_attributes(attributes)
        )
        return self._after_registration(make_response(request, ResponseCode.SUCCESS))

    async def _after_registration(self, response: RemotingCommand) -> RemotingCommand:
        """Answer once the NameServers route the change, as RocketMQ's registerIncrementBrokerData
        does: a client that asks for the route right after creating a topic finds it."""
        await self.register_all()
        return response

    def delete_topic(
        self, connection: ServerConnection, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        """DELETE_TOPIC_IN_BROKER, answered once the NameServers have the topic set without it: a
        registration round built before the deletion (still carrying the topic) is then answered
        too, so it cannot route the topic again after the admin's DELETE_TOPIC_IN_NAMESRV."""
        header = DeleteTopicRequestHeader.from_ext_fields(request.ext_fields)
        if self.topics.is_system(header.topic):
            return make_response(
                request, ResponseCode.SYSTEM_ERROR, f"the topic[{header.topic}] is a system topic and cannot be deleted"
            )
        deleted = self.topics.delete(header.topic)
        self.offsets.remove_topic(header.topic)
        self.store.delete_topic(header.topic)
        response = make_response(request, ResponseCode.SUCCESS)
        return self._after_registration(response) if deleted else response

    def all_topic_config(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        return make_response(request, ResponseCode.SUCCESS, body=self.topics.table.encode().encode("utf-8"))

    def all_consumer_offsets(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        return make_response(request, ResponseCode.SUCCESS, body=self.offsets.encode().encode("utf-8"))

    def topic_config(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_TOPIC_CONFIG (351, 5.x): what a 5.x admin client reads back after creating a topic."""
        header = GetTopicConfigRequestHeader.from_ext_fields(request.ext_fields)
        topic = self.topics.get(header.topic)
        if topic is None:
            return make_response(
                request, ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {header.topic}"
            )
        return make_response(request, ResponseCode.SUCCESS, body=dumps(topic.to_json()).encode("utf-8"))

    def subscription_group_config(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_SUBSCRIPTIONGROUP_CONFIG (352, 5.x): one group's config, the fields of newer
        versions (consumeMessageOrderly, groupRetryPolicy, ...) as they were written."""
        header = GetSubscriptionGroupConfigRequestHeader.from_ext_fields(request.ext_fields)
        group = self.groups.find(header.group)
        if group is None:
            return make_response(
                request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"No group in this broker. group: {header.group}"
            )
        return make_response(request, ResponseCode.SUCCESS, body=dumps(group.to_json()).encode("utf-8"))

    def all_subscription_groups(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        return make_response(request, ResponseCode.SUCCESS, body=self.groups.table.encode().encode("utf-8"))

    def topic_stats(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = GetTopicStatsInfoRequestHeader.from_ext_fields(request.ext_fields)
        topic = self.topics.get(header.topic)
        if topic is None:
            return make_response(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
        table = {}
        for queue_id in range(topic.write_queue_nums):
            mq = MessageQueue(topic=header.topic, broker_name=self.config.broker_name, queue_id=queue_id)
            max_offset = self.store.max_offset_in_queue(header.topic, queue_id)
            last = 0
            if max_offset > 0:
                unit = self.store.last_unit(header.topic, queue_id)
                last = (self.store.store_time_at(unit.physical_offset) or 0) if unit is not None else 0
            table[mq] = TopicOffset(
                min_offset=self.store.min_offset_in_queue(header.topic, queue_id),
                max_offset=max_offset,
                last_update_timestamp_ms=last,
            )
        return make_response(request, ResponseCode.SUCCESS, body=TopicStatsTable(offset_table=table).to_json())

    def consume_stats(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumeStatsRequestHeader.from_ext_fields(request.ext_fields)
        topics = [header.topic] if header.topic else sorted(self.offsets.topics_of_group(header.consumer_group))
        table = {}
        for topic in topics:
            config = self.topics.get(topic)
            if config is None:
                continue
            committed = self.offsets.offsets_of_group(header.consumer_group, topic)
            for queue_id in range(config.read_queue_nums):
                mq = MessageQueue(topic=topic, broker_name=self.config.broker_name, queue_id=queue_id)
                table[mq] = OffsetWrapper(
                    broker_offset=self.store.max_offset_in_queue(topic, queue_id),
                    consumer_offset=committed.get(queue_id, 0),
                    last_timestamp_ms=0,
                )
        return make_response(request, ResponseCode.SUCCESS, body=ConsumeStats(offset_table=table).to_json())

    def broker_consume_stats(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CONSUME_STATS (AdminBrokerProcessor.fetchAllConsumeStatsInBroker): for every
        subscription group, one ConsumeStats per topic it committed offsets on (all write queues),
        skipping topics the broker no longer has, topics an online group does not subscribe to, and
        with `isOrder` topics that are not ordered; `totalDiff` sums broker minus consumer offsets."""
        header = GetConsumeStatsInBrokerRequestHeader.from_ext_fields(request.ext_fields)
        topics_of: dict[str, set[str]] = {}
        for key in self.offsets.all():
            topic, separator, group = key.partition("@")
            if separator:
                topics_of.setdefault(group, set()).add(topic)
        entries: list[dict[str, tuple[ConsumeStats, ...]]] = []
        total_diff = 0
        for group in sorted(self.groups.table.all()):
            online = self.consumers.find(group)
            per_topic: list[ConsumeStats] = []
            for topic in sorted(topics_of.get(group, ())):
                config = self.topics.get(topic)
                if config is None or (header.is_order and not config.order):
                    continue
                if online is not None and online.subscriptions and topic not in online.subscriptions:
                    continue
                stats = self._group_stats_on(group, topic, config.write_queue_nums)
                total_diff += sum(
                    wrapper.broker_offset - wrapper.consumer_offset for wrapper in stats.offset_table.values()
                )
                per_topic.append(stats)
            entries.append({group: tuple(per_topic)})
        body = ConsumeStatsList(
            broker_addr=self.broker_address(), consume_stats_list=tuple(entries), total_diff=total_diff
        )
        return make_response(request, ResponseCode.SUCCESS, body=body.to_json())

    def _group_stats_on(self, group: str, topic: str, queue_count: int) -> ConsumeStats:
        """One group's ConsumeStats on one topic: per queue the max offset, the committed offset (0
        when none) and the store time of the last message consumed; the minute's pulled-message TPS."""
        table = {}
        for queue_id in range(queue_count):
            consumer_offset = max(self.offsets.query(group, topic, queue_id), 0)
            last_timestamp_ms = 0
            unit = self.store.unit_at(topic, queue_id, consumer_offset - 1) if consumer_offset > 0 else None
            if unit is not None:
                last_timestamp_ms = max(self.store.store_time_at(unit.physical_offset) or 0, 0)
            mq = MessageQueue(topic=topic, broker_name=self.config.broker_name, queue_id=queue_id)
            table[mq] = OffsetWrapper(
                broker_offset=max(self.store.max_offset_in_queue(topic, queue_id), 0),
                consumer_offset=consumer_offset,
                last_timestamp_ms=last_timestamp_ms,
            )
        item = self.stats.item(GROUP_GET_NUMS, f"{topic}@{group}")
        tps = item.windows()[0].tps if item is not None else 0.0
        return ConsumeStats(offset_table=table, consume_tps=tps)
