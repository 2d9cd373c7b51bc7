"""The proxy's remoting side: topic routes from the NameServers, and the requests it makes of brokers.

Like RocketMQ 5's proxy in cluster mode, every gRPC call becomes remoting requests to the master
of the broker group that holds the queue: SEND_MESSAGE_V2 for a send, POP_MESSAGE / ACK_MESSAGE /
CHANGE_MESSAGE_INVISIBLETIME for consumption, CONSUMER_SEND_MSG_BACK for a dead letter,
END_TRANSACTION for a transaction, HEART_BEAT to be found for transaction checks.
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

from shoal.client.errors import RemotingError
from shoal.client.route import NameServerClient, master_address
from shoal.client.transport import ClientRemoting
from shoal.formats.json_compat import loads
from shoal.formats.topic_attributes import TopicMessageType, topic_message_type
from shoal.protocol import RemotingCommand, RequestCode, ResponseCode
from shoal.protocol.acl_signature import Credentials
from shoal.protocol.bodies import HeartbeatData, ProducerData
from shoal.protocol.errors import BodyFormatError
from shoal.protocol.headers import GetSubscriptionGroupConfigRequestHeader, GetTopicConfigRequestHeader
from shoal.protocol.route_bodies import TopicConfig, TopicRouteData
from shoal.protocol.v2 import definition_pb2 as v2
from shoal.proxy.errors import ProxyError
from shoal.proxy.limits import REQUEST_TIMEOUT_S, ROUTE_REFRESH_S
from shoal.remoting.client import RemotingConnection

log = logging.getLogger(__name__)


CheckHandler = Callable[[str, RemotingCommand], Awaitable[None]]
"""Called with a broker's address and its CHECK_TRANSACTION_STATE request."""


