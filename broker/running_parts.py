"""The parts a broker runs once its store is open, built together by `open_running_parts`.

    parts = await open_running_parts(settings, store_host=..., ...)
    parts.store, parts.topics, parts.schedule, parts.pull.hold, ...

Before the store is open none of them exists, and once it is they all do: one frozen object
instead of attributes that appear one by one during `BrokerController.start()`. Services are
started here in the order they depend on each other; the broker stops them (`stop()`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from shoal.broker.client_manager import ConsumerManager, ProducerManager
from shoal.broker.config import BrokerSettings
from shoal.broker.group_manager import SubscriptionGroupManager
from shoal.broker.metrics import BrokerMetrics
from shoal.broker.pop import PopService
from shoal.broker.processors.pull import PullProcessor
from shoal.broker.replication.role import BrokerRoleState
from shoal.broker.schedule import ScheduleMessageService, schedule_tags_code_rule
from shoal.broker.topic_manager import TopicManager
from shoal.broker.transactions.checking import TransactionCheckService
from shoal.broker.transactions.service import TransactionService
from shoal.store import MessageStore, RecoveryReport
from shoal.store.metadata import ConsumerOffsetTable, SubscriptionGroupTable, TopicConfigTable


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class RunningParts:
    """Everything `BrokerController.start()` opens, built at once."""

    store: MessageStore
    recovery_report: RecoveryReport
    topics: TopicManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetTable
    schedule: ScheduleMessageService
    transactions: TransactionService
    transaction_checker: TransactionCheckService
    pull: PullProcessor
    """PULL_MESSAGE; owns the long-polling `hold` service."""
    pop: PopService
    """POP consumption's leases and their journal (RocketMQ 5's POP_MESSAGE, ACK_MESSAGE, ...)."""


async def open_running_parts(
    settings: BrokerSettings,
    *,
    store_host: bytes,
    role: BrokerRoleState,
    consumers: ConsumerManager,
    producers: ProducerManager,
    metrics: BrokerMetrics,
    register_soon: Callable[[], None],
    next_opaque: Callable[[], int],
) -> RunningParts:
    """Open and recover the store, load metadata, build and start the services that use them.

    After the store is open only its first segment is awaited (recovery has dispatched everything,
    so the dispatch tick that already runs finds nothing); a registration scheduled by a topic
    change (`register_soon`) runs only once the parts are in place."""
    config = settings.broker
    store = MessageStore(
        settings.store, store_host=store_host, tags_code=schedule_tags_code_rule(config.delay_levels_ms)
    )
    recovery_report = await asyncio.to_thread(store.open)
    loop = asyncio.get_running_loop()
    store.start(dispatch_loop=loop)  # dispatch on the loop: after an append, before the next read
    await asyncio.to_thread(store.wait_prepared)  # first segment ready before serving
    config_dir = settings.store.config_dir
    topics = TopicManager(TopicConfigTable(config_dir / "topics.json", _now_ms), config, register_soon)
    topics.table.load()
    topics.create_builtin_topics()
    topics.table.persist()
    group_table = SubscriptionGroupTable(config_dir / "subscriptionGroup.json", _now_ms)
    group_table.load()
    groups = SubscriptionGroupManager(group_table, config)
    offsets = ConsumerOffsetTable(config_dir / "consumerOffset.json")
    offsets.load()
    pull = PullProcessor(
        config=config,
        role=role,
        topics=topics,
        groups=groups,
        offsets=offsets,
        consumers=consumers,
        store=store,
        metrics=metrics,
        loop=loop,
    )
    store.subscribe(pull.hold.on_dispatch)
    pop = PopService(
        store=store,
        topics=topics,
        groups=groups,
        offsets=offsets,
        directory=settings.store.root_dir / "pop",
        on_append=store.dispatch_soon,
    )
    await asyncio.to_thread(pop.load)  # before serving: every lease and ack a killed broker left
    store.subscribe(pop.on_dispatch)
    schedule = ScheduleMessageService(
        store,
        config.delay_levels_ms,
        config_dir,
        persist_interval_s=config.flush_delay_offset_interval_ms / 1000,
    )
    if role.is_master:  # RocketMQ delivers delayed messages on the master only
        schedule.start(loop)
    transactions = TransactionService(
        store,
        topics,
        offsets,
        producers,
        config,
        on_append=store.dispatch_soon,
        next_opaque=next_opaque,
        is_master=lambda: role.is_master,
    )
    transactions.load()  # before serving: END_TRANSACTION must know every unresolved transaction
    transaction_checker = TransactionCheckService(transactions, config.transaction_check_interval_ms / 1000)
    transaction_checker.start()
    return RunningParts(
        store=store,
        recovery_report=recovery_report,
        topics=topics,
        groups=groups,
        offsets=offsets,
        schedule=schedule,
        transactions=transactions,
        transaction_checker=transaction_checker,
        pull=pull,
        pop=pop,
    )
