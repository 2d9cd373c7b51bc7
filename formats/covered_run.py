"""A covered run: consecutive CommitLog records that re-dispatch after a crash may skip, because
their ConsumeQueues (and the index, or the unique keys handed back) already hold them.

After a SIGKILL the Dispatcher replays the CommitLog from the checkpoint; most of what it meets
was dispatched before the crash. A record is covered when all of these hold:
- it is a well-formed V1 record at its expected PHYSICALOFFSET (`dispatch_fields` is not None);
- it has no ConsumeQueue unit (a transaction half or rollback), or its queue already ends past
  it: `physical + size <= queues[(topic, queue_id)].max_physical_offset` (RocketMQ's duplicate
  test);
- the index holds keys of a later message (`physical < indexed_end`), or it is a rollback (no
  keys to index), or `keys_out` is a list and the record has no KEYS: then its unique key, if it
  has one, is appended to `keys_out` as (topic, UNIQ_KEY, offset, store time) for
  `IndexService.build_unique_keys` (an index file a crash made untrustworthy is deleted, while
  the ConsumeQueues survive: this rebuilds it without dispatching every record again).

The run stops before the first record that is not covered, at `stop_at`, after `count_max`
records, or at a record whose queue is not in `queues` or whose topic (with a key to hand back)
is not in `topic_names`: that (raw topic, queue id) is returned for the caller to look up. The
Python reference below is the rule; `_record_speedups.c` implements it when built, and the tests
hold both to each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from shoal.formats.compiled import compiled_module
from shoal.formats.index_entry import UniqueKeyEntry
from shoal.formats.properties import KEYS, UNIQ_CLIENT_MESSAGE_ID_KEYIDX, python_find_properties
from shoal.formats.record import python_dispatch_fields
from shoal.formats.sysflag import TRANSACTION_TYPE_MASK, TransactionType

CoveredRun = tuple[int, int, tuple[bytes, int] | None]
"""(bytes consumed, records, the (raw topic, queue id) missing from `queues` or None)."""

_UNIT_TYPES = (int(TransactionType.NOT_TYPE), int(TransactionType.COMMIT_TYPE))
_KEY_NAMES = (KEYS.encode(), UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode())


class QueueEnd(Protocol):
    """What a covered run reads of a ConsumeQueue."""

    @property
    def max_physical_offset(self) -> int: ...


def python_covered_run(
    view: bytes | bytearray | memoryview,
    position: int,
    limit: int,
    expected_offset: int,
    stop_at: int,
    indexed_end: int,
    queues: Mapping[tuple[bytes, int], QueueEnd],
    topic_names: Mapping[bytes, str],
    count_max: int,
    keys_out: list[UniqueKeyEntry] | None,
) -> CoveredRun:
    """The covered records from `position` (its CommitLog offset `expected_offset`), each ending
    by `limit` and starting before `stop_at` (module docstring: which records are covered)."""
    if position < 0 or (position < limit and limit > len(view)):
        raise ValueError("covered_run: [position, limit) is not inside the buffer")
    start = position
    count = 0
    while count < count_max and position < stop_at:
        fields = python_dispatch_fields(view, position, limit, expected_offset + position - start)
        if fields is None:
            break
        size, queue_id, _queue_offset, physical, sysflag, store_timestamp, raw_topic, properties = fields
        kind = sysflag & TRANSACTION_TYPE_MASK
        uniq_key = None
        if physical >= indexed_end and kind != TransactionType.ROLLBACK_TYPE:
            if keys_out is None:
                break
            keys, uniq_key = python_find_properties(properties, _KEY_NAMES)
            if keys is not None:
                break
        if kind in _UNIT_TYPES:
            queue = queues.get((raw_topic, queue_id))
            if queue is None:
                return position - start, count, (raw_topic, queue_id)
            if physical + size > queue.max_physical_offset:
                break
        if uniq_key is not None:
            assert keys_out is not None
            topic = topic_names.get(raw_topic)
            if topic is None:
                return position - start, count, (raw_topic, queue_id)
            keys_out.append((topic, uniq_key, physical, store_timestamp))
        position += size
        count += 1
    return position - start, count, None


_compiled = compiled_module("shoal.formats._record_speedups")
covered_run = python_covered_run
"""`python_covered_run`, compiled when built."""
if _compiled is not None:
    covered_run = _compiled.covered_run
