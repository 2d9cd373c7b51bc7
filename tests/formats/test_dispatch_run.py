"""shoal.formats.dispatch_run: the compiled dispatch_run (formats/_record_speedups.c) against its
Python twin, and the twin against the record-by-record reading it replaces: same units, keys,
arrivals and stopping point, on runs of every shape and on damaged bytes."""

from __future__ import annotations

import os
import random
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.formats import dispatch_run
from shoal.formats.compiled import pure_python
from shoal.formats.consume_queue_unit import UNIT, UNIT_SIZE
from shoal.formats.dispatch_run import RunEnd, RunsEnd, python_dispatch_run, python_dispatch_runs
from shoal.formats.index_entry import UniqueKeyEntry
from shoal.formats.java_hash import tags_code
from shoal.formats.record import body_crc, encode_host, python_encode_record_into, record_length
from shoal.formats.sysflag import TransactionType
from shoal.store import DispatchRequest as Request  # the type the store hands dispatch_run

try:  # directly, not through compiled_module: these tests hold even under SHOAL_PURE_PYTHON
    from shoal.formats import _record_speedups as COMPILED  # noqa: N812
except ImportError:
    COMPILED = None  # type: ignore[assignment]
NOT_BUILT_HERE = pytest.mark.skipif(
    COMPILED is None and not os.environ.get("CI"),
    reason="shoal.formats._record_speedups was not built (no C compiler at install) and this is not CI; "
    "in CI these tests fail instead",
)

HOST = encode_host("10.0.0.1", 10911)
TOPIC = "RunTopic"
QUEUE_ID = 3
BASE_OFFSET = 7_000_000  # the buffer's first byte in the CommitLog


def _record(
    buffer: bytearray,
    topic: str,
    queue_id: int,
    queue_offset: int,
    properties: dict[str, str],
    body: bytes,
    sysflag: int = 0,
) -> None:
    """Append one V1 record to `buffer` (its PHYSICALOFFSET where it lands after BASE_OFFSET).
    Properties are encoded by hand: an empty value (which a client never sends, and dispatch
    reads as absent) and a repeated name (the last one wins) are written as given."""
    raw_topic = topic.encode()
    raw_properties = b"".join(f"{name.split('#')[0]}\x01{value}\x02".encode() for name, value in properties.items())
    length = record_length(len(body), len(raw_topic), len(raw_properties))
    position = len(buffer)
    buffer.extend(bytes(length))
    python_encode_record_into(
        buffer, position, body, raw_topic, raw_properties, queue_id, 0, queue_offset, BASE_OFFSET + position,
        sysflag, 1_700_000_000_000 + queue_offset, HOST, 1_700_000_000_500 + queue_offset, HOST, 0, 0, body_crc(body),
    )  # fmt: skip


def _properties(rng: random.Random, index: int) -> dict[str, str]:
    properties: dict[str, str] = {}
    tags = rng.choice([None, "TagA", "", "标签", "😀x", "T" * 40])
    if tags is not None:
        properties["TAGS"] = tags
        if rng.random() < 0.2:
            properties["TAGS#again"] = rng.choice(["", "TagB"])  # a repeated name
    if rng.random() < 0.85:
        properties["UNIQ_KEY"] = rng.choice([f"7F00000100{index:022X}", "ключ-" + str(index)])
    if rng.random() < 0.3:
        properties["WAIT"] = "true"
    return properties


def _run_buffer(seed: int) -> bytearray:
    """A run of the queue's messages, then sometimes a record that ends it (another queue, a gap,
    a transaction half, KEYS, another topic), then more of the queue's messages."""
    rng = random.Random(seed)
    buffer = bytearray()
    queue_offset = 100
    for index in range(rng.randrange(1, 12)):
        _record(buffer, TOPIC, QUEUE_ID, queue_offset, _properties(rng, index), rng.randbytes(rng.randrange(0, 50)))
        queue_offset += 1
    ending = rng.choice(["none", "queue", "gap", "half", "rollback", "commit", "keys", "topic"])
    if ending == "queue":
        _record(buffer, TOPIC, QUEUE_ID + 1, queue_offset, _properties(rng, 99), b"x")
    elif ending == "gap":
        _record(buffer, TOPIC, QUEUE_ID, queue_offset + 1, _properties(rng, 99), b"x")
    elif ending in ("half", "rollback", "commit"):
        kind = {"half": TransactionType.PREPARED_TYPE, "rollback": TransactionType.ROLLBACK_TYPE}.get(
            ending, TransactionType.COMMIT_TYPE
        )
        _record(buffer, TOPIC, QUEUE_ID, queue_offset, _properties(rng, 99), b"x", int(kind))
    elif ending == "keys":
        _record(buffer, TOPIC, QUEUE_ID, queue_offset, {**_properties(rng, 99), "KEYS": "order-1"}, b"x")
    elif ending == "topic":
        _record(buffer, TOPIC + "X", QUEUE_ID, queue_offset, _properties(rng, 99), b"x")
    for index in range(rng.randrange(0, 3)):
        _record(buffer, TOPIC, QUEUE_ID, queue_offset + 1 + index, _properties(rng, index), b"y")
    return buffer


