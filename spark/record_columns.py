"""CommitLog records -> one Arrow RecordBatch, field by field instead of record by record.

Input: a buffer read from one segment, its CommitLog offset, and where each record starts and
ends in it (framed by `shoal.formats.record.walk_records`, or taken from ConsumeQueue units).
Every field position comes from the store's one declaration (`header_layout`, the topic and
properties length structs of shoal.formats.record); each field is sliced out of all records at
once with Arrow kernels, then checked in bulk exactly as `check_record` checks one record:
MAGICCODE, TOTALSIZE == the framed size, PHYSICALOFFSET == the record's position, the fields
add up to TOTALSIZE, and (option) the body CRC.

A record that fails a check either ends the batch (`Damage.STOP`: a CommitLog walk stops at its
torn tail, like recovery) or is dropped (`Damage.DROP`: a ConsumeQueue unit that points at
nothing). Rows with IPv6 hosts have a longer header; a batch is decoded in runs of one layout.
"""

from __future__ import annotations

import array
import enum
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from shoal.formats.record import (
    HEADERS,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    PREFIX,
    PROPERTIES_LENGTH,
    TOPIC_LENGTH_V1,
    TOPIC_LENGTH_V2,
    FieldSpan,
    decode_host,
    header_layout,
)
from shoal.formats.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, host_lengths
from shoal.spark.arrow_buffers import (
    big_endian_shorts,
    big_endian_words,
    combine_int64,
    first_false,
    fixed_width_strings,
    gather,
    int32_array,
    int64_array,
    to_int32,
    values_bytes,
)
from shoal.spark.property_columns import (
    KEYS_NAME,
    TAGS_NAME,
    UNIQ_KEY_NAME,
    as_strings,
    properties_map,
    property_value,
)
from shoal.spark.schema import PROPERTY_COLUMNS

_HOST_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
_PREFIX_SPANS = {name: span for name, span in header_layout(8, 8).items() if span.offset < PREFIX.size}
_INT_FIELDS = ("total_size", "magic", "body_crc", "queue_id", "flag", "sysflag", "reconsume_times", "body_length")
_LONG_FIELDS = ("queue_offset", "physical_offset", "born_timestamp", "store_timestamp", "prepared_transaction_offset")
_COLUMN_OF_FIELD = {
    "total_size": "size",
    "physical_offset": "commitlog_offset",
    "sysflag": "sys_flag",
}
assert TOPIC_LENGTH_V1.size == 1 and TOPIC_LENGTH_V2.size == PROPERTIES_LENGTH.size == 2


def _i32(value: int) -> Any:
    """An int32 scalar: a bare Python int would widen int32 arithmetic to int64."""
    return pa.scalar(value, pa.int32())


class Damage(enum.Enum):
    STOP = "stop"
    """The first bad record ends the batch (and the caller's walk)."""
    DROP = "drop"
    """Bad records are left out; the rest is kept."""


@dataclass(frozen=True)
class RowFilter:
    """What a read keeps: topics (None = all) and a store-time window [since_ms, until_ms)."""

    topics: frozenset[str] | None = None
    since_ms: int | None = None
    until_ms: int | None = None

    @property
    def is_empty(self) -> bool:
        return self.topics is None and self.since_ms is None and self.until_ms is None


@dataclass
class Decoded:
    batches: list[Any] = field(default_factory=list)
    damage_offset: int | None = None
    """CommitLog offset of the first bad record (STOP mode: where decoding ended)."""
    damage_reason: str = ""
    dropped: int = 0
    """Records left out as bad (DROP mode)."""


@dataclass(frozen=True)
class Framing:
    """Records in a buffer: `buffer[starts[i]:ends[i]]`, ascending and not overlapping."""

    buffer: bytes | bytearray
    base_offset: int
    """CommitLog offset of buffer[0], when the buffer is one piece of a segment."""
    starts: array.array[int]
    ends: array.array[int]
    record_offsets: array.array[int] | None = None
    """Each record's CommitLog offset, when the buffer joins pieces read from several places."""
    offsets_from_records: bool = False
    """Each record's CommitLog offset is its own PHYSICALOFFSET (pull answers joined: nothing else
    says where a record was stored)."""

    def __post_init__(self) -> None:
        assert len(self.starts) == len(self.ends)
        assert self.record_offsets is None or len(self.record_offsets) == len(self.starts)
        if self.starts:
            assert self.starts[0] >= 0 and self.ends[-1] <= len(self.buffer)


