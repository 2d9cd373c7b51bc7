"""Broker-level administration (mqadmin clusterList, brokerStatus, getBrokerConfig,
updateBrokerConfig, statsAll, cleanExpiredCQ; DefaultMQAdminExt.deleteExpiredCommitLog):
GET_BROKER_RUNTIME_INFO (28), GET_BROKER_CONFIG (26), UPDATE_BROKER_CONFIG (25),
VIEW_BROKER_STATS_DATA (315), CLEAN_EXPIRED_CONSUMEQUEUE (306), DELETE_EXPIRED_COMMITLOG (329).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable
from importlib import metadata
from typing import TYPE_CHECKING

from shoal.broker.broker_stats import BrokerStats
from shoal.broker.config_update import (
    DataVersion,
    apply_in_place,
    apply_store_in_place,
    checked_update,
    config_properties,
    persist_changes,
    properties_text,
)
from shoal.broker.runtime_info import runtime_info_table, store_figures
from shoal.formats.topics import SCHEDULE_TOPIC, TIMER_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from shoal.protocol import RemotingCommand, ResponseCode, make_response
from shoal.protocol.headers import GetBrokerConfigResponseHeader, ViewBrokerStatsDataRequestHeader
from shoal.remoting.settings import ConfigError, parse_properties

if TYPE_CHECKING:
    from collections.abc import Callable

    from shoal.broker.config import BrokerSettings
    from shoal.remoting.server import ServerConnection
    from shoal.store import MessageStore

log = logging.getLogger(__name__)

KEEP_CONSUME_QUEUES_OF = frozenset({SCHEDULE_TOPIC, TIMER_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC})
"""Topics whose queue offsets a broker service keeps on its own (delay levels, the timer,
transactions): removing their queues would restart offsets under that service. RocketMQ 4.9.7
spares SCHEDULE_TOPIC_XXXX only; it has no timer topic."""


def _shoal_version() -> str:
    try:
        return f"Shoal {metadata.version('shoal')}"
    except metadata.PackageNotFoundError:
        return "Shoal"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class BrokerAdminProcessors:
    """Given the broker's settings (shared, live), the store, the sampled stats, and hooks:
    `extra_runtime` (role and replication fields), `schedule_offsets` (delay level -> delivered
    offset) and `broker_permission_changed` (re-register with the NameServers now)."""

    def __init__(
        self,
        *,
        settings: BrokerSettings,
        store: MessageStore,
        stats: BrokerStats,
        extra_runtime: Callable[[], dict[str, str]],
        schedule_offsets: Callable[[], dict[int, int]],
        broker_permission_changed: Callable[[], Awaitable[None]],
    ) -> None:
        self.settings = settings
        self.store = store
        self.stats = stats
        self.extra_runtime = extra_runtime
        self.schedule_offsets = schedule_offsets
        self.broker_permission_changed = broker_permission_changed
        self.data_version = DataVersion(_now_ms())
        self.shoal_version = _shoal_version()
        self._update_lock = asyncio.Lock()

    def runtime_info(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_RUNTIME_INFO: `{"table":{...}}` of strings, RocketMQ's KVTable."""
        table = runtime_info_table(
            self.stats,
            store_figures(self.store, self.schedule_offsets()),
            now_ms=_now_ms(),
            shoal_version=self.shoal_version,
            extra=self.extra_runtime(),
        )
        return make_response(request, ResponseCode.SUCCESS, body=json.dumps({"table": table}).encode("utf-8"))

    def broker_config(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CONFIG: every setting as `key=value` lines, the DataVersion in the header."""
        text = properties_text(config_properties(self.settings.broker, self.store.settings))
        header = GetBrokerConfigResponseHeader(version=self.data_version.to_json())
        return make_response(
            request, ResponseCode.SUCCESS, ext_fields=header.to_ext_fields(), body=text.encode("utf-8")
        )

    def update_broker_config(
        self, connection: ServerConnection, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        """UPDATE_BROKER_CONFIG: apply hot keys at once, refuse the request if any key is not."""
        if request.body is None:
            return make_response(request, ResponseCode.SUCCESS)  # RocketMQ: nothing to do
        try:
            changes = parse_properties(bytes(request.body).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"string2Properties error: {error}")
        return self._update(request, changes, connection.address)

    async def _update(self, request: RemotingCommand, changes: dict[str, str], client: str) -> RemotingCommand:
        async with self._update_lock:  # RocketMQ's `synchronized`: one update at a time
            live_broker, live_store = self.settings.broker, self.store.settings
            try:
                broker, store = checked_update(live_broker, live_store, changes)
            except ConfigError as error:
                log.warning("updateBrokerConfig from %s refused: %s", client, error)
                return make_response(request, ResponseCode.SYSTEM_ERROR, f"updateBrokerConfig refused: {error}")
            changed = apply_in_place(live_broker, broker) + apply_store_in_place(live_store, store)
            self.data_version = self.data_version.next(_now_ms())
            log.info("updateBrokerConfig from %s: %s (fields changed: %s)", client, changes, changed or "none")
            path = self.settings.config_path
            if path is None:
                log.warning("updateBrokerConfig: the broker was started without -c; the change is not persisted")
            else:
                try:
                    await asyncio.to_thread(persist_changes, path, changes)
                except OSError as error:
                    return make_response(
                        request,
                        ResponseCode.SYSTEM_ERROR,
                        f"applied, but writing {path} failed ({error}); the change is lost at restart",
                    )
            if "brokerPermission" in changes:
                await self.broker_permission_changed()
            return make_response(request, ResponseCode.SUCCESS)

    def view_stats(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """VIEW_BROKER_STATS_DATA: one item's minute, hour and day windows (BrokerStatsData)."""
        header = ViewBrokerStatsDataRequestHeader.from_ext_fields(request.ext_fields)
        item = self.stats.item(header.stats_name, header.stats_key)
        if item is None:
            return make_response(
                request, ResponseCode.SYSTEM_ERROR, f"The stats <{header.stats_name}> <{header.stats_key}> not exist"
            )
        minute, hour, day = item.windows()
        body = {
            name: {"avgpt": window.avgpt, "sum": window.sum, "tps": window.tps}
            for name, window in (("statsDay", day), ("statsHour", hour), ("statsMinute", minute))
        }
        return make_response(request, ResponseCode.SUCCESS, body=json.dumps(body).encode("utf-8"))

    async def clean_expired_consume_queues(
        self, connection: ServerConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """CLEAN_EXPIRED_CONSUMEQUEUE: off the event loop, since it waits for a cleaning round."""
        removed = await asyncio.to_thread(self.store.clean_expired_consume_queues, KEEP_CONSUME_QUEUES_OF)
        log.warning("cleanExpiredConsumeQueue by %s: %d ConsumeQueues removed", connection.address, len(removed))
        return make_response(request, ResponseCode.SUCCESS)

    def delete_expired_commitlog(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """DELETE_EXPIRED_COMMITLOG (AdminBrokerProcessor.deleteExpiredCommitLog): the store's next
        cleaning rounds delete CommitLog segments past fileReservedTime whatever the deleteWhen hour.
        SUCCESS at once, as RocketMQ: the cleaner does the work."""
        log.warning("deleteExpiredCommitLog by %s", connection.address)
        self.store.request_expired_file_deletion()
        return make_response(request, ResponseCode.SUCCESS)
