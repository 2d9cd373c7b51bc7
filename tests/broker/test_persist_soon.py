"""A heartbeat of a new consumer group is answered before the group and its retry topic are written
(shoal.broker.persist_soon): a slow answer loses the Java push consumer's heartbeat race and stalls
its pulls for a second (SUBSCRIPTION_NOT_LATEST)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any, cast

import pytest

from shoal.broker.client_manager import ConsumerManager, ProducerManager, RebalanceLockManager
from shoal.broker.config import BrokerConfig
from shoal.broker.group_manager import SubscriptionGroupManager
from shoal.broker.persist_soon import PersistSoon
from shoal.broker.processors.consumer import ConsumerProcessors
from shoal.broker.topic_manager import TopicManager
from shoal.protocol import RequestCode, ResponseCode
from shoal.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from shoal.protocol.command import make_request
from shoal.store import durability
from shoal.store.metadata import SubscriptionGroupTable, TopicConfigTable

SLOW_FSYNC_S = 0.05


def _tables(config_dir: Path) -> tuple[TopicManager, SubscriptionGroupManager]:
    topics = TopicManager(TopicConfigTable(config_dir / "topics.json", lambda: 0), BrokerConfig(), lambda: None)
    topics.table.load()
    groups = SubscriptionGroupManager(
        SubscriptionGroupTable(config_dir / "subscriptionGroup.json", lambda: 0), BrokerConfig()
    )
    groups.table.load()
    return topics, groups


def _processors(topics: TopicManager, groups: SubscriptionGroupManager) -> ConsumerProcessors:
    unused: Any = None  # what a heartbeat never touches
    return ConsumerProcessors(
        config=BrokerConfig(),
        topics=topics,
        groups=groups,
        offsets=unused,
        consumers=ConsumerManager(lambda info: None, 120.0),
        producers=ProducerManager(120.0),
        locks=RebalanceLockManager(),
        store=unused,
        schedule=unused,
        on_append=lambda: None,
    )


def _heartbeat(groups: tuple[str, ...]) -> Any:
    consumers = tuple(
        ConsumerData(group, subscription_data_set=(SubscriptionData("T", sub_version=1),)) for group in groups
    )
    body = HeartbeatData("127.0.0.1@persist-soon", (), consumers).to_json()
    return make_request(RequestCode.HEART_BEAT, opaque=1, body=body)


def test_new_groups_are_written_after_the_heartbeat_is_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: a heartbeat creating groups and their %RETRY% topics answers without waiting on the
    disk, and both files hold them once the writes (in a thread) are done, each written once. Method: fsync made
    to take 50 ms and counted; one heartbeat naming three new groups; the files reloaded."""
    fsyncs: list[int] = []

    def slow_fsync(descriptor: int) -> None:
        fsyncs.append(descriptor)
        time.sleep(SLOW_FSYNC_S)

    topics, groups = _tables(tmp_path)
    monkeypatch.setattr(durability, "fsync", slow_fsync)
    processors = _processors(topics, groups)
    names = ("CID_a", "CID_b", "CID_c")
    writes: list[str] = []
    for manager, name in ((topics, "topics"), (groups, "groups")):
        table = manager.table
        persist = table.persist
        monkeypatch.setattr(table, "persist", lambda persist=persist, name=name: (writes.append(name), persist()))  # type: ignore[func-returns-value]

    async def run() -> tuple[float, int]:
        started = time.monotonic()
        response = processors.heartbeat(cast(Any, object()), _heartbeat(names))
        took = time.monotonic() - started
        assert response.code == ResponseCode.SUCCESS
        fsyncs_when_answered = len(fsyncs)
        assert topics.persist_soon.pending and groups.persist_soon.pending
        await topics.persist_soon.wait()
        await groups.persist_soon.wait()
        return took, fsyncs_when_answered

    took, fsyncs_when_answered = asyncio.run(run())
    assert fsyncs_when_answered == 0
    assert took < SLOW_FSYNC_S, took
    assert sorted(writes) == ["groups", "topics"]
    reloaded_topics, reloaded_groups = _tables(tmp_path)
    for name in names:
        assert reloaded_groups.find(name) is not None, name
        assert reloaded_topics.get(f"%RETRY%{name}") is not None, name


def test_a_known_group_writes_nothing(tmp_path: Path) -> None:
    """Goal: the steady heartbeat of an existing group schedules no write. Method: two heartbeats."""
    topics, groups = _tables(tmp_path)
    processors = _processors(topics, groups)

    async def run() -> bool:
        processors.heartbeat(cast(Any, object()), _heartbeat(("CID_a",)))
        await topics.persist_soon.wait()
        await groups.persist_soon.wait()
        processors.heartbeat(cast(Any, object()), _heartbeat(("CID_a",)))
        return topics.persist_soon.pending or groups.persist_soon.pending

    assert asyncio.run(run()) is False


def test_persist_soon_coalesces_on_a_loop_and_writes_at_once_outside_one() -> None:
    """Goal: requests before a write starts share it, and it runs off the loop's thread; without a
    running loop the write happens in the call. Method: a counting persist that notes its thread,
    requested three times, then once outside."""
    threads: list[int] = []
    soon = PersistSoon(lambda: threads.append(threading.get_ident()), "counted")

    async def run() -> int:
        soon()
        soon()
        soon()
        before = len(threads)
        await soon.wait()
        return before

    assert asyncio.run(run()) == 0
    assert len(threads) == 1 and threads[0] != threading.get_ident()
    soon()
    assert len(threads) == 2 and threads[1] == threading.get_ident() and not soon.pending


def test_a_request_during_a_write_gets_a_write_of_its_own() -> None:
    """Goal: a change made while a write runs is not lost in it (that write may have read the table
    before the change). Method: a persist that takes 50 ms and copies a list; an item added during
    the first write is in the second."""
    items: list[str] = ["first"]
    written: list[list[str]] = []
    started = threading.Event()

    def persist() -> None:
        snapshot = list(items)
        started.set()
        time.sleep(SLOW_FSYNC_S)
        written.append(snapshot)

    soon = PersistSoon(persist, "slow.json")

    async def run() -> None:
        soon()
        await asyncio.to_thread(started.wait)
        items.append("second")
        soon()
        await soon.wait()

    asyncio.run(run())
    assert written == [["first"], ["first", "second"]]


def test_a_failed_write_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    """Goal: an OSError of a deferred write is logged and a later request writes again. Method: a
    persist failing once."""
    attempts: list[int] = []

    def persist() -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("disk full")

    soon = PersistSoon(persist, "failing.json")

    async def run() -> None:
        soon()
        await soon.wait()
        soon()
        await soon.wait()

    asyncio.run(run())
    assert len(attempts) == 2
    assert "persisting failing.json failed" in caplog.text
