"""The streaming jobs as a user runs them (`shoal spark stream JOB ... --once`) against a real
cluster: dlq_archive archives dead letters with their origin and reason, topic_flow writes the
topic's rates and every group's lag."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from shoal.client import (
    BlockingAdmin,
    BlockingProducer,
    BlockingPushConsumer,
    ClientSettings,
    ConsumerSettings,
    ConsumeStatus,
    Message,
    MessageExt,
)
from shoal.protocol import ConsumeFromWhere
from tests.conftest import Cluster, wait_until
from tests.ports import free_broker_port, free_port

pytestmark = pytest.mark.slow

TOPIC = "Pay"
SENT = 30
POISON = {3, 11, 17, 25}
CLIENT_SETTINGS = ClientSettings(client_ip="127.0.0.1", route_refresh_interval_s=1.0)
CONSUMER_SETTINGS = ConsumerSettings(rebalance_interval_s=0.5, offset_persist_interval_s=0.5, shutdown_await_s=5.0)
DELIVERY_TIMEOUT_S = 60.0
JOB_TIMEOUT_S = 600.0
"""A Spark job's JVM start and one micro-batch on a busy two-core machine: bounds a stuck job."""
GROUPS = {"g-direct": 0, "g-retry": 1}
"""Consumer groups and their maxReconsumeTimes: 0 dead-letters a failure at once, 1 after one retry."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A broker whose retries come back after 1 s; TOPIC with SENT messages, of which the POISON
    ones fail in both groups' listeners, so each group dead-letters them (directly, or after a retry)."""
    running = Cluster(tmp_path_factory.mktemp("jobs"), free_port(), free_broker_port(), free_port())
    running.start_namesrv()
    running.start_broker({"messageDelayLevel": " ".join(["1s"] * 18)})
    with BlockingAdmin(running.namesrv_addr, client_settings=CLIENT_SETTINGS) as admin:
        admin.create_topic(TOPIC, broker_addr=running.broker_addr, read_queue_nums=2, write_queue_nums=2)
    with BlockingProducer("jobs-producer", running.namesrv_addr, client_settings=CLIENT_SETTINGS) as producer:
        for n in range(SENT):
            producer.send(Message(TOPIC, f"p-{n}".encode(), tags="T", keys=(f"k-{n}",)))
    for group, max_reconsume in GROUPS.items():
        dead_letter(running, group, max_reconsume)
    yield running
    running.stop_all()


def dead_letter(cluster: Cluster, group: str, max_reconsume: int) -> None:
    failed: dict[str, int] = {}
    done: set[str] = set()

    def listener(messages: list[MessageExt]) -> ConsumeStatus:
        (message,) = messages
        key = message.keys[0]
        if int(key[2:]) in POISON:
            failed[key] = failed.get(key, 0) + 1
            return ConsumeStatus.RECONSUME_LATER
        done.add(key)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = BlockingPushConsumer(
        group, cluster.namesrv_addr, max_reconsume_times=max_reconsume,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        settings=CONSUMER_SETTINGS, client_settings=CLIENT_SETTINGS,
    )  # fmt: skip
    consumer.set_listener(listener)
    consumer.subscribe(TOPIC)
    consumer.start()
    try:
        wanted = max_reconsume + 1
        wait_until(
            lambda: len(done) == SENT - len(POISON) and all(failed.get(f"k-{n}", 0) >= wanted for n in POISON),
            DELIVERY_TIMEOUT_S,
        )
    finally:
        consumer.shutdown()


def run_job(job: str, cluster: Cluster, work: Path, *extra: str) -> None:
    command = [sys.executable, "-m", "shoal.cli.main", "spark", "stream", job, "-n", cluster.namesrv_addr]
    command += ["--checkpoint", str(work / "checkpoint"), "--output", str(work / "out"), "--once", *extra]
    done = subprocess.run(command, capture_output=True, text=True, timeout=JOB_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr[-4000:]


def test_dlq_archive_keeps_each_dead_letter_with_its_origin_and_reason(cluster: Cluster, tmp_path: Path) -> None:
    """Goal: one row per dead letter of each group: the group, the original topic, the original
    message id, and why (its first failure with maxReconsumeTimes 0, retries exhausted with 1)."""
    with BlockingAdmin(cluster.namesrv_addr, client_settings=CLIENT_SETTINGS) as admin:
        wait_until(lambda: all(f"%DLQ%{group}" in admin.topic_list() for group in GROUPS), DELIVERY_TIMEOUT_S)
    run_job("dlq_archive", cluster, tmp_path)
    rows = pq.read_table(tmp_path / "out" / "dead_letters.parquet").to_pylist()
    assert sorted((row["group"], row["keys"]) for row in rows) == sorted(
        (group, f"k-{n}") for group in GROUPS for n in POISON
    )
    for row in rows:
        assert row["dlq_topic"] == f"%DLQ%{row['group']}" and row["origin_topic"] == TOPIC
        assert row["origin_message_id"]
        expected = "first failure" if row["group"] == "g-direct" else "retries exhausted"
        assert row["reason"] == expected, row


def test_topic_flow_writes_rates_and_every_groups_lag(cluster: Cluster, tmp_path: Path) -> None:
    """Goal: topic_rates counts the topic's messages and bytes in the micro-batch; group_lag has
    both groups on the topic's queues, caught up (lag 0: they acknowledged everything)."""
    run_job("topic_flow", cluster, tmp_path, "-t", TOPIC)
    rates = pq.read_table(tmp_path / "out" / "topic_rates.parquet").to_pylist()
    assert [(row["topic"], row["messages"]) for row in rates] == [(TOPIC, SENT)]
    assert rates[0]["bytes"] > SENT * len("p-0")
    lag = [row for row in pq.read_table(tmp_path / "out" / "group_lag.parquet").to_pylist() if row["topic"] == TOPIC]
    assert {row["group"] for row in lag} == set(GROUPS)
    assert sum(row["broker_offset"] for row in lag if row["group"] == "g-direct") == SENT
    assert all(row["lag"] == 0 for row in lag), lag
