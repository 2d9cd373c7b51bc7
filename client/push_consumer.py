"""`PushConsumer`: rebalance, long-polling pull loops, and a listener (`DefaultMQPushConsumer`).

Start: heartbeat (ConsumerData with Java enum names), then rebalance every `rebalance_interval_s`
and whenever a broker sends NOTIFY_CONSUMER_IDS_CHANGED. Each assigned queue gets one pull loop:
PULL_MESSAGE with FLAG_SUSPEND (the broker holds it up to 15 s), the consumed offset piggy-backed
(FLAG_COMMIT_OFFSET) when pulling from a master, and back-pressure when the queue's cache is
full. Clustering consumers also consume `%RETRY%<group>` and keep offsets on the brokers
(persisted every `offset_persist_interval_s` and at shutdown); broadcasting consumers keep them
in a local JSON file. Orderly consumers lock queues at their broker before pulling them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from pathlib import Path

from shoal.client import limits
from shoal.client.client_instance import ClientInstance
from shoal.client.consume_service import (
    ConcurrentConsumeService,
    ConsumeContext,
    Listener,
    ListenerInvoker,
    OrderlyConsumeService,
)
from shoal.client.errors import (
    ClientStateError,
    MessageDecodeError,
    MQBrokerError,
    NoRouteError,
    RemotingError,
)
from shoal.client.lifecycle import ClientLifecycle
from shoal.client.message import check_group
from shoal.client.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    RemoteOffsetStore,
    default_local_offset_path,
)
from shoal.client.process_queue import ProcessQueue
from shoal.client.pull import PullResult, PullStatus, pull_request_fields, pull_result_of
from shoal.client.rebalance import AllocateStrategy, Rebalancer, allocate_averagely
from shoal.client.route import MASTER_ID
from shoal.client.service import PeriodicService
from shoal.client.settings import ClientSettings, ConsumerSettings
from shoal.client.subscription import Subscription
from shoal.formats.json_compat import JsonValue
from shoal.formats.message_id import local_ip, wall_clock_ms
from shoal.formats.topics import RETRY_GROUP_TOPIC_PREFIX, retry_topic
from shoal.protocol import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    MessageQueue,
    ProtocolError,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    make_response,
)
from shoal.protocol.bodies import ConsumerRunningInfo, ResetOffsetBody
from shoal.protocol.codes import CURRENT_VERSION
from shoal.protocol.headers import GetConsumerRunningInfoRequestHeader, ResetOffsetRequestHeader

log = logging.getLogger(__name__)

_THIRTY_MINUTES_MS = 30 * 60 * 1000


class PushConsumer(ClientLifecycle):
    """Consumes subscribed topics and hands messages to `listener`.

    `listener(messages) -> ConsumeStatus` (concurrent) or `-> ConsumeOrderlyStatus` (orderly), a
    plain function (run on a thread pool of `settings.consume_concurrency` threads) or an async
    one. An exception, or None, counts as RECONSUME_LATER / SUSPEND_CURRENT_QUEUE_A_MOMENT.
    `max_reconsume_times` -1 means Java's default: 16 for concurrent, unlimited for orderly.
    `shutdown()` finishes running listener calls (bounded), persists offsets, unlocks, unregisters.
    """

    def __init__(
        self,
        group: str,
        namesrv_addrs: str | Sequence[str],
        *,
        listener: Listener | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        orderly: bool = False,
        consume_batch_max: int = 1,
        pull_batch: int = 32,
        max_reconsume_times: int = limits.MAX_RECONSUME_TIMES_DEFAULT,
        allocate: AllocateStrategy = allocate_averagely,
        offset_store_path: str | Path | None = None,
        settings: ConsumerSettings | None = None,
        client_settings: ClientSettings | None = None,
    ) -> None:
        check_group(group)
        if not 1 <= consume_batch_max <= limits.CONSUME_BATCH_MAX_COUNT:
            raise ValueError(f"consume_batch_max must be in [1, {limits.CONSUME_BATCH_MAX_COUNT}]")
        if not 1 <= pull_batch <= limits.PULL_BATCH_MAX_COUNT:
            raise ValueError(f"pull_batch must be in [1, {limits.PULL_BATCH_MAX_COUNT}]")
        if max_reconsume_times < -1:
            raise ValueError("max_reconsume_times must be -1 (Java's default) or >= 0")
        super().__init__(f"consumer {group}")
        self.group = group
        self._namesrv_addrs = namesrv_addrs
        self.listener = listener
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.consume_timestamp_ms = consume_timestamp_ms
        self.orderly = orderly
        self.consume_batch_max = consume_batch_max
        self.pull_batch = pull_batch
        self.max_reconsume_times = max_reconsume_times
        self.allocate = allocate
        self.offset_store_path = Path(offset_store_path) if offset_store_path is not None else None
        self.settings = settings or ConsumerSettings()
        self.client_settings = client_settings or ClientSettings()
        self._subscriptions: dict[str, Subscription] = {}
        self._parts: _RunningParts | None = None

    # --- configuration ---

    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Consume `topic` messages matching `expression` (`*` or `TagA || TagB`)."""
        self._subscriptions[topic] = Subscription.build(topic, expression, wall_clock_ms())
        if self._parts is not None:
            self._parts.subscriptions_changed()

    def unsubscribe(self, topic: str) -> None:
        self._subscriptions.pop(topic, None)
        if self._parts is not None:
            self._parts.subscriptions_changed()

    def subscriptions(self) -> dict[str, Subscription]:
        """Every subscription in effect, the retry topic of a clustering group included."""
        result = dict(self._subscriptions)
        if self.message_model == MessageModel.CLUSTERING:
            topic = retry_topic(self.group)
            result.setdefault(topic, Subscription.build(topic, "*", 0))
        return result

    @property
    def client_id(self) -> str:
        if self._parts is None:
            raise ClientStateError("the client id is assigned at start()")
        return self._parts.instance.client_id

    def assigned_queues(self) -> list[MessageQueue]:
        """The queues this consumer currently pulls (sorted)."""
        return [] if self._parts is None else sorted(self._parts.rebalancer.table)

    # --- lifecycle ---

    def _check_startable(self) -> None:
        if self.listener is None:
            raise ClientStateError("set a listener before start()")

    async def _start_client(self) -> None:
        """Build and start the running parts; a failed start stops them again and leaves the
        consumer not running."""
        self._parts = _RunningParts(self)
        try:
            await self._parts.start()
        except BaseException:
            self._running = False
            parts, self._parts = self._parts, None
            await parts.shutdown()
            raise

    async def _shutdown_client(self) -> None:
        parts, self._parts = self._parts, None
        assert parts is not None
        await parts.shutdown()


