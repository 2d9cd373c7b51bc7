"""How a table of messages is best written to Parquet: options for Spark's Parquet writer.

Parquet tries dictionary encoding on every column and keeps min/max statistics of every page. For
the columns of format("rocketmq") whose values are all different (bodies, ids, offsets) the
dictionary never pays: the writer hashes each value, grows the dictionary until it outgrows its
page, then falls back to plain encoding, and does it again in every file a micro-batch writes. Min
and max of the bodies cost a byte comparison per row and serve no filter. Measured with
bench/spark_stream.py: these were about 40 % of the Spark JVM's Java samples (JFR) writing a stream
of 1 KiB messages, and turning them off saved 8-18 % of its CPU per message (docs/performance.md).
Options given to a writer go to its Hadoop configuration; Parquet reads `key#column` as that
column's setting.
"""

from __future__ import annotations

PROPERTY_NAMES_PATH = "properties.key_value.key"
PROPERTY_VALUES_PATH = "properties.key_value.value"
"""The Parquet columns Spark writes a map<string,string> column as (its MAP group's key_value)."""
UNIQUE_COLUMNS = ("body", "msg_id", "uniq_key", "commitlog_offset", "queue_offset", "body_crc", PROPERTY_VALUES_PATH)
"""Columns whose values repeat seldom or never: plain encoding, no dictionary. A third of the
property values are UNIQ_KEYs, so their dictionary grows by one entry per message."""
UNFILTERED_COLUMNS = ("body", PROPERTY_NAMES_PATH, PROPERTY_VALUES_PATH)
"""Columns no reader filters on by value: no min/max statistics. Spark pushes no filter on a map's
entries down to Parquet."""

PARQUET_WRITE_OPTIONS: dict[str, str] = {
    **{f"parquet.enable.dictionary#{column}": "false" for column in UNIQUE_COLUMNS},
    **{f"parquet.column.statistics.enabled#{column}": "false" for column in UNFILTERED_COLUMNS},
    **{f"parquet.size.statistics.enabled#{column}": "false" for column in UNFILTERED_COLUMNS},
}
"""`writer.options(**PARQUET_WRITE_OPTIONS)` for a table with format("rocketmq")'s columns."""
