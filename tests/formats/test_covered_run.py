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
from shoal.formats.record import python_dispatch_fields
from tests.formats.test_record_speedups import CHAIN_TOPICS, chained_log, damaged

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
    arguments = (log, start, limit, base_offset + start, stop_at, indexed_end, queues, count_max)
    expected = python_covered_run(*arguments)
    assert COMPILED.covered_run(*arguments) == expected
    assert COMPILED.covered_run(bytes(log), *arguments[1:]) == expected


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
        assert run(log, 0, len(log), 0, len(log), len(log), everything, 100) == (position, len(positions), None)
        at, (size, queue_id, _qo, _physical, _sysflag, _ts, topic, _props) = next(
            (at, fields) for at, fields in positions[1:] if fields[4] & 0xC in (0, 0x8)
        )
        without = {key: queue for key, queue in everything.items() if key != (topic, queue_id)}
        consumed, _taken, missing = run(log, 0, len(log), 0, len(log), len(log), without, 100)
        assert missing == (topic, queue_id) and consumed <= at
        short = dict(everything)
        short[(topic, queue_id)] = Queue(at + size - 1)
        consumed, _taken, missing = run(log, 0, len(log), 0, len(log), len(log), short, 100)
        assert missing is None and consumed <= at < position
