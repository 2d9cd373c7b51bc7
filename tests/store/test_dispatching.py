"""Tests of shoal.store.dispatching: ConsumeQueues and the index built from the CommitLog alone,
through a real store on real files."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from shoal.formats.sysflag import TransactionType
from shoal.store import (
    Arrivals,
    DispatchListener,
    DispatchRequest,
    MessageStore,
    MessageToStore,
    PutStatus,
    durability,
    index_service,
)
from shoal.store import index_file as index_file_module
from tests.store.conftest import SettingsFactory, body_of, cq_files, open_store, props, put


def test_dispatcher_rebuilds_consume_queues_and_index_from_a_foreign_commitlog(
    tmp_path: Path, small_settings: SettingsFactory
) -> None:
    """Goal: a copied commitlog/ alone rebuilds identical CQs and index. Method: copy, open, compare."""
    original_settings = small_settings(tmp_path / "original")
    original = open_store(original_settings)
    for i in range(600):  # several CommitLog segments, ConsumeQueue files and index files
        topic, queue_id = f"Topic{i % 2}", (i // 2) % 2  # 4 queues of 150 messages each
        put(original, topic, queue_id, os.urandom(i % 700), KEYS=f"key{i} shared{i % 7}", TAGS=f"t{i % 5}")
    original.shutdown()
    copy_settings = small_settings(tmp_path / "copy")
    copy_settings.root_dir.mkdir()
    shutil.copytree(original_settings.commitlog_dir, copy_settings.commitlog_dir)
    copy = MessageStore(copy_settings)
    report = copy.open()
    try:
        assert report.messages_redispatched == 600
        assert cq_files(copy_settings.consume_queue_dir) == cq_files(original_settings.consume_queue_dir)
        assert _index_entries(copy_settings.index_dir) == _index_entries(original_settings.index_dir)
        assert len(cq_files(copy_settings.consume_queue_dir)) == 4 * 3  # 150 units = 3 files each
        assert len(list(copy_settings.index_dir.iterdir())) > 1
        for i in (0, 299, 599):
            found = copy.query_by_key(f"Topic{i % 2}", f"key{i}", 4)
            assert [h.queue_offset for h, _v in found] == [i // 4]
    finally:
        copy.shutdown()


def _index_entries(directory: Path) -> list[bytes]:
    """Every index file's contents, oldest first (file names hold the creation time, so differ)."""
    return [p.read_bytes() for p in sorted(directory.iterdir())]


ALLOCATION_BLOCKED_MAX_S = 1.0
"""A dispatch pass that must not wait for the disk returns well within this (it waits 20 ms once)."""


