"""Spark Structured Streaming over real topics, in local mode, with the driver killed mid-batch:
the topic_archive job (rocketmq -> Parquet) must end with every acknowledged message exactly once,
across a SIGKILL of its driver and while queues and broker groups come and go; the rocketmq sink
must deliver every row at least once, repeats carrying the same SPARK_ROW."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from shoal.client import BlockingAdmin, BlockingProducer, ClientSettings, Message
from shoal.spark.streaming.options import parse_read
from shoal.spark.streaming.sink import ROW_PROPERTY
from shoal.spark.streaming.source import TopicBatchReader
from tests.conftest import Cluster, wait_until
from tests.ports import free_broker_port, free_port

pytestmark = pytest.mark.slow

CLIENT_SETTINGS = ClientSettings(client_ip="127.0.0.1", route_refresh_interval_s=1.0)
HERE = Path(__file__).resolve().parent
DRIVER_START_TIMEOUT_S = 180.0
"""A Spark driver (JVM and Python workers) starting on a busy two-core machine."""
CATCH_UP_TIMEOUT_S = 300.0
"""Until a restarted query has read everything acknowledged: bounds a stuck query, not speed."""
MID_BATCH_TIMEOUT_S = 240.0


@dataclass
class Sender:
    """Sends `count` keyed messages to `topic` from a thread, pausing between them; keeps the
    keys the broker acknowledged (SEND_OK)."""

    cluster: Cluster
    topic: str
    count: int
    prefix: str
    pause_s: float = 0.005
    acked: list[str] = field(default_factory=list)
    thread: threading.Thread | None = None
    error: BaseException | None = None

    def start(self) -> Sender:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            with BlockingProducer(
                f"sender-{self.prefix}", self.cluster.namesrv_addr, client_settings=CLIENT_SETTINGS
            ) as producer:
                for index in range(self.count):
                    key = f"{self.prefix}-{index}"
                    producer.send(Message(self.topic, key.encode(), tags="T", keys=(key,)))
                    self.acked.append(key)
                    time.sleep(self.pause_s)
        except BaseException as error:  # reported by join()
            self.error = error

    def join(self) -> list[str]:
        assert self.thread is not None
        self.thread.join(CATCH_UP_TIMEOUT_S)
        assert self.error is None, self.error
        return self.acked


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    (tmp_path / "a").mkdir()
    running = Cluster(tmp_path / "a", free_port(), free_broker_port(), free_port())
    running.start_namesrv()
    running.start_broker({"brokerName": "broker-a"})
    yield running
    running.stop_all()


def create_topic(cluster: Cluster, topic: str, queues: int, broker_addr: str | None = None) -> None:
    with BlockingAdmin(cluster.namesrv_addr, client_settings=CLIENT_SETTINGS) as admin:
        admin.create_topic(
            topic, broker_addr=broker_addr or cluster.broker_addr, read_queue_nums=queues, write_queue_nums=queues
        )


def start_driver(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """A driver in its own process group (the JVM is its child), as `python -m ...` runs it."""
    with log.open("ab") as handle:
        return subprocess.Popen(
            [sys.executable, *args], stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "SHOAL_LOG_LEVEL": "INFO"},
        )  # fmt: skip


def kill_group(driver: subprocess.Popen[bytes]) -> None:
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait(30)


def kill_mid_batch(driver: subprocess.Popen[bytes], checkpoint: Path, log: Path, after_batches: int) -> int:
    """SIGKILL the driver while a micro-batch is under way (its offsets logged, its commit not)
    once `after_batches` batches have committed; the cut batch's id."""
    offsets, commits = checkpoint / "offsets", checkpoint / "commits"
    deadline = time.monotonic() + MID_BATCH_TIMEOUT_S
    while time.monotonic() < deadline:
        assert driver.poll() is None, log.read_text()[-4000:]
        planned = {int(path.name) for path in offsets.glob("[0-9]*")} if offsets.is_dir() else set()
        done = {int(path.name) for path in commits.glob("[0-9]*")} if commits.is_dir() else set()
        running = planned - done
        if len(done) >= after_batches and running:
            kill_group(driver)
            cut = max(running)
            assert not (commits / str(cut)).exists(), "the batch finished before the kill landed; retry the test"
            return cut
        time.sleep(0.01)
    kill_group(driver)
    raise AssertionError(f"no micro-batch under way within {MID_BATCH_TIMEOUT_S} s:\n{log.read_text()[-4000:]}")


def stop_driver(driver: subprocess.Popen[bytes], log: Path) -> None:
    os.kill(driver.pid, signal.SIGTERM)  # the driver alone: it stops the query, then its JVM
    try:
        code = driver.wait(120)
    except subprocess.TimeoutExpired:
        kill_group(driver)
        raise AssertionError(f"the driver ignored SIGTERM:\n{log.read_text()[-4000:]}") from None
    assert code == 0, log.read_text()[-4000:]


def archived_keys(spark: SparkSession, table: Path) -> list[str]:
    """The keys the archive holds, read as Spark reads a file sink (through _spark_metadata)."""
    if not (table / "_spark_metadata").is_dir():
        return []
    return [row["keys"] for row in spark.read.parquet(str(table)).select("keys").collect()]


