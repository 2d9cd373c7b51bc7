"""Client bookkeeping and consumer progress: HEART_BEAT, UNREGISTER_CLIENT, CHECK_CLIENT_CONFIG,
GET_CONSUMER_LIST_BY_GROUP, QUERY/UPDATE_CONSUMER_OFFSET, LOCK/UNLOCK_BATCH_MQ and
CONSUMER_SEND_MSG_BACK (spec §8.8, §10.3, §13)."""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING

from shoal.broker.filter import check_subscription
from shoal.broker.processors.send import SEND_BACK_MIN_VERSION
from shoal.broker.schedule import Timing
from shoal.broker.topic_manager import PERM_READ, PERM_WRITE
from shoal.formats.json_compat import dumps
from shoal.formats.message_id import offset_msg_id
from shoal.formats.properties import (
    DELAY_TIME_LEVEL,
    ORIGIN_MESSAGE_ID,
    RETRY_TOPIC,
    decode_properties,
    encode_properties,
)
from shoal.formats.topics import dlq_topic, retry_topic, validate_group_name
from shoal.protocol import RemotingCommand, ResponseCode, make_response
from shoal.protocol.bodies import (
    CheckClientRequestBody,
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    UnlockBatchRequestBody,
)
from shoal.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from shoal.remoting.server import ServerConnection
from shoal.store import MessageStore, MessageToStore

if TYPE_CHECKING:
    from collections.abc import Callable

    from shoal.broker.client_manager import ConsumerManager, ProducerManager, RebalanceLockManager
    from shoal.broker.config import BrokerConfig
    from shoal.broker.group_manager import SubscriptionGroupManager
    from shoal.broker.schedule import ScheduleMessageService
    from shoal.broker.topic_manager import TopicManager
    from shoal.store.metadata import ConsumerOffsetTable

log = logging.getLogger(__name__)

RETRY_FIRST_DELAY_LEVEL = 3
"""A send-back with delay level 0 waits level 3 + reconsumeTimes (RocketMQ's rule: 10 s first)."""