def _call(function: Any, buffer: bytearray | bytes, **overrides: Any) -> tuple[RunEnd, bytes, list[Any], list[Any]]:
    units = bytearray(overrides.pop("units_bytes", 64 * UNIT_SIZE))
    keys: list[UniqueKeyEntry] = []
    arrivals: list[Request] = []
    arguments: dict[str, Any] = {
        "position": 0, "limit": len(buffer), "expected_offset": BASE_OFFSET, "count_max": 10_000,
        "raw_topic": TOPIC.encode(), "queue_id": QUEUE_ID, "next_queue_offset": 100, "max_physical_offset": -1,
        "units_position": UNIT_SIZE, "units_end": len(units),
    }  # fmt: skip
    arguments.update(overrides)
    end = function(
        buffer, arguments["position"], arguments["limit"], arguments["expected_offset"], arguments["count_max"],
        arguments["raw_topic"], arguments["queue_id"], arguments["next_queue_offset"],
        arguments["max_physical_offset"], units, arguments["units_position"], arguments["units_end"], TOPIC,
        Request, keys, arrivals,
    )  # fmt: skip
    return end, bytes(units), keys, arrivals


def _record_by_record(buffer: bytearray) -> tuple[int, list[bytes], list[UniqueKeyEntry]]:
    """What dispatching the run one record at a time finds: records taken, their units, their keys."""
    from shoal.formats.properties import decode_properties
    from shoal.formats.record import decode_header

    position, next_offset, units, keys = 0, 100, [], []
    while position < len(buffer):
        header = decode_header(buffer, position)
        raw = bytes(buffer[header.properties_position : header.properties_position + header.properties_length])
        properties = decode_properties(raw)
        if (
            header.topic != TOPIC
            or header.queue_id != QUEUE_ID
            or header.queue_offset != next_offset
            or header.sysflag & 0xC in (TransactionType.PREPARED_TYPE, TransactionType.ROLLBACK_TYPE)
            or properties.get("KEYS")
        ):
            break
        units.append(UNIT.pack(header.physical_offset, header.total_size, tags_code(properties.get("TAGS"))))
        if properties.get("UNIQ_KEY"):
            keys.append((TOPIC, properties["UNIQ_KEY"], header.physical_offset, header.store_timestamp))
        position += header.total_size
        next_offset += 1
    return len(units), units, keys


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_the_python_twin_takes_what_record_by_record_dispatch_takes(seed: int) -> None:
    buffer = _run_buffer(seed)
    (consumed, count, next_offset, max_physical, units_position, last_ts), units, keys, arrivals = _call(
        python_dispatch_run, buffer
    )
    taken, expected_units, expected_keys = _record_by_record(buffer)
    assert count == taken and next_offset == 100 + taken
    assert units[UNIT_SIZE : UNIT_SIZE * (1 + taken)] == b"".join(expected_units)
    assert units[UNIT_SIZE * (1 + taken) :] == bytes(len(units) - UNIT_SIZE * (1 + taken))
    assert units_position == UNIT_SIZE * (1 + taken)
    assert keys == expected_keys
    assert [request.queue_offset for request in arrivals] == list(range(100, 100 + taken))
    assert consumed == sum(request.size for request in arrivals)
    if taken:
        assert max_physical == arrivals[-1].commitlog_offset + arrivals[-1].size
        assert last_ts == arrivals[-1].store_timestamp


