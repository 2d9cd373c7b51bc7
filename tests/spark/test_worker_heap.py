"""shoal.spark.worker_heap: the heap is frozen once in a reused Spark worker, never elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from shoal.spark.worker_heap import REUSED_WORKER_ENV

PROBE = """
import gc
from shoal.spark.worker_heap import freeze_imports
first = freeze_imports()
frozen = gc.get_freeze_count()
second = freeze_imports()
print(first, frozen > 1000, second, gc.get_freeze_count() == frozen)
"""


@pytest.mark.parametrize(("reused", "expected"), [("1", "True True False True"), ("", "False False False True")])
def test_the_heap_is_frozen_once_and_only_in_a_reused_worker(reused: str, expected: str) -> None:
    """Goal: a reused worker (SPARK_REUSE_WORKER set, as Spark sets it for its daemon) freezes what
    its imports made on the first call and not again; any other process keeps its collector as is.
    Method: a fresh interpreter per case (freezing is per process)."""
    env = {key: value for key, value in os.environ.items() if key != REUSED_WORKER_ENV}
    if reused:
        env[REUSED_WORKER_ENV] = reused
    probe = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    assert probe.stdout.split() == expected.split()
