"""Consumed offsets of a consumer group: on the broker (clustering) or in a local file (broadcasting).

An offset is the next queue offset to consume. `update` changes memory only; `persist` /
`persist_all` write it out (UPDATE_CONSUMER_OFFSET, or the JSON file); `fetch` reads what was
written (QUERY_CONSUMER_OFFSET, or the file) and returns None when there is nothing for the
queue, so the consumer falls back to its consume-from-where rule.

The local file has the Java `LocalFileOffsetStore` format, with fastjson object keys:
`{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:42}}`, written to a temporary file
and renamed over the old one, which is kept as `<file>.bak`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from shoal.client.broker_api import BrokerApi
from shoal.client.errors import MQBrokerError, NoRouteError, RemotingError
from shoal.client.route import RouteTable
from shoal.formats.json_compat import JsonKey, JsonValue, dumps_fastjson
from shoal.protocol import MessageQueue
from shoal.protocol.errors import ProtocolError
from shoal.protocol.json_compat import ObjectReader, coerce_int, loads

log = logging.getLogger(__name__)


class OffsetStore(Protocol):
    """Where a consumer keeps its offsets."""

    async def load(self) -> None: ...

    def read_memory(self, mq: MessageQueue) -> int | None: ...

    async def fetch(self, mq: MessageQueue) -> int | None: ...

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool) -> None: ...

    async def persist(self, mq: MessageQueue) -> None: ...

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None: ...

    def remove(self, mq: MessageQueue) -> None: ...


class MemoryOffsets:
    """The in-memory table both stores share."""

    def __init__(self) -> None:
        self.table: dict[MessageQueue, int] = {}

    def read_memory(self, mq: MessageQueue) -> int | None:
        return self.table.get(mq)

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool) -> None:
        """Set the offset; with `increase_only` a lower value is ignored (late consume results)."""
        if offset < 0:
            return
        current = self.table.get(mq)
        if current is None or not increase_only or offset > current:
            self.table[mq] = offset

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)


class RemoteOffsetStore(MemoryOffsets):
    """`RemoteBrokerOffsetStore`: offsets kept by the master broker of each queue."""

    def __init__(self, group: str, routes: RouteTable, api: BrokerApi) -> None:
        super().__init__()
        self.group = group
        self._routes = routes
        self._api = api
        self._persisted: dict[MessageQueue, int] = {}

    async def load(self) -> None:
        return None

    async def fetch(self, mq: MessageQueue) -> int | None:
        """QUERY_CONSUMER_OFFSET; None when the broker has no offset (code 22). Raises on errors."""
        offset = await self._api.query_consumer_offset(await self._routes.master_address_of(mq), self.group, mq)
        if offset is not None:
            self.update(mq, offset, increase_only=False)
            self._persisted[mq] = offset
        return offset

    async def persist(self, mq: MessageQueue) -> None:
        offset = self.table.get(mq)
        if offset is None:
            return
        await self._api.update_consumer_offset(await self._routes.master_address_of(mq), self.group, mq, offset)
        self._persisted[mq] = offset

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """UPDATE_CONSUMER_OFFSET for every queue with an offset; failures are logged."""
        queues = [mq for mq in mqs if mq in self.table]
        results = await asyncio.gather(*(self.persist(mq) for mq in queues), return_exceptions=True)
        for mq, result in zip(queues, results, strict=True):
            if isinstance(result, RemotingError | MQBrokerError | NoRouteError):
                log.warning("persisting the offset of %s failed: %s", mq, result)
            elif isinstance(result, BaseException):
                raise result

    def remove(self, mq: MessageQueue) -> None:
        super().remove(mq)
        self._persisted.pop(mq, None)


def default_local_offset_path(client_ip: str, group: str) -> Path:
    """Java's default: ~/.rocketmq_offsets/<ip>@DEFAULT/<group>/offsets.json."""
    return Path.home() / ".rocketmq_offsets" / f"{client_ip}@DEFAULT" / group / "offsets.json"


def encode_offset_table(table: dict[MessageQueue, int]) -> str:
    """OffsetSerializeWrapper JSON with fastjson object keys (what Java's store reads)."""
    offsets: dict[JsonKey, JsonValue] = {mq.to_object_key(): offset for mq, offset in sorted(table.items())}
    return dumps_fastjson({"offsetTable": offsets})


def decode_offset_table(text: str | bytes) -> dict[MessageQueue, int]:
    """The inverse of `encode_offset_table`; ProtocolError when it is not such a document."""
    reader = ObjectReader(loads(text), "offsets")
    table: dict[MessageQueue, int] = {}
    for key, value in reader.mapping("offsetTable").items():
        mq = MessageQueue.from_map_key(key, "offsets.offsetTable key")
        table[mq] = coerce_int(value, f"offsets.offsetTable[{mq}]")
    return table


class LocalFileOffsetStore(MemoryOffsets):
    """`LocalFileOffsetStore`: a broadcasting consumer's own offsets, in a JSON file."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def _read_file(self) -> dict[MessageQueue, int]:
        for candidate in (self.path, self.path.with_name(self.path.name + ".bak")):
            try:
                return decode_offset_table(candidate.read_bytes())
            except FileNotFoundError:
                continue
            except (OSError, ProtocolError) as error:
                log.warning("cannot read offsets from %s: %s", candidate, error)
        return {}

    async def load(self) -> None:
        self.table.update(await asyncio.to_thread(self._read_file))

    async def fetch(self, mq: MessageQueue) -> int | None:
        offset = (await asyncio.to_thread(self._read_file)).get(mq)
        if offset is not None:
            self.update(mq, offset, increase_only=False)
        return offset

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_all([mq])

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Write the whole table (every queue this consumer knows) to the file."""
        del mqs  # a broadcasting consumer owns all its queues: the file holds the whole table
        text = encode_offset_table(dict(self.table))
        await asyncio.to_thread(self._write_file, text)

    def _write_file(self, text: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(self.path.name + ".tmp")
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if self.path.exists():
            shutil.copyfile(self.path, self.path.with_name(self.path.name + ".bak"))
        os.replace(temporary, self.path)
