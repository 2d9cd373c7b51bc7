"""Spark's reused Python workers run a full garbage collection after every task
(`pyspark/daemon.py`, when SPARK_REUSE_WORKER is set). A full collection walks every object the
process tracks, and most of them are what the imports made (pyspark, pyarrow, shoal: modules,
classes, functions), which live as long as the worker. Measured under a stream of 50,000 msgs/s
(bench/spark_stream.py, py-spy on a worker): that collection was 30 % of the readers' CPU.

`freeze_imports` moves what exists at a reader's first task into the permanent generation
(`gc.freeze`), which collections skip. Objects made later are collected as before; the frozen ones
are still freed by reference counting, only cycles among them would wait for the process's end.
"""

from __future__ import annotations

import gc
import os

__all__ = ["freeze_imports"]

REUSED_WORKER_ENV = "SPARK_REUSE_WORKER"
"""Set by Spark for the Python daemon whose forked workers serve task after task."""

_frozen = False


def freeze_imports() -> bool:
    """Freeze the heap once per reused Spark worker process; whether it was done now. Elsewhere
    (the driver, a test calling a reader directly, a worker used once) it does nothing."""
    global _frozen
    if _frozen or not os.environ.get(REUSED_WORKER_ENV):
        return False
    gc.freeze()
    _frozen = True
    return True