class _Rows:
    """The columns decoded so far for one run of records, narrowed as checks fail."""

    def __init__(self, damage: Damage, columns: dict[str, Any]) -> None:
        self.damage = damage
        self.columns = columns
        self.stopped_at: int | None = None
        self.reason = ""
        self.dropped = 0

    def __len__(self) -> int:
        return len(self.columns["start"])

    def keep(self, mask: Any, reason: str) -> None:
        """Keep rows where `mask` holds: in STOP mode only those before the first failure."""
        if len(self) == 0:
            return
        if self.damage is Damage.STOP:
            cut = first_false(mask)
            if cut == len(self):
                return
            self.stopped_at = int(self.columns["commitlog_offset"][cut].as_py())
            self.reason = reason
            self.columns = {name: column.slice(0, cut) for name, column in self.columns.items()}
            return
        kept = pc.sum(pc.cast(mask, pa.int64())).as_py() or 0
        if kept == len(self):
            return
        self.dropped += len(self) - kept
        self.reason = reason
        self.columns = {name: pc.filter(column, mask) for name, column in self.columns.items()}

    def select(self, mask: Any) -> None:
        """A row filter (not damage): drop rows where `mask` is false."""
        self.columns = {name: pc.filter(column, mask) for name, column in self.columns.items()}


def decode_records(
    framing: Framing,
    columns: tuple[str, ...],
    arrow_schema: Any,
    row_filter: RowFilter,
    *,
    damage: Damage,
    check_crc: bool,
) -> Decoded:
    """Decode every framed record into batches of `arrow_schema` (whose names are `columns`)."""
    assert tuple(arrow_schema.names) == columns, "columns are the schema's names, in its order"
    result = Decoded()
    if not framing.starts:
        return result
    data = pa.py_buffer(framing.buffer)
    boundaries = array.array("i", framing.starts)
    boundaries.append(framing.ends[-1])
    records = pa.Array.from_buffers(pa.binary(), len(framing.starts), [None, pa.py_buffer(boundaries), data])
    start = int32_array(framing.starts)
    end = int32_array(framing.ends)
    prefix = _fixed_fields(records, _PREFIX_SPANS, PREFIX.size)
    rows = _Rows(damage, {"start": start, "end": end, "record": records, **prefix})
    if framing.offsets_from_records:
        position = rows.columns["physical_offset"]
    elif framing.record_offsets is not None:
        position = int64_array(framing.record_offsets)
    else:
        position = pc.add(pc.cast(start, pa.int64()), pa.scalar(framing.base_offset, pa.int64()))
    rows.columns["commitlog_offset"] = position
    magic = rows.columns["magic"]
    rows.keep(
        pc.or_(pc.equal(magic, MESSAGE_MAGIC_CODE), pc.equal(magic, MESSAGE_MAGIC_CODE_V2)),
        "MAGICCODE is not a message's",
    )
    rows.keep(
        pc.equal(rows.columns["total_size"], pc.subtract(rows.columns["end"], rows.columns["start"])), "TOTALSIZE"
    )
    rows.keep(
        pc.equal(rows.columns["physical_offset"], rows.columns["commitlog_offset"]),
        "PHYSICALOFFSET != the record's position",
    )
    layouts = pc.bit_wise_and(rows.columns["sysflag"], _HOST_FLAGS)
    for run_start, run_length in _runs(layouts):
        run = _Rows(damage, {name: column.slice(run_start, run_length) for name, column in rows.columns.items()})
        born_len, store_len = host_lengths(int(layouts[run_start].as_py()))
        batch = _decode_run(run, data, born_len, store_len, columns, arrow_schema, row_filter, check_crc)
        result.dropped += run.dropped
        if batch is not None and batch.num_rows:
            result.batches.append(batch)
        if run.stopped_at is not None:
            result.damage_offset, result.damage_reason = run.stopped_at, run.reason
            return result
    result.dropped += rows.dropped
    if rows.stopped_at is not None:
        result.damage_offset, result.damage_reason = rows.stopped_at, rows.reason
    elif rows.dropped:
        result.damage_reason = rows.reason
    return result


def _runs(values: Any) -> list[tuple[int, int]]:
    """(start, length) of each run of equal values."""
    count = len(values)
    if count == 0:
        return []
    changes = pc.indices_nonzero(pc.not_equal(values.slice(1), values.slice(0, count - 1))).to_pylist()
    starts = [0, *(index + 1 for index in changes)]
    return [(begin, (starts[i + 1] if i + 1 < len(starts) else count) - begin) for i, begin in enumerate(starts)]


