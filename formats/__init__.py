"""shoal.formats: RocketMQ's vocabulary of bytes and JSON, as RocketMQ's `common` module holds it.

Stdlib only, and nothing of Shoal: every other part may import it. Each layout is declared once:

    batch               the SEND_BATCH_MESSAGE body (blocks of flag, body, properties)
    record              the CommitLog record (encode, decode, body CRC, blank record, columnar walk)
    properties          the message property string, its edits, and MessageConst keys
    java_properties     Java `.properties` text (broker.conf, tls.properties, credential files)
    sysflag             SYSFLAG bits (compression, transaction type, IPv6 hosts)
    java_hash           Java's String.hashCode (ConsumeQueue tagsCode, IndexFile keys)
    message_id          UNIQ_KEY and offset message ids
    consume_queue_unit  the 20-byte ConsumeQueue unit
    index_entry         IndexFile header, hash slot and entry
    store_layout        segment and config file names of a store directory
    consumer_offsets    config/consumerOffset.json's table
    json_compat         one tolerant (fastjson) JSON parser and writer
    topics              system topics, %RETRY% / %DLQ%, name validity (TopicValidator)
    trace               message trace records (TraceDataEncoder's Pub / SubBefore / SubAfter / EndTransaction)
    limits, errors      the bounds the formats set; ValueErrors callers translate at their boundary
"""

from shoal.formats.batch import BatchItem, decode_batch_body, encode_batch_body
from shoal.formats.errors import (
    BatchBodyError,
    FormatError,
    JavaPropertiesError,
    JsonSyntaxError,
    MessageIdError,
    PropertiesError,
    PropertiesTooLargeError,
    TraceDataError,
)
from shoal.formats.java_properties import parse_java_properties
from shoal.formats.json_compat import ObjectKey, dumps, dumps_fastjson, loads, parse_fastjson
from shoal.formats.message_id import create_uniq_id, decode_offset_msg_id, offset_msg_id
from shoal.formats.properties import decode_properties, encode_properties
from shoal.formats.record import RecordCheck, RecordHeader, RecordKind, body_crc, check_record, decode_header
from shoal.formats.topics import dlq_topic, retry_topic, validate_group_name, validate_topic_name
from shoal.formats.trace import TraceRecord, TraceType, decode_trace_data

__all__ = [
    "BatchBodyError",
    "BatchItem",
    "FormatError",
    "JavaPropertiesError",
    "JsonSyntaxError",
    "MessageIdError",
    "ObjectKey",
    "PropertiesError",
    "PropertiesTooLargeError",
    "RecordCheck",
    "RecordHeader",
    "RecordKind",
    "TraceDataError",
    "TraceRecord",
    "TraceType",
    "body_crc",
    "check_record",
    "create_uniq_id",
    "decode_batch_body",
    "decode_header",
    "decode_offset_msg_id",
    "decode_properties",
    "decode_trace_data",
    "dlq_topic",
    "dumps",
    "dumps_fastjson",
    "encode_batch_body",
    "encode_properties",
    "loads",
    "offset_msg_id",
    "parse_fastjson",
    "parse_java_properties",
    "retry_topic",
    "validate_group_name",
    "validate_topic_name",
]
