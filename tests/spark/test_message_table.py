"""shoal.spark.message_table's Parquet options reach Parquet: the columns that never repeat are
written plainly (no dictionary) and the bodies without min/max statistics, the others as Spark
writes them by default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from shoal.spark.message_table import (
    PARQUET_WRITE_OPTIONS,
    PROPERTY_NAMES_PATH,
    PROPERTY_VALUES_PATH,
    UNFILTERED_COLUMNS,
    UNIQUE_COLUMNS,
)

ROWS = 2000


def test_unique_columns_get_no_dictionary_and_bodies_no_statistics(spark: SparkSession, tmp_path: Path) -> None:
    # Few distinct values, so that Parquet's default would keep a dictionary for each column.
    rows = [
        (f"id-{i % 50}", i % 50, i % 50 * 1100, bytes([i % 50]) * 64, "TagA" if i % 2 else "TagB",
         {"TAGS": "TagA", "UNIQ_KEY": f"U{i % 50}"})
        for i in range(ROWS)
    ]  # fmt: skip
    frame = spark.createDataFrame(
        rows,
        "msg_id string, queue_offset long, commitlog_offset long, body binary, tags string, "
        "properties map<string,string>",
    )
    frame.coalesce(1).write.options(**PARQUET_WRITE_OPTIONS).parquet(str(tmp_path / "tuned"))
    frame.coalesce(1).write.parquet(str(tmp_path / "default"))

    def chunks(directory: str) -> dict[str, Any]:
        (file,) = (tmp_path / directory).glob("*.parquet")
        group = pq.ParquetFile(file).metadata.row_group(0)
        return {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}

    tuned, default = chunks("tuned"), chunks("default")
    for name in ("msg_id", "queue_offset", "commitlog_offset", "body"):
        assert name in UNIQUE_COLUMNS
        assert not tuned[name].has_dictionary_page, name
    assert all(default[name].has_dictionary_page for name in ("msg_id", "queue_offset", "body"))
    assert tuned["tags"].has_dictionary_page
    assert not tuned[PROPERTY_VALUES_PATH].has_dictionary_page and default[PROPERTY_VALUES_PATH].has_dictionary_page
    assert tuned[PROPERTY_NAMES_PATH].has_dictionary_page
    assert UNFILTERED_COLUMNS == ("body", PROPERTY_NAMES_PATH, PROPERTY_VALUES_PATH)
    for name in UNFILTERED_COLUMNS:
        assert not tuned[name].is_stats_set and default[name].is_stats_set, name
    assert default["body"].is_stats_set and tuned["tags"].is_stats_set
    assert spark.read.parquet(str(tmp_path / "tuned")).count() == ROWS
