"""The Broker process: wires the store, metadata, processors, long polling and NameServer registration.

    broker = BrokerController(load_broker_settings(conf))
    await broker.start()   # bind, open + recover the store, serve, register with every NameServer
    ...
    await broker.stop()    # stop accepting, unregister, persist metadata, flush, checkpoint, unlock

Requests are handled on one asyncio loop; the store's flush, dispatch and cleaning run in their
own threads (docs/locking.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time

from prometheus_client import CollectorRegistry

from shoal.acl import AccessValidator, AclFileWatcher, start_acl
from shoal.broker import limits
from shoal.broker.broker_stats import TPS_SAMPLE_INTERVAL_MS, BrokerStats
from shoal.broker.client_manager import ConsumerGroupInfo, ConsumerManager, ProducerManager, RebalanceLockManager
from shoal.broker.config import BrokerConfig, BrokerSettings
from shoal.broker.metrics import BrokerMetrics
from shoal.broker.metrics_endpoint import BrokerCollector, MetricsServer, load_metrics_token
from shoal.broker.pop.limits import JOURNAL_SYNC_INTERVAL_S
from shoal.broker.preflight import check_port_free, check_store_dir
from shoal.broker.processors.admin import AdminProcessors
from shoal.broker.processors.broker_admin import BrokerAdminProcessors
from shoal.broker.processors.consumer import ConsumerProcessors
from shoal.broker.processors.end_transaction import EndTransactionProcessor
from shoal.broker.processors.group_admin import GroupAdminProcessors
from shoal.broker.processors.pop import PopProcessors
from shoal.broker.processors.reply import ReplyProcessor
from shoal.broker.processors.send import SendProcessor
from shoal.broker.replication import ReplicatedBroker, ReplicationService
from shoal.broker.replication.role import RoleHooks
from shoal.broker.running_parts import RunningParts, open_running_parts
from shoal.broker.vip_channel import VIP_WITHHELD_CODES, bind_vip_socket
from shoal.formats.record import encode_host
from shoal.protocol import RequestCode, ResponseCode, make_request
from shoal.protocol.acl_signature import Credentials
from shoal.protocol.headers import (
    NotifyConsumerIdsChangedRequestHeader,
    RegisterBrokerRequestHeader,
    UnregisterBrokerRequestHeader,
)
from shoal.protocol.route_bodies import RegisterBrokerBody, register_body_crc32
from shoal.remoting import RemotingClient, RemotingError
from shoal.remoting import limits as remoting_limits
from shoal.remoting.heap import COLLECTIONS
from shoal.remoting.server import Processor, RemotingServer
from shoal.remoting.tls_listener import ServerTls
from shoal.store import disk_usage_ratio

log = logging.getLogger(__name__)

SCAN_CHANNELS_INTERVAL_S = 10.0
REGISTER_DEBOUNCE_S = 0.002
"""Topic changes this close together (a burst of auto-creations) cause one registration; a send that
created its topic waits for that round (SendProcessor), so this is added to its answer once."""
REGISTER_RETRY_S = 2.0  # while some NameServer has not accepted us yet
STATS_TICK_INTERVAL_S = TPS_SAMPLE_INTERVAL_MS / 1000  # RocketMQ samples its TPS figures once a second


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class BrokerController:
    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self.config = settings.broker
        self.metrics = BrokerMetrics()
        self.stats = BrokerStats(self.metrics, self.config.broker_cluster_name)
        """mqadmin's views of the metrics (TPS, statsAll windows, daily totals), sampled every second."""
        self.registry = CollectorRegistry()
        self.server = RemotingServer(
            "broker",
            max_connections=self.config.max_connections,
            idle_timeout_s=self.config.server_channel_max_idle_time_s,
            partial_frame_timeout_s=self.config.server_channel_partial_frame_timeout_s,
        )
        self.vip_server = self.server.sibling("broker-vip", withheld_codes=VIP_WITHHELD_CODES)
        """The VIP channel (listenPort - 2): the same processors, no pulls (`shoal.broker.vip_channel`)."""
        self.tls = ServerTls.from_settings(settings.tls.server)
        """What the remoting and VIP ports do with TLS (a bad certificate fails here, before the store opens)."""
        self.namesrv_client = RemotingClient(ssl_context=settings.tls.client.context())
        """To the NameServers; TLS with useTLS / tls.enable (RocketMQ's BrokerOuterAPI client)."""
        self.metrics_token = load_metrics_token(self.config.metrics_token_file)
        self.consumers = ConsumerManager(self._notify_ids_changed, self.config.channel_expired_timeout_ms / 1000)
        self.producers = ProducerManager(self.config.channel_expired_timeout_ms / 1000)
        self.locks = RebalanceLockManager()
        self.port = 0
        self.vip_port = 0
        """Where the VIP channel listens; 0: it does not."""
        self.metrics_port = 0
        self.boot_timestamp_ms = _now_ms()
        self._parts: RunningParts | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._register_soon: asyncio.TimerHandle | None = None
        self._registered_soon: asyncio.Future[None] | None = None  # ends with the round _register_soon starts
        self._register_lock = asyncio.Lock()
        """Held by each registration round from building its body to the last answer (register_all)."""
        self._rounds_built = 0
        self._metrics_server: MetricsServer | None = None
        self._stopping = False
        self.registered_namesrvs: set[str] = set()
        self._background: set[asyncio.Task[None]] = set()
        check_store_dir(settings.store.root_dir)  # PreflightError in one line, before anything reads the store
        if settings.store.commitlog_dir_override is not None:
            check_store_dir(settings.store.commitlog_dir_override)
        # may switch role/id from config/epoch.json
        self.replication = ReplicationService(self.config, settings.store.config_dir, tls=settings.tls)
        self.role = self.replication.role
        """Master or slave now, and the brokerId (replication changes it; `config` keeps broker.conf's)."""
        self.acl: AccessValidator | None = None
        self.acl_watcher: AclFileWatcher | None = None
        if self.config.acl_enable:  # a plain_acl.yml that cannot be used fails here, before the store opens
            self.acl, self.acl_watcher = start_acl(self.config.plain_acl_file, namesrv=False)
            self.server.gate = self.vip_server.gate = self.acl.refusal
        # registration and a slave's sync are signed with broker.conf's accessKey/secretKey when set
        self.namesrv_client.credentials = self.replication.remoting.credentials = _credentials(self.config)

    # --- lifecycle ---
    async def start(self, *, host: str | None = None, port: int | None = None) -> None:
        config = self.config
        sock = socket.create_server(
            (host or config.listen_host, config.listen_port if port is None else port),
            backlog=remoting_limits.LISTEN_BACKLOG_MAX_COUNT,
        )
        sock.setblocking(False)
        self.port = int(sock.getsockname()[1])
        metrics_port = 0 if port == 0 else config.metrics_port_effective
        vip_port, vip_sock = config.fast_port_for(config.listen_port if port is None else port), None
        try:  # a taken VIP, HA or metrics port fails here, before the store is opened (and left "aborted")
            if vip_port > 0:
                vip_sock = bind_vip_socket(host or config.listen_host, vip_port)
            if config.ha_listen_port > 0:
                check_port_free(config.listen_host, config.ha_listen_port)
            if config.metrics_port >= 0 and metrics_port > 0:
                check_port_free(config.metrics_host, metrics_port)
        except BaseException:
            sock.close()
            if vip_sock is not None:
                vip_sock.close()
            raise
        advertised_host = self.advertised_address.rpartition(":")[0]
        try:
            self._parts = await open_running_parts(
                self.settings,
                store_host=encode_host(advertised_host, self.port),
                role=self.role,
                consumers=self.consumers,
                producers=self.producers,
                metrics=self.metrics,
                register_soon=self.register_soon,
                next_opaque=self.namesrv_client.next_opaque,
            )
        except BaseException:
            sock.close()
            if vip_sock is not None:
                vip_sock.close()
            raise
        parts = self._parts
        loop = asyncio.get_running_loop()
        COLLECTIONS.install()  # garbage-collection pauses for /metrics
        self._register_processors()
        self.server.on_close.extend(
            [self.consumers.connection_closed, self.producers.connection_closed, parts.pull.hold.connection_closed]
        )
        hooks = RoleHooks(self._became_master, parts.schedule.stop, self._delay_offsets)
        replicated = ReplicatedBroker(
            store=parts.store,
            topics=parts.topics,
            groups=parts.groups,
            offsets=parts.offsets,
            address=self.advertised_address,
            port=self.port,
            on_append=parts.store.dispatch_soon,
            register_soon=self.register_soon,
            register_all=self.register_all,
        )
        await self.replication.start(hooks, replicated, self.server)  # HA port; a fenced master turns slave first
        await self.server.start(host or config.listen_host, self.port, sock=sock, tls=self.tls)
        if vip_sock is not None:
            self.vip_port = await self.vip_server.start(
                host or config.listen_host, vip_port, sock=vip_sock, tls=self.tls
            )
        self.registry.register(
            BrokerCollector(
                metrics=self.metrics,
                store=parts.store,
                hold=parts.pull.hold,
                schedule=parts.schedule,
                transactions=parts.transactions,
                connection_count=lambda: len(self.server.connections),
                ha_stats=self.replication.stats,
                consumer_lag=self.consumer_lag,
                namesrv_registered=lambda: {
                    address: address in self.registered_namesrvs for address in self.config.namesrv_addresses
                },
                disk_used_ratio=lambda: disk_usage_ratio(parts.store.settings.commitlog_dir),
                ha_fallbehind_max_bytes=lambda: self.config.ha_slave_fallbehind_max_bytes,
            )
        )
        if config.metrics_port >= 0:
            self._metrics_server = MetricsServer(self.registry, self.health, self.metrics_token)
            self.metrics_port = await self._metrics_server.start(config.metrics_host, metrics_port)
        await self.register_all()  # clients asking the NameServer right after start find us
        if self.acl_watcher is not None:
            self.acl_watcher.start()
        self._tasks = [
            loop.create_task(self._registration_loop(first_delay=True)),
            loop.create_task(self._every(config.flush_consumer_offset_interval_ms / 1000, self.persist_offsets)),
            loop.create_task(self._every(SCAN_CHANNELS_INTERVAL_S, self._scan_channels)),
            loop.create_task(self._every(JOURNAL_SYNC_INTERVAL_S, self.parts.pop.tick)),
            loop.create_task(self._every(STATS_TICK_INTERVAL_S, self.stats.tick, now=True)),
        ]
        log.info(  # self.role, not broker.conf's: fencing at start may have made this broker a slave
            "broker %s[%d] of %s serving on port %d (%s, %s; VIP channel: %s)",
            config.broker_name,
            self.role.broker_id,
            config.broker_cluster_name,
            self.port,
            self.role.role.value,
            self.settings.store.flush.flush_disk_type.value,
            f"port {self.vip_port}" if self.vip_port else "none",
        )

    def _register_processors(self) -> None:
        parts = self.parts
        send = SendProcessor(
            config=self.config,
            role=self.role,
            topics=parts.topics,
            groups=parts.groups,
            store=parts.store,
            schedule=parts.schedule,
            transactions=parts.transactions,
            metrics=self.metrics,
            on_append=parts.store.dispatch_soon,
            wait_replicated=self.replication.wait_replicated,
            pending_registration=self.pending_registration,
        )
        reply = ReplyProcessor(
            config=self.config,
            role=self.role,
            topics=parts.topics,
            store=parts.store,
            producers=self.producers,
            store_address=lambda: self.advertised_address,
            on_append=parts.store.dispatch_soon,
            next_opaque=self.namesrv_client.next_opaque,
        )
        consumer = ConsumerProcessors(
            config=self.config,
            topics=parts.topics,
            groups=parts.groups,
            offsets=parts.offsets,
            consumers=self.consumers,
            producers=self.producers,
            locks=self.locks,
            store=parts.store,
            schedule=parts.schedule,
            on_append=parts.store.dispatch_soon,
        )
        admin = AdminProcessors(
            config=self.config,
            role=self.role,
            topics=parts.topics,
            groups=parts.groups,
            offsets=parts.offsets,
            consumers=self.consumers,
            stats=self.stats,
            store=parts.store,
            register_all=self.register_all,
            broker_address=lambda: self.advertised_address,
        )
        broker_admin = BrokerAdminProcessors(
            settings=self.settings,
            store=parts.store,
            stats=self.stats,
            extra_runtime=lambda: {
                "brokerRole": self.role.role.value,
                # 5.x (mqadmin clusterList's ACTIVATED): a master runs the schedule and transaction-check services.
                "brokerActive": "true" if self.role.is_master else "false",
                **self.replication.runtime_fields(),
            },
            schedule_offsets=lambda: dict(parts.schedule.offsets),
            broker_permission_changed=self._broker_permission_changed,
        )
        group_admin = GroupAdminProcessors(
            config=self.config,
            role=self.role,
            topics=parts.topics,
            groups=parts.groups,
            offsets=parts.offsets,
            consumers=self.consumers,
            producers=self.producers,
            store=parts.store,
            next_opaque=self.namesrv_client.next_opaque,
        )
        pop = PopProcessors(config=self.config, role=self.role, pop=parts.pop)
        table: dict[int, Processor] = {
            RequestCode.SEND_MESSAGE: send,
            RequestCode.SEND_MESSAGE_V2: send,
            RequestCode.SEND_BATCH_MESSAGE: send,
            RequestCode.SEND_REPLY_MESSAGE: reply,
            RequestCode.SEND_REPLY_MESSAGE_V2: reply,
            RequestCode.PULL_MESSAGE: parts.pull,
            RequestCode.POP_MESSAGE: pop.pop,
            RequestCode.ACK_MESSAGE: pop.ack,
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME: pop.change_invisible_time,
            RequestCode.HEART_BEAT: consumer.heartbeat,
            RequestCode.UNREGISTER_CLIENT: consumer.unregister_client,
            RequestCode.CHECK_CLIENT_CONFIG: consumer.check_client_config,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: consumer.consumer_list,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: consumer.consumer_connections,
            RequestCode.QUERY_CONSUMER_OFFSET: consumer.query_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: consumer.update_offset,
            RequestCode.LOCK_BATCH_MQ: consumer.lock_batch,
            RequestCode.UNLOCK_BATCH_MQ: consumer.unlock_batch,
            RequestCode.CONSUMER_SEND_MSG_BACK: consumer.send_back,
            RequestCode.END_TRANSACTION: EndTransactionProcessor(parts.transactions),
            RequestCode.GET_MAX_OFFSET: admin.max_offset,
            RequestCode.GET_MIN_OFFSET: admin.min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: admin.search_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: admin.earliest_time,
            RequestCode.VIEW_MESSAGE_BY_ID: admin.view_message,
            RequestCode.QUERY_MESSAGE: admin.query_message,
            RequestCode.UPDATE_AND_CREATE_TOPIC: admin.create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: admin.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: admin.all_topic_config,
            RequestCode.GET_ALL_CONSUMER_OFFSET: admin.all_consumer_offsets,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin.all_subscription_groups,
            RequestCode.GET_TOPIC_CONFIG: admin.topic_config,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: admin.subscription_group_config,
            RequestCode.GET_TOPIC_STATS_INFO: admin.topic_stats,
            RequestCode.GET_CONSUME_STATS: admin.consume_stats,
            RequestCode.GET_BROKER_CONSUME_STATS: admin.broker_consume_stats,
            RequestCode.GET_BROKER_RUNTIME_INFO: broker_admin.runtime_info,
            RequestCode.GET_BROKER_CONFIG: broker_admin.broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: broker_admin.update_broker_config,
            RequestCode.VIEW_BROKER_STATS_DATA: broker_admin.view_stats,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: broker_admin.clean_expired_consume_queues,
            RequestCode.DELETE_EXPIRED_COMMITLOG: broker_admin.delete_expired_commitlog,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: group_admin.update_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: group_admin.delete_group,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: group_admin.producer_connections,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: group_admin.topic_consumed_by,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: group_admin.reset_offset,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: group_admin.consume_message_directly,
            RequestCode.GET_CONSUMER_RUNNING_INFO: group_admin.consumer_running_info,
        }
        for code, processor in table.items():
            self.server.register(code, processor)
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            self.server.register_run(code, send, send.run)  # pipelined sends: one pass per read

    async def stop(self) -> None:
        """Graceful shutdown: stop accepting, unregister, persist, flush, checkpoint, remove abort."""
        if self._stopping:
            return
        self._stopping = True
        log.info("broker stopping")
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._register_soon is not None:
            self._register_soon.cancel()
        if self._registered_soon is not None:
            _settle(self._registered_soon)  # a send waiting for that round is answered now
        parts = self.parts
        if self.acl_watcher is not None:
            await self.acl_watcher.stop()
        await parts.transaction_checker.stop()
        await self.replication.stop()
        await self.server.stop()
        await self.vip_server.stop()
        await self.unregister_all()
        await self.namesrv_client.close()
        if self._metrics_server is not None:
            await self._metrics_server.stop()
        await parts.schedule.stop()
        parts.pull.hold.close()
        parts.pop.close()
        self.persist_metadata()
        await parts.store.shutdown_from_loop()
        log.info("broker stopped")

    # --- state used by processors ---
    @property
    def parts(self) -> RunningParts:
        """The store and the services built on it; they exist from `start()` on."""
        assert self._parts is not None, "the broker is not started"
        return self._parts

    @property
    def is_master(self) -> bool:
        return self.role.is_master

    async def _broker_permission_changed(self) -> None:
        """brokerPermission changed at run time: as RocketMQ, move the topics' data version (the
        NameServers re-read routes only when it moves) and register at once."""
        table = self.parts.topics.table
        some_topic = next(iter(table.all().values()), None)
        if some_topic is not None:
            table.put(some_topic)  # the same entry again: only the data version moves
        await self.register_all()

    def _became_master(self) -> None:
        schedule = self.parts.schedule
        if not schedule.running:
            schedule.start(asyncio.get_running_loop())

    def _delay_offsets(self) -> bytes:
        return self.parts.schedule.offsets_table.encode().encode("utf-8")

    @property
    def advertised_address(self) -> str:
        host = self.config.advertised_address.rpartition(":")[0]
        return f"{host}:{self.port or self.config.listen_port}"

    def consumer_lag(self) -> dict[tuple[str, str], int]:
        parts = self.parts
        lag: dict[tuple[str, str], int] = {}
        for key, offsets in parts.offsets.all().items():
            topic, _, group = key.partition("@")
            total = 0
            for queue_id, committed in offsets.items():
                total += max(0, parts.store.max_offset_in_queue(topic, queue_id) - committed)
            lag[(group, topic)] = total
        return lag

    def health(self) -> tuple[bool, str]:
        store = self.parts.store
        if store.flush_failure is not None:
            return False, f"store flush failed: {store.flush_failure}"
        if store.disk_full:
            return False, "disk full: writes refused"
        if self._stopping:
            return False, "stopping"
        return True, f"ok: {self.config.broker_name}[{self.role.broker_id}] {self.role.role.value}"

    # --- periodic work ---
    async def _every(self, interval_s: float, action: object, *, now: bool = False) -> None:
        assert callable(action)
        if not now:
            await asyncio.sleep(interval_s)
        while True:
            try:
                result = action()
                if asyncio.iscoroutine(result):
                    await result
            except Exception:
                log.exception("periodic task %s failed", getattr(action, "__name__", action))
            await asyncio.sleep(interval_s)

    async def persist_offsets(self) -> None:
        """consumerOffset.json every flushConsumerOffsetInterval, written in a thread: its fsyncs took
        tens of milliseconds on a busy disk, a stall of every request on the loop (RocketMQ persists
        from a scheduled thread too). The table's lock keeps the snapshot consistent."""
        await asyncio.to_thread(self.parts.offsets.persist)

    def persist_metadata(self) -> None:
        parts = self.parts
        for table in (parts.offsets, parts.groups.table, parts.topics.table):
            try:
                table.persist()
            except OSError:
                log.exception("persisting %s failed", table.path)

    def _scan_channels(self) -> None:
        self.consumers.scan_expired()
        self.producers.scan_expired()

    def _notify_ids_changed(self, info: ConsumerGroupInfo) -> None:
        if not self.config.notify_consumer_ids_changed_enable:
            return
        group = self.parts.groups.find(info.group)
        if group is not None and not group.notify_consumer_ids_changed_enable:
            return
        ext = NotifyConsumerIdsChangedRequestHeader(consumer_group=info.group).to_ext_fields()
        for channel in info.channels.values():
            request = make_request(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                opaque=self.namesrv_client.next_opaque(),
                ext_fields=ext,
                oneway=True,
            )
            channel.connection.send(request)

    # --- NameServer registration ---
    async def _registration_loop(self, *, first_delay: bool) -> None:
        """Register every registerNameServerPeriod; while a NameServer is unreachable, retry every
        few seconds so a broker started before its NameServer becomes visible quickly."""
        period_ms = self.config.register_name_server_period_ms
        period_s = min(max(period_ms, limits.REGISTER_PERIOD_MIN_MS), limits.REGISTER_PERIOD_MAX_MS) / 1000
        if first_delay:
            missing = set(self.config.namesrv_addresses) - self.registered_namesrvs
            await asyncio.sleep(REGISTER_RETRY_S if missing else period_s)
        while True:
            try:
                await self.register_all()
            except Exception:
                log.exception("registration round failed")
            missing = set(self.config.namesrv_addresses) - self.registered_namesrvs
            await asyncio.sleep(REGISTER_RETRY_S if missing else period_s)

    def register_soon(self) -> None:
        """Topic set changed: register again shortly (coalescing bursts of changes)."""
        if self._stopping or self._register_soon is not None:
            return
        loop = asyncio.get_running_loop()
        round_done: asyncio.Future[None] = loop.create_future()

        def fire() -> None:
            self._register_soon = None
            self._registered_soon = None
            task = loop.create_task(self.register_all())
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            task.add_done_callback(lambda _: _settle(round_done))

        self._register_soon = loop.call_later(REGISTER_DEBOUNCE_S, fire)
        self._registered_soon = round_done

    def pending_registration(self) -> asyncio.Future[None] | None:
        """Ends when the registration round scheduled by the last topic change has run (whatever the
        NameServers answered); None when no round is scheduled."""
        return self._registered_soon

    async def register_all(self) -> None:
        """A registration round built after this call, answered (or failed) by every NameServer.

        Rounds run one at a time, as RocketMQ's synchronized registerBrokerAll: a round built before
        a topic change is answered before the round built after it is sent, so once this returns no
        NameServer will apply an older topic set of ours (DELETE_TOPIC_IN_BROKER relies on it: an
        older round arriving after DELETE_TOPIC_IN_NAMESRV would route the deleted topic again).
        Callers that waited while a round built after their call ran share that round."""
        asked_after = self._rounds_built
        await self.replication.before_register()  # fencing: a stale master turns slave first
        async with self._register_lock:
            if self._rounds_built > asked_after or self._stopping:
                return  # a round built after our call has been answered meanwhile
            self._rounds_built += 1
            await self._register_round_locked()

    async def _register_round_locked(self) -> None:
        body = RegisterBrokerBody(topic_config_serialize_wrapper=self.parts.topics.serialize_wrapper()).encode(False)
        header = RegisterBrokerRequestHeader(
            broker_name=self.config.broker_name,
            broker_addr=self.advertised_address,
            cluster_name=self.config.broker_cluster_name,
            ha_server_addr=self.replication.ha_address,
            broker_id=self.role.broker_id,
            compressed=False,
            body_crc32=register_body_crc32(body),
        ).to_ext_fields()
        await asyncio.gather(*(self._register_one(addr, header, body) for addr in self.config.namesrv_addresses))

    async def _register_one(self, address: str, header: dict[str, str], body: bytes) -> None:
        try:
            response = await self.namesrv_client.invoke(
                address, RequestCode.REGISTER_BROKER, header, body, timeout_s=limits.BROKER_REGISTER_TIMEOUT_S
            )
        except RemotingError as error:
            if address in self.registered_namesrvs:
                log.warning("registration with NameServer %s failed: %s", address, error)
            self.registered_namesrvs.discard(address)
            return
        if response.code != ResponseCode.SUCCESS:
            log.warning("NameServer %s refused registration: %s %s", address, response.code, response.remark)
            self.registered_namesrvs.discard(address)
            return
        if address not in self.registered_namesrvs:
            log.info("registered with NameServer %s", address)
        self.registered_namesrvs.add(address)
        self.replication.on_registered(response)

    async def unregister_all(self) -> None:
        header = UnregisterBrokerRequestHeader(
            broker_name=self.config.broker_name,
            broker_addr=self.advertised_address,
            cluster_name=self.config.broker_cluster_name,
            broker_id=self.role.broker_id,
        ).to_ext_fields()
        for address in self.config.namesrv_addresses:
            with contextlib.suppress(RemotingError):
                await self.namesrv_client.invoke(address, RequestCode.UNREGISTER_BROKER, header, timeout_s=2.0)


def _settle(future: asyncio.Future[None]) -> None:
    """Resolve `future` unless it is already done."""
    if not future.done():
        future.set_result(None)


def _credentials(config: BrokerConfig) -> Credentials | None:
    """What the broker signs its own requests with (broker.conf accessKey/secretKey), or None."""
    if config.access_key and config.secret_key:
        return Credentials(config.access_key, config.secret_key)
    return None
