"""Offsets, lookups and administration: GET_MAX/MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP,
GET_EARLIEST_MSG_STORETIME, VIEW_MESSAGE_BY_ID, QUERY_MESSAGE, topic create/update/delete, config
bodies, topic and consume stats (spec §8.8). Broker-level requests (runtime info, broker config,
stats, cleaning) are in `broker_admin`."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from shoal.broker import limits
from shoal.broker.remoting_server import ServerConnection
from shoal.formats.topics import validate_topic_name
from shoal.protocol import RemotingCommand, ResponseCode, make_response
from shoal.protocol.bodies import (
    ConsumerOffsetSerializeWrapper,
    ConsumeStats,
    MessageQueue,
    OffsetWrapper,
    TopicOffset,
    TopicStatsTable,
)
from shoal.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumeStatsRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    GetTopicStatsInfoRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    ViewMessageRequestHeader,
)
from shoal.store.limits import QUERY_MESSAGES_MAX_COUNT, QUERY_UNIQUE_KEY_MAX_COUNT
from shoal.store.metadata import TopicConfig

if TYPE_CHECKING:
    from collections.abc import Callable

    from shoal.broker.config import BrokerConfig
    from shoal.broker.group_manager import SubscriptionGroupManager
    from shoal.broker.replication.role import BrokerRoleState
    from shoal.broker.topic_manager import TopicManager
    from shoal.store import MessageStore
    from shoal.store.metadata import ConsumerOffsetTable


class AdminProcessors:
    """Given only what these requests touch: the broker's config and role, topics, groups,
    offsets, the store, and `register_all` (tell the NameServers now)."""

    def __init__(
        self,
        *,
        config: BrokerConfig,
        role: BrokerRoleState,
        topics: TopicManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetTable,
        store: MessageStore,
        register_all: Callable[[], Awaitable[None]],
    ) -> None:
        self.config = config
        self.role = role
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.store = store
        self.register_all = register_all

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
        if store.index is None:
            return make_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                "message index is disabled on this broker (messageIndexEnable=false)",
            )
        offsets = store.index.query(header.topic, header.key, count, header.begin_timestamp_ms, header.end_timestamp_ms)
        stamp, physical = store.index.last_update
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
        self.topics.update(
            TopicConfig(
                header.topic,
                read_queue_nums=header.read_queue_nums,
                write_queue_nums=header.write_queue_nums,
                perm=header.perm,
                topic_filter_type=header.topic_filter_type,
                topic_sys_flag=header.topic_sys_flag or 0,
                order=header.order,
            )
        )
        return self._after_registration(make_response(request, ResponseCode.SUCCESS))

    async def _after_registration(self, response: RemotingCommand) -> RemotingCommand:
        """Answer once the NameServers route the change, as RocketMQ's registerIncrementBrokerData
        does: a client that asks for the route right after creating a topic finds it."""
        await self.register_all()
        return response

    def delete_topic(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = DeleteTopicRequestHeader.from_ext_fields(request.ext_fields)
        if self.topics.is_system(header.topic):
            return make_response(
                request, ResponseCode.SYSTEM_ERROR, f"the topic[{header.topic}] is a system topic and cannot be deleted"
            )
        self.topics.delete(header.topic)
        self.offsets.remove_topic(header.topic)
        self.store.delete_topic(header.topic)
        return make_response(request, ResponseCode.SUCCESS)

    def all_topic_config(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        return make_response(request, ResponseCode.SUCCESS, body=self.topics.table.encode().encode("utf-8"))

    def all_consumer_offsets(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        return make_response(request, ResponseCode.SUCCESS, body=self.offsets.encode().encode("utf-8"))

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
                queue = self.store.find_consume_queue(header.topic, queue_id)
                unit = queue.last_unit() if queue is not None else None
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

    def all_consumer_offsets_wrapper(self) -> ConsumerOffsetSerializeWrapper:
        return ConsumerOffsetSerializeWrapper(offset_table=self.offsets.all())
