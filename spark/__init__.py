"""shoal.spark: PySpark 4 data sources over a store directory, and the analysis jobs.

    from shoal.spark import register
    register(spark)
    spark.read.format("shoal").option("topic", "Orders").load("/data/store")

Reads files only (never the broker, never the store lock): see docs/spark.md.

PySpark is the [spark] extra: importing this package (or `shoal.spark.jobs`, which the CLI does
to list the jobs) must not import it, so the names below load on first use (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shoal.spark.datasource import (
        DATA_SOURCES,
        ShoalConsumeQueueDataSource,
        ShoalDataSource,
        ShoalIndexDataSource,
        register,
    )
    from shoal.spark.errors import JobError, ReadOptionError, ShoalSparkError
    from shoal.spark.schema import CONSUME_QUEUE_SCHEMA, INDEX_SCHEMA, MESSAGE_SCHEMA

_HOMES = {
    "DATA_SOURCES": "shoal.spark.datasource",
    "ShoalConsumeQueueDataSource": "shoal.spark.datasource",
    "ShoalDataSource": "shoal.spark.datasource",
    "ShoalIndexDataSource": "shoal.spark.datasource",
    "register": "shoal.spark.datasource",
    "JobError": "shoal.spark.errors",
    "ReadOptionError": "shoal.spark.errors",
    "ShoalSparkError": "shoal.spark.errors",
    "CONSUME_QUEUE_SCHEMA": "shoal.spark.schema",
    "INDEX_SCHEMA": "shoal.spark.schema",
    "MESSAGE_SCHEMA": "shoal.spark.schema",
}

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'shoal.spark' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