def _fixed_fields(records: Any, spans: dict[str, FieldSpan], header_size: int) -> dict[str, Any]:
    """Integer fields of every record from one slice of its first `header_size` bytes."""
    assert header_size % 4 == 0
    block = values_bytes(pc.binary_slice(records, 0, header_size))
    assert len(block) == header_size * len(records), "every record holds a whole header"
    words = big_endian_words(block)
    stride = header_size // 4
    fields: dict[str, Any] = {}
    for name, span in spans.items():
        assert span.offset % 4 == 0
        word = span.offset // 4
        if span.code == "i":
            fields[name] = int32_array(words[word::stride])
        elif span.code == "q":
            fields[name] = combine_int64(int32_array(words[word::stride]), int32_array(words[word + 1 :: stride]))
    return fields


def _decode_run(
    rows: _Rows,
    data: Any,
    born_len: int,
    store_len: int,
    columns: tuple[str, ...],
    arrow_schema: Any,
    row_filter: RowFilter,
    check_crc: bool,
) -> Any:
    header = HEADERS[(born_len, store_len)]
    spans = header_layout(born_len, store_len)
    minimum = header.size + TOPIC_LENGTH_V1.size + 1 + PROPERTIES_LENGTH.size  # a topic has a byte at least
    rows.keep(pc.greater_equal(rows.columns["total_size"], minimum), "TOTALSIZE below the smallest record")
    if not len(rows):
        return None
    rows.columns.update(_fixed_fields(rows.columns["record"], spans, header.size))
    for name in ("born_host", "store_host"):
        span = spans[name]
        rows.columns[name] = pc.binary_slice(rows.columns["record"], span.offset, span.offset + span.size)
    offset_span = spans["physical_offset"]
    rows.columns["physical_offset_bytes"] = pc.binary_slice(
        rows.columns["record"], offset_span.offset, offset_span.offset + offset_span.size
    )
    del rows.columns["record"]  # every fixed field is out; filters must not copy whole records
    body_length = rows.columns["body_length"]
    body_start = pc.add(rows.columns["start"], _i32(header.size))
    body_end = pc.add(body_start, body_length)
    rows.columns.update(body_start=body_start, body_end=body_end)
    rows.keep(
        pc.and_(
            pc.greater_equal(body_length, 0),
            pc.less_equal(pc.add(body_end, _i32(minimum - header.size)), rows.columns["end"]),
        ),
        "BODYLENGTH does not fit TOTALSIZE",
    )
    _topic_bounds(rows, data)
    _properties_bounds(rows, data)
    if not len(rows):
        return None
    if "topic" in columns or row_filter.topics is not None:
        topic_start, topic_end = to_int32(rows.columns["topic_start"]), to_int32(rows.columns["topic_end"])
        rows.columns["topic_raw"] = gather(data, topic_start, topic_end)
    _apply_filter(rows, row_filter)
    if not len(rows):
        return None
    return _build_batch(rows, data, columns, arrow_schema, check_crc)


def _topic_bounds(rows: _Rows, data: Any) -> None:
    """TOPICLENGTH after the body: a signed byte (V1) or short (V2); the topic must not be empty."""
    if not len(rows):
        return
    body_end = rows.columns["body_end"]
    raw = values_bytes(gather(data, to_int32(body_end), to_int32(pc.add(body_end, _i32(2)))))
    shorts = _int16_as_int32(raw, len(rows))
    first_bytes = pa.Array.from_buffers(pa.int8(), len(rows), [None, pa.py_buffer(bytes(raw[0::2]))])
    is_v2 = pc.equal(rows.columns["magic"], MESSAGE_MAGIC_CODE_V2)
    topic_length = pc.if_else(is_v2, shorts, pc.cast(first_bytes, pa.int32()))
    topic_start = pc.add(body_end, pc.if_else(is_v2, _i32(TOPIC_LENGTH_V2.size), _i32(TOPIC_LENGTH_V1.size)))
    topic_end = pc.add(topic_start, topic_length)
    rows.columns.update(topic_start=topic_start, topic_end=topic_end)
    fits = pc.less_equal(pc.add(topic_end, _i32(PROPERTIES_LENGTH.size)), rows.columns["end"])
    rows.keep(pc.and_(pc.greater(topic_length, 0), fits), "TOPICLENGTH does not fit TOTALSIZE")


