"""`PullConsumer`: the application chooses queues and offsets and pulls itself (`DefaultMQPullConsumer`).

Offsets are read and written at the broker directly (QUERY_CONSUMER_OFFSET /
UPDATE_CONSUMER_OFFSET); nothing is cached or persisted in the background. A blocking pull lets
the broker hold the request until a message arrives or `timeout_s` passes (long polling).
"""

from __future__ import annotations

from collections.abc import Sequence

from shoal.client import limits
from shoal.client.client_instance import ClientInstance
from shoal.client.errors import NoRouteError
from shoal.client.lifecycle import InstanceLifecycle
from shoal.client.message import check_group
from shoal.client.pull import PullResult, pull_request_fields, pull_result_of
from shoal.client.route import MASTER_ID
from shoal.client.settings import ClientSettings
from shoal.client.subscription import Subscription
from shoal.formats.message_id import wall_clock_ms
from shoal.protocol import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    MessageQueue,
    RequestCode,
)


class PullConsumer(InstanceLifecycle):
    """Pulls chosen queues at chosen offsets for consumer group `group`."""

    def __init__(
        self,
        group: str,
        namesrv_addrs: str | Sequence[str],
        *,
        client_settings: ClientSettings | None = None,
    ) -> None:
        check_group(group)
        super().__init__(f"pull consumer {group}")
        self.group = group
        self._instance = ClientInstance(namesrv_addrs, client_settings or ClientSettings())
        self._instance.heartbeat_data = self._heartbeat_data
        self._instance.topics_in_use = lambda: list(self._subscriptions)
        self._subscriptions: dict[str, Subscription] = {}
        self._suggested_broker: dict[MessageQueue, int] = {}

    @property
    def client_id(self) -> str:
        return self._instance.client_id

    async def _unregister(self) -> None:
        await self._instance.unregister(consumer_group=self.group)

    def _heartbeat_data(self) -> HeartbeatData:
        data = ConsumerData(
            group_name=self.group,
            consume_type=ConsumeType.CONSUME_ACTIVELY,
            message_model=MessageModel.CLUSTERING,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            subscription_data_set=tuple(sub.to_subscription_data() for sub in self._subscriptions.values()),
        )
        return HeartbeatData(client_id=self._instance.client_id, consumer_data_set=(data,))

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of `topic` (`fetchSubscribeMessageQueues`)."""
        self._check_running()
        queues = await self._instance.routes.subscribe_queues(topic, refresh=True)
        if topic not in self._subscriptions:
            self._subscriptions[topic] = Subscription.build(topic, "*", wall_clock_ms())
        return list(queues)

    async def pull(
        self,
        mq: MessageQueue,
        expression: str,
        offset: int,
        max_nums: int = 32,
        *,
        block: bool = False,
        timeout_s: float = 10.0,
    ) -> PullResult:
        """Pull up to `max_nums` messages matching `expression` from `offset`.

        Without `block`, `timeout_s` bounds the request. With `block`, the broker holds the pull
        for up to `timeout_s` when nothing is there yet; the call then takes at most `timeout_s`
        plus the broker's answer margin (a Java broker answers held pulls up to ~5 s late).
        """
        self._check_running()
        if not 1 <= max_nums <= limits.PULL_BATCH_MAX_COUNT:
            raise ValueError(f"max_nums must be in [1, {limits.PULL_BATCH_MAX_COUNT}]")
        if offset < 0:
            raise ValueError("offset must not be negative")
        subscription = self._subscriptions.get(mq.topic)
        if subscription is None or subscription.expression != Subscription.build(mq.topic, expression, 0).expression:
            subscription = Subscription.build(mq.topic, expression, wall_clock_ms())
            self._subscriptions[mq.topic] = subscription
        address, _broker_id = await self._pull_address(mq)
        suspend_timeout_ms = int(timeout_s * 1000) if block else None
        fields = pull_request_fields(
            self.group, mq, subscription, offset, max_nums, commit_offset=0, suspend_timeout_ms=suspend_timeout_ms
        )
        rpc_timeout_s = timeout_s + limits.LONG_POLL_RESPONSE_MARGIN_S if block else timeout_s
        response = await self._instance.remoting.invoke(
            address, RequestCode.PULL_MESSAGE, fields, timeout_s=min(rpc_timeout_s, limits.REQUEST_TIMEOUT_MAX_S)
        )
        result = pull_result_of(response, mq, subscription, address)
        self._suggested_broker[mq] = result.suggest_which_broker_id
        return result

    async def _pull_address(self, mq: MessageQueue) -> tuple[str, int]:
        routes = self._instance.routes
        found = routes.broker_address(mq.broker_name, self._suggested_broker.get(mq, MASTER_ID))
        if found is None:
            await routes.refresh(mq.topic)
            found = routes.broker_address(mq.broker_name, MASTER_ID)
        if found is None:
            raise NoRouteError(f"broker {mq.broker_name} of {mq.topic} has no address")
        return found

    async def _master(self, mq: MessageQueue) -> str:
        return await self._instance.routes.master_address_of(mq)

    async def update_offset(self, mq: MessageQueue, offset: int) -> None:
        """Store the group's offset of `mq` at its master broker (UPDATE_CONSUMER_OFFSET)."""
        self._check_running()
        await self._instance.api.update_consumer_offset(await self._master(mq), self.group, mq, offset)

    async def fetch_offset(self, mq: MessageQueue) -> int | None:
        """The group's stored offset of `mq`; None when the broker has none."""
        self._check_running()
        return await self._instance.api.query_consumer_offset(await self._master(mq), self.group, mq)

    async def min_offset(self, mq: MessageQueue) -> int:
        self._check_running()
        return await self._instance.api.min_offset(await self._master(mq), mq)

    async def max_offset(self, mq: MessageQueue) -> int:
        self._check_running()
        return await self._instance.api.max_offset(await self._master(mq), mq)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset stored at or after `timestamp_ms` (SEARCH_OFFSET_BY_TIMESTAMP)."""
        self._check_running()
        return await self._instance.api.search_offset(await self._master(mq), mq, timestamp_ms)

    async def earliest_msg_store_time_ms(self, mq: MessageQueue) -> int:
        self._check_running()
        return await self._instance.api.earliest_msg_store_time_ms(await self._master(mq), mq)
