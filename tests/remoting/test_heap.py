"""remoting/heap.py: the startup heap frozen out of collections, and every collection timed."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from shoal.remoting.heap import CollectionTimes

FREEZE_IN_A_SERVER_PROCESS = """
import gc, json, weakref
import shoal.broker.broker  # what a broker process imports
from shoal.remoting.heap import freeze_startup_heap

class Node:
    pass

kept = Node()
kept_ref = weakref.ref(kept)
frozen = freeze_startup_heap()
freeze_count = gc.get_freeze_count()
walked_after = len(gc.get_objects())
# Made after the freeze: a cycle, which only the collector frees.
later = Node()
later.self = later
later_ref = weakref.ref(later)
del later
gc.collect()
del kept  # frozen, but still freed by reference counting
print(json.dumps({
    "frozen": frozen,
    "freeze_count": freeze_count,
    "freeze_count_after": gc.get_freeze_count(),
    "walked_after": walked_after,
    "later_freed": later_ref() is None,
    "kept_freed": kept_ref() is None,
}))
"""


def test_freezing_leaves_later_objects_to_the_collector() -> None:
    """Goal: `freeze_startup_heap` takes what a server's start made out of the collector's walks,
    and objects made later are collected as before; frozen ones are still freed by reference
    counting. Method: a fresh interpreter (freezing the test process would keep its garbage)."""
    result = subprocess.run(
        [sys.executable, "-c", FREEZE_IN_A_SERVER_PROCESS], capture_output=True, text=True, timeout=120, check=True
    )
    report = json.loads(result.stdout)
    assert report["frozen"] == report["freeze_count"] >= 10_000
    assert report["walked_after"] < report["frozen"] // 10
    assert report["later_freed"] and report["kept_freed"]
    assert report["freeze_count_after"] < report["freeze_count"]  # `kept` left the frozen ones


@pytest.fixture
def timer() -> Iterator[CollectionTimes]:
    timer = CollectionTimes()
    timer.install()
    try:
        yield timer
    finally:
        timer.uninstall()


def test_each_collection_is_counted_and_timed_by_generation(timer: CollectionTimes) -> None:
    before = list(timer.counts)
    gc.collect(1)
    gc.collect(2)
    gc.collect(2)
    assert timer.counts[2] - before[2] == 2
    assert timer.counts[1] - before[1] >= 1
    for generation in range(3):
        assert 0.0 <= timer.longest_s[generation] <= timer.seconds[generation]
    assert timer.longest_s[2] > 0.0


def test_installing_twice_hooks_once(timer: CollectionTimes) -> None:
    timer.install()
    assert gc.callbacks.count(timer._on_collection) == 1
    timer.uninstall()
    assert timer._on_collection not in gc.callbacks
    counts = list(timer.counts)
    gc.collect()
    assert timer.counts == counts
