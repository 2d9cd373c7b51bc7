"""Consumer-group administration (RocketMQ's AdminBrokerProcessor and Broker2Client):
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, DELETE_SUBSCRIPTIONGROUP, GET_PRODUCER_CONNECTION_LIST,
QUERY_TOPIC_CONSUME_BY_WHO, INVOKE_BROKER_TO_RESET_OFFSET (pushing RESET_CONSUMER_CLIENT_OFFSET to
the group's live consumers), CONSUME_MESSAGE_DIRECTLY and GET_CONSUMER_RUNNING_INFO (forwarded to one
consumer).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from shoal.broker import limits
from shoal.broker.offset_reset import RESET_TO_MAX_OFFSET_TIMESTAMP, plan_reset
from shoal.formats.errors import FormatError
from shoal.formats.message_id import decode_offset_msg_id
from shoal.formats.topics import validate_group_name
from shoal.protocol import LanguageCode, RemotingCommand, RequestCode, ResponseCode, make_request, make_response
from shoal.protocol.bodies import (
    ClientConnection,
    GroupList,
    MessageQueue,
    ProducerConnection,
    ResetOffsetBody,
    ResetOffsetBodyForC,
)
from shoal.protocol.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetProducerConnectionListRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
)
from shoal.protocol.json_compat import loads
from shoal.remoting import RemotingError, RemotingTimeoutError
from shoal.remoting.server import ServerConnection
from shoal.store.json_files import MetadataFormatError
from shoal.store.metadata import SubscriptionGroupConfig

if TYPE_CHECKING:
    from collections.abc import Callable

    from shoal.broker.client_manager import ClientChannel, ConsumerManager, ProducerManager
    from shoal.broker.config import BrokerConfig
    from shoal.broker.group_manager import SubscriptionGroupManager
    from shoal.broker.replication.role import BrokerRoleState
    from shoal.broker.topic_manager import TopicManager
    from shoal.store import MessageStore
    from shoal.store.metadata import ConsumerOffsetTable

log = logging.getLogger(__name__)

RESET_OFFSET_MIN_VERSION = 28
"""MQVersion V3_0_7_SNAPSHOT: older clients cannot apply RESET_CONSUMER_CLIENT_OFFSET."""
CALL_CONSUMER_MIN_VERSION = 62
"""MQVersion V3_1_8_SNAPSHOT: older clients cannot answer CONSUME_MESSAGE_DIRECTLY."""
CALL_CONSUMER_TIMEOUT_S = 10.0
"""How long a forwarded request waits for the consumer (Broker2Client.callClient's 10 s); the
admin waits 15 s (3 x its 5 s timeout), so it hears our CONSUME_MSG_TIMEOUT first."""
SLAVE_REFUSES = "Can't modify topic or subscription group from slave broker, please execute it from master broker."


class GroupAdminProcessors:
    """Given only what these requests touch: the broker's config and role, topics, groups,
    offsets, the consumer and producer registries, the store, and `next_opaque` (ids of the
    requests the broker sends to clients)."""

    def __init__(
        self,
        *,
        config: BrokerConfig,
        role: BrokerRoleState,
        topics: TopicManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetTable,
        consumers: ConsumerManager,
        producers: ProducerManager,
        store: MessageStore,
        next_opaque: Callable[[], int],
    ) -> None:
        self.config = config
        self.role = role
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.consumers = consumers
        self.producers = producers
        self.store = store
        self.next_opaque = next_opaque

    # --- subscription groups ---
    def update_group(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: the body is a SubscriptionGroupConfig, stored whole."""
        if not self.role.is_master:
            return make_response(request, ResponseCode.SYSTEM_ERROR, SLAVE_REFUSES)
        if not request.body:
            return make_response(request, ResponseCode.SYSTEM_ERROR, "no subscription group config in the body")
        try:
            group = SubscriptionGroupConfig.from_json(loads(request.body))
        except MetadataFormatError as error:
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"bad subscription group config: {error}")
        problem = validate_group_name(group.group_name)
        if problem is not None:
            return make_response(request, ResponseCode.SYSTEM_ERROR, problem)
        queues_max = limits.TOPIC_QUEUES_MAX_COUNT
        if not 0 <= group.retry_queue_nums <= queues_max:
            return make_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"retryQueueNums {group.retry_queue_nums} is out of range 0..{queues_max}",
            )
        old = self.groups.update(group)
        action = "updated" if old is not None else "created"
        log.info("subscription group %s %s by %s: %s", group.group_name, action, connection.address, group.to_json())
        return make_response(request, ResponseCode.SUCCESS)

    def delete_group(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """DELETE_SUBSCRIPTIONGROUP; with `removeOffset` also the group's committed offsets. A
        group that does not exist is no error (RocketMQ only logs it)."""
        if not self.role.is_master:
            return make_response(request, ResponseCode.SYSTEM_ERROR, SLAVE_REFUSES)
        header = DeleteSubscriptionGroupRequestHeader.from_ext_fields(request.ext_fields)
        removed = self.groups.delete(header.group_name)
        if removed is None:
            log.warning("delete subscription group %s by %s: no such group", header.group_name, connection.address)
        removed_offsets = 0
        if header.remove_offset:
            removed_offsets = self.offsets.remove_group(header.group_name)
            self.offsets.persist()
        log.info(
            "subscription group %s deleted by %s (offsets of %d topics removed)",
            header.group_name,
            connection.address,
            removed_offsets,
        )
        return make_response(request, ResponseCode.SUCCESS)

    # --- connections and who consumes ---
    def producer_connections(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_PRODUCER_CONNECTION_LIST: the live clients of a producer group."""
        header = GetProducerConnectionListRequestHeader.from_ext_fields(request.ext_fields)
        channels = self.producers.groups.get(header.producer_group)
        if not channels:
            return make_response(
                request, ResponseCode.SYSTEM_ERROR, f"the producer group[{header.producer_group}] not exist"
            )
        body = ProducerConnection(connection_set=tuple(_connection_of(channel) for channel in channels.values()))
        return make_response(request, ResponseCode.SUCCESS, body=body.to_json())

    def topic_consumed_by(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """QUERY_TOPIC_CONSUME_BY_WHO: groups subscribed now plus groups with committed offsets."""
        header = QueryTopicConsumeByWhoRequestHeader.from_ext_fields(request.ext_fields)
        groups = {info.group for info in self.consumers.groups.values() if header.topic in info.subscriptions}
        groups |= self.offsets.groups_of_topic(header.topic)
        return make_response(request, ResponseCode.SUCCESS, body=GroupList(tuple(sorted(groups))).to_json())

    # --- reset by time ---
    def reset_offset(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """INVOKE_BROKER_TO_RESET_OFFSET: compute each queue's offset for the timestamp, push it to
        every live consumer of the group (oneway) and answer the table (`shoal.broker.offset_reset`)."""
        header = ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
        topic = self.topics.get(header.topic)
        if topic is None:
            return make_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"[reset-offset] reset offset failed, no topic in this broker. topic={header.topic}",
            )
        store = self.store

        def target_of(queue_id: int) -> int:
            if header.timestamp_ms == RESET_TO_MAX_OFFSET_TIMESTAMP:
                return store.max_offset_in_queue(header.topic, queue_id)
            return store.offset_by_time(header.topic, queue_id, header.timestamp_ms)

        committed = self.offsets.offsets_of_group(header.group, header.topic)
        plan = plan_reset(topic.write_queue_nums, committed, target_of, force=header.is_force)
        if plan.never_committed_queue_id is not None:
            return make_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"THe consumer group <{header.group}> not exist: it has no committed offset on queue "
                f"{plan.never_committed_queue_id} of topic {header.topic}",
            )
        broker_name = self.config.broker_name
        table = {MessageQueue(header.topic, broker_name, queue_id): offset for queue_id, offset in plan.offsets.items()}
        info = self.consumers.find(header.group)
        if info is None or not info.channels:
            return make_response(
                request,
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"Consumer not online, so can not reset offset, Group: {header.group} Topic: {header.topic} "
                f"Timestamp: {header.timestamp_ms}",
            )
        too_old = [channel for channel in info.channels.values() if channel.version < RESET_OFFSET_MIN_VERSION]
        if too_old:
            return make_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"the client does not support this feature. version={too_old[0].version} "
                f"(client {too_old[0].client_id}; MQVersion V3_0_7_SNAPSHOT or later needed)",
            )
        is_c = request.language == LanguageCode.CPP
        push_body = (ResetOffsetBodyForC(table) if is_c else ResetOffsetBody(table)).to_json()
        push_header = ResetOffsetRequestHeader(
            topic=header.topic, group=header.group, timestamp_ms=header.timestamp_ms, is_force=header.is_force
        ).to_ext_fields()
        for channel in info.channels.values():
            push = make_request(
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                opaque=self.next_opaque(),
                ext_fields=push_header,
                body=push_body,
                oneway=True,
            )
            channel.connection.send(push)
            log.info(
                "[reset-offset] topic %s group %s to %d (force %s) pushed to %s",
                header.topic,
                header.group,
                header.timestamp_ms,
                header.is_force,
                channel.client_id,
            )
        return make_response(request, ResponseCode.SUCCESS, body=ResetOffsetBody(table).to_json())

    # --- requests forwarded to one consumer ---
    async def consume_message_directly(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """CONSUME_MESSAGE_DIRECTLY: the message (by offset message id) goes in the body, the broker's
        name in the header, to the named consumer; its answer (ConsumeMessageDirectlyResult) is ours."""
        header = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(request.ext_fields)
        body = self._record_bytes(header.msg_id)
        if body is None:
            return make_response(
                request, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset message id {header.msg_id}"
            )
        ext_fields = {**request.ext_fields, "brokerName": self.config.broker_name}
        return await self._call_consumer(request, header.consumer_group, header.client_id, ext_fields, body)

    async def consumer_running_info(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO (mqadmin consumerStatus): forwarded as is to the named consumer, whose
        ConsumerRunningInfo (properties, subscriptions, per-queue process state, status) is the answer."""
        header = GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
        return await self._call_consumer(
            request, header.consumer_group, header.client_id, dict(request.ext_fields), bytes(request.body or b"")
        )

    def _record_bytes(self, msg_id: str | None) -> bytes | None:
        if not msg_id:
            return None
        try:
            _host, physical_offset = decode_offset_msg_id(msg_id)
        except (FormatError, ValueError):
            return None
        found = self.store.message_at(physical_offset)
        if found is None:
            return None
        _record, view = found
        try:
            return bytes(view)
        finally:
            view.release()

    async def _call_consumer(
        self, request: RemotingCommand, group: str, client_id: str | None, ext_fields: dict[str, str], body: bytes
    ) -> RemotingCommand:
        """Forward `request` (new opaque, same code) to one consumer and relay its answer."""
        info = self.consumers.find(group)
        channel = info.channels.get(client_id or "") if info is not None else None
        if channel is None or not channel.connection.is_open:
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        if channel.version < CALL_CONSUMER_MIN_VERSION:
            return make_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer <{client_id}> Version <{channel.version}> too low to finish, please upgrade it to "
                "V3_1_8_SNAPSHOT",
            )
        forward = make_request(request.code, opaque=self.next_opaque(), ext_fields=ext_fields, body=body)
        try:
            answer = await channel.connection.request(forward, CALL_CONSUMER_TIMEOUT_S)
        except RemotingTimeoutError as error:
            return make_response(
                request, ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {error}"
            )
        except RemotingError as error:
            return make_response(
                request, ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {error}"
            )
        return make_response(request, answer.code, answer.remark, ext_fields=answer.ext_fields, body=answer.body)


def _connection_of(channel: ClientChannel) -> ClientConnection:
    return ClientConnection(
        client_id=channel.client_id,
        client_addr=channel.connection.address,
        language=channel.language,
        version=channel.version,
    )