class _RunningParts:
    """Everything a started PushConsumer runs; built at start(), discarded at shutdown()."""

    def __init__(self, consumer: PushConsumer) -> None:
        self.consumer = consumer
        settings = consumer.settings
        addresses = consumer._namesrv_addrs  # noqa: SLF001 - the consumer's own running half
        self.instance = ClientInstance(addresses, consumer.client_settings)
        self.instance.heartbeat_data = self.heartbeat_data
        self.instance.topics_in_use = lambda: list(consumer.subscriptions())
        self.instance.on_consumer_ids_changed = self._on_consumer_ids_changed
        self.instance.processors[RequestCode.RESET_CONSUMER_CLIENT_OFFSET] = self._reset_offsets
        self.instance.processors[RequestCode.GET_CONSUMER_RUNNING_INFO] = self._running_info
        self.started_ms = wall_clock_ms()
        self.offset_store = self._make_offset_store()
        self.rebalancer = Rebalancer(
            consumer.group,
            self.instance,
            message_model=consumer.message_model,
            allocate=consumer.allocate,
            orderly=consumer.orderly,
            on_added=self._on_added,
            on_removed=self._on_removed,
        )
        max_reconsume = consumer.max_reconsume_times
        if max_reconsume < 0 and not consumer.orderly:
            max_reconsume = limits.MAX_RECONSUME_TIMES_DEFAULT
        context = ConsumeContext(
            group=consumer.group,
            message_model=consumer.message_model,
            max_reconsume_times=max_reconsume,
            consume_batch_max=consumer.consume_batch_max,
            settings=settings,
            instance=self.instance,
            offset_store=self.offset_store,
            rebalancer=self.rebalancer,
        )
        assert consumer.listener is not None
        invoker = ListenerInvoker(consumer.listener, settings.consume_concurrency)
        self.concurrent = None if consumer.orderly else ConcurrentConsumeService(context, invoker)
        self.ordered = OrderlyConsumeService(context, invoker) if consumer.orderly else None
        self.pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self.suggested_broker: dict[MessageQueue, int] = {}
        self.services = [
            PeriodicService("rebalance", settings.rebalance_interval_s, self.rebalance, initial_delay_s=0.0),
            PeriodicService("offset persist", settings.offset_persist_interval_s, self.persist_offsets),
        ]
        if self.rebalancer.needs_locks:
            self.services.append(PeriodicService("lock renewal", settings.lock_interval_s, self.rebalancer.lock_all))
        self._background: set[asyncio.Task[None]] = set()
        self._undecided_rounds = 0
        self._offsets_loaded = False

    def _make_offset_store(self) -> OffsetStore:
        consumer = self.consumer
        if consumer.message_model == MessageModel.CLUSTERING:
            return RemoteOffsetStore(consumer.group, self.instance.routes, self.instance.api)
        ip = consumer.client_settings.client_ip or local_ip()
        return LocalFileOffsetStore(consumer.offset_store_path or default_local_offset_path(ip, consumer.group))

    async def start(self) -> None:
        await self.offset_store.load()
        self._offsets_loaded = True
        await self.instance.start()
        await self.instance.routes.refresh_all(list(self.consumer.subscriptions()))
        await self.instance.send_heartbeats()
        for service in self.services:
            service.start()

    async def shutdown(self) -> None:
        for service in self.services:
            await service.stop()
        for task in list(self._background):
            task.cancel()
        tasks = list(self.pull_tasks.values())
        self.pull_tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, *self._background, return_exceptions=True)
        consume_service = self.concurrent or self.ordered
        assert consume_service is not None
        await consume_service.shutdown(self.consumer.settings.shutdown_await_s)
        if self._offsets_loaded:  # never overwrite stored offsets with an empty table
            await self.persist_offsets()
        if self.rebalancer.needs_locks:
            await self.rebalancer.unlock(self.rebalancer.table)
        for process_queue in self.rebalancer.table.values():
            process_queue.drop()
        self.rebalancer.table.clear()
        if self.instance.running:
            await self.instance.unregister(consumer_group=self.consumer.group)
        await self.instance.shutdown()

    # --- heartbeat, rebalance, offsets ---

    def heartbeat_data(self) -> HeartbeatData:
        consumer = self.consumer
        data = ConsumerData(
            group_name=consumer.group,
            consume_type=ConsumeType.CONSUME_PASSIVELY,
            message_model=consumer.message_model,
            consume_from_where=consumer.consume_from_where,
            subscription_data_set=tuple(sub.to_subscription_data() for sub in consumer.subscriptions().values()),
        )
        return HeartbeatData(client_id=self.instance.client_id, consumer_data_set=(data,))

    def _on_consumer_ids_changed(self, group: str) -> None:
        if group == self.consumer.group:
            self.services[0].wakeup()

    def subscriptions_changed(self) -> None:
        """Fetch routes of new topics, tell the brokers, rebalance (after subscribe at runtime)."""

        async def refresh() -> None:
            await self.instance.routes.refresh_all(list(self.consumer.subscriptions()))
            await self.instance.send_heartbeats()
            self.services[0].wakeup()

        task = asyncio.get_running_loop().create_task(refresh())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def rebalance(self) -> None:
        if await self.rebalancer.rebalance(self.consumer.subscriptions()):
            # A topic created a moment ago may not be routed yet: look again soon, not in 20 s.
            self._undecided_rounds += 1
            if self._undecided_rounds <= limits.QUICK_REBALANCE_RETRY_MAX_COUNT:
                await self.instance.routes.refresh_all(list(self.consumer.subscriptions()))
                asyncio.get_running_loop().call_later(limits.QUICK_REBALANCE_RETRY_S, self.services[0].wakeup)
        else:
            self._undecided_rounds = 0

    async def persist_offsets(self) -> None:
        await self.offset_store.persist_all(list(self.rebalancer.table))

    def _on_added(self, process_queue: ProcessQueue) -> None:
        task = asyncio.get_running_loop().create_task(self._pull_loop(process_queue), name=f"pull {process_queue.mq}")
        self.pull_tasks[process_queue.mq] = task

    async def _on_removed(self, process_queue: ProcessQueue) -> None:
        """`removeUnnecessaryMessageQueue`: stop pulling, persist and forget the offset, unlock."""
        mq = process_queue.mq
        task = self.pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        try:
            await self.offset_store.persist(mq)
        except (RemotingError, MQBrokerError, NoRouteError, OSError) as error:
            log.warning("persisting the offset of %s on removal failed: %s", mq, error)
        self.offset_store.remove(mq)
        self.suggested_broker.pop(mq, None)
        if self.rebalancer.needs_locks and await self.rebalancer.wait_unlocked_consumption(process_queue, 1.0):
            await self.rebalancer.unlock([mq])

    async def _reset_offsets(self, request: RemotingCommand) -> RemotingCommand | None:
        """RESET_CONSUMER_CLIENT_OFFSET (a broker relays an admin's resetOffsetByTime): each listed
        queue this consumer holds is dropped (nothing consumed from it commits any more), its
        offset set, persisted and forgotten; the rebalance that follows takes it again from there.
        Java sleeps 10 s before applying; dropping the queue first makes that wait unnecessary."""
        try:
            header = ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
            table = ResetOffsetBody.from_json(request.body).offset_table if request.body else {}
        except ProtocolError as error:
            log.warning("ignoring a malformed RESET_CONSUMER_CLIENT_OFFSET: %s", error)
            return None
        if header.group != self.consumer.group:
            return None
        for mq, offset in table.items():
            process_queue = self.rebalancer.table.pop(mq, None) if mq.topic == header.topic else None
            if process_queue is None:
                continue
            process_queue.drop()
            self.offset_store.update(mq, offset, increase_only=False)
            await self._on_removed(process_queue)
            log.info("group %s: offset of %s reset to %d", self.consumer.group, mq, offset)
        self.services[0].wakeup()
        return None

    async def _running_info(self, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO (mqadmin consumerStatus, the dashboard, relayed by a broker): this
        consumer's settings, subscriptions and, per queue it holds, what it has cached and committed."""
        try:
            header = GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
        except ProtocolError as error:
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"malformed request: {error}")
        consumer = self.consumer
        if header.consumer_group != consumer.group:
            return make_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer Group <{header.consumer_group}> not exist in this consumer",
            )
        addresses = consumer._namesrv_addrs  # noqa: SLF001 - the consumer's own running half
        properties = {
            "PROP_NAMESERVER_ADDR": addresses if isinstance(addresses, str) else ";".join(addresses),
            "PROP_CONSUME_TYPE": ConsumeType.CONSUME_PASSIVELY.name,
            "PROP_CONSUMEORDERLY": str(consumer.orderly).lower(),
            "PROP_CLIENT_VERSION": CURRENT_VERSION.name,
            "PROP_CONSUMER_START_TIMESTAMP": str(self.started_ms),
            "consumerGroup": consumer.group,
            "messageModel": consumer.message_model.name,
            "consumeFromWhere": consumer.consume_from_where.name,
            "consumeMessageBatchMaxSize": str(consumer.consume_batch_max),
            "pullBatchSize": str(consumer.pull_batch),
            "maxReconsumeTimes": str(consumer.max_reconsume_times),
            "language": "PYTHON",
        }
        queues: dict[MessageQueue, dict[str, JsonValue]] = {}
        for mq, process_queue in self.rebalancer.table.items():
            committed = self.offset_store.read_memory(mq)
            queues[mq] = {
                "commitOffset": -1 if committed is None else committed,
                "cachedMsgCount": process_queue.cached_count,
                "cachedMsgSizeInMiB": process_queue.cached_size_bytes // (1024 * 1024),
                "locked": process_queue.locked,
                "droped": process_queue.dropped,
            }
        info = ConsumerRunningInfo(
            properties=properties,
            subscriptions=tuple(sub.to_subscription_data() for sub in consumer.subscriptions().values()),
            queues=queues,
        )
        return make_response(request, ResponseCode.SUCCESS, body=info.to_json())

    # --- pulling ---

    async def _pull_loop(self, process_queue: ProcessQueue) -> None:
        """Pull one queue until it is dropped; each response is handled before the next pull."""
        settings = self.consumer.settings
        current: ProcessQueue | None = process_queue
        while current is not None and not current.dropped:
            try:
                if not await self._ready_to_pull(current):
                    continue
                result = await self._pull_once(current)
            except asyncio.CancelledError:
                raise
            except MessageDecodeError as error:
                log.error("cannot decode messages of %s (retrying): %s", current.mq, error)
                await asyncio.sleep(settings.pull_delay_on_error_s)
                continue
            except (RemotingError, MQBrokerError, NoRouteError) as error:
                log.warning("pulling %s failed: %s", current.mq, error)
                await asyncio.sleep(settings.pull_delay_on_error_s)
                continue
            current = await self._handle_pull_result(current, result)

    async def _ready_to_pull(self, process_queue: ProcessQueue) -> bool:
        """Lock (orderly), compute the first offset, respect flow control; False: check again."""
        settings = self.consumer.settings
        needs_lock = self.rebalancer.needs_locks and (
            not process_queue.locked or process_queue.lock_expired(settings.lock_max_live_s)
        )
        if needs_lock and not await self.rebalancer.lock(process_queue.mq):
            await asyncio.sleep(settings.lock_retry_delay_s)
            return False
        if process_queue.next_offset is None:
            process_queue.next_offset = await self._compute_pull_from_where(process_queue.mq)
            log.info(
                "group %s starts %s at offset %d", self.consumer.group, process_queue.mq, process_queue.next_offset
            )
        if (
            process_queue.cached_count >= settings.cached_count_max_per_queue
            or process_queue.cached_size_bytes >= settings.cached_size_max_bytes_per_queue
            or (not self.consumer.orderly and process_queue.max_span > settings.consume_concurrently_max_span)
        ):
            await process_queue.wait_for_space(settings.pull_delay_on_flow_control_s)
            return False
        return True

    async def _compute_pull_from_where(self, mq: MessageQueue) -> int:
        """`computePullFromWhereWithException`: the stored offset, else by consume_from_where."""
        stored = await self.offset_store.fetch(mq)
        if stored is not None and stored >= 0:
            return stored
        api = self.instance.api
        is_retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        where = self.consumer.consume_from_where
        if where == ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return await api.min_offset(await self.instance.routes.master_address_of(mq), mq)
        if where == ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            if is_retry:
                return await api.max_offset(await self.instance.routes.master_address_of(mq), mq)
            timestamp_ms = self.consumer.consume_timestamp_ms
            if timestamp_ms is None:
                timestamp_ms = wall_clock_ms() - _THIRTY_MINUTES_MS
            return await api.search_offset(await self.instance.routes.master_address_of(mq), mq, timestamp_ms)
        if is_retry:
            return 0
        return await api.max_offset(await self.instance.routes.master_address_of(mq), mq)

    async def _pull_once(self, process_queue: ProcessQueue) -> PullResult:
        mq = process_queue.mq
        assert process_queue.next_offset is not None
        subscription = self.consumer.subscriptions().get(mq.topic)
        if subscription is None:
            raise NoRouteError(f"topic {mq.topic} is no longer subscribed")
        routes = self.instance.routes
        found = routes.broker_address(mq.broker_name, self.suggested_broker.get(mq, MASTER_ID))
        if found is None:
            await routes.refresh(mq.topic)
            found = routes.broker_address(mq.broker_name, MASTER_ID)
        if found is None:
            raise NoRouteError(f"broker {mq.broker_name} has no address")
        address, broker_id = found
        commit_offset = 0
        if self.consumer.message_model == MessageModel.CLUSTERING and broker_id == MASTER_ID:
            commit_offset = self.offset_store.read_memory(mq) or 0
        settings = self.consumer.settings
        fields = pull_request_fields(
            self.consumer.group,
            mq,
            subscription,
            process_queue.next_offset,
            self.consumer.pull_batch,
            commit_offset=commit_offset,
            suspend_timeout_ms=settings.pull_suspend_timeout_ms,
        )
        response = await self.instance.remoting.invoke(
            address, RequestCode.PULL_MESSAGE, fields, timeout_s=settings.pull_rpc_timeout_s
        )
        result = pull_result_of(response, mq, subscription, address)
        self.suggested_broker[mq] = result.suggest_which_broker_id
        return result

    async def _handle_pull_result(self, process_queue: ProcessQueue, result: PullResult) -> ProcessQueue | None:
        """`PullCallback.onSuccess`: the queue to pull next (a fresh one after OFFSET_ILLEGAL)."""
        mq = process_queue.mq
        if result.status is PullStatus.FOUND:
            process_queue.next_offset = result.next_begin_offset
            if result.messages:
                dispatch = process_queue.put(result.messages)
                process_queue.pulled_until(result.next_begin_offset)
                if self.concurrent is not None:
                    self.concurrent.submit(process_queue, result.messages)
                elif self.ordered is not None:
                    self.ordered.submit(process_queue, dispatch)
            elif process_queue.cached_count == 0:
                # everything was filtered out by tag and nothing is in flight: the offsets up to
                # next_begin_offset are done (Java waits for the next NO_NEW_MSG to record this)
                self.offset_store.update(mq, result.next_begin_offset, increase_only=True)
            return process_queue
        if result.status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            process_queue.next_offset = result.next_begin_offset
            if process_queue.cached_count == 0:  # correctTagsOffset
                self.offset_store.update(mq, result.next_begin_offset, increase_only=True)
            return process_queue
        log.warning(
            "offset %s of %s is illegal; continuing at %d in %.0f s",
            process_queue.next_offset,
            mq,
            result.next_begin_offset,
            self.consumer.settings.offset_moved_delay_s,
        )
        process_queue.drop()
        await asyncio.sleep(self.consumer.settings.offset_moved_delay_s)
        self.offset_store.update(mq, result.next_begin_offset, increase_only=False)
        try:
            await self.offset_store.persist(mq)
        except (RemotingError, MQBrokerError, NoRouteError, OSError) as error:
            log.warning("persisting the corrected offset of %s failed: %s", mq, error)
        if self.rebalancer.table.get(mq) is not process_queue:
            return None
        fresh = self.rebalancer.replace(process_queue)
        fresh.next_offset = result.next_begin_offset
        return fresh
