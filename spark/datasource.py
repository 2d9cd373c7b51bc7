"""The PySpark 4 Python Data Sources over a store directory (thin: planning and reading live in
planning.py and the *_reader modules).

    spark.dataSource.register(ShoalDataSource)          # or shoal.spark.register(spark)
    spark.read.format("shoal").option("topic", "T").load("/data/store")
    spark.read.format("shoal_consume_queue").load(store)   # ConsumeQueue units
    spark.read.format("shoal_index").load(store)           # IndexFile entries

Planning runs on the driver, reading in the Python workers: this module must be importable
there (an installed `shoal`, and PYSPARK_PYTHON pointing at its interpreter).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from shoal.spark.commitlog_reader import read_range
from shoal.spark.consume_queue_reader import read_queue_records, units_batch
from shoal.spark.errors import ReadOptionError
from shoal.spark.index_reader import index_files, read_index_file
from shoal.spark.options import ReadOptions, parse_options
from shoal.spark.planning import (
    QueueFilePlan,
    RangePlan,
    list_segments,
    plan_queue_files,
    plan_ranges,
    prune_by_time,
)
from shoal.spark.schema import CONSUME_QUEUE_SCHEMA, INDEX_SCHEMA, MESSAGE_SCHEMA, arrow_schema, project
from shoal.spark.streaming.source import RocketMQDataSource
from shoal.spark.worker_heap import freeze_imports


class RangePartition(InputPartition):
    """Records starting in one byte range of one CommitLog segment."""

    def __init__(self, plan: RangePlan) -> None:
        super().__init__(plan)
        self.plan = plan


class QueueFilePartition(InputPartition):
    """One ConsumeQueue file (its units, or the records they point at)."""

    def __init__(self, plan: QueueFilePlan) -> None:
        super().__init__(plan)
        self.plan = plan


class IndexFilePartition(InputPartition):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


def _checked_schema(schema: StructType, full: StructType) -> StructType:
    """A user-given schema must be a projection of ours (same names and types)."""
    known = {field.name: field.dataType for field in full.fields}
    for field in schema.fields:
        if known.get(field.name) != field.dataType:
            raise ReadOptionError(f"column {field.name} {field.dataType} is not one of {full.simpleString()}")
    return schema


class ShoalDataSource(DataSource):
    """CommitLog messages; see shoal.spark.schema for the columns, options.py for the options."""

    @classmethod
    def name(cls) -> str:
        return "shoal"

    def schema(self) -> StructType:
        return project(MESSAGE_SCHEMA, parse_options(self.options).columns)

    def reader(self, schema: StructType) -> DataSourceReader:
        return MessageReader(parse_options(self.options), _checked_schema(schema, MESSAGE_SCHEMA))


class MessageReader(DataSourceReader):
    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        require_store(options)
        if options.consume_queue:
            queue_files = plan_queue_files(options.consume_queue_dir, options.row_filter.topics, options.queue_ids)
            return [QueueFilePartition(plan) for plan in queue_files]
        segments = list_segments(options.commitlog_dir)
        segments = prune_by_time(segments, options.row_filter.since_ms, options.row_filter.until_ms)
        return [RangePartition(plan) for plan in plan_ranges(segments, options.partition_bytes)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        freeze_imports()
        columns = tuple(self.schema.fieldNames())
        target = arrow_schema(self.schema)
        options = self.options
        if isinstance(partition, QueueFilePartition):
            segments = list_segments(options.commitlog_dir)
            yield from read_queue_records(
                partition.plan, segments, columns, target, options.row_filter, check_crc=options.check_crc
            )
        elif isinstance(partition, RangePartition):
            yield from read_range(partition.plan, columns, target, options.row_filter, check_crc=options.check_crc)


class ShoalConsumeQueueDataSource(DataSource):
    """Every written ConsumeQueue unit (options: path, topic/topics, queue_ids)."""

    @classmethod
    def name(cls) -> str:
        return "shoal_consume_queue"

    def schema(self) -> StructType:
        return CONSUME_QUEUE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return ConsumeQueueReader(parse_options(self.options), _checked_schema(schema, CONSUME_QUEUE_SCHEMA))


class ConsumeQueueReader(DataSourceReader):
    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        if schema.fieldNames() != CONSUME_QUEUE_SCHEMA.fieldNames():
            raise ReadOptionError("shoal_consume_queue reads all of its columns")
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        require_store(options)
        plans = plan_queue_files(options.consume_queue_dir, options.row_filter.topics, options.queue_ids)
        return [QueueFilePartition(plan) for plan in plans]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, QueueFilePartition):
            return  # Spark's stand-in partition when there are no files
        batch = units_batch(partition.plan, arrow_schema(CONSUME_QUEUE_SCHEMA))
        if batch.num_rows:
            yield batch


class ShoalIndexDataSource(DataSource):
    """Every IndexFile entry (options: path, hash_slots = the broker's maxHashSlotNum)."""

    @classmethod
    def name(cls) -> str:
        return "shoal_index"

    def schema(self) -> StructType:
        return INDEX_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return IndexReader(parse_options(self.options), _checked_schema(schema, INDEX_SCHEMA))


class IndexReader(DataSourceReader):
    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        if schema.fieldNames() != INDEX_SCHEMA.fieldNames():
            raise ReadOptionError("shoal_index reads all of its columns")
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        require_store(self.options)
        return [IndexFilePartition(path) for path in index_files(self.options.index_dir)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, IndexFilePartition):
            return
        yield from read_index_file(partition.path, self.options.hash_slots, arrow_schema(INDEX_SCHEMA))


def require_store(options: ReadOptions) -> None:
    """A path that is not a directory is a mistake, not an empty store (a store whose broker has
    written nothing yet is a directory with no segments, and reads as empty)."""
    if not options.store_dir.is_dir():
        raise ReadOptionError(
            f"no store directory at {options.store_dir}: load() takes a broker's storePathRootDir "
            "(the directory holding commitlog/, consumequeue/ and index/)"
        )


DATA_SOURCES: tuple[type[DataSource], ...] = (
    ShoalDataSource,
    ShoalConsumeQueueDataSource,
    ShoalIndexDataSource,
    RocketMQDataSource,
)


def register(spark: SparkSession) -> None:
    """Make the formats "shoal", "shoal_consume_queue", "shoal_index" (store files) and "rocketmq"
    (live topics, shoal.spark.streaming) known to `spark`."""
    for source in DATA_SOURCES:
        spark.dataSource.register(source)
