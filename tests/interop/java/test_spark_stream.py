"""format("rocketmq") against Apache RocketMQ 4.9.7's own NameServer and Broker: the stream plan
reads every message once with its columns, tag and SQL92 filters are applied by RocketMQ's broker,
and the topic_archive job (Spark, local mode) archives the topic into Parquet."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from shoal.client import BlockingAdmin, BlockingProducer, ClientSettings, Message
from shoal.spark.schema import MESSAGE_SCHEMA
from shoal.spark.streaming.options import parse_read
from shoal.spark.streaming.source import TopicStreamReader
from tests.interop.java import rocketmq_broker as launcher

pytestmark = pytest.mark.slow

TOPIC = "SparkOnRocketMQ"
SENT = 300
CLIENT_SETTINGS = ClientSettings(client_ip="127.0.0.1")
ARCHIVE_TIMEOUT_S = 600.0
"""A Spark job (JVM start, one micro-batch) beside RocketMQ's JVMs on a busy two-core machine."""


@dataclass
class RocketMQ:
    namesrv: object
    broker: object

    @property
    def namesrv_addr(self) -> str:
        return str(self.namesrv.addr)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def rocketmq(rocketmq_lib: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQ]:
    """RocketMQ 4.9.7 (SQL92 filtering on) with TOPIC: 4 queues, SENT messages `m-<n>`, tag TagA
    for even n and TagB for odd, user property n."""
    root = tmp_path_factory.mktemp("rocketmq-spark")
    namesrv = launcher.RocketMQNamesrv(rocketmq_lib, root / "namesrv")
    namesrv.start()
    broker = launcher.RocketMQBroker(
        rocketmq_lib, root / "broker", namesrv_addr=namesrv.addr, store_dir=root / "store",
        settings={"enablePropertyFilter": "true"},
    )  # fmt: skip
    broker.start()
    try:
        with BlockingAdmin(namesrv.addr, client_settings=CLIENT_SETTINGS) as admin:
            admin.create_topic(TOPIC, broker_addr=broker.addr, read_queue_nums=4, write_queue_nums=4)
        with BlockingProducer("spark-rocketmq-producer", namesrv.addr, client_settings=CLIENT_SETTINGS) as producer:
            for n in range(SENT):
                tag = "TagA" if n % 2 == 0 else "TagB"
                producer.send(Message(TOPIC, f"m-{n}".encode(), tags=tag, keys=(f"k-{n}",), properties={"n": str(n)}))
        yield RocketMQ(namesrv, broker)
    finally:
        broker.stop()
        namesrv.stop()


def plan_bodies(namesrv: str, **extra: str) -> list[str]:
    options = {"namesrv": namesrv, "topics": TOPIC, "startingOffsets": "earliest", **extra}
    reader = TopicStreamReader(parse_read(options, streaming=True))
    try:
        start = reader.initialOffset()
        partitions = reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))
        batches = [batch for partition in partitions for batch in reader.read(partition)]
    finally:
        reader.stop()
    table = pa.Table.from_batches(batches)
    assert table.schema.names == MESSAGE_SCHEMA.fieldNames()
    return sorted(value.decode() for value in table.column("body").to_pylist())


def test_a_micro_batch_plan_reads_rocketmqs_topic_with_its_filters(rocketmq: RocketMQ) -> None:
    """Goal: the same reads as against Shoal: everything once, TagA only, and an SQL92 range."""
    assert plan_bodies(rocketmq.namesrv_addr) == sorted(f"m-{n}" for n in range(SENT))
    assert plan_bodies(rocketmq.namesrv_addr, tag="TagA") == sorted(f"m-{n}" for n in range(0, SENT, 2))
    assert plan_bodies(rocketmq.namesrv_addr, sql="n BETWEEN 10 AND 19") == sorted(f"m-{n}" for n in range(10, 20))


def test_topic_archive_archives_a_rocketmq_topic(rocketmq: RocketMQ, tmp_path: Path) -> None:
    """Goal: the streaming job, as a user runs it (`--once`), against RocketMQ 4.9.7: every message
    in the Parquet table, with its keys."""
    done = subprocess.run(
        [
            sys.executable, "-m", "shoal.spark.jobs.topic_archive", "-n", rocketmq.namesrv_addr, "-t", TOPIC,
            "--checkpoint", str(tmp_path / "checkpoint"), "-o", str(tmp_path / "out"), "--once",
        ],
        capture_output=True, text=True, timeout=ARCHIVE_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    table = pq.read_table(tmp_path / "out" / "messages.parquet")
    assert sorted(table.column("keys").to_pylist()) == sorted(f"k-{n}" for n in range(SENT))
