"""The topic stream reader against a real NameServer and Broker, driven the way Spark drives it
(initialOffset, latestOffset, partitions, read, commit) but without a Spark session: every row a
micro-batch plan reads, and its offsets. Spark itself runs the source in test_streaming_queries.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from shoal.client import BlockingAdmin, BlockingProducer, ClientSettings, Message
from shoal.spark.schema import MESSAGE_SCHEMA
from shoal.spark.streaming.options import parse_read
from shoal.spark.streaming.source import TopicBatchReader, TopicStreamReader
from tests.conftest import Cluster
from tests.ports import free_broker_port, free_port

TOPIC = "Stream"
QUEUES = 4
SENT = 200
CLIENT_SETTINGS = ClientSettings(client_ip="127.0.0.1", route_refresh_interval_s=1.0)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A NameServer and a Broker (SQL92 filtering on); TOPIC with 4 queues holding SENT messages:
    body `m-<n>`, tag TagA for even n and TagB for odd, key `k-<n>`, user property n."""
    running = Cluster(tmp_path_factory.mktemp("stream"), free_port(), free_broker_port(), free_port())
    running.start_namesrv()
    running.start_broker({"enablePropertyFilter": "true"})
    with BlockingAdmin(running.namesrv_addr, client_settings=CLIENT_SETTINGS) as admin:
        admin.create_topic(TOPIC, broker_addr=running.broker_addr, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
    send(running, TOPIC, range(SENT))
    yield running
    running.stop_all()
    running.discard_store()


def send(cluster: Cluster, topic: str, numbers: range) -> None:
    with BlockingProducer("stream-test-producer", cluster.namesrv_addr, client_settings=CLIENT_SETTINGS) as producer:
        for n in numbers:
            tag = "TagA" if n % 2 == 0 else "TagB"
            producer.send(Message(topic, f"m-{n}".encode(), tags=tag, keys=(f"k-{n}",), properties={"n": str(n)}))


def options(cluster: Cluster, **extra: str) -> dict[str, str]:
    return {"namesrv": cluster.namesrv_addr, "topics": TOPIC, "requestTimeoutMs": "3000", **extra}


def read_plan(reader: TopicStreamReader | TopicBatchReader, partitions: Any) -> pa.Table:
    batches = [batch for partition in partitions for batch in reader.read(partition)]
    return pa.Table.from_batches(batches) if batches else pa.table({"body": pa.array([], pa.binary())})


def bodies(table: pa.Table) -> list[str]:
    return sorted(value.decode() for value in table.column("body").to_pylist())


def test_a_micro_batch_reads_every_message_once_with_the_file_sources_columns(cluster: Cluster) -> None:
    """Goal: from earliest to latest, one partition per queue, each message once, with the columns
    of format("shoal") (tags, keys, properties, offsets) and the offsets in the checkpoint form."""
    reader = TopicStreamReader(parse_read(options(cluster, startingOffsets="earliest"), streaming=True))
    try:
        start = reader.initialOffset()
        assert start == {TOPIC: {"broker-a": {str(queue): 0 for queue in range(QUEUES)}}}
        end = reader.latestOffset(start, ReadAllAvailable())
        assert sum(end[TOPIC][broker][queue] for broker in end[TOPIC] for queue in end[TOPIC][broker]) == SENT
        partitions = reader.partitions(start, end)
        assert len(partitions) == QUEUES
        table = read_plan(reader, partitions)
    finally:
        reader.stop()
    assert table.schema.names == MESSAGE_SCHEMA.fieldNames()
    assert bodies(table) == sorted(f"m-{n}" for n in range(SENT))
    rows = table.to_pylist()
    for row in rows:
        n = int(row["body"].decode()[2:])
        assert row["topic"] == TOPIC and row["tags"] == ("TagA" if n % 2 == 0 else "TagB")
        assert row["keys"] == f"k-{n}" and dict(row["properties"])["n"] == str(n)
    per_queue: dict[int, list[int]] = {}
    for row in rows:
        per_queue.setdefault(row["queue_id"], []).append(row["queue_offset"])
    for queue_id, offsets in per_queue.items():
        assert offsets == list(range(len(offsets))), queue_id  # in order, none missing, none twice


def test_tag_and_sql_filters_are_applied_by_the_broker(cluster: Cluster) -> None:
    """Goal: `tag` keeps only TagA, `sql` only the messages whose property matches."""
    for extra, expected in (
        ({"tag": "TagA"}, [n for n in range(SENT) if n % 2 == 0]),
        ({"sql": "n < 50 AND n >= 40"}, list(range(40, 50))),
    ):
        reader = TopicStreamReader(parse_read(options(cluster, startingOffsets="earliest", **extra), streaming=True))
        try:
            start = reader.initialOffset()
            table = read_plan(reader, reader.partitions(start, reader.latestOffset(start, ReadAllAvailable())))
        finally:
            reader.stop()
        assert bodies(table) == sorted(f"m-{n}" for n in expected), extra


def test_max_messages_per_trigger_splits_the_backlog_into_bounded_batches(cluster: Cluster) -> None:
    """Goal: with a cap of 30, every batch holds at most about 30 messages (plus one per queue) and
    the batches together read each message exactly once; the group's committed offsets follow."""
    reader = TopicStreamReader(
        parse_read(
            options(cluster, startingOffsets="earliest", maxMessagesPerTrigger="30", group="capped"), streaming=True
        )
    )
    seen: list[str] = []
    try:
        limit = reader.getDefaultReadLimit()
        assert limit == ReadMaxRows(30)
        start = reader.initialOffset()
        for _ in range(100):
            end = reader.latestOffset(start, limit)
            if end == start:
                break
            batch = bodies(read_plan(reader, reader.partitions(start, end)))
            assert 0 < len(batch) <= 30 + QUEUES
            seen += batch
            reader.commit(end)
            start = end
    finally:
        reader.stop()
    assert sorted(seen) == sorted(f"m-{n}" for n in range(SENT))
    with BlockingAdmin(cluster.namesrv_addr, client_settings=CLIENT_SETTINGS) as admin:
        progress = admin.consumer_progress("capped", TOPIC)
    assert sum(queue.consumer_offset for queue in progress) == SENT


def test_starting_at_latest_or_at_a_time_reads_only_what_came_after(cluster: Cluster) -> None:
    """Goal: `latest` starts at the end; `startingTimestamp` at the first message stored at or
    after the time; both then read the new messages."""
    latest = TopicStreamReader(parse_read(options(cluster), streaming=True))
    try:
        start = latest.initialOffset()
        time.sleep(0.05)
        cutoff_ms = int(time.time() * 1000)
        time.sleep(0.05)
        send(cluster, TOPIC, range(SENT, SENT + 8))
        table = read_plan(latest, latest.partitions(start, latest.latestOffset(start, ReadAllAvailable())))
    finally:
        latest.stop()
    new = sorted(f"m-{n}" for n in range(SENT, SENT + 8))
    assert bodies(table) == new
    at_time = TopicBatchReader(parse_read(options(cluster, startingTimestamp=str(cutoff_ms)), streaming=False))
    assert bodies(read_plan(at_time, at_time.partitions())) == new


def test_new_queues_are_read_from_their_first_message(cluster: Cluster, tmp_path: Path) -> None:
    """Goal: a topic scaled up while a query runs: its new queues appear in the next latest offsets
    and are read from offset 0, so nothing sent to them is skipped."""
    topic = "Scaled"
    with BlockingAdmin(cluster.namesrv_addr, client_settings=CLIENT_SETTINGS) as admin:
        admin.create_topic(topic, broker_addr=cluster.broker_addr, read_queue_nums=2, write_queue_nums=2)
        reader = TopicStreamReader(
            parse_read({**options(cluster), "topics": topic, "startingOffsets": "earliest"}, streaming=True)
        )
        try:
            start = reader.initialOffset()
            assert sorted(start[topic]["broker-a"]) == ["0", "1"]
            admin.create_topic(topic, broker_addr=cluster.broker_addr, read_queue_nums=6, write_queue_nums=6)
            time.sleep(0.5)
            send(cluster, topic, range(60))
            end = reader.latestOffset(start, ReadAllAvailable())
            assert sorted(end[topic]["broker-a"]) == [str(queue) for queue in range(6)]
            table = read_plan(reader, reader.partitions(start, end))
        finally:
            reader.stop()
    assert bodies(table) == sorted(f"m-{n}" for n in range(60))
    assert {row["queue_id"] for row in table.to_pylist()} - {0, 1}, "the new queues held messages"


def test_a_reader_pickles_without_its_connections(cluster: Cluster) -> None:
    """Spark ships the reader to its workers for read(): options only, no thread or socket."""
    import pickle

    reader = TopicStreamReader(parse_read(options(cluster, startingOffsets="earliest"), streaming=True))
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        partitions = reader.partitions(start, end)
        copy = pickle.loads(pickle.dumps(reader))
        assert copy._cluster is None
        assert bodies(read_plan(copy, pickle.loads(pickle.dumps(partitions)))) == bodies(read_plan(reader, partitions))
    finally:
        reader.stop()


def test_available_now_reads_up_to_the_ends_recorded_at_the_start(cluster: Cluster) -> None:
    """Goal: Trigger.AvailableNow: what arrives after prepareForTriggerAvailableNow is not read, and
    maxMessagesPerTrigger still splits the way there. Method: record, send 10 more, walk the batches."""
    reader = TopicStreamReader(
        parse_read(options(cluster, startingOffsets="earliest", maxMessagesPerTrigger="64"), streaming=True)
    )
    try:
        start = reader.initialOffset()
        reader.prepareForTriggerAvailableNow()
        send(cluster, TOPIC, range(10_000, 10_010))
        read = 0
        batches = 0
        while True:
            end = reader.latestOffset(start, reader.getDefaultReadLimit())
            if end == start:
                break
            rows = read_plan(reader, reader.partitions(start, end))
            assert rows.num_rows <= 64 + QUEUES
            assert not {f"m-{n}" for n in range(10_000, 10_010)} & set(bodies(rows))
            read += rows.num_rows
            batches += 1
            start = end
    finally:
        reader.stop()
    assert batches > 1 and read >= SENT
