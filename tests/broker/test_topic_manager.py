"""The topics a broker creates at start (RocketMQ 4.9.7's TopicConfigManager constructor)."""

from __future__ import annotations

from pathlib import Path

from shoal.broker.config import BrokerConfig
from shoal.broker.topic_manager import PERM_READ, PERM_WRITE, TopicManager
from shoal.store.metadata import TopicConfigTable


def builtins(tmp_path: Path, config: BrokerConfig) -> TopicManager:
    topics = TopicManager(TopicConfigTable(tmp_path / "topics.json", lambda: 0), config, lambda: None)
    topics.create_builtin_topics()
    return topics


def test_reply_topic_is_created_with_one_queue(tmp_path: Path) -> None:
    """Goal: `<cluster>_REPLY_TOPIC`, where request-reply answers are stored, exists from the start,
    1 read/write queue. Method: built-ins of a broker in cluster "Blue"."""
    topic = builtins(tmp_path, BrokerConfig(broker_cluster_name="Blue")).get("Blue_REPLY_TOPIC")
    assert topic is not None
    assert (topic.read_queue_nums, topic.write_queue_nums, topic.perm) == (1, 1, PERM_READ | PERM_WRITE)


def test_trace_topic_is_created_only_when_trace_topic_enable(tmp_path: Path) -> None:
    """Goal: traceTopicEnable creates msgTraceTopicName (default RMQ_SYS_TRACE_TOPIC) with one
    queue; off (RocketMQ's default) it is not created. Method: three configurations."""
    assert builtins(tmp_path / "off", BrokerConfig()).get("RMQ_SYS_TRACE_TOPIC") is None
    enabled = builtins(tmp_path / "on", BrokerConfig(trace_topic_enable=True)).get("RMQ_SYS_TRACE_TOPIC")
    assert enabled is not None and (enabled.read_queue_nums, enabled.write_queue_nums) == (1, 1)
    custom = builtins(tmp_path / "custom", BrokerConfig(trace_topic_enable=True, msg_trace_topic_name="MyTraces"))
    assert custom.get("MyTraces") is not None
    assert custom.get("RMQ_SYS_TRACE_TOPIC") is None


def test_the_running_broker_adds_its_cluster_broker_reply_and_trace_topics_to_the_system_set(tmp_path: Path) -> None:
    """Goal: as RocketMQ's TopicConfigManager calls TopicValidator.addSystemTopic at start, topic
    create/delete refuse the cluster and broker names, `<cluster>_REPLY_TOPIC` and the configured
    trace topic (only when traceTopicEnable); ordinary names stay user topics. Method: is_system."""
    config = BrokerConfig(
        broker_cluster_name="Blue", broker_name="blue-a", trace_topic_enable=True, msg_trace_topic_name="MyTraces"
    )
    topics = builtins(tmp_path / "on", config)
    for topic in ("Blue", "blue-a", "Blue_REPLY_TOPIC", "MyTraces", "RMQ_SYS_TRACE_TOPIC", "TBW102", "rmq_sys_x"):
        assert topics.is_system(topic), topic
    assert not topics.is_system("Orders")
    untraced = builtins(tmp_path / "off", BrokerConfig(msg_trace_topic_name="MyTraces"))
    assert not untraced.is_system("MyTraces")
