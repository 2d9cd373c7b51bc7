"""A server process's heap and CPython's cyclic garbage collector.

A full collection walks every object the process tracks, and most of a server's are what its
imports and its start made (modules, classes, functions, the store's and the processors' wiring):
about 70,000 in a broker, which one full collection took 35-63 ms to walk on the benchmark VM.
Under load a broker ran one about every second (the objects of requests in flight are promoted
by the young collections and count towards the next full one), and every connection waited for it.

`freeze_startup_heap` moves what exists once a process serves into the permanent generation
(`gc.freeze`), which collections skip: a full collection then walks only what was made since
(0.2-0.4 ms in the same benchmark). It is called once per process, by the commands that run one server for
the process's life (`shoal namesrv`, `broker`, `proxy`, `local`), never by a process that starts
and stops many (a test run): cycles among frozen objects are freed only at exit, and a stopped
server's would pile up. Frozen objects are still freed by reference counting.

`COLLECTIONS` times every collection by generation (a `gc.callbacks` hook), for /metrics.
"""

from __future__ import annotations

import gc
import time
from typing import Any

__all__ = ["COLLECTIONS", "GENERATIONS", "CollectionTimes", "freeze_startup_heap"]

GENERATIONS = 3
"""CPython's generations: 0 and 1 young, 2 the full collection."""


def freeze_startup_heap() -> int:
    """Collect what starting left behind, then freeze the rest out of later collections; returns
    the number of objects frozen (`gc.get_freeze_count()`)."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


class CollectionTimes:
    """Collections, their pauses in total and the longest pause, per generation, since `install`."""

    def __init__(self) -> None:
        self.counts = [0] * GENERATIONS
        self.seconds = [0.0] * GENERATIONS
        self.longest_s = [0.0] * GENERATIONS
        self._started = 0.0

    def install(self) -> None:
        """Start timing (idempotent: one hook per process, however many servers install it)."""
        if self._on_collection not in gc.callbacks:
            gc.callbacks.append(self._on_collection)

    def uninstall(self) -> None:
        if self._on_collection in gc.callbacks:
            gc.callbacks.remove(self._on_collection)

    def _on_collection(self, phase: str, info: dict[str, Any]) -> None:
        # Called with the GIL held by whichever thread triggered the collection, never
        # concurrently: the start and the stop of one collection pair up.
        if phase == "start":
            self._started = time.perf_counter()
            return
        pause = time.perf_counter() - self._started
        generation = info["generation"]
        self.counts[generation] += 1
        self.seconds[generation] += pause
        self.longest_s[generation] = max(self.longest_s[generation], pause)


COLLECTIONS = CollectionTimes()
"""The process's one timer (gc.callbacks is process-wide)."""
