"""The columns of `spark.read.format("shoal")`, documented once (docs/spark.md copies this table).

column                       type                 from
topic                        string               TOPIC
queue_id                     int                  QUEUEID
queue_offset                 bigint               QUEUEOFFSET (the ConsumeQueue index)
commitlog_offset             bigint               PHYSICALOFFSET (checked == the record's position)
size                         int                  TOTALSIZE, bytes of the whole record
born_timestamp               bigint               BORNTIMESTAMP, ms since the epoch
store_timestamp              bigint               STORETIMESTAMP, ms since the epoch (broker clock)
born_host                    string               BORNHOST as "address:port"
store_host                   string               STOREHOST as "address:port"
sys_flag                     int                  SYSFLAG
flag                         int                  FLAG
reconsume_times              int                  RECONSUMETIMES
prepared_transaction_offset  bigint               PREPARED_TX_OFFSET
tags                         string               property TAGS (null when absent)
keys                         string               property KEYS, space separated (null when absent)
uniq_key                     string               property UNIQ_KEY: the client's message id
properties                   map<string,string>   every property, decoded as Java does
msg_id                       string               offset message id (store host + offset, hex)
body_length                  int                  BODYLENGTH
body_crc                     int                  BODYCRC as stored
body_crc_ok                  boolean              CRC recomputed == stored; null unless check_crc=true
body                         binary               BODY as stored (compressed if SYSFLAG says so)
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from shoal.spark.errors import ReadOptionError

_STRING_MAP = MapType(StringType(), StringType(), valueContainsNull=True)
_COLUMNS: tuple[tuple[str, DataType, bool], ...] = (
    ("topic", StringType(), False),
    ("queue_id", IntegerType(), False),
    ("queue_offset", LongType(), False),
    ("commitlog_offset", LongType(), False),
    ("size", IntegerType(), False),
    ("born_timestamp", LongType(), False),
    ("store_timestamp", LongType(), False),
    ("born_host", StringType(), False),
    ("store_host", StringType(), False),
    ("sys_flag", IntegerType(), False),
    ("flag", IntegerType(), False),
    ("reconsume_times", IntegerType(), False),
    ("prepared_transaction_offset", LongType(), False),
    ("tags", StringType(), True),
    ("keys", StringType(), True),
    ("uniq_key", StringType(), True),
    ("properties", _STRING_MAP, False),
    ("msg_id", StringType(), False),
    ("body_length", IntegerType(), False),
    ("body_crc", IntegerType(), False),
    ("body_crc_ok", BooleanType(), True),
    ("body", BinaryType(), False),
)
COLUMN_NAMES: tuple[str, ...] = tuple(name for name, _type, _nullable in _COLUMNS)
PROPERTY_COLUMNS = frozenset({"tags", "keys", "uniq_key", "properties"})
"""Columns that need the property string parsed; a read without them skips that work."""

MESSAGE_SCHEMA = StructType([StructField(name, kind, nullable) for name, kind, nullable in _COLUMNS])

CONSUME_QUEUE_SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("queue_id", IntegerType(), False),
        StructField("queue_offset", LongType(), False),
        StructField("commitlog_offset", LongType(), False),
        StructField("size", IntegerType(), False),
        StructField("tags_code", LongType(), False),
    ]
)
"""`spark.read.format("shoal_consume_queue")`: every written unit; blank padding units skipped."""

INDEX_SCHEMA = StructType(
    [
        StructField("index_file", StringType(), False),
        StructField("entry_number", IntegerType(), False),
        StructField("key_hash", IntegerType(), False),
        StructField("commitlog_offset", LongType(), False),
        StructField("time_diff_s", IntegerType(), False),
        StructField("prev_index", IntegerType(), False),
        StructField("begin_timestamp", LongType(), False),
    ]
)
"""`spark.read.format("shoal_index")`: every entry of every IndexFile (entry numbers from 1)."""


def project(schema: StructType, columns: tuple[str, ...] | None) -> StructType:
    """The schema restricted to `columns` (in the schema's order); all columns when None."""
    if columns is None:
        return schema
    unknown = sorted(set(columns) - set(schema.fieldNames()))
    if unknown:
        raise ReadOptionError(f"unknown column(s) {unknown}; the columns are {schema.fieldNames()}")
    return StructType([field for field in schema.fields if field.name in columns])


def arrow_schema(schema: StructType) -> Any:
    """The Arrow schema Spark expects from read() (Spark compares it with `equals`)."""
    return to_arrow_schema(schema, timezone="UTC")
