"""formats.covered_run: the records re-dispatch skips after a crash, compiled and in Python, held
to the same answers on chained logs of a few topics and queues, damaged or cut anywhere."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.formats import covered_run as covered_run_module
from shoal.formats.compiled import pure_python
from shoal.formats.covered_run import python_covered_run
from shoal.formats.index_entry import UniqueKeyEntry
from shoal.formats.record import python_dispatch_fields
from tests.formats.test_record_speedups import CHAIN_TOPICS, chained_log, chained_log_record, damaged

try:  # directly, not through compiled_module: these tests hold even under SHOAL_PURE_PYTHON
    from shoal.formats import _record_speedups as COMPILED  # noqa: N812
except ImportError:
    COMPILED = None  # type: ignore[assignment]
if COMPILED is None:
    pytestmark = pytest.mark.skipif(
        not os.environ.get("CI"),
        reason="shoal.formats._record_speedups was not built (no C compiler at install) and this is not CI; "
        "in CI this module's tests fail instead",
    )


NAMES = {topic: topic.decode("utf-8", "replace") for topic in CHAIN_TOPICS}


@dataclass
class Queue:
    max_physical_offset: int


def test_the_compiled_run_is_chosen_unless_pure_python() -> None:
    assert COMPILED is not None
    expected = python_covered_run if pure_python() else COMPILED.covered_run
    assert covered_run_module.covered_run is expected


def _queues(rng: random.Random, log_end: int) -> dict[tuple[bytes, int], Queue]:
    """Most (topic, queue) pairs of a chained log, each ending somewhere in it or past it."""
    return {
        (topic, queue_id): Queue(rng.choice([-1, rng.randrange(0, log_end + 1), log_end + 10**6]))
        for topic in CHAIN_TOPICS
        for queue_id in range(4)
        if rng.random() < 0.9
    }


@settings(max_examples=800, deadline=None)
@given(
    st.integers(min_value=0, max_value=2**32),
    st.integers(min_value=0, max_value=12),
    st.binary(max_size=8),
    st.integers(min_value=0, max_value=14),
    st.sampled_from([0, 4096, 2**40]),
)
def test_the_compiled_run_skips_what_the_python_run_skips(
    seed: int, count: int, damage: bytes, count_max: int, base_offset: int
) -> None:
    """Goal: both stop before the same record for the same reason (not covered, a queue missing
    from `queues`, stop_at, count_max, damage, a cut) over queues ending anywhere and an index
    ending anywhere."""
    assert COMPILED is not None
    rng = random.Random(seed)
    log = damaged(chained_log(rng, base_offset, count), rng, damage)
    start = rng.choice([0, rng.randrange(0, len(log) + 1)])
    limit = rng.choice([len(log), rng.randrange(start, len(log) + 1)])
    stop_at = rng.choice([len(log), rng.randrange(0, len(log) + 1)])
    end = base_offset + len(log)
    indexed_end = rng.choice([end, base_offset, base_offset + rng.randrange(0, len(log) + 1)])
    queues = _queues(rng, end)
    names = {topic: topic.decode("utf-8", "replace") for topic in CHAIN_TOPICS if rng.random() < 0.9}
    collect = rng.random() < 0.7
    python_keys: list[UniqueKeyEntry] | None = [] if collect else None
    compiled_keys: list[UniqueKeyEntry] | None = [] if collect else None
    arguments = (log, start, limit, base_offset + start, stop_at, indexed_end, queues, names, count_max)
    expected = python_covered_run(*arguments, python_keys)
    assert COMPILED.covered_run(*arguments, compiled_keys) == expected
    assert compiled_keys == python_keys
    assert COMPILED.covered_run(bytes(log), *arguments[1:], None if collect else []) is not None


def test_a_run_dispatched_before_the_crash_is_skipped_whole_and_a_missing_queue_named() -> None:
    """Goal: a log whose queues and index all end past it is one run; a queue missing from the
    map stops the run at its first record and names it; a queue ending before a record stops
    the run there."""
    assert COMPILED is not None
    log = chained_log(random.Random(11), 0, 12)
    positions = []
    position = 0
    while (fields := python_dispatch_fields(log, position, len(log), position)) is not None:
        positions.append((position, fields))
        position += fields[0]
    assert len(positions) > 3
    everything = {(topic, queue_id): Queue(len(log)) for topic in CHAIN_TOPICS for queue_id in range(4)}
    for run in (COMPILED.covered_run, python_covered_run):
        assert run(log, 0, len(log), 0, len(log), len(log), everything, NAMES, 100, None) == (
            position,
            len(positions),
            None,
        )
        at, (size, queue_id, _qo, _physical, _sysflag, _ts, topic, _props) = next(
            (at, fields) for at, fields in positions[1:] if fields[4] & 0xC in (0, 0x8)
        )
        without = {key: queue for key, queue in everything.items() if key != (topic, queue_id)}
        consumed, _taken, missing = run(log, 0, len(log), 0, len(log), len(log), without, NAMES, 100, None)
        assert missing == (topic, queue_id) and consumed <= at
        short = dict(everything)
        short[(topic, queue_id)] = Queue(at + size - 1)
        consumed, _taken, missing = run(log, 0, len(log), 0, len(log), len(log), short, NAMES, 100, None)
        assert missing is None and consumed <= at < position


def test_records_the_index_lost_are_skipped_with_their_unique_keys_handed_back() -> None:
    """Goal: after a crash that cost the index file but not the ConsumeQueues, a run skips the
    records and hands back each one's (topic, UNIQ_KEY, offset, store time) in CommitLog order; a
    record with KEYS stops it (IndexService.build indexes those), and without a list to hand keys
    back the run stops at the first record the index lacks."""
    assert COMPILED is not None
    log = bytearray()
    rng = random.Random(5)
    offsets: list[int] = []
    while len(offsets) < 6:
        offsets.append(len(log))
        log += chained_log_record(rng, len(log), b"UNIQ_KEY\x01K%d" % len(offsets))
    offsets.append(len(log))
    log += chained_log_record(rng, len(log), b"KEYS\x01a b\x02UNIQ_KEY\x01K7")
    everything = {(topic, queue_id): Queue(len(log)) for topic in CHAIN_TOPICS for queue_id in range(4)}
    for run in (COMPILED.covered_run, python_covered_run):
        keys: list[UniqueKeyEntry] = []
        consumed, taken, missing = run(log, 0, len(log), 0, len(log), 0, everything, NAMES, 100, keys)
        assert (consumed, taken, missing) == (offsets[6], 6, None)
        assert [(key, offset) for _topic, key, offset, _stamp in keys] == [
            (f"K{number}", offsets[number - 1]) for number in range(1, 7)
        ]
        assert run(log, 0, len(log), 0, len(log), 0, everything, NAMES, 100, None) == (0, 0, None)
        unnamed = {raw: name for raw, name in NAMES.items() if raw != keys[0][0].encode()}
        consumed, taken, missing = run(log, 0, len(log), 0, len(log), 0, everything, unnamed, 100, [])
        assert taken == 0 and missing is not None and missing[0] == keys[0][0].encode()