def _properties_bounds(rows: _Rows, data: Any) -> None:
    """PROPERTIESLENGTH after the topic; the properties must end exactly at TOTALSIZE."""
    if not len(rows):
        return
    topic_end = rows.columns["topic_end"]
    raw = values_bytes(gather(data, to_int32(topic_end), to_int32(pc.add(topic_end, _i32(PROPERTIES_LENGTH.size)))))
    properties_length = _int16_as_int32(raw, len(rows))
    properties_start = pc.add(topic_end, _i32(PROPERTIES_LENGTH.size))
    properties_end = pc.add(properties_start, properties_length)
    rows.columns.update(properties_start=properties_start, properties_end=properties_end)
    rows.keep(
        pc.and_(pc.greater_equal(properties_length, 0), pc.equal(properties_end, rows.columns["end"])),
        "the fields do not add up to TOTALSIZE",
    )


def _int16_as_int32(raw: memoryview, count: int) -> Any:
    shorts = big_endian_shorts(raw)
    return pc.cast(pa.Array.from_buffers(pa.int16(), count, [None, pa.py_buffer(shorts)]), pa.int32())


def _apply_filter(rows: _Rows, row_filter: RowFilter) -> None:
    if row_filter.is_empty:
        return
    mask = None
    if row_filter.topics is not None:
        wanted = pa.array(sorted(topic.encode("utf-8") for topic in row_filter.topics), pa.binary())
        mask = pc.is_in(rows.columns["topic_raw"], value_set=wanted)
    for bound, compare in ((row_filter.since_ms, pc.greater_equal), (row_filter.until_ms, pc.less)):
        if bound is not None:
            in_window = compare(rows.columns["store_timestamp"], pa.scalar(bound, pa.int64()))
            mask = in_window if mask is None else pc.and_(mask, in_window)
    if mask is not None:
        rows.select(mask)


def _hosts(raw: Any) -> Any:
    """ "address:port" strings from host bytes; few distinct values, so formatted once each."""
    encoded = pc.dictionary_encode(raw)
    text = []
    for value in encoded.dictionary.to_pylist():
        address, port = decode_host(value)
        text.append(f"[{address}]:{port}" if ":" in address else f"{address}:{port}")
    return pc.take(pa.array(text, pa.string()), encoded.indices)


def _message_ids(rows: _Rows) -> Any:
    """The offset message id: hex of STOREHOST bytes + PHYSICALOFFSET, as RocketMQ computes it."""
    joined = pc.binary_join_element_wise(rows.columns["store_host"], rows.columns["physical_offset_bytes"], b"")
    raw = values_bytes(joined)
    width = 2 * len(raw) // len(rows)
    return fixed_width_strings(raw.hex().upper().encode("ascii"), width, len(rows))


def _crc_ok(rows: _Rows, data: Any) -> Any:
    view = memoryview(data)
    stored = rows.columns["body_crc"].to_pylist()
    starts = rows.columns["body_start"].to_pylist()
    ends = rows.columns["body_end"].to_pylist()
    ok = [(zlib.crc32(view[s:e]) & 0x7FFFFFFF) == crc for s, e, crc in zip(starts, ends, stored, strict=True)]
    view.release()
    return pa.array(ok, pa.bool_())


def _build_batch(rows: _Rows, data: Any, columns: tuple[str, ...], arrow_schema: Any, check_crc: bool) -> Any:
    built: dict[str, Any] = {}
    cols = rows.columns
    for name in _INT_FIELDS + _LONG_FIELDS:
        built[_COLUMN_OF_FIELD.get(name, name)] = cols[name]
    built["commitlog_offset"] = cols["commitlog_offset"]
    lazy: dict[str, Callable[[], Any]] = {
        "topic": lambda: as_strings(cols["topic_raw"]),
        "born_host": lambda: _hosts(cols["born_host"]),
        "store_host": lambda: _hosts(cols["store_host"]),
        "msg_id": lambda: _message_ids(rows),
        "body": lambda: gather(data, to_int32(cols["body_start"]), to_int32(cols["body_end"])),
        "body_crc_ok": lambda: _crc_ok(rows, data) if check_crc else pa.nulls(len(rows), pa.bool_()),
    }
    if PROPERTY_COLUMNS.intersection(columns):
        raw = gather(data, to_int32(cols["properties_start"]), to_int32(cols["properties_end"]))
        map_type = arrow_schema.field("properties").type if "properties" in columns else None
        properties = properties_map(raw, map_type)
        built["properties"] = properties
        built["tags"] = property_value(properties, TAGS_NAME)
        built["keys"] = property_value(properties, KEYS_NAME)
        built["uniq_key"] = property_value(properties, UNIQ_KEY_NAME)
    arrays = [built[name] if name in built else lazy[name]() for name in columns]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)
