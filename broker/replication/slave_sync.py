"""Metadata follows the master (RocketMQ's SlaveSynchronize, spec §9.1): every
`slaveSyncInterval` (10 s; first after 3 s) a slave copies, over the remoting protocol,

* GET_ALL_TOPIC_CONFIG: the topic table, replaced when its dataVersion differs;
* GET_ALL_CONSUMER_OFFSET: consumer offsets (a slave never commits offsets itself);
* GET_ALL_DELAY_OFFSET: delayOffset.json, written verbatim (when the master has one);
* GET_ALL_SUBSCRIPTIONGROUP_CONFIG: subscription groups, replaced when the dataVersion differs.

Each copy is written to the broker's own file with the safe-write procedure and loaded into a
fresh table, which then replaces the broker's: a table is never half-updated, and a body that
does not parse leaves the previous table in place.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shoal.broker.replication import limits
from shoal.formats.store_layout import DELAY_OFFSET_FILE_NAME
from shoal.protocol import RequestCode, ResponseCode
from shoal.remoting import RemotingClient, RemotingError
from shoal.store.json_files import MetadataFormatError, parse_fastjson, write_json_file_safely
from shoal.store.metadata import ConsumerOffsetTable, DataVersion, SubscriptionGroupTable, TopicConfigTable

if TYPE_CHECKING:
    from shoal.broker.group_manager import SubscriptionGroupManager
    from shoal.broker.topic_manager import TopicManager

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _data_version(document: Any) -> tuple[int, int] | None:
    if not isinstance(document, dict) or "dataVersion" not in document:
        return None
    version = DataVersion.from_json(document["dataVersion"])
    return version.counter, version.timestamp_ms


class MetadataSync:
    def __init__(
        self,
        *,
        topics: TopicManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetTable,
        config_dir: Path,
        client: RemotingClient,
        interval_s: float,
        master_address: Callable[[], str | None],
    ) -> None:
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.config_dir = config_dir
        self.client = client
        self.interval_s = interval_s
        self.master_address = master_address
        self.synced_total = 0
        self.last_sync_ms = 0
        self._task: asyncio.Task[None] | None = None
        self._last_failure = ""

    def start(self) -> None:
        assert self._task is None
        self._task = asyncio.get_running_loop().create_task(self._run(), name="slave-metadata-sync")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        await asyncio.sleep(min(limits.METADATA_SYNC_FIRST_DELAY_S, self.interval_s))
        while True:
            try:
                await self.sync_once()
            except (RemotingError, MetadataFormatError, OSError, ValueError) as error:
                if str(error) != self._last_failure:
                    log.warning("metadata sync from the master failed: %s", error)
                self._last_failure = str(error)
            await asyncio.sleep(self.interval_s)

    async def sync_once(self) -> bool:
        """One round; False when the master's address is not known yet."""
        address = self.master_address()
        if not address:
            return False
        topic_manager, group_manager, config_dir = self.topics, self.groups, self.config_dir
        topics = await self._fetch(address, RequestCode.GET_ALL_TOPIC_CONFIG)
        if topics is not None and self._version_differs(topics, topic_manager.table.data_version):
            table = TopicConfigTable(topic_manager.table.path, _now_ms)
            if _install(table, topics):
                topic_manager.table = table
                log.info("topic table copied from the master (%d topics)", len(table.all()))
        offsets = await self._fetch(address, RequestCode.GET_ALL_CONSUMER_OFFSET)
        if offsets is not None and offsets != self.offsets.encode():
            _merge_offsets(self.offsets, offsets)
        delay = await self._fetch(address, RequestCode.GET_ALL_DELAY_OFFSET)
        if delay is not None:
            _write(config_dir / DELAY_OFFSET_FILE_NAME, delay)
        groups = await self._fetch(address, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        if groups is not None and self._version_differs(groups, group_manager.table.data_version):
            group_table = SubscriptionGroupTable(group_manager.table.path, _now_ms)
            if _install(group_table, groups):
                group_manager.table = group_table
        self.synced_total += 1
        self.last_sync_ms = _now_ms()
        self._last_failure = ""
        return True

    async def _fetch(self, address: str, code: int) -> str | None:
        """The body as text; None when the master has nothing of the kind (or does not know the code)."""
        response = await self.client.invoke(address, code, timeout_s=limits.METADATA_REQUEST_TIMEOUT_S)
        if response.code != ResponseCode.SUCCESS or not response.body:
            if response.code not in (
                ResponseCode.SUCCESS,
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                ResponseCode.SYSTEM_ERROR,
            ):
                log.warning("master answered %d to request code %d: %s", response.code, code, response.remark)
            return None
        return bytes(response.body).decode("utf-8")

    @staticmethod
    def _version_differs(text: str, current: DataVersion) -> bool:
        return _data_version(parse_fastjson(text)) != (current.counter, current.timestamp_ms)


def _write(path: Path, text: str) -> None:
    parse_fastjson(text)  # never write a body that is not JSON over a good file
    write_json_file_safely(path, text)


def _merge_offsets(table: ConsumerOffsetTable, text: str) -> None:
    """Put the master's offsets into our table in place (RocketMQ's putAll): other parts of the
    broker (transactions) hold this table, so it is never replaced."""
    document = parse_fastjson(text)
    entries = document.get("offsetTable") if isinstance(document, dict) else None
    if not isinstance(entries, dict):
        raise ValueError("the master's consumer offsets have no offsetTable")
    for key, queues in entries.items():
        topic, _, group = str(key).partition("@")
        if not group or not isinstance(queues, dict):
            continue
        for queue_id, offset in queues.items():
            with contextlib.suppress(TypeError, ValueError):
                table.commit(group, topic, int(queue_id), int(offset))
    table.persist()


def _install(table: TopicConfigTable | SubscriptionGroupTable, text: str) -> bool:
    """Write the master's document to the table's file and load it; False (old table kept) when unusable."""
    _write(table.path, text)
    if not table.load():
        log.warning("the master's copy of %s could not be loaded; keeping ours", table.path.name)
        return False
    return True
