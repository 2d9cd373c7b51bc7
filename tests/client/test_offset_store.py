"""Offset stores: the in-memory rules and the broadcasting consumer's local JSON file."""

from __future__ import annotations

import asyncio
from pathlib import Path

from shoal.client.offset_store import (
    LocalFileOffsetStore,
    MemoryOffsets,
    decode_offset_table,
    default_local_offset_path,
    encode_offset_table,
)
from shoal.protocol import MessageQueue

MQ0 = MessageQueue("T", "broker-a", 0)
MQ1 = MessageQueue("T", "broker-a", 1)


def test_increase_only_ignores_lower_offsets() -> None:
    """Goal: late consume results never move an offset back. Method: update 10, then 5."""
    offsets = MemoryOffsets()
    offsets.update(MQ0, 10, increase_only=True)
    offsets.update(MQ0, 5, increase_only=True)
    assert offsets.read_memory(MQ0) == 10
    offsets.update(MQ0, 5, increase_only=False)
    assert offsets.read_memory(MQ0) == 5
    offsets.update(MQ0, -1, increase_only=False)  # "nothing cached" marker: ignored
    assert offsets.read_memory(MQ0) == 5
    offsets.remove(MQ0)
    assert offsets.read_memory(MQ0) is None


def test_offset_file_uses_fastjson_object_keys() -> None:
    """Goal: Java's LocalFileOffsetStore format (gotcha 9). Method: encode, check text, decode."""
    text = encode_offset_table({MQ1: 7, MQ0: 3})
    assert text == (
        '{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:3,'
        '{"brokerName":"broker-a","queueId":1,"topic":"T"}:7}}'
    )
    assert decode_offset_table(text) == {MQ0: 3, MQ1: 7}


def test_local_store_persists_loads_and_falls_back_to_the_backup(tmp_path: Path) -> None:
    """Goal: offsets survive a restart, a lost file is replaced by `.bak`. Method: persist twice, delete."""
    path = tmp_path / "g" / "offsets.json"

    async def run() -> None:
        store = LocalFileOffsetStore(path)
        await store.load()
        assert await store.fetch(MQ0) is None
        store.update(MQ0, 4, increase_only=True)
        await store.persist_all([MQ0])
        store.update(MQ0, 9, increase_only=True)
        await store.persist_all([MQ0])
        again = LocalFileOffsetStore(path)
        await again.load()
        assert again.read_memory(MQ0) == 9
        path.unlink()
        fallback = LocalFileOffsetStore(path)
        await fallback.load()
        assert fallback.read_memory(MQ0) == 4  # the previous version, kept as offsets.json.bak

    asyncio.run(run())


def test_unreadable_offset_file_counts_as_empty(tmp_path: Path) -> None:
    """Goal: a corrupt file does not stop the consumer. Method: garbage in the file."""
    path = tmp_path / "offsets.json"
    path.write_text("{not json")

    async def run() -> None:
        store = LocalFileOffsetStore(path)
        await store.load()
        assert store.read_memory(MQ0) is None

    asyncio.run(run())


def test_default_path_is_javas() -> None:
    """Goal: ~/.rocketmq_offsets/<ip>@DEFAULT/<group>/offsets.json. Method: build it."""
    path = default_local_offset_path("10.0.0.1", "g")
    assert path.parts[-4:] == (".rocketmq_offsets", "10.0.0.1@DEFAULT", "g", "offsets.json")