@NOT_BUILT_HERE
@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=0, max_value=2**32), st.integers(min_value=0, max_value=12))
def test_the_compiled_run_matches_the_python_twin(seed: int, count_max: int) -> None:
    assert COMPILED is not None
    buffer = _run_buffer(seed)
    for overrides in ({}, {"count_max": count_max}, {"units_end": UNIT_SIZE * (1 + count_max)}):
        assert _call(COMPILED.dispatch_run, buffer, **overrides) == _call(python_dispatch_run, buffer, **overrides)


@NOT_BUILT_HERE
@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_a_run_starting_mid_queue_or_after_a_duplicate_matches_the_python_twin(seed: int) -> None:
    """The run's state from an earlier call: the queue's next offset and its last record's end."""
    assert COMPILED is not None
    buffer = _run_buffer(seed)
    rng = random.Random(seed)
    overrides = {
        "next_queue_offset": rng.choice([99, 100, 101]),
        "max_physical_offset": BASE_OFFSET + rng.choice([-1, 0, 1, 200, 10_000]),
        "position": 0,
    }
    assert _call(COMPILED.dispatch_run, buffer, **overrides) == _call(python_dispatch_run, buffer, **overrides)


@NOT_BUILT_HERE
@settings(max_examples=1500, deadline=None)
@given(
    st.integers(min_value=0, max_value=2**32),
    st.integers(min_value=0, max_value=2000),
    st.binary(min_size=1, max_size=8),
)
def test_damaged_bytes_stop_both_alike(seed: int, at: int, garbage: bytes) -> None:
    """Any byte run over a run of records (lengths, magic, offsets, flags, properties): both stop
    at the same record with the same outputs, and never read or write outside their buffers."""
    assert COMPILED is not None
    buffer = _run_buffer(seed)
    at = min(at, len(buffer) - 1)
    buffer[at : at + len(garbage)] = garbage
    for limit in (len(buffer), max(0, len(buffer) - 7)):
        assert _call(COMPILED.dispatch_run, buffer, limit=limit) == _call(python_dispatch_run, buffer, limit=limit)


@NOT_BUILT_HERE
def test_refusals_name_the_argument() -> None:
    assert COMPILED is not None
    buffer = _run_buffer(1)
    with pytest.raises(ValueError, match="count_max"):
        _call(COMPILED.dispatch_run, buffer, count_max=-1)
    with pytest.raises(TypeError, match="raw_topic is bytes"):
        _call(COMPILED.dispatch_run, buffer, raw_topic=TOPIC)
    with pytest.raises(TypeError, match="16 arguments"):
        COMPILED.dispatch_run(buffer, 0)  # type: ignore[call-arg]
    read_only_units: Any = bytes(64)  # the units must be writable
    with pytest.raises(BufferError):
        COMPILED.dispatch_run(
            buffer, 0, len(buffer), BASE_OFFSET, 5, TOPIC.encode(), QUEUE_ID, 100, -1, read_only_units, 0, 64,
            TOPIC, Request, None, None,
        )  # fmt: skip


def test_the_compiled_run_is_chosen_where_built() -> None:
    if COMPILED is not None and not pure_python():
        assert dispatch_run.dispatch_run is COMPILED.dispatch_run
    else:
        assert dispatch_run.dispatch_run is python_dispatch_run


def test_units_are_big_endian_offset_size_tags_code() -> None:
    """One message, read back from the unit bytes as RocketMQ's ConsumeQueue unit (spec §2.1)."""
    buffer = bytearray()
    _record(buffer, TOPIC, QUEUE_ID, 100, {"TAGS": "TagA", "UNIQ_KEY": "K1"}, b"body")
    (_consumed, count, *_rest), units, keys, _arrivals = _call(dispatch_run.dispatch_run, buffer)
    assert count == 1
    assert struct.unpack_from(">qiq", units, UNIT_SIZE) == (BASE_OFFSET, len(buffer), tags_code("TagA"))
    assert keys == [(TOPIC, "K1", BASE_OFFSET, 1_700_000_000_600)]


# --- dispatch_runs: interleaved queues ---

TOPICS_INTERLEAVED = ("RunTopic", "RunTopicB")