def test_dispatch_that_must_not_wait_leaves_a_slow_consume_queue_file_to_the_allocation_thread(
    tmp_path: Path, small_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: dispatch on an event loop never waits for a new ConsumeQueue file's sync; the record is
    dispatched once the file exists, and nothing is lost or doubled. Method: hold the allocation
    thread's fdatasync on an Event (the durability seam), dispatch with a file wait, release."""
    released = threading.Event()
    real_fdatasync = durability.fdatasync

    def gated_fdatasync(fd: int) -> None:
        if threading.current_thread().name.startswith("shoal-allocate-cq"):
            assert released.wait(30), "the test never released the allocation"
        real_fdatasync(fd)

    store = MessageStore(small_settings(tmp_path / "store"))
    store.open()
    store.start(background_dispatch=False)
    try:
        monkeypatch.setattr(durability, "fdatasync", gated_fdatasync)
        put(store, "SlowFile", 0, b"first")
        started = time.monotonic()
        assert store._dispatcher.dispatch_available(file_wait_s=0.02) == 0
        assert store._dispatcher.dispatch_available(file_wait_s=0.02) == 0  # no second wait either
        assert time.monotonic() - started < ALLOCATION_BLOCKED_MAX_S
        assert store.max_offset_in_queue("SlowFile", 0) == 0
        released.set()
        put(store, "SlowFile", 0, b"second")
        deadline = time.monotonic() + 10
        while store.dispatch_behind_bytes and time.monotonic() < deadline:
            store._dispatcher.dispatch_available(file_wait_s=0.02)
        assert store.max_offset_in_queue("SlowFile", 0) == 2
        got = store.get_messages("SlowFile", 0, 0, 8)
        assert [body_of(view) for view in got.messages] == [b"first", b"second"]
        got.release()
    finally:
        released.set()
        store.shutdown()


class _StoppedWallClock:
    """One wall-clock time for every store of a test, so stores written apart hold the same bytes."""

    def now_ms(self) -> int:
        return 1_790_000_000_000

    def monotonic_s(self) -> float:
        return time.monotonic()


def _dispatch_mix(store: MessageStore) -> None:
    """Messages of every kind dispatch meets: most with only their unique key (the fast path),
    some with KEYS too, transaction halves and rollbacks, four queues, tags of several codes."""
    for i in range(700):
        topic, queue_id = f"Mix{i % 2}", (i // 2) % 2
        properties = {"UNIQ_KEY": f"U{i:05d}", "TAGS": f"t{i % 3}"}
        if i % 50 == 7:
            properties["KEYS"] = f"order{i} shared"
        sysflag = 0
        if i % 97 == 11:
            sysflag = int(TransactionType.PREPARED_TYPE)
        elif i % 97 == 12:
            sysflag = int(TransactionType.ROLLBACK_TYPE)
        message = MessageToStore(topic, queue_id, os.urandom(i % 300), props(**properties), sysflag=sysflag)
        assert store.put_message(message).status is PutStatus.PUT_OK


def test_one_pass_writes_the_files_one_record_per_pass_writes(
    tmp_path: Path, small_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: a dispatch pass's fast path (units appended in runs, unique keys indexed in runs,
    listeners told once per pass) writes byte for byte what dispatching one record at a time
    writes, across ConsumeQueue and index file rolls, and tells the listeners the same messages.
    Method: the same records in two stores; one dispatches all at once, the other one by one with
    no run opened ahead of a record, so every record takes the one-record path (the reference)."""
    told: dict[str, list[list[tuple[tuple[str, int], list[DispatchRequest]]]]] = {"pass": [], "one": []}
    stores = {}

    def listener(name: str) -> DispatchListener:
        def told_once(arrivals: Arrivals) -> None:
            told[name].append([(key, list(requests)) for key, requests in arrivals.items()])

        return told_once

    for name in ("pass", "one"):
        store = MessageStore(small_settings(tmp_path / name), clock=_StoppedWallClock())
        store.open()
        store.start(background_dispatch=False)
        store.subscribe(listener(name))
        _dispatch_mix(store)
        stores[name] = store
    monkeypatch.setattr(stores["one"]._dispatcher, "_open_run", lambda *_args: None)
    try:
        while stores["pass"].dispatch_now():
            pass
        one_by_one = 0
        while stores["one"].dispatch_now(1):
            one_by_one += 1
        assert one_by_one == 700
        settings = {name: store.settings for name, store in stores.items()}
        assert cq_files(settings["pass"].consume_queue_dir) == cq_files(settings["one"].consume_queue_dir)
        assert len(cq_files(settings["pass"].consume_queue_dir)) > 4  # files rolled
        assert _index_entries(settings["pass"].index_dir) == _index_entries(settings["one"].index_dir)
        assert len(list(settings["pass"].index_dir.iterdir())) > 1
        # Once per pass (a pass covers at most one CommitLog segment), not once per message.
        assert len(told["pass"]) <= stores["pass"].segment_count < 700 // 4
        assert len(told["one"]) == 700

        def by_queue(calls: list[list[tuple[tuple[str, int], list[DispatchRequest]]]]) -> dict[object, list[object]]:
            merged: dict[object, list[object]] = {}
            for call in calls:
                for key, requests in call:
                    merged.setdefault(key, []).extend(requests)
            return merged

        assert by_queue(told["pass"]) == by_queue(told["one"])
        for name in told:
            found = stores[name].query_by_key("Mix1", "U00699", 4)
            assert [header.queue_offset for header, _view in found] == [stores[name].max_offset_in_queue("Mix1", 1) - 1]
    finally:
        for store in stores.values():
            store.shutdown()


def test_the_first_record_of_each_queue_in_a_pass_takes_the_fast_path(
    tmp_path: Path, small_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: a pass that holds one record per queue (many synchronous senders spread over queues)
    writes each through a run, not the one-record path, and the units and the index are right.
    Method: a real store; one message to each of eight queues creates them; then one more to each,
    dispatched in one pass while `_dispatch_one` is counted; then read back by offset and by key."""
    store = MessageStore(small_settings(tmp_path), clock=_StoppedWallClock())
    store.open()
    store.start(background_dispatch=False)
    try:
        for round_ in range(2):
            for queue_id in range(8):
                properties = props(UNIQ_KEY=f"U{round_}-{queue_id}", TAGS="t")
                assert store.put_message(MessageToStore("Spread", queue_id, b"x" * 100, properties)).status is (
                    PutStatus.PUT_OK
                )
            if round_ == 0:
                while store.dispatch_now():
                    pass
        dispatcher = store._dispatcher
        one_record_calls: list[int] = []
        dispatch_one = dispatcher._dispatch_one

        def counted(*args: Any) -> None:
            one_record_calls.append(1)
            dispatch_one(*args)

        monkeypatch.setattr(dispatcher, "_dispatch_one", counted)
        assert store.dispatch_now() == 8
        assert one_record_calls == []
        for queue_id in range(8):
            assert store.max_offset_in_queue("Spread", queue_id) == 2
            got = store.get_messages("Spread", queue_id, 1, 4)
            assert [body_of(view) for view in got.messages] == [b"x" * 100]
            got.release()
            found = store.query_by_key("Spread", f"U1-{queue_id}", 4)
            assert [header.queue_offset for header, _view in found] == [1]
    finally:
        store.shutdown()


def test_an_index_file_that_cannot_be_created_mid_pass_loses_no_key(
    tmp_path: Path, small_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: when a new index file cannot be created (ENOSPC) in the middle of a pass whose unique
    keys wait to be indexed in a run, dispatch stops, refuses nothing silently, and once the disk
    has room again indexes every key exactly once. Method: fail IndexFile creation twice, then
    compare with a store that never failed."""
    reference = MessageStore(small_settings(tmp_path / "reference"), clock=_StoppedWallClock())
    reference.open()
    reference.start(background_dispatch=False)
    store = MessageStore(small_settings(tmp_path / "store"), clock=_StoppedWallClock())
    store.open()
    store.start(background_dispatch=False)
    real_index_file = index_file_module.IndexFile
    failures = {"left": 0}

    def index_file(*args: object, **kwargs: object) -> object:
        if failures["left"] and kwargs.get("create"):
            failures["left"] -= 1
            raise OSError(errno.ENOSPC, "No space left on device (injected)")
        return real_index_file(*args, **kwargs)  # type: ignore[arg-type]

    try:
        _dispatch_mix(reference)
        while reference.dispatch_now():
            pass
        _dispatch_mix(store)
        store.dispatch_now(100)  # the first index file exists
        monkeypatch.setattr(index_service, "IndexFile", index_file)  # the service creates its files by this name
        failures["left"] = 2
        store.dispatch_now()
        assert store._dispatcher.failing
        assert store.dispatch_behind_bytes > 0
        while failures["left"]:
            store._dispatcher._retry_at_s = 0  # skip the backoff
            store.dispatch_now()
        store._dispatcher._retry_at_s = 0
        while store.dispatch_now():
            pass
        assert not store._dispatcher.failing
        assert store.dispatch_behind_bytes == 0
        assert _index_entries(store.settings.index_dir) == _index_entries(reference.settings.index_dir)
        assert cq_files(store.settings.consume_queue_dir) == cq_files(reference.settings.consume_queue_dir)
    finally:
        store.shutdown()
        reference.shutdown()


def test_the_loop_driver_ticks_seldom_while_idle_and_still_catches_an_unannounced_append(
    tmp_path: Path, small_settings: SettingsFactory
) -> None:
    """Goal: an idle broker's loop is not woken 200 times a second by the dispatch tick: while the
    ticks find nothing, each waits twice as long, up to DISPATCH_IDLE_TICK_MAX_S; an append nobody
    announced is still dispatched by a tick, and one announced with `dispatch_soon` is dispatched
    on the next loop turn, whatever the tick. Method: a real store driven by a real asyncio loop."""
    from shoal.store import limits

    async def scenario() -> None:
        store = MessageStore(small_settings(tmp_path / "store"))
        store.open()
        store.start(dispatch_loop=asyncio.get_running_loop())
        driver = store._loop_dispatch
        assert driver is not None
        try:
            # From 5 ms, doubling: 5+10+20+40+80 ms of ticks reach the 100 ms cap.
            await wait_for(lambda: driver.tick_s == limits.DISPATCH_IDLE_TICK_MAX_S)
            ticks: list[float] = []  # each tick's next wait, as it armed it
            original = driver._on_tick

            def counting_tick() -> None:
                original()
                ticks.append(driver.tick_s)

            driver._on_tick = counting_tick  # type: ignore[method-assign]
            await asyncio.sleep(1.0)
            # The armed tick still calls the original: at most one more than a second's 100 ms ticks.
            assert 1 <= len(ticks) <= 1.0 / limits.DISPATCH_IDLE_TICK_MAX_S + 1, ticks
            seen = len(ticks)
            assert store.append_message(MessageToStore("Quiet", 0, b"unannounced")).ok
            await wait_for(lambda: store.max_offset_in_queue("Quiet", 0) == 1)
            assert limits.DISPATCH_TICK_S in ticks[seen:]  # the tick that found work armed a fast one
            await wait_for(lambda: driver.tick_s == limits.DISPATCH_IDLE_TICK_MAX_S)
            assert store.append_message(MessageToStore("Quiet", 0, b"announced")).ok
            store.dispatch_soon()
            for _ in range(3):  # a few loop turns, far less than a tick of 100 ms
                await asyncio.sleep(0)
            assert store.max_offset_in_queue("Quiet", 0) == 2
        finally:
            await store.shutdown_from_loop()

    asyncio.run(scenario())


async def wait_for(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)
