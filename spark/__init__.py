"""shoal.spark: PySpark 4 data sources over a store directory, and the analysis jobs.

    from shoal.spark import register
    register(spark)
    spark.read.format("shoal").option("topic", "Orders").load("/data/store")

Reads files only (never the broker, never the store lock): see docs/spark.md.
"""

from shoal.spark.datasource import (
    DATA_SOURCES,
    ShoalConsumeQueueDataSource,
    ShoalDataSource,
    ShoalIndexDataSource,
    register,
)
from shoal.spark.errors import JobError, ReadOptionError, ShoalSparkError
from shoal.spark.schema import CONSUME_QUEUE_SCHEMA, INDEX_SCHEMA, MESSAGE_SCHEMA

__all__ = [
    "CONSUME_QUEUE_SCHEMA",
    "DATA_SOURCES",
    "INDEX_SCHEMA",
    "MESSAGE_SCHEMA",
    "JobError",
    "ReadOptionError",
    "ShoalConsumeQueueDataSource",
    "ShoalDataSource",
    "ShoalIndexDataSource",
    "ShoalSparkError",
    "register",
]
