"""TPS and lag over time for the charts: the dashboard samples the cluster every
SAMPLE_INTERVAL_S and keeps HISTORY_SAMPLES per series in memory (the last hour by default; Grafana
on Prometheus is the place for longer history)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

from shoal.client import Admin, MQClientError
from shoal.dashboard.charts import Line
from shoal.dashboard.cluster_view import MASTER_ID, GroupFigures, broker_addresses, broker_row, group_figures
from shoal.dashboard.limits import HISTORY_SAMPLES, SAMPLE_INTERVAL_S

log = logging.getLogger(__name__)

Point = tuple[float, float]


class History:
    """Series by name, each a ring of (unix seconds, value)."""

    def __init__(self, max_samples: int = HISTORY_SAMPLES) -> None:
        self._series: dict[str, deque[Point]] = {}
        self._max = max_samples

    def add(self, name: str, at_s: float, value: float) -> None:
        series = self._series.get(name)
        if series is None:
            series = self._series[name] = deque(maxlen=self._max)
        series.append((at_s, value))

    def line(self, name: str, label: str | None = None) -> Line:
        return Line(label or name, tuple(self._series.get(name, ())))

    def names(self, prefix: str) -> list[str]:
        return sorted(name for name in self._series if name.startswith(prefix))


def put_series(broker_name: str) -> str:
    return f"put_tps/{broker_name}"


def get_series(broker_name: str) -> str:
    return f"get_tps/{broker_name}"


def lag_series(group: str) -> str:
    return f"lag/{group}"


async def sample_once(admin: Admin, history: History, now_s: float) -> None:
    """One round: each master's put and get TPS, each group's lag summed over the masters."""
    info = await admin.cluster_info()
    by_group: dict[str, GroupFigures] = {}
    for cluster, name, broker_id, address in broker_addresses(info):
        if broker_id != MASTER_ID:
            continue
        try:
            row = broker_row(cluster, name, broker_id, address, await admin.runtime_info(address))
            history.add(put_series(name), now_s, row.put_tps)
            history.add(get_series(name), now_s, row.get_tps)
            stats = await admin.broker_consume_stats(address)
        except MQClientError as error:
            log.info("sampling %s (%s) failed: %s", name, address, error)
            continue
        group_figures(stats, by_group)
    for group, figures in by_group.items():
        history.add(lag_series(group), now_s, figures.lag)


async def run_sampler(
    admin: Admin,
    history: History,
    interval_s: float = SAMPLE_INTERVAL_S,
    clock: Callable[[], float] = time.time,
) -> None:
    """Sample until cancelled; a round that fails is logged once and the next one tried."""
    while True:
        try:
            await sample_once(admin, history, clock())
        except MQClientError as error:
            log.warning("sampling the cluster failed: %s", error)
        except Exception:  # the charts must not stop for good on one surprise: say what it was
            log.exception("sampling the cluster failed")
        await asyncio.sleep(interval_s)
