"""A dispatch run: consecutive CommitLog records of one queue turned into their ConsumeQueue units
in one call.

A batch sent to a queue lands as consecutive records of that queue, each the queue's next plain
message; dispatching them one Python call per field, per property and per unit cost more than
the append itself. `dispatch_run` writes the units of such a run straight into the ConsumeQueue's
mapped file and hands back what the index and the listeners need; the first record that is not
the queue's next plain message ends the run and the caller dispatches it on its own.

The run stops before a record when any of these holds (the Python reference below is the rule;
`_record_speedups.c` implements it when built, and the tests hold both to each other):
- it is not a well-formed V1 record at its expected PHYSICALOFFSET (`dispatch_fields` is None);
- its topic or QUEUEID differ from the run's, its QUEUEOFFSET is not `next_queue_offset`, or it
  ends at or before `max_physical_offset` (a duplicate);
- it is a transaction half or rollback (only NOT_TYPE and COMMIT_TYPE have units);
- it has KEYS (the caller indexes those with `IndexService.build`);
- the unit would not fit before `units_end`, or `count_max` records were taken.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from shoal.formats.compiled import compiled_module
from shoal.formats.consume_queue_unit import UNIT, UNIT_SIZE
from shoal.formats.index_entry import UniqueKeyEntry
from shoal.formats.java_hash import python_java_string_hash
from shoal.formats.properties import KEYS, TAGS, UNIQ_CLIENT_MESSAGE_ID_KEYIDX, python_find_properties
from shoal.formats.record import python_dispatch_fields
from shoal.formats.sysflag import TRANSACTION_TYPE_MASK, TransactionType

RunEnd = tuple[int, int, int, int, int, int]
"""(bytes consumed, records, next queue offset, max physical offset, units position, last store timestamp)."""


_NAMES = (KEYS.encode(), TAGS.encode(), UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode())
_UNIT_TYPES = (int(TransactionType.NOT_TYPE), int(TransactionType.COMMIT_TYPE))


def python_dispatch_run(
    view: bytes | bytearray | memoryview,
    position: int,
    limit: int,
    expected_offset: int,
    count_max: int,
    raw_topic: bytes,
    queue_id: int,
    next_queue_offset: int,
    max_physical_offset: int,
    units: bytearray | memoryview,
    units_position: int,
    units_end: int,
    topic: str,
    request_type: Callable[..., Any],
    keys_out: list[UniqueKeyEntry] | None,
    arrivals_out: list[Any] | None,
) -> RunEnd:
    """Write the unit of each record of the run starting at `position` (its offset in the CommitLog
    `expected_offset`) at `units[units_position:]`; append (topic, UNIQ_KEY, offset, store time)
    of each message with a unique key to `keys_out`, and `request_type(topic, queue_id, offset,
    size, tagsCode, store time, queue offset, raw properties)` to `arrivals_out` (each skipped when
    None). Returns where the run ended (module docstring: when it does)."""
    start = position
    count = 0
    last_timestamp = 0
    units_end = min(units_end, len(units))
    while count < count_max and units_position + UNIT_SIZE <= units_end:
        fields = python_dispatch_fields(view, position, limit, expected_offset + position - start)
        if fields is None:
            break
        size, record_queue_id, queue_offset, physical, sysflag, store_timestamp, record_topic, properties = fields
        if (
            record_queue_id != queue_id
            or queue_offset != next_queue_offset
            or record_topic != raw_topic
            or sysflag & TRANSACTION_TYPE_MASK not in _UNIT_TYPES
            or physical + size <= max_physical_offset
        ):
            break
        keys, tags, uniq_key = python_find_properties(properties, _NAMES)
        if keys:
            break
        code = python_java_string_hash(tags) if tags else 0
        if uniq_key and keys_out is not None:
            keys_out.append((topic, uniq_key, physical, store_timestamp))
        if arrivals_out is not None:
            arrivals_out.append(
                request_type(topic, queue_id, physical, size, code, store_timestamp, queue_offset, properties)
            )
        UNIT.pack_into(units, units_position, physical, size, code)
        units_position += UNIT_SIZE
        next_queue_offset += 1
        max_physical_offset = physical + size
        last_timestamp = store_timestamp
        position += size
        count += 1
    return position - start, count, next_queue_offset, max_physical_offset, units_position, last_timestamp


class RunUnits(Protocol):
    """A queue's open run of units (the store's `UnitRun`): where its next unit goes."""

    view: Any
    position: int
    end: int
    next_offset: int
    max_physical_offset: int


class OpenRun(Protocol):
    """A dispatch pass's open run of one queue: its units, its topic as text, its arrivals."""

    @property
    def units(self) -> RunUnits: ...
    @property
    def topic(self) -> str: ...
    @property
    def arrived(self) -> list[Any]: ...


RunsEnd = tuple[int, int, int]
"""(bytes consumed, records, last store timestamp)."""


def python_dispatch_runs(
    view: bytes | bytearray | memoryview,
    position: int,
    limit: int,
    expected_offset: int,
    count_max: int,
    runs: Mapping[tuple[bytes, int], OpenRun],
    request_type: Callable[..., Any],
    keys_out: list[UniqueKeyEntry] | None,
    listening: bool,
) -> RunsEnd:
    """`python_dispatch_run` over consecutive records of several queues: producers that spread
    their sends over the queues interleave them, so a run of one queue is one record long. Each
    record goes through its queue's open run `runs[(raw topic, queue id)]` (its units' state is
    advanced in place; its arrivals go to the run's `arrived` when `listening`). Stops before the
    first record with no open run, or that its run would not take (the module docstring's rule)."""
    start = position
    count = 0
    last_timestamp = 0
    while count < count_max:
        offset = expected_offset + position - start
        fields = python_dispatch_fields(view, position, limit, offset)
        if fields is None:
            break
        run = runs.get((fields[6], fields[1]))
        if run is None:
            break
        units = run.units
        consumed, taken, next_offset, max_physical, units_position, timestamp = python_dispatch_run(
            view,
            position,
            limit,
            offset,
            1,
            fields[6],
            fields[1],
            units.next_offset,
            units.max_physical_offset,
            units.view,
            units.position,
            units.end,
            run.topic,
            request_type,
            keys_out,
            run.arrived if listening else None,
        )
        if not taken:
            break
        units.next_offset, units.max_physical_offset, units.position = next_offset, max_physical, units_position
        last_timestamp = timestamp
        position += consumed
        count += 1
    return position - start, count, last_timestamp


_compiled = compiled_module("shoal.formats._record_speedups")
COMPILED = _compiled is not None
"""Whether `dispatch_run` is the compiled one."""
dispatch_run = python_dispatch_run
"""`python_dispatch_run`, compiled when built."""
dispatch_runs = python_dispatch_runs
"""`python_dispatch_runs`, compiled when built."""
if _compiled is not None:
    dispatch_run = _compiled.dispatch_run
    dispatch_runs = _compiled.dispatch_runs