class _Units:
    """A queue's units as the store's UnitRun holds them (the attributes dispatch_runs reads and writes)."""

    def __init__(self, size: int, position: int, next_offset: int, max_physical_offset: int, end: int) -> None:
        self.view = memoryview(bytearray(size))
        self.position = position
        self.end = end
        self.next_offset = next_offset
        self.max_physical_offset = max_physical_offset


class _OpenRun:
    def __init__(self, units: _Units, topic: str) -> None:
        self.units = units
        self.topic = topic
        self.arrived: list[Request] = []


def _interleaved_buffer(seed: int) -> tuple[bytearray, dict[tuple[str, int], int]]:
    """Records of a few queues of two topics, interleaved at random, each queue's offsets from 100,
    with now and then a record its run would not take (a gap, a duplicate offset, a transaction half,
    KEYS); returns the buffer and each queue's first offset."""
    rng = random.Random(seed)
    queues = [(topic, queue_id) for topic in TOPICS_INTERLEAVED for queue_id in range(rng.randrange(1, 5))]
    next_offsets = dict.fromkeys(queues, 100)
    buffer = bytearray()
    for index in range(rng.randrange(1, 40)):
        queue = rng.choice(queues)
        kind = rng.choices(["plain", "gap", "duplicate", "half", "keys"], [120, 1, 1, 1, 1])[0]
        offset = next_offsets[queue] + (1 if kind == "gap" else -1 if kind == "duplicate" else 0)
        properties = _properties(rng, index)
        if kind == "keys":
            properties["KEYS"] = "order-1"
        sysflag = int(TransactionType.PREPARED_TYPE) if kind == "half" else 0
        _record(buffer, queue[0], queue[1], offset, properties, rng.randbytes(rng.randrange(0, 40)), sysflag)
        if kind == "plain":
            next_offsets[queue] += 1
    return buffer, dict.fromkeys(queues, 100)


def _runs(first_offsets: dict[tuple[str, int], int], rng: random.Random) -> dict[tuple[bytes, int], _OpenRun]:
    """Open runs for some of the queues (a queue without one stops the call), some nearly full."""
    runs: dict[tuple[bytes, int], _OpenRun] = {}
    for (topic, queue_id), offset in first_offsets.items():
        if rng.random() < 0.95:
            size = rng.choice([64, 64, 64, 3, 0]) * UNIT_SIZE + UNIT_SIZE
            units = _Units(size, UNIT_SIZE, offset, -1, size if rng.random() < 0.9 else size - 1)
            runs[(topic.encode(), queue_id)] = _OpenRun(units, topic)
    return runs


def _state(runs: dict[tuple[bytes, int], _OpenRun]) -> list[tuple[Any, ...]]:
    return [
        (key, bytes(run.units.view), run.units.position, run.units.next_offset, run.units.max_physical_offset,
         list(run.arrived))
        for key, run in sorted(runs.items())
    ]  # fmt: skip


def _call_runs(
    function: Any, buffer: bytes | bytearray, seed: int, count_max: int = 10_000, listening: bool = True
) -> tuple[RunsEnd, list[tuple[Any, ...]], list[UniqueKeyEntry]]:
    rng = random.Random(seed)
    _, first = _interleaved_buffer(seed)
    runs = _runs(first, rng)
    keys: list[UniqueKeyEntry] = []
    end = function(buffer, 0, len(buffer), BASE_OFFSET, count_max, runs, Request, keys, listening)
    return end, _state(runs), keys


def _one_queue_at_a_time(buffer: bytes | bytearray, seed: int) -> tuple[RunsEnd, list[tuple[Any, ...]], list[Any]]:
    """The reference: each record through `python_dispatch_run` of its own queue, count_max 1."""
    from shoal.formats.record import decode_header

    rng = random.Random(seed)
    _, first = _interleaved_buffer(seed)
    runs = _runs(first, rng)
    keys: list[UniqueKeyEntry] = []
    position = count = last = 0
    while position < len(buffer):
        header = decode_header(buffer, position)
        run = runs.get((header.topic.encode(), header.queue_id))
        if run is None:
            break
        units = run.units
        (consumed, taken, units.next_offset, units.max_physical_offset, units.position, timestamp) = (
            python_dispatch_run(
                buffer, position, len(buffer), BASE_OFFSET + position, 1, header.topic.encode(), header.queue_id,
                units.next_offset, units.max_physical_offset, units.view, units.position, units.end, run.topic,
                Request, keys, run.arrived,
            )
        )  # fmt: skip
        if not taken:
            break
        position, count, last = position + consumed, count + 1, timestamp
    return (position, count, last), _state(runs), keys


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_interleaved_queues_are_dispatched_as_one_queue_at_a_time_would(seed: int) -> None:
    """The Python twin of dispatch_runs takes exactly the records, units, keys and arrivals that
    each record's own queue run takes, and stops where that stops (no open run, or a record its run
    would not take); every queue's state is advanced in place."""
    buffer, _ = _interleaved_buffer(seed)
    assert _call_runs(python_dispatch_runs, buffer, seed) == _one_queue_at_a_time(buffer, seed)


