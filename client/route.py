"""Topic routes from the nameservers: which queues to publish to and subscribe from, and where
each broker lives (spec §8.9, §8.10, `MQClientInstance`).

Pure parts: `publish_queues`, `subscribe_queues`, `default_topic_route` (the TBW102 fallback
with `min(4, readQueueNums)` queues per broker, as the Java producer does) and `order_topic_queues`.
`NameServerClient` sends a request to one nameserver and fails over to the next on transport
errors. `RouteTable` caches routes per topic, keeps the last good route when a refresh fails,
and derives broker addresses from every cached route.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from shoal.client import limits
from shoal.client.errors import MQBrokerError, NoRouteError, NoWritableQueueError, RemotingError
from shoal.client.transport import ClientRemoting
from shoal.protocol import (
    BrokerData,
    GetRouteInfoRequestHeader,
    MessageQueue,
    PermName,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    TopicRouteData,
)
from shoal.protocol.errors import BodyFormatError

log = logging.getLogger(__name__)

MASTER_ID = 0


def parse_namesrv_addresses(addresses: str | Sequence[str]) -> tuple[str, ...]:
    """Nameserver addresses from "a:9876;b:9876" (Java's form), a comma list, or a sequence."""
    items = [addresses] if isinstance(addresses, str) else list(addresses)
    result: list[str] = []
    for item in items:
        for part in item.replace(",", ";").split(";"):
            address = part.strip()
            if address and address not in result:
                result.append(address)
    if not result:
        raise ValueError("at least one nameserver address is needed")
    if len(result) > limits.NAMESRV_ADDRESSES_MAX_COUNT:
        raise ValueError(f"more than {limits.NAMESRV_ADDRESSES_MAX_COUNT} nameserver addresses")
    return tuple(result)


_WRITE: int = PermName.WRITE.value
_READ: int = PermName.READ.value
"""Plain ints: `int & IntFlag` runs enum code (about 1 us); a send asks for every queue it picks."""


def is_writeable(perm: int) -> bool:
    return perm & _WRITE != 0


def is_readable(perm: int) -> bool:
    return perm & _READ != 0


def master_address(broker: BrokerData) -> str | None:
    """The master (brokerId 0) address of a broker group, if it has one."""
    return broker.broker_addrs.get(MASTER_ID)


def order_topic_queues(topic: str, order_topic_conf: str) -> tuple[MessageQueue, ...]:
    """Queues from `orderTopicConf` ("brokerA:4;brokerB:4"), which replaces queueDatas when set."""
    queues: list[MessageQueue] = []
    for item in order_topic_conf.split(";"):
        name, _, count = item.partition(":")
        if name and count.strip().isdigit():
            queues.extend(MessageQueue(topic, name, queue_id) for queue_id in range(int(count)))
    return tuple(queues)


def publish_queues(topic: str, route: TopicRouteData) -> tuple[MessageQueue, ...]:
    """`topicRouteData2TopicPublishInfo`: writable queues of brokers that have a master."""
    if route.order_topic_conf:
        return order_topic_queues(topic, route.order_topic_conf)
    brokers = {broker.broker_name: broker for broker in route.broker_datas}
    queues: list[MessageQueue] = []
    for queue_data in sorted(route.queue_datas, key=lambda item: item.broker_name):
        if not is_writeable(queue_data.perm):
            continue
        broker = brokers.get(queue_data.broker_name)
        if broker is None or master_address(broker) is None:
            continue
        queues.extend(MessageQueue(topic, queue_data.broker_name, qid) for qid in range(queue_data.write_queue_nums))
    return tuple(queues)


def subscribe_queues(topic: str, route: TopicRouteData) -> tuple[MessageQueue, ...]:
    """`topicRouteData2TopicSubscribeInfo`: readable queues of every broker, sorted."""
    queues = [
        MessageQueue(topic, queue_data.broker_name, queue_id)
        for queue_data in route.queue_datas
        if is_readable(queue_data.perm)
        for queue_id in range(queue_data.read_queue_nums)
    ]
    return tuple(sorted(queues))


def default_topic_route(route: TopicRouteData, queue_nums: int) -> TopicRouteData:
    """The TBW102 route a producer borrows for a topic without a route: each broker capped at
    `min(queue_nums, readQueueNums)` read and write queues."""
    queue_datas = tuple(
        replace(
            queue_data,
            read_queue_nums=min(queue_nums, queue_data.read_queue_nums),
            write_queue_nums=min(queue_nums, queue_data.read_queue_nums),
        )
        for queue_data in route.queue_datas
    )
    return replace(route, queue_datas=queue_datas)


@dataclass(frozen=True, slots=True)
class TopicPublishInfo:
    """Where a topic can be sent: its queues in Java's order, and whether they are borrowed."""

    topic: str
    queues: tuple[MessageQueue, ...]
    from_default_topic: bool = False
    order_topic: bool = False


class NameServerClient:
    """Requests to the nameservers: one is used until it fails, then the next is tried."""

    def __init__(self, addresses: Sequence[str], remoting: ClientRemoting, timeout_s: float) -> None:
        assert addresses, "at least one nameserver"
        self.addresses = tuple(addresses)
        self._remoting = remoting
        self._timeout_s = timeout_s
        self._current = random.randrange(len(self.addresses))

    async def invoke(
        self,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes | None = None,
        *,
        timeout_s: float | None = None,
    ) -> RemotingCommand:
        """The response of the first nameserver that answers; RemotingError if none does."""
        last_error: RemotingError | None = None
        for attempt in range(len(self.addresses)):
            index = (self._current + attempt) % len(self.addresses)
            address = self.addresses[index]
            try:
                response = await self._remoting.invoke(
                    address, code, ext_fields, body, timeout_s=timeout_s or self._timeout_s
                )
            except RemotingError as error:
                log.warning("nameserver %s failed: %s", address, error)
                last_error = error
                continue
            self._current = index
            return response
        assert last_error is not None
        raise last_error

    async def get_route(self, topic: str) -> TopicRouteData | None:
        """The topic's route, or None when the nameserver knows no route for it."""
        header = GetRouteInfoRequestHeader(topic=topic)
        response = await self.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, header.to_ext_fields())
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerError(response.code, response.remark, "nameserver")
        if not response.body:
            return None  # the C++ client treats an empty body like TOPIC_NOT_EXIST
        try:
            return TopicRouteData.from_json(response.body)
        except BodyFormatError as error:
            raise MQBrokerError(
                ResponseCode.SYSTEM_ERROR, f"unreadable route of {topic}: {error}", "nameserver"
            ) from None


