"""The topic stream when things go wrong: a master down (the slave serves offsets and pulls), and
messages deleted by retention before the query read them (failOnDataLoss)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from shoal.client import BlockingAdmin, BlockingProducer, BlockingPullConsumer, ClientSettings, Message, MessageQueue
from shoal.spark.streaming.options import parse_read
from shoal.spark.streaming.pull_reader import DataLossError
from shoal.spark.streaming.source import TopicStreamReader
from tests.conftest import RETENTION_EVERY_SEGMENT_CONF, Cluster, wait_until
from tests.ports import free_broker_port, free_port
from tests.scenarios.test_replication import BROKER_NAME, Group, group  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

CLIENT_SETTINGS = ClientSettings(client_ip="127.0.0.1", route_refresh_interval_s=1.0, request_timeout_s=3.0)
WAIT_S = 30.0


def read_all(reader: TopicStreamReader) -> tuple[dict[str, Any], list[str]]:
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    batches = [batch for partition in reader.partitions(start, end) for batch in reader.read(partition)]
    bodies = pa.Table.from_batches(batches).column("body").to_pylist() if batches else []
    return end, sorted(body.decode() for body in bodies)


def test_a_stream_reads_from_the_slave_while_the_master_is_down(group: Group) -> None:  # noqa: F811
    """Goal: with the master SIGKILLed, a new query still plans (offsets from the slave) and reads
    (pulls from the slave) every message the slave replicated. Method: a SYNC_MASTER and its slave;
    100 messages acknowledged (so replicated); kill the master; read from earliest."""
    master = group.master()
    slave = group.slave(master)
    with BlockingAdmin(group.namesrv.addr, client_settings=CLIENT_SETTINGS) as admin:
        admin.create_topic("Failover", broker_addr=master.addr, read_queue_nums=2, write_queue_nums=2)
    with BlockingProducer("failover-producer", group.namesrv.addr, client_settings=CLIENT_SETTINGS) as producer:
        for n in range(100):
            producer.send(Message("Failover", f"f-{n}".encode()))
    with BlockingAdmin(group.namesrv.addr, client_settings=CLIENT_SETTINGS) as admin:

        def brokers() -> set[int]:
            route = admin.topic_route("Failover")
            return {broker_id for broker in route.broker_datas for broker_id in broker.broker_addrs}

        # The slave copies the topic's config (slaveSyncInterval); until then it refuses pulls of it.
        wait_until(lambda: brokers() == {0, 1} and "Failover" in admin.broker_topic_configs(slave.addr), WAIT_S)
        master.stop(signal.SIGKILL)
        wait_until(lambda: brokers() == {1}, WAIT_S)
    reader = TopicStreamReader(
        parse_read({"namesrv": group.namesrv.addr, "topics": "Failover", "startingOffsets": "earliest",
                    "requestTimeoutMs": "2000"}, streaming=True)
    )  # fmt: skip
    try:
        end, bodies = read_all(reader)
    finally:
        reader.stop()
    assert sum(end["Failover"][BROKER_NAME].values()) == 100
    assert bodies == sorted(f"f-{n}" for n in range(100))
    assert slave.process is not None and slave.process.poll() is None


@pytest.fixture
def retention_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Retention that deletes every CommitLog segment but the newest, at any hour."""
    running = Cluster(tmp_path, free_port(), free_broker_port(), free_port())
    running.start_namesrv()
    running.start_broker(dict(RETENTION_EVERY_SEGMENT_CONF))
    yield running
    running.stop_all()


def test_messages_deleted_before_they_were_read_fail_the_query_or_are_skipped(retention_cluster: Cluster) -> None:
    """Goal: a query that stands at offset 0 while retention deletes the first messages fails with
    DataLossError (failOnDataLoss=true, the default); with false it reads what is left, from the
    queue's new first offset. Method: plan at earliest, send 240 KiB, wait for the first segments
    to go, read."""
    cluster = retention_cluster
    with BlockingAdmin(cluster.namesrv_addr, client_settings=CLIENT_SETTINGS) as admin:
        admin.create_topic("Expiring", broker_addr=cluster.broker_addr, read_queue_nums=1, write_queue_nums=1)
    base = {"namesrv": cluster.namesrv_addr, "topics": "Expiring", "startingOffsets": "earliest"}
    strict = TopicStreamReader(parse_read(base, streaming=True))
    lenient = TopicStreamReader(parse_read({**base, "failOnDataLoss": "false"}, streaming=True))
    try:
        starts = strict.initialOffset(), lenient.initialOffset()
        assert starts[0] == {"Expiring": {"broker-a": {"0": 0}}}
        body = b"x" * 1024
        with BlockingProducer("expiring-producer", cluster.namesrv_addr, client_settings=CLIENT_SETTINGS) as producer:
            for _ in range(240):
                producer.send(Message("Expiring", body))
        queue = MessageQueue("Expiring", "broker-a", 0)
        puller = BlockingPullConsumer("expiring-check", cluster.namesrv_addr, client_settings=CLIENT_SETTINGS)
        puller.start()
        try:
            puller.fetch_message_queues("Expiring")
            wait_until(lambda: puller.min_offset(queue) > 0, WAIT_S)
            first = puller.min_offset(queue)
        finally:
            puller.shutdown()
        end = strict.latestOffset(starts[0], ReadAllAvailable())
        with pytest.raises(DataLossError, match="are gone"):
            for partition in strict.partitions(starts[0], end):
                list(strict.read(partition))
        end = lenient.latestOffset(starts[1], ReadAllAvailable())
        rows = [batch for partition in lenient.partitions(starts[1], end) for batch in lenient.read(partition)]
        offsets = pa.Table.from_batches(rows).column("queue_offset").to_pylist()
        assert offsets[0] >= first and offsets == list(range(offsets[0], 240))
    finally:
        strict.stop()
        lenient.stop()