class Brokers:
    """Routes (cached for `ROUTE_REFRESH_S`) and requests to broker masters. The proxy heartbeats
    every master it knows as producer group `producer_group`, so that a broker checking an orphaned
    half message finds this connection and sends CHECK_TRANSACTION_STATE here (`on_check`)."""

    def __init__(
        self,
        namesrv_addrs: Sequence[str],
        producer_group: str,
        on_check: CheckHandler,
        credentials: Credentials | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.remoting = ClientRemoting(handler=self._on_request, credentials=credentials, ssl_context=ssl_context)
        self.namesrv = NameServerClient(namesrv_addrs, self.remoting, REQUEST_TIMEOUT_S)
        self.producer_group = producer_group
        self.client_id = f"{socket.gethostname()}@shoal-proxy-{os.getpid()}"
        self.on_check = on_check
        self._routes: dict[str, tuple[float, TopicRouteData]] = {}
        self._masters: dict[str, str] = {}
        self._groups: dict[str, tuple[float, bool]] = {}
        self._topic_types: dict[str, tuple[float, TopicMessageType]] = {}
        """Topic -> (when asked, monotonic s; its message.type)."""
        """Consumer group -> (when asked, monotonic s; FIFO)."""
        self._greeted: set[str] = set()
        """Masters heartbeated at least once."""

    async def _on_request(self, connection: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.CHECK_TRANSACTION_STATE:
            await self.on_check(connection.address, request)
        return None

    async def heartbeat(self, *, new_only: bool = False) -> None:
        """HEART_BEAT every known master (or only those never heartbeated) as the proxy's producer."""
        body = HeartbeatData(client_id=self.client_id, producer_data_set=(ProducerData(self.producer_group),)).to_json()
        for address in sorted(set(self._masters.values())):
            if new_only and address in self._greeted:
                continue
            try:
                await self.remoting.invoke(address, RequestCode.HEART_BEAT, body=body, timeout_s=REQUEST_TIMEOUT_S)
                self._greeted.add(address)
            except RemotingError as failure:
                log.warning("heartbeat to broker %s failed: %s", address, failure)

    async def route(self, topic: str, *, refresh: bool = False) -> TopicRouteData:
        """The topic's route; ProxyError(TOPIC_NOT_FOUND) when the NameServers know none."""
        cached = self._routes.get(topic)
        now = time.monotonic()
        if cached is not None and not refresh and now - cached[0] < ROUTE_REFRESH_S:
            return cached[1]
        try:
            route = await self.namesrv.get_route(topic)
        except RemotingError as failure:
            if cached is not None:
                return cached[1]  # a NameServer outage must not stop traffic to brokers that still serve
            raise ProxyError(v2.PROXY_TIMEOUT, f"no NameServer answered for {topic}: {failure}") from None
        if route is None:
            self._routes.pop(topic, None)
            raise ProxyError(v2.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
        self._routes[topic] = (now, route)
        for broker in route.broker_datas:
            address = master_address(broker)
            if address is not None:
                self._masters[broker.broker_name] = address
        if not set(self._masters.values()) <= self._greeted:
            await self.heartbeat(new_only=True)  # before a transaction's first half message
        return route

    async def group_is_fifo(self, topic: str, group: str) -> bool:
        """Whether `group` consumes in order (its config's `consumeMessageOrderly`, RocketMQ 5's
        FIFO groups), asked of a master holding `topic` (GET_SUBSCRIPTIONGROUP_CONFIG), cached for
        ROUTE_REFRESH_S. A group no broker knows yet is not FIFO (the broker creates it plain)."""
        cached = self._groups.get(group)
        now = time.monotonic()
        if cached is not None and now - cached[0] < ROUTE_REFRESH_S:
            return cached[1]
        route = await self.route(topic)
        masters = [master_address(broker) for broker in route.broker_datas]
        addresses = [address for address in masters if address is not None]
        if not addresses:
            raise ProxyError(v2.NOT_FOUND, f"no master holds {topic}")
        header = GetSubscriptionGroupConfigRequestHeader(group=group)
        response = await self.invoke(addresses[0], RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, header.to_ext_fields())
        fifo = False
        if response.code == ResponseCode.SUCCESS and response.body:
            try:
                config = loads(response.body)
            except ValueError as failure:
                raise ProxyError(v2.INTERNAL_SERVER_ERROR, f"unreadable config of group {group}: {failure}") from None
            fifo = isinstance(config, dict) and config.get("consumeMessageOrderly") is True
        self._groups[group] = (now, fifo)
        return fifo

    async def topic_message_type(self, topic: str, *, refresh: bool = False) -> TopicMessageType:
        """The topic's `message.type` attribute (NORMAL when unset), asked of a master holding it
        (GET_TOPIC_CONFIG, 351), cached for ROUTE_REFRESH_S. A broker that does not serve 351
        (RocketMQ 4.x) keeps no attributes: its topics take every type (MIXED)."""
        cached = self._topic_types.get(topic)
        now = time.monotonic()
        if cached is not None and not refresh and now - cached[0] < ROUTE_REFRESH_S:
            return cached[1]
        route = await self.route(topic)
        addresses = [address for address in map(master_address, route.broker_datas) if address is not None]
        if not addresses:
            raise ProxyError(v2.NOT_FOUND, f"no master holds {topic}")
        header = GetTopicConfigRequestHeader(topic=topic)
        response = await self.invoke(addresses[0], RequestCode.GET_TOPIC_CONFIG, header.to_ext_fields())
        if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            kind = TopicMessageType.MIXED
        elif response.code != ResponseCode.SUCCESS or not response.body:
            kind = TopicMessageType.UNSPECIFIED  # RocketMQ 5's proxy: no config, no send passes the check
        else:
            try:
                config = TopicConfig.from_json(response.body)
            except BodyFormatError as failure:
                raise ProxyError(v2.INTERNAL_SERVER_ERROR, f"unreadable config of topic {topic}: {failure}") from None
            kind = topic_message_type(config.attributes)
        self._topic_types[topic] = (now, kind)
        return kind

    def broker_name_of(self, address: str) -> str | None:
        """The broker group whose master is at `address`, as the routes say."""
        return next((name for name, master in self._masters.items() if master == address), None)

    async def master_of(self, topic: str, broker_name: str) -> str:
        address = self._masters.get(broker_name)
        if address is None:
            await self.route(topic, refresh=True)
            address = self._masters.get(broker_name)
        if address is None:
            raise ProxyError(v2.NOT_FOUND, f"broker {broker_name} has no master for {topic}")
        return address

    async def invoke(
        self,
        address: str,
        code: int,
        ext_fields: Mapping[str, str],
        body: bytes | None = None,
        *,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> RemotingCommand:
        try:
            return await self.remoting.invoke(address, code, ext_fields, body, timeout_s=timeout_s)
        except RemotingError as failure:
            raise ProxyError(v2.PROXY_TIMEOUT, f"broker {address} did not answer: {failure}") from None

    async def close(self) -> None:
        await self.remoting.close()