def archive_args(cluster: Cluster, topic: str, work: Path) -> list[str]:
    return [
        "-m", "shoal.spark.jobs.topic_archive", "-n", cluster.namesrv_addr, "-t", topic,
        "--checkpoint", str(work / "checkpoint"), "-o", str(work / "out"),
        "--max-messages-per-trigger", "500", "--trigger-seconds", "0.2",
    ]  # fmt: skip


def test_an_archive_is_exactly_once_across_a_driver_kill_and_queue_changes(
    cluster: Cluster, spark: SparkSession, tmp_path: Path
) -> None:
    """Goal: topic -> Parquet with a checkpoint holds every acknowledged message exactly once,
    though its driver was SIGKILLed in the middle of a micro-batch and, after the restart, the
    topic gained queues, a second broker group joined and then left. Method: a producer sends
    keyed messages throughout; kill when a batch's offsets are logged but not its commit; restart
    on the same checkpoint; scale the topic 4 -> 6 queues; start broker-b with the topic (4
    queues), send to both, stop broker-b once its messages are archived, send more; count keys."""
    create_topic(cluster, "Orders", 4)
    work, log = tmp_path / "archive", tmp_path / "driver.log"
    first = Sender(cluster, "Orders", 2000, "first").start()
    driver = start_driver(archive_args(cluster, "Orders", work), log)
    cut = kill_mid_batch(driver, work / "checkpoint" / "topic_archive", log, after_batches=2)
    first_keys = first.join()

    driver = start_driver(archive_args(cluster, "Orders", work), log)
    try:
        create_topic(cluster, "Orders", 6)
        (tmp_path / "b").mkdir()
        second = Cluster(tmp_path / "b", cluster.namesrv_port, free_broker_port(), free_port())
        second.start_broker({"brokerName": "broker-b"})
        create_topic(cluster, "Orders", 4, broker_addr=second.broker_addr)
        time.sleep(2)  # the producer's routes refresh every second
        both = Sender(cluster, "Orders", 400, "both").start().join()
        on_b = [key for key in both if key]  # which broker took each is the producer's choice
        wait_until(
            lambda: set(on_b) <= set(archived_keys(spark, work / "out" / "messages.parquet")), CATCH_UP_TIMEOUT_S
        )
        second.stop_all()
        last = Sender(cluster, "Orders", 200, "last").start().join()
        everything = [*first_keys, *both, *last]
        wait_until(
            lambda: len(archived_keys(spark, work / "out" / "messages.parquet")) >= len(everything),
            CATCH_UP_TIMEOUT_S,
        )
    finally:
        stop_driver(driver, log)
    archived = archived_keys(spark, work / "out" / "messages.parquet")
    repeated = [key for key, times in Counter(archived).items() if times > 1]
    assert not repeated, f"archived twice (batch {cut} was cut): {repeated[:10]}"
    assert sorted(archived) == sorted(everything)
    queues = {
        (row["topic"], row["queue_id"]) for row in spark.read.parquet(str(work / "out" / "messages.parquet")).collect()
    }
    assert len(queues) >= 6, queues


SINK_DRIVER = HERE / "sink_driver.py"


def test_the_sink_delivers_every_row_at_least_once_across_a_driver_kill(cluster: Cluster, tmp_path: Path) -> None:
    """Goal: a stream from one topic into another through the rocketmq sink loses no row when its
    driver is SIGKILLed mid-batch; a row sent twice (the replayed batch) carries the same
    SPARK_ROW, so dropping repeats by it leaves each source message exactly once. Method:
    sink_driver.py (Src -> Dst, 300 messages per batch); kill, restart; read Dst back."""
    create_topic(cluster, "Src", 4)
    create_topic(cluster, "Dst", 4)
    work, log = tmp_path / "sink", tmp_path / "sink-driver.log"
    keys = Sender(cluster, "Src", 1200, "src", pause_s=0.0).start().join()
    args = [str(SINK_DRIVER), cluster.namesrv_addr, str(work / "checkpoint")]
    driver = start_driver(args, log)
    kill_mid_batch(driver, work / "checkpoint", log, after_batches=1)
    driver = start_driver(args, log)
    try:
        wait_until(lambda: len(set(dst_rows(cluster).values())) >= len(keys), CATCH_UP_TIMEOUT_S)
    finally:
        stop_driver(driver, log)
    rows = dst_rows(cluster)
    by_row: dict[str, set[str]] = {}
    for (row_id, _offset), key in rows.items():
        by_row.setdefault(row_id, set()).add(key)
    assert all(len(values) == 1 for values in by_row.values()), "one SPARK_ROW, one source message"
    assert sorted(next(iter(values)) for values in by_row.values()) == sorted(keys)


def dst_rows(cluster: Cluster) -> dict[tuple[str, int], str]:
    """Every message of Dst: (SPARK_ROW, its own queue offset and queue) -> the source key it carries."""
    reader = TopicBatchReader(
        parse_read(
            {"namesrv": cluster.namesrv_addr, "topics": "Dst", "columns": "queue_id,queue_offset,keys,properties"},
            streaming=False,
        )
    )
    batches = [batch for partition in reader.partitions() for batch in reader.read(partition)]
    if not batches:
        return {}
    table = pa.Table.from_batches(batches).to_pylist()
    return {
        (dict(row["properties"])[ROW_PROPERTY], row["queue_id"] * 1_000_000 + row["queue_offset"]): row["keys"]
        for row in table
    }
