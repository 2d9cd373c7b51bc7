"""The HTTP endpoint serving `/metrics` and `/healthz`, and the collector behind `/metrics`.

With `metricsTokenFile` set, /metrics answers 401 unless the request carries
`Authorization: Bearer <the file's token>`; /healthz stays open, because kubelet probes carry no
secret (docs/security.md §5).

Hot paths only bump plain integers in dicts; a custom collector turns them (and store, long-poll
and consumer-lag figures read at scrape time) into metric families. Exposition is
prometheus-client's, so the text format is exactly what Prometheus expects; HTTP is aiohttp's
server, on the broker's own event loop.
"""

from __future__ import annotations

import gc
import hmac
import logging
from collections.abc import Callable, Iterator

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from shoal.broker.long_polling import PullRequestHoldService
from shoal.broker.metrics import BrokerMetrics
from shoal.broker.schedule import ScheduleMessageService
from shoal.broker.transactions.service import TransactionService
from shoal.remoting.heap import COLLECTIONS, GENERATIONS
from shoal.remoting.settings import ConfigError
from shoal.store import MessageStore

log = logging.getLogger(__name__)

HTTP_SHUTDOWN_TIMEOUT_S = 5.0
"""How long a stopping broker lets a scrape in progress finish."""
PROMETHEUS_TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The exposition format `generate_latest` writes (newer prometheus-clients label it 1.0.0)."""
METRICS_TOKEN_MAX_BYTES = 4096  # a bearer token; a larger file is the wrong file


HA_GAUGES = (
    ("epoch", "Replication epoch of this broker (grows with every promotion)"),
    ("is_master", "1 on a master, 0 on a slave"),
    ("slaves_connected", "Slaves reporting to this master over the HA port"),
    ("master_connected", "1 while this slave follows its master over the HA port"),
    ("lag_bytes", "Replication lag in bytes (master: best slave; slave: behind the master), -1 unknown"),
    ("lag_seconds", "Age of the oldest message the (best) slave lacks, -1 unknown"),
    ("confirmed_offset", "Highest CommitLog offset a slave acknowledged"),
    ("sync_waiters", "SYNC_MASTER sends waiting for a slave"),
)
HA_COUNTERS = (
    ("slave_timeouts", "SYNC_MASTER sends answered FLUSH_SLAVE_TIMEOUT"),
    ("slave_not_available", "SYNC_MASTER sends answered SLAVE_NOT_AVAILABLE"),
    ("promotions", "Promotions of this broker to master"),
    ("demotions", "Times this broker was fenced and turned slave"),
    ("dead_links", "HA connections closed because the peer fell silent (a master's slaves, a slave's master)"),
)


class BrokerCollector(Collector):
    """Figures read at scrape time from the parts that keep them."""

    def __init__(
        self,
        *,
        metrics: BrokerMetrics,
        store: MessageStore,
        hold: PullRequestHoldService,
        schedule: ScheduleMessageService,
        transactions: TransactionService,
        connection_count: Callable[[], int],
        ha_stats: Callable[[], dict[str, float]],
        consumer_lag: Callable[[], dict[tuple[str, str], int]],
        namesrv_registered: Callable[[], dict[str, bool]],
        disk_used_ratio: Callable[[], float],
        ha_fallbehind_max_bytes: Callable[[], int],
    ) -> None:
        self.metrics = metrics
        self.store = store
        self.hold = hold
        self.schedule = schedule
        self.transactions = transactions
        self.connection_count = connection_count
        self.ha_stats = ha_stats
        self.consumer_lag = consumer_lag
        self.namesrv_registered = namesrv_registered
        self.disk_used_ratio = disk_used_ratio
        self.ha_fallbehind_max_bytes = ha_fallbehind_max_bytes

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        metrics = self.metrics
        yield _counter("shoal_messages_in", "Messages stored, by topic", ["topic"], metrics.messages_in)
        yield _counter("shoal_bytes_in", "Record bytes stored, by topic", ["topic"], metrics.bytes_in)
        yield _counter(
            "shoal_put_failures", "Puts refused or failed, by store status", ["status"], metrics.put_failures
        )
        yield _counter(
            "shoal_put_timeouts",
            "Puts stored but not durable in time (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE)",
            ["status"],
            metrics.put_timeouts,
        )
        yield _counter(
            "shoal_messages_out", "Messages pulled, by topic and group", ["topic", "group"], metrics.messages_out
        )
        yield _counter(
            "shoal_bytes_out", "Record bytes pulled, by topic and group", ["topic", "group"], metrics.bytes_out
        )
        store = self.store
        stats = store.stats()
        for name, help_text in (
            ("commitlog_min_offset", "First CommitLog byte still stored"),
            ("commitlog_max_offset", "End of the CommitLog"),
            ("commitlog_flushed_offset", "End of the durable CommitLog"),
            ("commitlog_segments", "CommitLog segment files"),
            ("dispatch_behind_bytes", "CommitLog bytes not yet in ConsumeQueues"),
            ("consume_queues", "ConsumeQueues"),
            ("disk_full", "1 while writes are refused for lack of disk"),
            ("dispatch_failing", "1 while dispatch cannot write ConsumeQueue/index files and writes are refused"),
        ):
            yield GaugeMetricFamily(f"shoal_store_{name}", help_text, value=float(stats[name]))
        for name, help_text in (
            ("dispatch_write_failures", "Dispatch attempts failed by a write error (e.g. ENOSPC)"),
            ("commitlog_damaged_ranges", "Damaged CommitLog ranges skipped (recovery and dispatch)"),
            ("commitlog_damaged_bytes", "Bytes in damaged CommitLog ranges skipped"),
        ):
            yield CounterMetricFamily(f"shoal_store_{name}", help_text, value=float(stats[name]))
        yield GaugeMetricFamily(
            "shoal_store_disk_used_ratio",
            "Used share of the CommitLog's disk, 0..1 (-1: unknown); the broker cleans at diskMaxUsedSpaceRatio",
            value=self.disk_used_ratio(),
        )
        yield CounterMetricFamily("shoal_store_flushes", "CommitLog fdatasync calls", value=float(stats["flush_count"]))
        yield CounterMetricFamily(
            "shoal_store_flush_seconds", "Time spent in CommitLog flushes", value=float(stats["flush_seconds_total"])
        )
        hold = self.hold
        yield GaugeMetricFamily("shoal_long_poll_held", "Pull requests held now", value=float(hold.parked_count))
        yield CounterMetricFamily(
            "shoal_long_poll_wakeups", "Held pulls answered by arriving messages", value=float(hold.woken_total)
        )
        yield CounterMetricFamily(
            "shoal_long_poll_timeouts", "Held pulls answered at their timeout", value=float(hold.expired_total)
        )
        yield GaugeMetricFamily("shoal_connections", "Open client connections", value=float(self.connection_count()))
        ha = self.ha_stats()
        for name, help_text in HA_GAUGES:
            yield GaugeMetricFamily(f"shoal_ha_{name}", help_text, value=ha[name])
        for name, help_text in HA_COUNTERS:
            yield CounterMetricFamily(f"shoal_ha_{name}", help_text, value=ha[name])
        yield GaugeMetricFamily(
            "shoal_ha_slave_fallbehind_max_bytes",
            "haSlaveFallbehindMax: a slave further behind is not counted as in sync",
            value=float(self.ha_fallbehind_max_bytes()),
        )
        registered = GaugeMetricFamily(
            "shoal_namesrv_registered",
            "1 while the last registration round reached this NameServer, 0 after it failed",
            labels=["namesrv"],
        )
        for address, ok in sorted(self.namesrv_registered().items()):
            registered.add_metric([address], 1.0 if ok else 0.0)
        yield registered
        schedule = self.schedule.stats()
        yield CounterMetricFamily(
            "shoal_delay_delivered", "Delayed and timed messages delivered", value=float(schedule["delivered"])
        )
        yield CounterMetricFamily(
            "shoal_delay_skipped", "Parked messages that could not be delivered", value=float(schedule["skipped"])
        )
        yield GaugeMetricFamily(
            "shoal_delay_timer_pending",
            "Messages waiting for an arbitrary delivery time",
            value=float(schedule["timer_pending"]),
        )
        yield GaugeMetricFamily(
            "shoal_delay_levels_behind",
            "Parked delay-level messages not yet delivered",
            value=float(schedule["levels_behind"]),
        )
        transactions = self.transactions
        yield GaugeMetricFamily(
            "shoal_transactions_tracked",
            "Half messages awaiting commit or rollback",
            value=float(transactions.table.tracked_count),
        )
        yield CounterMetricFamily(
            "shoal_transaction_checks", "CHECK_TRANSACTION_STATE requests sent", value=float(transactions.checks_sent)
        )
        yield CounterMetricFamily(
            "shoal_transaction_checks_without_producer",
            "Check-back rounds that found no live producer of the group",
            value=float(transactions.checks_without_producer),
        )
        lag = GaugeMetricFamily(
            "shoal_consumer_lag", "Messages not yet consumed, by group and topic", labels=["group", "topic"]
        )
        for (group, topic), value in self.consumer_lag().items():
            lag.add_metric([group, topic], float(value))
        yield lag
        yield from _collector_families()


def _collector_families() -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
    """CPython's cyclic collector: collections and their pauses by generation (remoting/heap.py),
    and the objects frozen out of its walks at start."""
    labels = [str(generation) for generation in range(GENERATIONS)]
    for family, values in (
        (
            CounterMetricFamily(
                "shoal_gc_collections", "Garbage collections by generation (2: full)", labels=["generation"]
            ),
            COLLECTIONS.counts,
        ),
        (
            CounterMetricFamily(
                "shoal_gc_pause_seconds",
                "Time the process stood still in garbage collections, by generation",
                labels=["generation"],
            ),
            COLLECTIONS.seconds,
        ),
        (
            GaugeMetricFamily(
                "shoal_gc_longest_pause_seconds",
                "Longest garbage collection pause since start, by generation",
                labels=["generation"],
            ),
            COLLECTIONS.longest_s,
        ),
    ):
        for label, value in zip(labels, values, strict=True):
            family.add_metric([label], float(value))
        yield family
    yield GaugeMetricFamily(
        "shoal_gc_frozen_objects",
        "Objects frozen out of garbage collections once the process served (0: not frozen)",
        value=float(gc.get_freeze_count()),
    )


def _counter(
    name: str, help_text: str, labels: list[str], values: dict[str, int] | dict[tuple[str, str], int]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, help_text, labels=labels)
    for key, value in list(values.items()):
        label_values = [str(part) for part in key] if isinstance(key, tuple) else [str(key)]
        family.add_metric(label_values, float(value))
    return family


def load_metrics_token(path: str) -> str | None:
    """The bearer token in `path` (surrounding blanks dropped); None when no file is configured.
    A missing, unreadable, empty or oversized file is a one-line `ConfigError`."""
    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            data = handle.read(METRICS_TOKEN_MAX_BYTES + 1)
    except OSError as error:
        raise ConfigError(f"metricsTokenFile={path}: cannot read it: {error.strerror or error}") from None
    token = data.decode("utf-8", "replace").strip()
    if len(data) > METRICS_TOKEN_MAX_BYTES or not token or not token.isprintable() or " " in token:
        raise ConfigError(
            f"metricsTokenFile={path} is not allowed: it must hold one token of printable characters without "
            f"blanks, at most {METRICS_TOKEN_MAX_BYTES} bytes"
        )
    return token


def bearer_matches(authorization: str | None, token: str) -> bool:
    """Whether an Authorization header's value is `Bearer <token>` (scheme case-insensitive, the
    token compared in constant time)."""
    if authorization is None:
        return False
    scheme, _, given = authorization.strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


class MetricsServer:
    """GET /metrics (Prometheus text) and GET /healthz over aiohttp's HTTP server."""

    def __init__(
        self, registry: CollectorRegistry, healthy: Callable[[], tuple[bool, str]], token: str | None = None
    ) -> None:
        self.registry = registry
        self.healthy = healthy
        self.token = token
        """When set, /metrics needs `Authorization: Bearer <token>`."""
        self.unauthorized_total = 0
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=HTTP_SHUTDOWN_TIMEOUT_S)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        log.info(
            "metrics on http://%s:%d/metrics (%s)",
            host,
            self.port,
            "bearer token required" if self.token is not None else "open",
        )
        return self.port

    async def _metrics(self, request: web.Request) -> web.Response:
        if self.token is not None and not bearer_matches(request.headers.get("Authorization"), self.token):
            self.unauthorized_total += 1
            return web.Response(
                status=401,
                text="/metrics needs Authorization: Bearer <token>\n",
                headers={"WWW-Authenticate": 'Bearer realm="shoal metrics"'},
            )
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": PROMETHEUS_TEXT_CONTENT_TYPE})

    async def _healthz(self, request: web.Request) -> web.Response:
        ok, detail = self.healthy()
        return web.Response(status=200 if ok else 503, text=detail + "\n")

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
