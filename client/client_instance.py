"""`ClientInstance`: what one producer, consumer or admin shares with the cluster (Java's
`MQClientInstance`): the client id, connections, nameservers, routes, heartbeats, and the
requests brokers send to the client.

Every producer and consumer owns one instance (no process-wide registry): collaborators are
passed in explicitly, and two clients in one process never share state by accident.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence

from shoal.client.broker_api import BrokerApi
from shoal.client.errors import MQBrokerError, RemotingError
from shoal.client.route import NameServerClient, RouteTable, parse_namesrv_addresses
from shoal.client.service import PeriodicService
from shoal.client.settings import ClientSettings
from shoal.client.transport import ClientRemoting
from shoal.formats.message_id import local_ip
from shoal.protocol import (
    HeartbeatData,
    NotifyConsumerIdsChangedRequestHeader,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    make_response,
)
from shoal.protocol.errors import ProtocolError
from shoal.remoting import RemotingConnection

log = logging.getLogger(__name__)

RequestProcessor = Callable[[RemotingCommand], Awaitable[RemotingCommand | None]]


def make_client_id(settings: ClientSettings, instance_name: str | None = None) -> str:
    """`clientIP@instanceName`; the instance name defaults to `<pid>#<nanos>` (unique per client)."""
    ip = settings.client_ip or local_ip()
    name = settings.instance_name or instance_name or f"{os.getpid()}#{time.monotonic_ns()}"
    return f"{ip}@{name}"


class ClientInstance:
    """Connections, routes and heartbeats of one client."""

    def __init__(
        self,
        namesrv_addrs: str | Sequence[str],
        settings: ClientSettings,
        *,
        instance_name: str | None = None,
        default_topic: str = "TBW102",
        default_topic_queue_nums: int = 4,
    ) -> None:
        self.settings = settings
        self.client_id = make_client_id(settings, instance_name)
        self.remoting = ClientRemoting(
            handler=self._handle_request,
            connect_timeout_s=settings.connect_timeout_s,
            credentials=settings.credentials,
            ssl_context=settings.tls.context(),
        )
        addresses = parse_namesrv_addresses(namesrv_addrs)
        self.namesrv = NameServerClient(addresses, self.remoting, settings.request_timeout_s)
        self.routes = RouteTable(self.namesrv, default_topic=default_topic, default_queue_nums=default_topic_queue_nums)
        self.api = BrokerApi(self.remoting, settings.request_timeout_s)
        self.heartbeat_data: Callable[[], HeartbeatData] = lambda: HeartbeatData(client_id=self.client_id)
        self.topics_in_use: Callable[[], Iterable[str]] = tuple
        self.on_consumer_ids_changed: Callable[[str], None] | None = None
        self.on_check_transaction_state: Callable[[str, RemotingCommand], Awaitable[None]] | None = None
        """Set by a TransactionProducer: called with the broker's address and the request."""
        self.processors: dict[int, RequestProcessor] = {}
        self._heartbeat = PeriodicService("heartbeat", settings.heartbeat_interval_s, self.send_heartbeats)
        self._route_refresh = PeriodicService("route refresh", settings.route_refresh_interval_s, self.refresh_routes)
        self._tasks: set[asyncio.Task[None]] = set()  # background route fetches (one per topic at a time)
        self.running = False

    async def start(self) -> None:
        assert not self.running
        self.running = True
        self._heartbeat.start()
        self._route_refresh.start()

    async def shutdown(self) -> None:
        self.running = False
        await self._heartbeat.stop()
        await self._route_refresh.stop()
        tasks, self._tasks = list(self._tasks), set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.remoting.close()

    async def refresh_routes(self) -> None:
        """Fetch the routes of every topic in use again (every route_refresh_interval_s)."""
        await self.routes.refresh_all(list(self.topics_in_use()))

    def refresh_route_soon(self, topic: str) -> None:
        """Fetch `topic`'s route again in the background, now, unless that happened less than
        ROUTE_REFRESH_AFTER_FAILURE_MIN_INTERVAL_S ago (an answer a failover may explain, such as
        SLAVE_NOT_AVAILABLE, must not wait for the next poll, nor flood the nameservers)."""
        if not self.running or not self.routes.refresh_due(topic):
            return
        task = asyncio.get_running_loop().create_task(self._refresh_route(topic), name=f"route {topic}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _refresh_route(self, topic: str) -> None:
        try:
            await self.routes.refresh(topic)
        except (RemotingError, MQBrokerError) as error:
            log.info("refreshing the route of %s failed: %s", topic, error)

    async def send_heartbeats(self) -> None:
        """HEART_BEAT to every known broker (masters only when the client runs no consumer)."""
        data = self.heartbeat_data()
        if not data.producer_data_set and not data.consumer_data_set:
            return
        addresses = self.routes.broker_addresses(masters_only=not data.consumer_data_set)
        results = await asyncio.gather(
            *(self.api.heartbeat(address, data) for address in sorted(addresses)), return_exceptions=True
        )
        for address, result in zip(sorted(addresses), results, strict=True):
            if isinstance(result, RemotingError | MQBrokerError):
                log.warning("heartbeat to %s failed: %s", address, result)
            elif isinstance(result, BaseException):
                raise result

    async def unregister(self, *, producer_group: str | None = None, consumer_group: str | None = None) -> None:
        """UNREGISTER_CLIENT at every known broker; failures are logged (the broker expires us)."""
        addresses = sorted(self.routes.broker_addresses(masters_only=False))
        results = await asyncio.gather(
            *(
                self.api.unregister_client(
                    address, self.client_id, producer_group=producer_group, consumer_group=consumer_group
                )
                for address in addresses
            ),
            return_exceptions=True,
        )
        for address, result in zip(addresses, results, strict=True):
            if isinstance(result, RemotingError | MQBrokerError):
                log.info("unregistering from %s failed: %s", address, result)
            elif isinstance(result, BaseException):
                raise result

    async def _handle_request(self, connection: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        """Requests brokers send us (spec §8.11); unknown codes get REQUEST_CODE_NOT_SUPPORTED."""
        if request.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            try:
                group = NotifyConsumerIdsChangedRequestHeader.from_ext_fields(request.ext_fields).consumer_group
            except ProtocolError as error:
                log.warning("ignoring a malformed NOTIFY_CONSUMER_IDS_CHANGED: %s", error)
                return None
            if self.on_consumer_ids_changed is not None:
                self.on_consumer_ids_changed(group)
            return None
        if request.code == RequestCode.CHECK_TRANSACTION_STATE:
            if self.on_check_transaction_state is not None:
                await self.on_check_transaction_state(connection.address, request)
            return None
        processor = self.processors.get(request.code)
        if processor is not None:
            return await processor(request)
        return make_response(
            request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
        )
