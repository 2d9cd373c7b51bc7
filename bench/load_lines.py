"""What bench/py_load.py and bench/cpp_load.py share: their key=value arguments, the body pool and the
figures of their `result` JSON line (the same fields bench/java/Load.java prints, which vs_rocketmq.py reads).

Imported by the two scripts from their own directory (a script's folder is first on sys.path).
"""

from __future__ import annotations

import math
import random
from typing import Any

BODY_POOL = 256
"""Distinct random bodies a load generator cycles through."""


def parse(argv: list[str]) -> dict[str, str]:
    args = {}
    for arg in argv:
        key, eq, value = arg.partition("=")
        if not eq:
            raise SystemExit(f"expected key=value, got {arg}")
        args[key] = value
    return args


def bodies(size: int) -> list[bytes]:
    rng = random.Random(16)
    return [rng.randbytes(size) for _ in range(BODY_POOL)]


def quantile_ms(samples_ns: list[int], q: float) -> float:
    if not samples_ns:
        return -1.0
    ordered = sorted(samples_ns)
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index] / 1e6


def result_fields(
    *,
    mode: str,
    sent: int,
    failures: int,
    warm_failures: int,
    produce_s: float,
    latency_ns: list[int],
    e2e_ns: list[int],
    live: Any,
    live_done: bool,
    drain: Any,
    drained: bool,
) -> dict[str, Any]:
    """The `result` line's figures for one mode: `failures` of the `sent` timed sends (the rate counts
    the others), `warm_failures` of the warm-up; `live` and `drain` are the scripts' Counters
    (`received`, and the drain's `first_ms` / `last_ms`)."""
    drain_s = max(1e-3, (drain.last_ms - drain.first_ms) / 1e3)
    return {
        "mode": mode,
        "sent": sent,
        "failures": failures + warm_failures,
        "produceSeconds": produce_s,
        "produceRate": (sent - failures) / produce_s,
        "sendP50Ms": quantile_ms(latency_ns, 0.50),
        "sendP99Ms": quantile_ms(latency_ns, 0.99),
        "sendP999Ms": quantile_ms(latency_ns, 0.999),
        "e2eP50Ms": quantile_ms(e2e_ns, 0.50),
        "e2eP99Ms": quantile_ms(e2e_ns, 0.99),
        "liveReceived": live.received,
        "liveDone": live_done,
        "drainReceived": drain.received,
        "drained": drained,
        "consumeRate": drain.received / drain_s,
    }