class RouteTable:
    """Routes of the topics in use, and the broker addresses they name."""

    def __init__(self, namesrv: NameServerClient, *, default_topic: str = "TBW102", default_queue_nums: int = 4):
        self.namesrv = namesrv
        self.default_topic = default_topic
        self.default_queue_nums = default_queue_nums
        self.routes: dict[str, TopicRouteData] = {}
        self._borrowed: dict[str, float] = {}  # topics whose route is TBW102's -> last check (monotonic s)
        self._publish_cache: dict[str, tuple[TopicRouteData, TopicPublishInfo]] = {}
        self._brokers: dict[str, dict[int, str]] = {}
        self._refreshed_after_failure_s: dict[str, float] = {}  # topic -> last such fetch (monotonic s)
        self._fetching: dict[str, asyncio.Future[TopicRouteData | None]] = {}

    async def refresh(self, topic: str) -> TopicRouteData | None:
        """Fetch `topic`'s route and cache it; None (cache untouched) when there is none. Callers
        that ask while a fetch of the topic is in flight share it: 100,000 sends started at once
        on an unknown topic make one GET_ROUTEINFO_BY_TOPIC, not 100,000."""
        fetching = self._fetching.get(topic)
        if fetching is None:
            fetching = asyncio.ensure_future(self._fetch(topic))
            self._fetching[topic] = fetching
            fetching.add_done_callback(lambda done: self._forget_fetch(topic, done))
        return await asyncio.shield(fetching)

    def _forget_fetch(self, topic: str, done: asyncio.Future[TopicRouteData | None]) -> None:
        if self._fetching.get(topic) is done:
            del self._fetching[topic]
        if not done.cancelled():
            done.exception()  # retrieved here: every caller may have been cancelled meanwhile

    async def _fetch(self, topic: str) -> TopicRouteData | None:
        route = await self.namesrv.get_route(topic)
        if route is None:
            return None
        self.routes[topic] = route
        self._borrowed.pop(topic, None)
        self._rebuild_brokers()
        return route

    async def refresh_all(self, topics: Iterable[str]) -> None:
        """Refresh every topic; failures keep the last good route (logged)."""
        for topic in topics:
            try:
                await self.refresh(topic)
            except (RemotingError, MQBrokerError) as error:
                log.warning("refreshing the route of %s failed: %s", topic, error)

    def refresh_due(self, topic: str) -> bool:
        """Whether `topic`'s route may be fetched again after a failure (and note that it is):
        at most every ROUTE_REFRESH_AFTER_FAILURE_MIN_INTERVAL_S, so a dead cluster is not hammered."""
        now_s = time.monotonic()
        last_s = self._refreshed_after_failure_s.get(topic)
        if last_s is not None and now_s - last_s < limits.ROUTE_REFRESH_AFTER_FAILURE_MIN_INTERVAL_S:
            return False
        self._refreshed_after_failure_s[topic] = now_s
        return True

    async def publish_info(self, topic: str, *, refresh: bool = False) -> TopicPublishInfo:
        """Queues to send `topic` to, fetched when unknown (or `refresh`), else TBW102's.

        A route without a writable queue of a broker with a master (a master died, and no slave
        is promoted yet) is fetched again at once (throttled by `refresh_due`): a promotion is
        seen within moments of its registration, not at the next poll. NoWritableQueueError
        (retriable) while there is still none."""
        info = await self._publish_info(topic, refresh)
        if not info.queues and not refresh and self.refresh_due(topic):
            info = await self._publish_info(topic, True)
        if not info.queues:
            raise NoWritableQueueError(f"topic {topic} has no writable queue on a broker with a master")
        return info

    def cached_publish_info(self, topic: str) -> TopicPublishInfo | None:
        """`publish_info` without a coroutine, when the answer is already known: the topic's own
        route, cached and with writable queues (a send's usual case). None: ask `publish_info`."""
        route = self.routes.get(topic)
        cached = self._publish_cache.get(topic)
        if route is None or cached is None or cached[0] is not route or topic in self._borrowed:
            return None
        info = cached[1]
        return info if info.queues and not info.from_default_topic else None

    async def _publish_info(self, topic: str, refresh: bool) -> TopicPublishInfo:
        route = self.routes.get(topic)
        checked_at = self._borrowed.get(topic)
        recheck = checked_at is not None and time.monotonic() - checked_at >= limits.BORROWED_ROUTE_RECHECK_S
        if route is None or refresh or recheck:
            try:
                fetched = await self.refresh(topic)
                if fetched is None and topic in self._borrowed:
                    self._borrowed[topic] = time.monotonic()
                    if refresh:
                        fetched = await self._borrow_default_route(topic)
                elif fetched is None and route is None:
                    fetched = await self._borrow_default_route(topic)
            except (RemotingError, MQBrokerError):
                if route is None:
                    raise
                fetched = None  # keep sending by the last good route
            route = fetched or route
        if route is None:
            raise NoRouteError(f"no route info of topic {topic} (nor of {self.default_topic})")
        cached = self._publish_cache.get(topic)
        borrowed = topic in self._borrowed
        if cached is not None and cached[0] is route and cached[1].from_default_topic == borrowed:
            return cached[1]  # the hot path: one dict lookup per send
        info = TopicPublishInfo(
            topic,
            publish_queues(topic, route),
            from_default_topic=borrowed,
            order_topic=bool(route.order_topic_conf),
        )
        self._publish_cache[topic] = (route, info)
        return info

    async def _borrow_default_route(self, topic: str) -> TopicRouteData | None:
        default = await self.namesrv.get_route(self.default_topic)
        if default is None:
            return None
        route = default_topic_route(default, self.default_queue_nums)
        self.routes[topic] = route
        self._borrowed[topic] = time.monotonic()
        self._rebuild_brokers()
        return route

    async def subscribe_queues(self, topic: str, *, refresh: bool = False) -> tuple[MessageQueue, ...]:
        """Readable queues of `topic`; NoRouteError when it has no route."""
        route = self.routes.get(topic)
        if route is None or refresh:
            route = await self.refresh(topic) or route
        if route is None:
            raise NoRouteError(f"no route info of topic {topic}")
        return subscribe_queues(topic, route)

    def _rebuild_brokers(self) -> None:
        brokers: dict[str, dict[int, str]] = {}
        for route in self.routes.values():
            for broker in route.broker_datas:
                brokers.setdefault(broker.broker_name, {}).update(broker.broker_addrs)
        self._brokers = brokers

    def master_address(self, broker_name: str) -> str | None:
        """`findBrokerAddressInPublish`: the master of `broker_name`."""
        return self._brokers.get(broker_name, {}).get(MASTER_ID)

    async def master_address_of(self, mq: MessageQueue) -> str:
        """The master of `mq`'s broker, fetching `mq`'s topic route once more if it is unknown;
        NoRouteError when there is none."""
        address = self.master_address(mq.broker_name)
        if address is None:
            await self.refresh(mq.topic)
            address = self.master_address(mq.broker_name)
        if address is None:
            raise NoRouteError(f"broker {mq.broker_name} of {mq.topic} has no master address")
        return address

    def broker_address(self, broker_name: str, broker_id: int = MASTER_ID) -> tuple[str, int] | None:
        """`findBrokerAddressInSubscribe`: (address, id) of `broker_id`, else the master, else any."""
        addrs = self._brokers.get(broker_name)
        if not addrs:
            return None
        for candidate in (broker_id, MASTER_ID):
            if candidate in addrs:
                return addrs[candidate], candidate
        first = min(addrs)
        return addrs[first], first

    def any_broker_address(self, topic: str) -> str | None:
        """`findBrokerAddrByTopic`: the master (else any address) of a random broker of `topic`."""
        route = self.routes.get(topic)
        if route is None or not route.broker_datas:
            return None
        broker = random.choice(route.broker_datas)
        address = master_address(broker)
        if address is None and broker.broker_addrs:
            address = broker.broker_addrs[min(broker.broker_addrs)]
        return address

    def broker_addresses(self, *, masters_only: bool) -> set[str]:
        """Every known broker address (heartbeats go to masters only when no consumer runs)."""
        return {
            address
            for addrs in self._brokers.values()
            for broker_id, address in addrs.items()
            if broker_id == MASTER_ID or not masters_only
        }
