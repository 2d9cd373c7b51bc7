"""A SEND_BATCH_MESSAGE body (shoal.formats.batch) written as CommitLog records (shoal.formats.record)
in one call, with no object per message: what the broker's batch send does.

Each block becomes one V1 record with the batch's topic, queue, sysflag, hosts, born and store
times, its own flag and body, and its properties joined with the batch's shared ones
(`join_properties`); queue offsets are consecutive and each PHYSICALOFFSET is where its record
starts. The Python functions here are the reference for the compiled twins in `_batch_speedups.c`,
which the broker uses when they were built (shoal.formats.compiled).
"""

from __future__ import annotations

from shoal.formats import limits
from shoal.formats.batch import decode_batch_body
from shoal.formats.compiled import compiled_module
from shoal.formats.errors import BatchBodyError
from shoal.formats.properties import join_properties
from shoal.formats.record import body_crc, python_encode_record_into, record_length, with_host_flags

__all__ = ["COMPILED", "COMPILED_ENCODE_BATCH_INTO", "batch_record_sizes", "encode_batch_into"]

BatchSizes = tuple[list[int], int, int]
"""Each block's record length, the sum of the bodies, the longest joined property string."""


def python_batch_record_sizes(
    body: bytes | memoryview, shared_properties: bytes, topic_len: int, hosts_len: int, count_max: int
) -> BatchSizes:
    """The record each block of `body` becomes: its length (`hosts_len` the born and store host
    fields together), with the bodies' sum and the longest joined property string. ValueError with
    formats.batch's message when `body` is not a run of 1..count_max blocks."""
    try:
        items = decode_batch_body(body, count_max=count_max)
    except BatchBodyError as error:
        raise ValueError(str(error)) from None
    sizes, bodies_total, properties_max = [], 0, 0
    for item in items:
        properties_len = len(join_properties(item.properties, shared_properties))
        sizes.append(record_length(len(item.body), topic_len, properties_len, hosts_len - 8, 8))
        bodies_total += len(item.body)
        properties_max = max(properties_max, properties_len)
    return sizes, bodies_total, properties_max


def python_encode_batch_into(
    buffer: bytearray | memoryview,
    position: int,
    body: bytes | memoryview,
    shared_properties: bytes,
    topic: bytes,
    queue_id: int,
    first_queue_offset: int,
    first_physical_offset: int,
    sysflag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
) -> int:
    """Write every block of `body` as a record from `position`; returns the bytes written.
    ValueError, with nothing written, when a record would not fit its fields or the buffer."""
    try:
        items = decode_batch_body(body, count_max=len(body) // 22 + 1)
    except BatchBodyError as error:
        raise ValueError(str(error)) from None
    if len(born_host) not in (8, 20) or len(store_host) not in (8, 20):
        raise ValueError("a host is 8 (IPv4) or 20 (IPv6) bytes")
    if with_host_flags(sysflag, born_host, store_host) != sysflag:  # a decoder places fields by these bits
        raise ValueError("the SYSFLAG host bits do not match the hosts' lengths")
    if not 1 <= len(topic) <= limits.TOPIC_LENGTH_MAX_BYTES:
        raise ValueError("topic longer than its length field")
    joined = [join_properties(item.properties, shared_properties) for item in items]
    for index, properties in enumerate(joined):
        if len(properties) > limits.PROPERTIES_LENGTH_MAX_BYTES:
            raise ValueError(f"batch record {index}: properties longer than their length field")
    hosts = len(born_host), len(store_host)
    lengths = [record_length(len(item.body), len(topic), len(p), *hosts) for item, p in zip(items, joined, strict=True)]
    total = sum(lengths)
    if position > len(buffer) or total > len(buffer) - position:
        raise ValueError("the records do not fit the buffer")
    at = position
    for index, (item, properties) in enumerate(zip(items, joined, strict=True)):
        at += python_encode_record_into(
            buffer,
            at,
            item.body,
            topic,
            properties,
            queue_id,
            item.flag,
            first_queue_offset + index,
            first_physical_offset + at - position,
            sysflag,
            born_timestamp,
            born_host,
            store_timestamp,
            store_host,
            reconsume_times,
            0,
            body_crc(item.body),
        )
    return at - position


_compiled = compiled_module("shoal.formats._batch_speedups")
COMPILED = _compiled is not None
"""Whether the compiled twins are in use."""
batch_record_sizes = python_batch_record_sizes if _compiled is None else _compiled.batch_record_sizes
encode_batch_into = python_encode_batch_into if _compiled is None else _compiled.encode_batch_into
COMPILED_ENCODE_BATCH_INTO = None if _compiled is None else _compiled.encode_batch_into
"""The compiled encoder, which refuses what would not frame (so its writes need no re-read)."""