class ConsumerProcessors:
    """Given only what these requests touch: the config (enablePropertyFilter), topics, groups,
    offsets, the consumer and producer registries, the orderly locks, the store and the delay
    service (send-back), and `on_append` (let the Dispatcher index the records sent back)."""

    def __init__(
        self,
        *,
        config: BrokerConfig,
        topics: TopicManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetTable,
        consumers: ConsumerManager,
        producers: ProducerManager,
        locks: RebalanceLockManager,
        store: MessageStore,
        schedule: ScheduleMessageService,
        on_append: Callable[[], None],
    ) -> None:
        self.config = config
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.consumers = consumers
        self.producers = producers
        self.locks = locks
        self.store = store
        self.schedule = schedule
        self.on_append = on_append

    def heartbeat(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """Register the client's groups. A group with a name no group may have is skipped, as
        RocketMQ 5 skips it, and the heartbeat still answers SUCCESS (a remark names the skipped).
        Groups and retry topics it creates are written after the answer (shoal.broker.persist_soon:
        a slow answer costs a new Java push consumer a second of SUBSCRIPTION_NOT_LATEST pulls)."""
        data = HeartbeatData.from_json(request.body or b"{}")
        language = str(getattr(request.language, "name", request.language))
        skipped = []
        for consumer in data.consumer_data_set:
            problem = validate_group_name(consumer.group_name)
            if problem is not None:
                skipped.append(problem)
                continue
            # A new group and its retry topic reach the disk just after the answer (persist_soon).
            group = self.groups.find_or_create(consumer.group_name, persist_now=False)
            if group is not None:
                self.topics.create_if_absent(
                    retry_topic(consumer.group_name),
                    max(1, group.retry_queue_nums),
                    PERM_READ | PERM_WRITE,
                    persist_now=False,
                )
            self.consumers.register(connection, data.client_id, language, request.version, consumer)
        for producer in data.producer_data_set:
            if not producer.group_name.strip():
                skipped.append("The specified producer group is blank.")
                continue
            self.producers.register(connection, producer.group_name, data.client_id, language, request.version)
        if skipped:
            log.debug("heartbeat from %s: skipped %s", connection.address, skipped)
        return make_response(request, ResponseCode.SUCCESS, f"skipped: {' '.join(skipped)}" if skipped else None)

    def unregister_client(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = UnregisterClientRequestHeader.from_ext_fields(request.ext_fields)
        if header.consumer_group:
            self.consumers.unregister(header.consumer_group, header.client_id)
        if header.producer_group:
            self.producers.unregister(header.producer_group, header.client_id)
        return make_response(request, ResponseCode.SUCCESS)

    def check_client_config(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """CHECK_CLIENT_CONFIG (a push consumer's start, for each non-tag subscription): SUCCESS, or
        SYSTEM_ERROR without enablePropertyFilter, or SUBSCRIPTION_PARSE_FAILED with the parser's
        message (RocketMQ 4.9.7's ClientManageProcessor.checkClientConfig)."""
        body = CheckClientRequestBody.from_json(request.body) if request.body else None
        subscription = body.subscription_data if body is not None else None
        if subscription is None:
            return make_response(request, ResponseCode.SUCCESS)
        verdict = check_subscription(
            subscription.expression_type,
            subscription.sub_string,
            property_filter_enabled=self.config.enable_property_filter,
        )
        if not verdict.ok:
            log.warning(
                "client %s of %s: subscription %r refused: %s",
                body.client_id if body is not None else "?",
                body.group if body is not None else "?",
                subscription.sub_string,
                verdict.remark,
            )
        return make_response(request, verdict.code, verdict.remark)

    def consumer_list(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumerListByGroupRequestHeader.from_ext_fields(request.ext_fields)
        info = self.consumers.find(header.consumer_group)
        if info is None or not info.channels:
            return make_response(
                request, ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {header.consumer_group}"
            )
        body = GetConsumerListByGroupResponseBody(consumer_id_list=tuple(info.client_ids()))
        return make_response(request, ResponseCode.SUCCESS, body=body.to_json())

    def consumer_connections(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_CONNECTION_LIST: the group's live clients and subscriptions (ConsumerConnection)."""
        header = GetConsumerListByGroupRequestHeader.from_ext_fields(request.ext_fields)
        info = self.consumers.find(header.consumer_group)
        if info is None or not info.channels:
            return make_response(
                request, ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{header.consumer_group}] not online"
            )
        body = {
            "connectionSet": [
                {
                    "clientAddr": channel.connection.address,
                    "clientId": channel.client_id,
                    "language": channel.language,
                    "version": channel.version,
                }
                for channel in info.channels.values()
            ],
            "consumeFromWhere": info.consume_from_where,
            "consumeType": info.consume_type,
            "messageModel": info.message_model,
            "subscriptionTable": {topic: data.to_dict() for topic, data in info.subscriptions.items()},
        }
        return make_response(request, ResponseCode.SUCCESS, body=dumps(body).encode("utf-8"))

    def query_offset(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """The committed offset; for a group that never committed, 0 while the queue's head is
        still in memory (spec §8.8), else QUERY_NOT_FOUND so the client applies consume-from-where."""
        header = QueryConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self.offsets.query(header.consumer_group, header.topic, header.queue_id)
        if offset < 0:
            store = self.store
            if store.min_offset_in_queue(header.topic, header.queue_id) <= 0 and not store.queue_head_on_disk(
                header.topic, header.queue_id
            ):
                offset = 0
        if offset < 0:
            return make_response(
                request, ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
            )
        return make_response(
            request, ResponseCode.SUCCESS, ext_fields=QueryConsumerOffsetResponseHeader(offset=offset).to_ext_fields()
        )

    def update_offset(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = UpdateConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        self.offsets.commit(header.consumer_group, header.topic, header.queue_id, header.commit_offset)
        return make_response(request, ResponseCode.SUCCESS)

    def lock_batch(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        body = LockBatchRequestBody.from_json(request.body or b"{}")
        wanted = [(mq.topic, mq.broker_name, mq.queue_id) for mq in body.mq_set]
        granted = self.locks.try_lock(body.consumer_group, body.client_id, wanted)
        response = LockBatchResponseBody(
            lock_ok_mq_set=tuple(MessageQueue(topic=t, broker_name=b, queue_id=q) for t, b, q in granted)
        )
        return make_response(request, ResponseCode.SUCCESS, body=response.to_json())

    def unlock_batch(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        body = UnlockBatchRequestBody.from_json(request.body or b"{}")
        queues = [(mq.topic, mq.broker_name, mq.queue_id) for mq in body.mq_set]
        self.locks.unlock(body.consumer_group, body.client_id, queues)
        return make_response(request, ResponseCode.SUCCESS)

    def send_back(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """CONSUMER_SEND_MSG_BACK (spec §10.3): store the consumed message again for %RETRY%<group>,
        delayed by the request's level or 3 + reconsumeTimes (10 s, 30 s, 1 m, ... with the default
        table) through SCHEDULE_TOPIC_XXXX; to %DLQ%<group> at once after maxReconsumeTimes or when
        the level is negative. RETRY_TOPIC and ORIGIN_MESSAGE_ID are set, reconsumeTimes + 1."""
        header = ConsumerSendMsgBackRequestHeader.from_ext_fields(request.ext_fields)
        group = self.groups.find_or_create(header.group)
        if group is None:
            return make_response(
                request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {header.group}"
            )
        if group.retry_queue_nums <= 0:
            return make_response(request, ResponseCode.SUCCESS)  # the group wants no retries: dropped
        found = self.store.message_at(header.offset)
        if found is None:
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}")
        record, view = found
        properties = decode_properties(
            view[record.properties_position : record.properties_position + record.properties_length]
        )
        body = bytes(view[record.body_position : record.body_position + record.body_length])
        view.release()
        original_topic = properties.get(RETRY_TOPIC) or record.topic
        max_times = group.retry_max_times
        if request.version >= SEND_BACK_MIN_VERSION and header.max_reconsume_times is not None:
            max_times = header.max_reconsume_times
        to_dlq = record.reconsume_times >= max_times or header.delay_level < 0
        if to_dlq:
            target, queue_id = dlq_topic(header.group), 0
            self.topics.create_if_absent(target, 1, PERM_READ | PERM_WRITE)
        else:
            target = retry_topic(header.group)
            queue_id = random.randrange(group.retry_queue_nums)
            self.topics.create_if_absent(target, group.retry_queue_nums, PERM_READ | PERM_WRITE)
        properties[RETRY_TOPIC] = original_topic
        properties.setdefault(ORIGIN_MESSAGE_ID, offset_msg_id(record.store_host, record.physical_offset))
        properties.pop(DELAY_TIME_LEVEL, None)  # a leftover of an earlier delay (spec §16 gotcha 17)
        message = MessageToStore(
            topic=target,
            queue_id=queue_id,
            body=body,
            properties=encode_properties(properties),
            flag=record.flag,
            sysflag=record.sysflag,
            born_timestamp_ms=record.born_timestamp,
            born_host=record.born_host,
            reconsume_times=record.reconsume_times + 1,
        )
        level = 0
        if not to_dlq:
            level = header.delay_level if header.delay_level > 0 else RETRY_FIRST_DELAY_LEVEL + record.reconsume_times
            message = self.schedule.park(message, Timing(level=level))
        result = self.store.append_message(message)
        if result.append is None:
            return make_response(request, ResponseCode.SYSTEM_ERROR, result.remark or result.status.value)
        self.on_append()
        log.debug(
            "message at %d of %s sent back to %s (attempt %d, delay level %d)",
            header.offset,
            original_topic,
            target,
            record.reconsume_times + 1,
            level,
        )
        return make_response(request, ResponseCode.SUCCESS)
