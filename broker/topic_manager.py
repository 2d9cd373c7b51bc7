"""Topics of this broker: built-in topics, auto-creation from TBW102, retry/DLQ topics (spec §7.3).

Wraps `shoal.store.metadata.TopicConfigTable` (config/topics.json) with RocketMQ's policies and
the validation every topic name goes through (names and rules: `shoal.formats.topics`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from shoal.broker import limits
from shoal.broker.config import BrokerConfig, parse_delay_levels
from shoal.broker.persist_soon import PersistSoon
from shoal.formats.topics import (
    BENCHMARK_TOPIC,
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TBW102,
    TIMER_TOPIC,
    is_system_topic,
    validate_topic_name,
)
from shoal.protocol import TopicFilterType
from shoal.protocol.route_bodies import DataVersion as RouteDataVersion
from shoal.protocol.route_bodies import TopicConfig as RouteTopicConfig
from shoal.protocol.route_bodies import TopicConfigSerializeWrapper
from shoal.store.metadata import TopicConfig, TopicConfigTable

log = logging.getLogger(__name__)

SCHEDULE_LEVELS = 18

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1


class TopicManager:
    def __init__(self, table: TopicConfigTable, config: BrokerConfig, on_change: Callable[[], None]) -> None:
        self.table = table
        self.config = config
        self.on_change = on_change
        """Called after a change that the NameServers must learn (re-registration)."""
        # self.table when it runs: a slave's metadata sync swaps the table
        self.persist_soon = PersistSoon(lambda: self.table.persist(), "topics.json")  # noqa: PLW0108

    def create_builtin_topics(self) -> None:
        c = self.config
        # one SCHEDULE_TOPIC_XXXX queue per configured delay level (RocketMQ's 18 by default)
        schedule_queues = max(SCHEDULE_LEVELS, len(parse_delay_levels(c.message_delay_level)))
        builtins = [
            TopicConfig(SELF_TEST_TOPIC, 1, 1, PERM_READ | PERM_WRITE),
            TopicConfig(
                BENCHMARK_TOPIC, limits.TOPIC_QUEUES_MAX_COUNT, limits.TOPIC_QUEUES_MAX_COUNT, PERM_READ | PERM_WRITE
            ),
            TopicConfig(
                c.broker_cluster_name, 16, 16, PERM_INHERIT | (PERM_READ | PERM_WRITE if c.cluster_topic_enable else 0)
            ),
            TopicConfig(c.broker_name, 1, 1, PERM_INHERIT | (PERM_READ | PERM_WRITE if c.broker_topic_enable else 0)),
            TopicConfig(OFFSET_MOVED_EVENT, 1, 1, PERM_READ | PERM_WRITE),
            TopicConfig(SCHEDULE_TOPIC, schedule_queues, schedule_queues, PERM_READ | PERM_WRITE),
            TopicConfig(TIMER_TOPIC, 1, 1, PERM_READ | PERM_WRITE),
            TopicConfig(f"{c.broker_cluster_name}_REPLY_TOPIC", 1, 1, PERM_READ | PERM_WRITE),
        ]
        if c.trace_topic_enable:  # TopicConfigManager: one queue, created only when switched on
            builtins.append(TopicConfig(c.msg_trace_topic_name, 1, 1, PERM_READ | PERM_WRITE))
        if c.auto_create_topic_enable:
            builtins.append(
                TopicConfig(
                    TBW102,
                    c.default_topic_queue_nums,
                    c.default_topic_queue_nums,
                    PERM_READ | PERM_WRITE | PERM_INHERIT,
                )
            )
        for topic in builtins:
            if self.table.get(topic.topic_name) is None:
                self.table.put(topic)
        scheduled = self.table.get(SCHEDULE_TOPIC)
        if scheduled is not None and scheduled.write_queue_nums < schedule_queues:  # more levels configured
            self.table.put(
                dataclasses.replace(scheduled, read_queue_nums=schedule_queues, write_queue_nums=schedule_queues)
            )

    def is_system(self, topic: str) -> bool:
        """`TopicValidator.isSystemTopic` on a running broker: the fixed set, plus what RocketMQ's
        TopicConfigManager adds at start (the cluster and broker names, `<cluster>_REPLY_TOPIC`, and
        the trace topic when traceTopicEnable). Those are refused by topic create and delete."""
        c = self.config
        return (
            is_system_topic(topic)
            or topic in (c.broker_cluster_name, c.broker_name, f"{c.broker_cluster_name}_REPLY_TOPIC")
            or (c.trace_topic_enable and topic == c.msg_trace_topic_name)
        )

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def create_from_default(self, topic: str, default_topic: str, queue_nums: int, sys_flag: int) -> TopicConfig | None:
        """Auto-create `topic` from `default_topic` (TBW102) when that topic allows it (spec §7.3)."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        template = self.table.get(default_topic)
        if template is None or (not self.config.auto_create_topic_enable and default_topic == TBW102):
            return None
        if not template.perm & PERM_INHERIT:
            log.warning(
                "auto-create of %s refused: default topic %s lacks the inherit permission", topic, default_topic
            )
            return None
        if validate_topic_name(topic) is not None:
            return None
        queues = max(1, min(queue_nums, template.write_queue_nums))
        created = TopicConfig(
            topic,
            read_queue_nums=queues,
            write_queue_nums=queues,
            perm=template.perm & ~PERM_INHERIT,
            topic_filter_type=template.topic_filter_type,
            topic_sys_flag=sys_flag,
        )
        self._put_and_persist(created, "auto-created from " + default_topic)
        return created

    def create_if_absent(
        self, topic: str, queues: int, perm: int, sys_flag: int = 0, *, persist_now: bool = True
    ) -> TopicConfig:
        """Retry, DLQ and system topics the broker creates itself; with `persist_now` False, one
        created is written once the request is answered (shoal.broker.persist_soon: a heartbeat)."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        created = TopicConfig(
            topic, read_queue_nums=queues, write_queue_nums=queues, perm=perm, topic_sys_flag=sys_flag
        )
        self._put_and_persist(created, "created by the broker", persist_now=persist_now)
        return created

    def update(self, config: TopicConfig) -> None:
        self._put_and_persist(config, "created or updated by an admin request")

    def delete(self, topic: str) -> bool:
        removed = self.table.delete(topic) is not None
        if removed:
            self.table.persist()
            self.on_change()
        return removed

    def _put_and_persist(self, config: TopicConfig, why: str, *, persist_now: bool = True) -> None:
        self.table.put(config)
        if persist_now:
            self.table.persist()
        else:
            self.persist_soon()
        log.info(
            "topic %s %s: %d/%d queues, perm %d",
            config.topic_name,
            why,
            config.read_queue_nums,
            config.write_queue_nums,
            config.perm,
        )
        self.on_change()

    def serialize_wrapper(self) -> TopicConfigSerializeWrapper:
        """The REGISTER_BROKER view of every topic, with the broker's permission applied."""
        version = self.table.data_version
        topics = {}
        broker_perm = self.config.broker_permission
        for name, config in self.table.all().items():
            perm = config.perm if broker_perm & PERM_WRITE else config.perm & ~PERM_WRITE
            topics[name] = RouteTopicConfig(
                topic_name=name,
                read_queue_nums=config.read_queue_nums,
                write_queue_nums=config.write_queue_nums,
                perm=perm & (broker_perm | PERM_INHERIT | PERM_PRIORITY),
                topic_filter_type=TopicFilterType(config.topic_filter_type),
                topic_sys_flag=config.topic_sys_flag,
                order=config.order,
            )
        return TopicConfigSerializeWrapper(
            topic_config_table=topics,
            data_version=RouteDataVersion(timestamp_ms=version.timestamp_ms, counter=version.counter),
        )
