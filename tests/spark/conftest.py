"""Spark fixtures: one local SparkSession for the whole run, and one store written by a real broker.

The store (session scope, built once): a NameServer and a Broker in real processes with 64 KiB
CommitLog segments, 64-unit ConsumeQueue files and 256-entry index files, so every kind of file
rolls. shoal.client produces three topics, a push consumer dead-letters the "poison" messages of
one (max_reconsume_times=0 sends them straight to %DLQ%<group>) and commits offsets, a pull
consumer commits partial offsets of another; then the broker stops cleanly. Afterwards the test
damages it the ways a live store can look: half a record appended after the last record of the
last segment (a torn tail) and the first segment deleted (retention).

The reference for every comparison is the store's own reader, shoal.store.inspection.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from shoal.client import (
    BlockingProducer,
    BlockingPullConsumer,
    BlockingPushConsumer,
    ClientSettings,
    ConsumeFromWhere,
    ConsumerSettings,
    ConsumeStatus,
    Message,
    MessageExt,
)
from shoal.formats.record import PHYSICAL_OFFSET_OFFSET, TIMESTAMP, RecordHeader, RecordKind
from shoal.spark.session import session
from shoal.store.inspection import iter_commitlog, segment_paths
from tests.conftest import Cluster, wait_until
from tests.ports import free_broker_port, free_port

SEGMENT_BYTES = 64 * 1024
HASH_SLOTS = 64
INDEX_ENTRIES = 256
TOPICS = {"Orders": 260, "Payments": 120, "Logs": 80}
"""Messages per topic: about 500 KB of records, so about 8 segments of 64 KiB."""
DLQ_GROUP = "spark-dlq-group"
LAG_GROUP = "spark-lag-group"
POISON_EVERY = 10
"""Every tenth Payments message is poison: the push consumer dead-letters it."""
DELIVERY_TIMEOUT_S = 30.0
CLIENT_SETTINGS = ClientSettings(client_ip="127.0.0.1", route_refresh_interval_s=1.0)
CONSUMER_SETTINGS = ConsumerSettings(rebalance_interval_s=0.5, offset_persist_interval_s=0.5, shutdown_await_s=5.0)


@dataclass
class ReferenceRecord:
    """One valid record, as shoal.store.inspection reads it."""

    offset: int
    size: int
    header: RecordHeader
    properties: dict[str, str]
    body: bytes


@dataclass
class BrokerStore:
    store_dir: Path
    deleted_segment: Path
    torn_offset: int
    dlq_topic: str
    sent: dict[str, int] = field(default_factory=dict)

    def reference(self) -> list[ReferenceRecord]:
        return reference_records(self.store_dir)


def reference_records(store_dir: Path) -> list[ReferenceRecord]:
    """Every valid record, by the store's own reader (CRC checked); positions in a header are
    positions in its segment file."""
    records = []
    segments: dict[int, bytes] = {}
    for item in iter_commitlog(store_dir / "commitlog", check_crc=True):
        if item.check.kind is not RecordKind.MESSAGE or item.check.header is None:
            continue
        header = item.check.header
        base = item.offset - item.offset % SEGMENT_BYTES
        if base not in segments:
            segments[base] = (store_dir / "commitlog" / f"{base:020d}").read_bytes()
        body = segments[base][header.body_position : header.body_position + header.body_length]
        records.append(ReferenceRecord(item.offset, item.check.size, header, item.properties, body))
    return records


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local[2] session (about 7 s to start) for every Spark test."""
    active = session(
        "shoal-tests",
        "local[2]",
        {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"},
    )
    active.sparkContext.setLogLevel("ERROR")
    yield active
    active.stop()


def _produce(cluster: Cluster) -> dict[str, int]:
    rng = random.Random(7)
    producer = BlockingProducer("spark-test-producer", cluster.namesrv_addr, client_settings=CLIENT_SETTINGS)
    producer.start()
    try:
        for topic, count in TOPICS.items():
            for index in range(count):
                poison = topic == "Payments" and index % POISON_EVERY == 0
                body = bytes(rng.randrange(256) for _ in range(rng.randrange(50, 1500)))
                producer.send(
                    Message(
                        topic,
                        body,
                        tags=f"Tag{index % 3}",
                        keys=(f"{topic}-{index}", "poison" if poison else "good"),
                    )
                )
    finally:
        producer.shutdown()
    return dict(TOPICS)


def _dead_letter_poison(cluster: Cluster) -> None:
    seen: set[str] = set()

    def listener(messages: list[MessageExt]) -> ConsumeStatus:
        (message,) = messages
        seen.add(message.msg_id)
        return ConsumeStatus.RECONSUME_LATER if "poison" in message.keys else ConsumeStatus.CONSUME_SUCCESS

    consumer = BlockingPushConsumer(
        DLQ_GROUP,
        cluster.namesrv_addr,
        max_reconsume_times=0,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        settings=CONSUMER_SETTINGS,
        client_settings=CLIENT_SETTINGS,
    )
    consumer.set_listener(listener)
    consumer.subscribe("Payments")
    consumer.start()
    try:
        wait_until(lambda: len(seen) >= TOPICS["Payments"], DELIVERY_TIMEOUT_S)
    finally:
        consumer.shutdown()


def _commit_partial_offsets(cluster: Cluster) -> None:
    puller = BlockingPullConsumer(LAG_GROUP, cluster.namesrv_addr, client_settings=CLIENT_SETTINGS)
    puller.start()
    try:
        for queue in puller.fetch_message_queues("Orders"):
            puller.update_offset(queue, puller.max_offset(queue) // 3)
    finally:
        puller.shutdown()


def _tear_tail(store_dir: Path) -> int:
    """Append the first half of the last record after it, with PHYSICALOFFSET set to where it now
    lies, so it looks like a write that stopped halfway; returns its offset."""
    last = None
    for item in iter_commitlog(store_dir / "commitlog", check_crc=True):
        if item.check.kind is RecordKind.MESSAGE:
            last = item
    assert last is not None
    base = last.offset - last.offset % SEGMENT_BYTES
    path = store_dir / "commitlog" / f"{base:020d}"
    position = last.offset - base
    with path.open("r+b") as file:
        file.seek(position)
        record = bytearray(file.read(last.check.size))
        torn_at = position + last.check.size
        assert torn_at + len(record) // 2 < SEGMENT_BYTES, "the torn half must fit the last segment"
        record[PHYSICAL_OFFSET_OFFSET : PHYSICAL_OFFSET_OFFSET + 8] = TIMESTAMP.pack(
            base + torn_at
        )  # a long, as PHYSICALOFFSET is
        file.seek(torn_at)
        file.write(record[: len(record) // 2])
    return base + torn_at


@pytest.fixture(scope="session")
def broker_store(tmp_path_factory: pytest.TempPathFactory) -> BrokerStore:
    """The damaged broker-written store described in the module docstring (do not modify it)."""
    root = tmp_path_factory.mktemp("spark-store")
    cluster = Cluster(root, free_port(), free_broker_port(), free_port())
    cluster.start_namesrv()
    try:
        cluster.start_broker(
            {
                "mappedFileSizeCommitLog": str(SEGMENT_BYTES),
                "maxMessageSize": str(16 * 1024),
                "mappedFileSizeConsumeQueue": str(64 * 20),
                "maxHashSlotNum": str(HASH_SLOTS),
                "maxIndexNum": str(INDEX_ENTRIES),
            }
        )
        sent = _produce(cluster)
        _dead_letter_poison(cluster)
        _commit_partial_offsets(cluster)
        assert cluster.stop("broker") == 0
    finally:
        cluster.stop_all()
    store_dir = cluster.store_dir
    assert not (store_dir / "abort").exists(), "the broker stopped cleanly"
    segments = segment_paths(store_dir / "commitlog")
    assert len(segments) >= 5, f"only {len(segments)} segment(s): the store must roll"
    torn_offset = _tear_tail(store_dir)
    segments[0].unlink()
    return BrokerStore(store_dir, segments[0], torn_offset, f"%DLQ%{DLQ_GROUP}", sent)


@pytest.fixture
def store_copy(broker_store: BrokerStore, tmp_path: Path) -> Callable[[], Path]:
    """A private copy of the broker store for tests that change files."""

    def copy() -> Path:
        target = tmp_path / "store-copy"
        shutil.copytree(broker_store.store_dir, target)
        return target

    return copy


os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
