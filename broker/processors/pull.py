"""PULL_MESSAGE (spec §8.8): read a ConsumeQueue, answer with raw CommitLog records, or hold the pull.

The response body is the records exactly as stored, sent with one gather write straight from
the mapped CommitLog (no per-message copies). A tag subscription filters by the ConsumeQueue's
tagsCode; a SQL92 one (`enablePropertyFilter`) by each message's properties, read from the CommitLog
records the store returns (shoal.broker.filter.MessageFilter). A pull whose messages all fail the
filter answers PULL_RETRY_IMMEDIATELY (NO_MATCHED_MESSAGE) with the offset after them, so the client
moves past them at once.

A pull can overtake the heartbeat that announces its subscription's version: a Java push consumer
raises the version when a rebalance hands it queues, sends the pulls for those queues and, on
another thread, the heartbeat. Answered SUBSCRIPTION_NOT_LATEST (FILTER_DATA_NOT_LATEST for SQL92)
at once, as RocketMQ answers, each such queue waits 1 s (pullTimeDelayMillsWhenException) before
its first message. So a pull that is only ahead of the heartbeat waits up to
SUBSCRIPTION_CATCH_UP_WAIT_S for it, and is answered as usual once it is there; the code comes after
that wait if the version never arrives.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from shoal.broker.filter import (
    FilterError,
    MessageFilter,
    Sql92Filter,
    compile_filter,
    is_tag_type,
    keep_matching,
    message_filter_for,
    parse_subscription,
)
from shoal.broker.filter.limits import SQL92_SCAN_UNITS_MAX_COUNT
from shoal.broker.limits import (
    SUBSCRIPTION_CATCH_UP_HELD_MAX_COUNT,
    SUBSCRIPTION_CATCH_UP_POLL_S,
    SUBSCRIPTION_CATCH_UP_WAIT_S,
)
from shoal.broker.long_polling import PullRequestHoldService
from shoal.broker.topic_manager import PERM_READ
from shoal.formats.topics import SCHEDULE_TOPIC
from shoal.protocol import PullSysFlag, RemotingCommand, ResponseCode, make_response
from shoal.protocol.headers import PullMessageRequestHeader, PullMessageResponseHeader
from shoal.remoting.server import ServerConnection
from shoal.store import GetMessageStatus, GetResult

if TYPE_CHECKING:
    import asyncio

    from shoal.broker.client_manager import ConsumerManager
    from shoal.broker.config import BrokerConfig
    from shoal.broker.group_manager import SubscriptionGroupManager
    from shoal.broker.metrics import BrokerMetrics
    from shoal.broker.replication.role import BrokerRoleState
    from shoal.broker.topic_manager import TopicManager
    from shoal.store import MessageStore
    from shoal.store.metadata import ConsumerOffsetTable

log = logging.getLogger(__name__)

_COMMIT_OFFSET: int = PullSysFlag.COMMIT_OFFSET.value
_SUSPEND: int = PullSysFlag.SUSPEND.value
_SUBSCRIPTION: int = PullSysFlag.SUBSCRIPTION.value
"""Plain ints: `int & IntFlag` runs enum code, about 1 us a test on every pull."""

_CODE_OF_STATUS = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}

_CORRECTED_STATUSES = frozenset(
    {
        GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
        GetMessageStatus.NO_MESSAGE_IN_QUEUE,
        GetMessageStatus.OFFSET_TOO_SMALL,
        GetMessageStatus.OFFSET_OVERFLOW_BADLY,
        GetMessageStatus.OFFSET_FOUND_NULL,
    }
)
"""Statuses whose nextBeginOffset a master corrects (RocketMQ's nextOffsetCorrection) and a slave does not."""

_NOT_LATEST_CODES = frozenset({ResponseCode.SUBSCRIPTION_NOT_LATEST, ResponseCode.FILTER_DATA_NOT_LATEST})
"""Answers a heartbeat on its way may make wrong: held for SUBSCRIPTION_CATCH_UP_WAIT_S first."""


class PullProcessor:
    """Given only what a pull touches: the broker's config and role, topics, groups, offsets, the
    consumer registry (for subscriptions), the store and the metrics. It owns the long-polling
    service that holds its pulls (`hold`) and calls `pull_again` when one wakes."""

    def __init__(
        self,
        *,
        config: BrokerConfig,
        role: BrokerRoleState,
        topics: TopicManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetTable,
        consumers: ConsumerManager,
        store: MessageStore,
        metrics: BrokerMetrics,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.config = config
        self.role = role
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.consumers = consumers
        self.store = store
        self.metrics = metrics
        self.hold = PullRequestHoldService(loop, self.pull_again, store.max_offset_in_queue)
        self._loop = loop
        self._held_for_subscription = 0
        """Pulls waiting for their subscription's version now (at most SUBSCRIPTION_CATCH_UP_HELD_MAX_COUNT)."""

    def __call__(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand | None:
        return self.process(connection, request, allow_suspend=True)

    def pull_again(self, connection: ServerConnection, request: RemotingCommand) -> None:
        """Re-run a held pull (woken or timed out); always answers."""
        response = self.process(connection, request, allow_suspend=False)
        if response is not None:
            connection.reply(response, request)

    def _await_subscription(self, connection: ServerConnection, request: RemotingCommand, deadline_s: float) -> None:
        """Run a pull held for its subscription's version again: answered as usual once the version
        is there, or with the not-latest code it had at `deadline_s`."""
        self._held_for_subscription -= 1  # `process` counts it again if it holds it again
        if not connection.is_open:
            return
        response = self.process(connection, request, allow_suspend=True, subscription_deadline_s=deadline_s)
        if response is not None:
            connection.reply(response, request)

    def process(
        self,
        connection: ServerConnection,
        request: RemotingCommand,
        *,
        allow_suspend: bool,
        subscription_deadline_s: float | None = None,
    ) -> RemotingCommand | None:
        """Answer `request`, or return None when it is answered later (held, or sent with its body).
        `subscription_deadline_s`: the loop time until which a not-latest subscription is waited for
        (None: a first try, which sets it)."""
        header = PullMessageRequestHeader.from_ext_fields(request.ext_fields)
        if not self.config.broker_permission & PERM_READ:
            return make_response(
                request,
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_name}] pulling message is forbidden",
            )
        group = self.groups.find_or_create(header.consumer_group)
        if group is None:
            return make_response(
                request,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{header.consumer_group}] does not exist",
            )
        if not group.consume_enable:
            return make_response(
                request, ResponseCode.NO_PERMISSION, f"subscription group no permission, {header.consumer_group}"
            )
        topic = self.topics.get(header.topic)
        if topic is None:
            return make_response(
                request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist, apply first please!"
            )
        if not topic.perm & PERM_READ:
            return make_response(
                request, ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] pulling message is forbidden"
            )
        if not 0 <= header.queue_id < topic.read_queue_nums:
            return make_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] topicConfig.readQueueNums:"
                f"[{topic.read_queue_nums}] consumer:[{connection.address}]",
            )
        message_filter = self._message_filter(request, header, consume_broadcast=group.consume_broadcast_enable)
        if isinstance(message_filter, RemotingCommand):
            if allow_suspend and message_filter.code in _NOT_LATEST_CODES:
                now = self._loop.time()
                deadline_s = subscription_deadline_s or now + SUBSCRIPTION_CATCH_UP_WAIT_S
                if now < deadline_s and self._held_for_subscription < SUBSCRIPTION_CATCH_UP_HELD_MAX_COUNT:
                    self._held_for_subscription += 1
                    self._loop.call_later(
                        SUBSCRIPTION_CATCH_UP_POLL_S, self._await_subscription, connection, request, deadline_s
                    )
                    return None
            return message_filter
        found = self._read(header, message_filter)
        code = self._code_of(found.status, header.queue_offset)
        next_offset = found.next_begin_offset
        if found.status in (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE):
            next_offset = 0
        if not self.role.is_master and found.status in _CORRECTED_STATUSES:
            # A slave may simply not have the offset yet: never move a consumer (spec §8.8, offsetCheckInSlave=false).
            next_offset = header.queue_offset
            if code == ResponseCode.PULL_OFFSET_MOVED:
                code = ResponseCode.PULL_RETRY_IMMEDIATELY
        if allow_suspend and header.sys_flag & _COMMIT_OFFSET and self.role.is_master:
            self.offsets.commit(header.consumer_group, header.topic, header.queue_id, header.commit_offset)
        self.metrics.pulls(header.topic, header.consumer_group, found.count, found.total_bytes)
        if (
            code == ResponseCode.PULL_NOT_FOUND
            and allow_suspend
            and header.sys_flag & _SUSPEND
            and self.hold.park(
                connection,
                request,
                header.topic,
                header.queue_id,
                header.queue_offset,
                header.suspend_timeout_ms if self.config.long_polling_enable else self.config.short_polling_time_ms,
                None if message_filter.passes_everything else message_filter.matches_arrival,
            )
        ):
            found.release()
            return None
        response_header = PullMessageResponseHeader(
            suggest_which_broker_id=self.groups.suggest_broker_id(group, found.suggest_pulling_from_slave),
            next_begin_offset=next_offset,
            min_offset=found.min_offset,
            max_offset=found.max_offset,
        )
        response = make_response(request, code, found.status.value, ext_fields=response_header.to_ext_fields())
        if found.count:
            connection.send(response, found.body_parts)
            found.release()
            return None
        return response

    def _message_filter(
        self, request: RemotingCommand, header: PullMessageRequestHeader, *, consume_broadcast: bool
    ) -> MessageFilter | RemotingCommand:
        """The pull's filter, from its own subscription (sysFlag SUBSCRIPTION: DefaultMQPullConsumer,
        lite pull) or from what the group's heartbeats registered; else RocketMQ's refusal (a response)."""
        sql92: Sql92Filter | None = None
        tag_codes: frozenset[int] | None = None
        if header.sys_flag & _SUBSCRIPTION:
            expression_type = header.expression_type
            if is_tag_type(expression_type):
                tag_codes = parse_subscription(header.subscription)
            else:
                try:
                    sql92 = compile_filter(expression_type, header.subscription)
                except FilterError as failure:
                    log.warning("pull of %s on %s: %s", header.consumer_group, header.topic, failure)
                    if self.config.enable_property_filter:
                        return make_response(
                            request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed"
                        )
        else:
            info = self.consumers.find(header.consumer_group)
            if info is None:
                return make_response(
                    request,
                    ResponseCode.SUBSCRIPTION_NOT_EXIST,
                    f"the consumer's group info not exist, group: {header.consumer_group}",
                )
            if not consume_broadcast and info.message_model == "BROADCASTING":
                return make_response(
                    request,
                    ResponseCode.NO_PERMISSION,
                    f"the consumer group[{header.consumer_group}] can not consume by broadcast way",
                )
            subscription = info.subscriptions.get(header.topic)
            if subscription is None:
                return make_response(
                    request,
                    ResponseCode.SUBSCRIPTION_NOT_EXIST,
                    f"the consumer's subscription not exist, topic: {header.topic}",
                )
            if subscription.sub_version < header.sub_version:
                return make_response(
                    request, ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
                )
            expression_type = subscription.expression_type
            if is_tag_type(expression_type):
                tag_codes = parse_subscription(subscription.sub_string)
            else:
                registered = self.consumers.filters.get(header.topic, header.consumer_group)
                if registered is None:
                    return make_response(
                        request,
                        ResponseCode.FILTER_DATA_NOT_EXIST,
                        "The broker's consumer filter data is not exist!Your expression may be wrong!",
                    )
                if registered.client_version < header.sub_version:
                    return make_response(
                        request, ResponseCode.FILTER_DATA_NOT_LATEST, "the consumer's consumer filter data not latest"
                    )
                sql92 = registered.compiled
        if not is_tag_type(expression_type) and not self.config.enable_property_filter:
            return make_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {expression_type}",
            )
        if header.topic == SCHEDULE_TOPIC:
            tag_codes = None  # tagsCode holds delivery times there (spec gotcha 17)
        message_filter = message_filter_for(
            header.topic,
            header.consumer_group,
            tag_codes,
            sql92,
            self.consumers.filters,
            filter_support_retry=self.config.filter_support_retry,
        )
        return message_filter

    def _read(self, header: PullMessageRequestHeader, message_filter: MessageFilter) -> GetResult:
        """The store's answer, its messages filtered by properties when the filter needs them. Up to
        SQL92_SCAN_UNITS_MAX_COUNT units that all fail it are read past in one pull (RocketMQ's
        maxFilterMessageCount); the answer is then NO_MATCHED_MESSAGE at the offset after them."""
        tag_codes = message_filter.tag_codes
        tag_filter = None if tag_codes is None else tag_codes.__contains__
        offset = header.queue_offset
        while True:
            found = self.store.get_messages(
                header.topic,
                header.queue_id,
                offset,
                header.max_msg_nums,
                tag_filter,
                coalesce=not message_filter.reads_properties,  # a SQL92 filter reads each message
            )
            if not message_filter.reads_properties:
                return found
            if found.status not in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE):
                if offset == header.queue_offset:
                    return found
                found.release()  # the end (or a gap) after unmatched messages: continue from there
                return GetResult(GetMessageStatus.NO_MATCHED_MESSAGE, offset, found.min_offset, found.max_offset)
            keep_matching(found, message_filter)
            if found.messages:
                return found
            found.status = GetMessageStatus.NO_MATCHED_MESSAGE
            if found.next_begin_offset - header.queue_offset >= SQL92_SCAN_UNITS_MAX_COUNT:
                return found
            if found.next_begin_offset <= offset:  # the store made no progress: answer, never spin
                return found
            offset = found.next_begin_offset

    @staticmethod
    def _code_of(status: GetMessageStatus, offset: int) -> int:
        if status in (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE):
            return ResponseCode.PULL_OFFSET_MOVED if offset != 0 else ResponseCode.PULL_NOT_FOUND
        return _CODE_OF_STATUS[status]
