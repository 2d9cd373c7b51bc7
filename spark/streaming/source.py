"""`format("rocketmq")`: topics read (and written) over the remoting protocol, for
`spark.readStream`, `spark.read` and `df.writeStream` / `df.write`.

    spark.dataSource.register(RocketMQDataSource)      # or shoal.spark.register(spark)
    stream = (spark.readStream.format("rocketmq").option("namesrv", "ns:9876")
              .option("topics", "Orders").load())

The rows have the file source's columns (shoal.spark.schema), so a job moves between store files
(`format("shoal")`) and a live topic by changing its reader. Options: streaming/options.py;
guarantees and how a micro-batch is planned: docs/spark.md, "Streaming".
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from shoal.spark.errors import ReadOptionError, ShoalSparkError
from shoal.spark.schema import MESSAGE_SCHEMA, project
from shoal.spark.streaming.cluster import Queues, StreamCluster
from shoal.spark.streaming.offsets import (
    EARLIEST,
    LATEST,
    Offsets,
    QueueRange,
    admit,
    advance,
    from_json,
    ranges,
    to_json,
)
from shoal.spark.streaming.options import ReadOptions, parse_read, parse_write
from shoal.spark.streaming.pull_reader import read_queue_range
from shoal.spark.streaming.sink import TopicBatchWriter, TopicStreamWriter

__all__ = ["QueueRangePartition", "RocketMQDataSource", "TopicBatchReader", "TopicStreamReader"]


class QueueRangePartition(InputPartition):
    """One queue's messages in [start, end), and where its broker group is (master first)."""

    def __init__(self, qrange: QueueRange, addresses: tuple[str, ...]) -> None:
        super().__init__((qrange, addresses))
        self.qrange = qrange
        self.addresses = addresses


class RocketMQDataSource(DataSource):
    """Topics of a RocketMQ-protocol cluster (Shoal or Apache RocketMQ) through its NameServer."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> StructType:
        return project(MESSAGE_SCHEMA, parse_read(self.options, streaming=True).columns)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 (PySpark's name)
        return TopicStreamReader(parse_read(self.options, streaming=True))

    def reader(self, schema: StructType) -> DataSourceReader:
        return TopicBatchReader(parse_read(self.options, streaming=False))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802 (PySpark's name)
        return TopicStreamWriter(parse_write(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return TopicBatchWriter(parse_write(self.options), schema)


class _Planner:
    """What the stream and batch readers share: the cluster (driver only, never pickled), the
    queues it last reported, and the starting offsets."""

    options: ReadOptions
    _cluster: StreamCluster | None
    _queues: Queues

    def _start_planning(self, options: ReadOptions) -> None:
        self.options = options
        self._cluster = None
        self._queues = {}

    def __getstate__(self) -> dict[str, Any]:
        # Workers get the reader to call read(): options only, no connections or threads.
        return {"options": self.options, "_cluster": None, "_queues": {}}

    def _connected(self) -> StreamCluster:
        if self._cluster is None:
            self._cluster = StreamCluster(self.options)
        return self._cluster

    def _refresh(self) -> Queues:
        found = self._connected().queues()
        # A queue that left the routes keeps its last addresses: a replayed batch may still read it.
        self._queues = {**self._queues, **found}
        return found

    def _starting_offsets(self, queues: Queues) -> Offsets:
        cluster, starting = self._connected(), self.options.starting
        if starting.how == "latest":
            return cluster.latest(queues)
        if starting.how == "timestamp":
            assert starting.timestamp_ms is not None
            return cluster.at_time(queues, starting.timestamp_ms)
        earliest = cluster.earliest(queues)
        if starting.how == "earliest":
            return earliest
        assert starting.offsets is not None
        given = starting.offsets
        latest = cluster.latest(queues) if LATEST in given.values() else {}
        offsets: Offsets = {key: offset for key, offset in given.items() if offset >= 0}
        for key in queues:
            wanted = given.get(key, EARLIEST)
            if wanted == LATEST and key in latest:
                offsets[key] = latest[key]
            elif wanted == EARLIEST and key in earliest:
                offsets[key] = earliest[key]
        return offsets

    def _partitions(self, start: Offsets, end: Offsets) -> list[QueueRangePartition]:
        found = ranges(start, end)
        if any(qrange.key not in self._queues for qrange in found):
            self._refresh()  # a restarted query replays a batch planned before this process began
        partitions = []
        for qrange in found:
            addresses = self._queues.get(qrange.key)
            if not addresses:
                raise ShoalSparkError(
                    f"{qrange.topic}/{qrange.broker}/{qrange.queue_id} has offsets {qrange.start}-{qrange.end} to read "
                    "but no broker of its group is in the routes"
                )
            partitions.append(QueueRangePartition(qrange, addresses))
        return partitions

    def _close(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


class TopicStreamReader(_Planner, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of topic messages with their offsets in the query's checkpoint."""

    def __init__(self, options: ReadOptions) -> None:
        self._start_planning(options)
        self._latest: Offsets = {}
        self._target: Offsets | None = None
        """Trigger.AvailableNow: the ends recorded when the query started; nothing past them is read."""

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "_latest": {}, "_target": None}

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 (PySpark's name)
        """Record every queue's end now: the query reads up to there (in batches of
        maxMessagesPerTrigger, if set) and stops. Queues that appear later are not read."""
        self._target = self._connected().latest(self._refresh())

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 (PySpark's name)
        return to_json(self._starting_offsets(self._refresh()))

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 (PySpark's name)
        limit = self.options.max_messages_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802 (PySpark's name)
        begin = from_json(start)
        if self._target is not None:
            self._latest = dict(self._target)
        else:
            self._latest = self._connected().latest(self._refresh())
        if isinstance(limit, ReadMaxRows):
            return to_json(admit(begin, self._latest, limit.max_rows))
        return to_json(advance(begin, self._latest))

    def reportLatestOffset(self) -> dict[str, Any] | None:  # noqa: N802 (PySpark's name)
        return to_json(self._latest) if self._latest else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return self._partitions(from_json(start), from_json(end))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, QueueRangePartition)
        yield from read_queue_range(partition.qrange, partition.addresses, self.options)

    def commit(self, end: dict[str, Any]) -> None:
        if self.options.commit_offsets:
            self._connected().commit(self._queues, from_json(end))

    def stop(self) -> None:
        self._close()


class TopicBatchReader(_Planner, DataSourceReader):
    """The messages between startingOffsets (earliest) and endingOffsets (latest), once."""

    def __init__(self, options: ReadOptions) -> None:
        if options.max_messages_per_trigger is not None:
            raise ReadOptionError(
                "maxMessagesPerTrigger is for streams; a batch read takes startingOffsets/endingOffsets"
            )
        self._start_planning(options)

    def partitions(self) -> Sequence[InputPartition]:
        try:
            queues = self._refresh()
            start = self._starting_offsets(queues)
            end = self.options.ending if self.options.ending is not None else self._connected().latest(queues)
            return self._partitions(start, advance(start, end))
        finally:
            self._close()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, QueueRangePartition):
            return  # Spark's stand-in partition when there is nothing to read
        yield from read_queue_range(partition.qrange, partition.addresses, self.options)
