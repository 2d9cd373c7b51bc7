"""A SparkSession for the jobs and tests: local mode on loopback by default, data sources registered."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from shoal.spark.datasource import register

LOCAL_MASTER_DEFAULT = "local[2]"
SHUFFLE_PARTITIONS_LOCAL = 4
"""Spark's default of 200 shuffle partitions is for clusters; tiny local jobs spend most of their
time scheduling empty tasks."""


def prepare_environment() -> None:
    """Workers must run this interpreter (it has shoal and pyarrow) and Spark must stay on
    loopback unless told otherwise; set only what the caller has not."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def under_spark_submit() -> bool:
    """spark-submit starts the JVM first and hands the Python driver its gateway."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def session(app_name: str, master: str | None = None, conf: Mapping[str, str] | None = None) -> SparkSession:
    """The active session (spark-submit's) or a new local one; the shoal formats registered."""
    prepare_environment()
    builder = SparkSession.builder.appName(app_name)
    if master is None and not under_spark_submit():
        master = LOCAL_MASTER_DEFAULT
    if master is not None:
        builder = builder.master(master)
    if master is not None and master.startswith("local"):
        builder = builder.config("spark.ui.enabled", "false").config(
            "spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS_LOCAL)
        )
    for name, value in (conf or {}).items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