@NOT_BUILT_HERE
@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=0, max_value=2**32), st.integers(min_value=0, max_value=40), st.booleans())
def test_the_compiled_runs_match_the_python_twin(seed: int, count_max: int, listening: bool) -> None:
    assert COMPILED is not None
    buffer, _ = _interleaved_buffer(seed)
    for limit_count in (10_000, count_max):
        assert _call_runs(COMPILED.dispatch_runs, buffer, seed, limit_count, listening) == _call_runs(
            python_dispatch_runs, buffer, seed, limit_count, listening
        )


@NOT_BUILT_HERE
@settings(max_examples=1000, deadline=None)
@given(
    st.integers(min_value=0, max_value=2**32),
    st.integers(min_value=0, max_value=3000),
    st.binary(min_size=1, max_size=8),
)
def test_damaged_bytes_stop_both_runs_alike(seed: int, at: int, garbage: bytes) -> None:
    assert COMPILED is not None
    buffer, _ = _interleaved_buffer(seed)
    at = min(at, len(buffer) - 1)
    buffer[at : at + len(garbage)] = garbage
    assert _call_runs(COMPILED.dispatch_runs, buffer, seed) == _call_runs(python_dispatch_runs, buffer, seed)


@NOT_BUILT_HERE
def test_more_queues_than_one_call_keeps_are_taken_over_several_calls() -> None:
    """The compiled call keeps at most 64 queues' state at once: with more, it stops before the
    next new queue, having written back what it took; the caller calls again from there."""
    assert COMPILED is not None
    buffer = bytearray()
    queue_count = 100
    for queue_id in range(queue_count):
        _record(buffer, TOPIC, queue_id, 100, {"UNIQ_KEY": f"k{queue_id}"}, b"x")
    runs = {
        (TOPIC.encode(), q): _OpenRun(_Units(4 * UNIT_SIZE, 0, 100, -1, 4 * UNIT_SIZE), TOPIC)
        for q in range(queue_count)
    }
    keys: list[UniqueKeyEntry] = []
    position = calls = 0
    while position < len(buffer):
        consumed, taken, _ = COMPILED.dispatch_runs(
            buffer, position, len(buffer), BASE_OFFSET + position, 10_000, runs, Request, keys, True
        )
        assert taken
        position += consumed
        calls += 1
    assert calls == 2 and [key[1] for key in keys] == [f"k{q}" for q in range(queue_count)]
    assert all(run.units.next_offset == 101 and run.units.position == UNIT_SIZE for run in runs.values())


@NOT_BUILT_HERE
def test_runs_refusals_name_the_argument() -> None:
    assert COMPILED is not None
    buffer, _ = _interleaved_buffer(3)
    with pytest.raises(TypeError, match="9 arguments"):
        COMPILED.dispatch_runs(buffer, 0)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="runs is a dict"):
        COMPILED.dispatch_runs(buffer, 0, len(buffer), BASE_OFFSET, 5, [], Request, None, False)  # type: ignore[arg-type]
    broken = {(TOPIC.encode(), q): object() for q in range(8)}
    broken |= {(b"RunTopicB", q): object() for q in range(8)}
    with pytest.raises(AttributeError):
        COMPILED.dispatch_runs(buffer, 0, len(buffer), BASE_OFFSET, 5, broken, Request, None, False)  # type: ignore[arg-type]


def test_the_compiled_runs_are_chosen_where_built() -> None:
    if COMPILED is not None and not pure_python():
        assert dispatch_run.dispatch_runs is COMPILED.dispatch_runs
    else:
        assert dispatch_run.dispatch_runs is python_dispatch_runs
