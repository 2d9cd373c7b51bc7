"""Tests of shoal.store.flushing: group commit under SYNC_FLUSH (WAIT=false, syncFlushTimeout, many
concurrent puts), the periodic flush of ASYNC_FLUSH and the commit service of the transient store
pool, each through a real store on real files."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from shoal.store import (
    CommitLogSettings,
    FlushDiskType,
    GetMessageStatus,
    MessageStore,
    MessageToStore,
    PutResult,
    PutStatus,
)
from tests.store.conftest import SettingsFactory, WaitUntil, body_of, open_store, process_write_bytes, put, settle


@pytest.fixture
def sync_store(tmp_path: Path, small_settings: SettingsFactory) -> Iterator[MessageStore]:
    """An open SYNC_FLUSH store on small segments."""
    store = open_store(small_settings(tmp_path / "sync", flush_disk_type=FlushDiskType.SYNC_FLUSH))
    yield store
    store.shutdown()


def test_sync_flush_put_returns_only_once_its_record_is_flushed(sync_store: MessageStore) -> None:
    """Goal: a SYNC_FLUSH put returns once flushed past its record. Method: 4 threads check every put."""
    failures: list[str] = []

    def producer(thread_index: int) -> None:
        for i in range(40):
            result = sync_store.put_message(MessageToStore("Sync", thread_index, os.urandom(200 + i)))
            if result.status is not PutStatus.PUT_OK or result.append is None:
                failures.append(f"status {result.status}")
                continue
            flushed = sync_store._flusher.flushed_offset
            if flushed < result.append.next_offset:
                failures.append(f"flushed {flushed} < record end {result.append.next_offset}")

    threads = [threading.Thread(target=producer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []


@pytest.fixture
def gated_flush(sync_store: MessageStore, monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Hold every CommitLog flush of `sync_store` until the returned event is set."""
    gate = threading.Event()
    queue = sync_store._commitlog.queue
    original = queue.flush

    def held_flush(least_pages: int) -> bool:
        gate.wait(10)
        return original(least_pages)

    monkeypatch.setattr(queue, "flush", held_flush)
    yield gate
    gate.set()


def test_sync_flush_with_wait_false_returns_before_the_flush(
    sync_store: MessageStore, gated_flush: threading.Event, wait_until: WaitUntil
) -> None:
    """Goal: SYNC_FLUSH with WAIT=false answers before fdatasync. Method: hold the flush, put, release."""
    started = time.monotonic()
    result = sync_store.put_message(MessageToStore("NoWait", 0, b"quick", wait_store_msg_ok=False))
    assert result.status is PutStatus.PUT_OK and result.append is not None
    assert time.monotonic() - started < 5
    assert sync_store._flusher.flushed_offset < result.append.next_offset
    gated_flush.set()
    end = result.append.next_offset
    wait_until(lambda: sync_store._flusher.flushed_offset >= end, 5)


def test_sync_flush_answers_flush_disk_timeout_when_the_disk_is_slow(
    tmp_path: Path, small_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch, wait_until: WaitUntil
) -> None:
    """Goal: a flush slower than syncFlushTimeout is FLUSH_DISK_TIMEOUT, yet stored. Method: hold the flush."""
    settings = small_settings(tmp_path / "store", flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout_ms=200)
    store = open_store(settings)
    gate = threading.Event()
    original = store._commitlog.queue.flush

    def held_flush(least_pages: int) -> bool:
        gate.wait(10)
        return original(least_pages)

    monkeypatch.setattr(store._commitlog.queue, "flush", held_flush)
    try:
        result = store.put_message(MessageToStore("Slow", 0, b"late"))
        assert result.status is PutStatus.FLUSH_DISK_TIMEOUT
        assert result.status.stored and result.append is not None
        gate.set()
        end = result.append.next_offset
        wait_until(lambda: store._flusher.flushed_offset >= end, 5)
        settle(store)
        got = store.get_messages("Slow", 0, 0, 1)
        assert got.status is GetMessageStatus.FOUND
        got.release()
    finally:
        gate.set()
        store.shutdown()


def test_put_message_async_group_commits_many_concurrent_puts(sync_store: MessageStore) -> None:
    """Goal: 400 concurrent asyncio puts are PUT_OK after few fdatasyncs. Method: gather put_message_async."""
    count = 400
    flushes_before = sync_store._flusher.flush_count

    async def main() -> list[PutResult]:
        return await asyncio.gather(
            *(sync_store.put_message_async(MessageToStore("Async", i % 4, b"a%d" % i)) for i in range(count))
        )

    results = asyncio.run(main())
    assert all(r.status is PutStatus.PUT_OK for r in results)
    ends = [r.append.next_offset for r in results if r.append is not None]
    assert len(ends) == count
    assert sync_store._flusher.flushed_offset >= max(ends)
    flushes = sync_store._flusher.flush_count - flushes_before
    assert 1 <= flushes <= count // 10
    settle(sync_store)
    assert sum(sync_store.max_offset_in_queue("Async", q) for q in range(4)) == count


def test_store_keeps_accepting_writes_after_an_asyncio_loop_that_used_it_closes(
    sync_store: MessageStore,
) -> None:
    """Goal: puts work after an asyncio loop that awaited puts is closed. Method: asyncio.run twice."""

    async def one() -> PutResult:
        return await sync_store.put_message_async(MessageToStore("Loops", 0, b"first"))

    assert asyncio.run(one()).status is PutStatus.PUT_OK
    for i in range(3):
        result = sync_store.put_message(MessageToStore("Loops", 0, b"after-%d" % i))
        assert result.status is PutStatus.PUT_OK, result.remark
    assert asyncio.run(one()).status is PutStatus.PUT_OK
    assert sync_store.flush_failure is None


def test_async_flush_service_flushes_within_its_interval(
    tmp_path: Path, small_settings: SettingsFactory, wait_until: WaitUntil
) -> None:
    """Goal: ASYNC_FLUSH data is flushed by the service in its interval. Method: 20 ms interval, wait."""
    settings = small_settings(tmp_path / "store", flush_interval_ms=20, flush_least_pages=0)
    store = open_store(settings)
    try:
        flush_count = store._flusher.flush_count
        result = put(store, "AsyncFlush", 0, b"z" * 100)
        started = time.monotonic()
        wait_until(lambda: store._flusher.flushed_offset >= result.append.next_offset, 2)  # type: ignore[union-attr]
        assert time.monotonic() - started < 2
        assert store._flusher.flush_count > flush_count
        assert store._checkpoint.physic_msg_timestamp == result.append.store_timestamp  # type: ignore[union-attr]
    finally:
        store.shutdown()


def test_transient_store_pool_data_is_readable_after_commit_and_survives_reopen(
    tmp_path: Path, small_settings: SettingsFactory, wait_until: WaitUntil, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: pool data is readable only after commit, survives reopen. Method: hold commit, 8 segments."""
    settings = small_settings(
        tmp_path / "store", transient_store_pool_enable=True, commit_interval_ms=10, commit_least_pages=0
    )
    store = open_store(settings)
    gate = threading.Event()
    original_commit = store._commitlog.queue.commit

    def held_commit(least_pages: int) -> bool:
        gate.wait(10)
        return original_commit(least_pages)

    monkeypatch.setattr(store._commitlog.queue, "commit", held_commit)
    bodies = [os.urandom(900 + i) for i in range(8 * 64)]  # ~8 segments; the pool holds 5
    try:
        assert store._pool is not None and store._committer is not None
        first = put(store, "Pool", 0, bodies[0], KEYS="pool0")
        assert store.max_offset == 0  # written to the buffer, not yet committed
        assert store.message_at(first.append.wrote_offset) is None  # type: ignore[union-attr]
        gate.set()
        wait_until(lambda: store.message_at(first.append.wrote_offset) is not None, 5)  # type: ignore[union-attr]
        for index, body in enumerate(bodies[1:], start=1):
            put(store, "Pool", index % 2, body, KEYS=f"pool{index}")
        wait_until(lambda: store.max_offset == store.wrote_offset, 5)
        wait_until(lambda: store.dispatch_behind_bytes == 0, 5)
        assert _bodies_in(store, "Pool", 2) == bodies
    finally:
        gate.set()
        store.shutdown()
    reopened = open_store(settings)
    try:
        report = reopened.recovery_report
        assert report is not None and report.lossless and report.last_exit_ok
        assert _bodies_in(reopened, "Pool", 2) == bodies
        assert [h.topic for h, _v in reopened.query_by_key("Pool", "pool300", 4)] == ["Pool"]
    finally:
        reopened.shutdown()


def _bodies_in(store: MessageStore, topic: str, queue_count: int) -> list[bytes]:
    """Every body of a topic in CommitLog order."""
    found: list[tuple[int, bytes]] = []
    for queue_id in range(queue_count):
        offset = 0
        while True:
            got = store.get_messages(topic, queue_id, offset, 32)
            if got.status is not GetMessageStatus.FOUND:
                break
            found.extend(zip(got.commitlog_offsets, (body_of(v) for v in got.messages), strict=True))
            offset = got.next_begin_offset
            got.release()
    return [body for _offset, body in sorted(found)]


def test_sync_flush_slower_than_the_timeout_answers_flush_disk_timeout(tmp_path: Path, wait_until: WaitUntil) -> None:
    """Goal: a group commit that outlasts syncFlushTimeout reports FLUSH_DISK_TIMEOUT when the timeout
    passes (the flush still running), and the message is stored and made durable all the same.
    Method: slow the real flush down by 50 ms with a 10 ms timeout, await a put."""
    import asyncio
    import time as time_module

    from shoal.store import (
        FlushDiskType,
        FlushSettings,
        MessageStore,
        MessageToStore,
        PutStatus,
        StoreSettings,
    )

    settings = StoreSettings(
        root_dir=tmp_path / "slow",
        flush=FlushSettings(flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout_ms=10),
    )
    store = MessageStore(settings)
    store.open()
    store.start()
    real_flush = store._flusher.flush_to_end

    def slow_flush(least_pages: int) -> bool:
        time_module.sleep(0.05)  # a disk that takes 50 ms to sync
        return real_flush(least_pages)

    store._flusher.flush_to_end = slow_flush  # type: ignore[method-assign]
    try:
        result = asyncio.run(store.put_message_async(MessageToStore("SlowTopic", 0, b"late but durable")))
        assert result.status is PutStatus.FLUSH_DISK_TIMEOUT
        assert result.append is not None
        next_offset = result.append.next_offset
        wait_until(lambda: store.flushed_offset >= next_offset, 10.0)
    finally:
        store._flusher.flush_to_end = real_flush  # type: ignore[method-assign]
        store.shutdown()


GRAIN_SEGMENT_BYTES = 64 * 1024 * 1024
GRAIN_LEAD_BODIES = 256  # of 60 KiB: 15 MiB into the segment, past where large folios appear
GRAIN_PUTS = 32
GRAIN_WRITTEN_PER_PUT_MAX = 3 * 4096  # a record may straddle two pages; slack for one more


@pytest.mark.parametrize("restart", [False, True], ids=["running", "restarted"])
def test_sync_flush_group_commits_write_back_only_the_pages_a_small_put_dirtied(
    tmp_path: Path, small_settings: SettingsFactory, restart: bool
) -> None:
    """Goal: under SYNC_FLUSH a 1 KiB put 15 MiB into a segment costs its pages of write-back, also after
    a restart (the loaded tail is regrained), not the 2 MiB folio a populated mapping caches (Linux 6.x
    ext4). Method: the process's write_bytes across 32 synced puts."""
    settings = replace(
        small_settings(tmp_path / "grain", flush_disk_type=FlushDiskType.SYNC_FLUSH),
        commitlog=CommitLogSettings(segment_size_bytes=GRAIN_SEGMENT_BYTES, preallocate_next_segment=False),
    )
    store = open_store(settings)
    try:
        for _ in range(GRAIN_LEAD_BODIES):
            put(store, "Grain", 0, b"\x05" * (60 * 1024))
        if restart:
            store.shutdown()
            store = open_store(settings)
        before = process_write_bytes()
        for _ in range(GRAIN_PUTS):
            put(store, "Grain", 0, b"\x06" * 1024)
        assert (process_write_bytes() - before) / GRAIN_PUTS <= GRAIN_WRITTEN_PER_PUT_MAX  # 17.5 KiB before
    finally:
        store.shutdown()


class SteppingClock:
    """Wall time the test sets (one value per segment); monotonic time stays real."""

    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def now_ms(self) -> int:
        return self.now

    def monotonic_s(self) -> float:
        return time.monotonic()


def test_the_checkpoint_time_never_runs_ahead_of_what_a_flush_covered(
    tmp_path: Path, small_settings: SettingsFactory
) -> None:
    """Goal: after a backlog of three segments, one flush round (two segments) records the time of
    the last record it flushed, not the newest segment's. Method: a stepping clock, one time per
    segment, the flusher driven by hand."""
    clock = SteppingClock()
    store = MessageStore(small_settings(tmp_path / "store"), clock=clock)
    store.open()
    try:
        segment_times: list[int] = []
        while len(store._commitlog.queue.files) < 3 or store._commitlog.queue.last.wrote_position < 4096:  # type: ignore[union-attr]
            segments = len(store._commitlog.queue.files)
            clock.now = 1_700_000_000_000 + segments * 1000
            put(store, "Backlog", 0, b"b" * 1000)
            if len(store._commitlog.queue.files) > len(segment_times):
                segment_times.append(clock.now)
        assert store._flusher.flush_to_end(0)
        flushed = store.flushed_offset
        newest = store._commitlog.queue.last
        assert newest is not None and flushed <= newest.file_from_offset, "one round flushed two segments"
        assert store._checkpoint.physic_msg_timestamp < newest.last_store_timestamp
        assert store._checkpoint.physic_msg_timestamp <= segment_times[1] + 1000
    finally:
        store.shutdown()


def test_flush_to_end_never_commits_beside_the_commit_thread(
    tmp_path: Path, small_settings: SettingsFactory, wait_until: WaitUntil, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: `MessageStore.flush_to_end` (the schedule service and truncation call it from other
    threads) and the CommitRealTimeService never commit at once: a commit hands its write buffer
    back to the pool. Method: a pool store whose queue commit records how many run at once, slowed
    so they would overlap; the commit thread every ms and three threads calling flush_to_end while
    a writer appends across segments; every record readable afterwards."""
    settings = small_settings(
        tmp_path / "store", transient_store_pool_enable=True, commit_interval_ms=1, commit_least_pages=0
    )
    store = open_store(settings)
    original_commit = store._commitlog.queue.commit
    running = [0]
    most = [0]
    count_lock = threading.Lock()

    def counted_commit(least_pages: int) -> bool:
        with count_lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            time.sleep(0.0005)
            return original_commit(least_pages)
        finally:
            with count_lock:
                running[0] -= 1

    monkeypatch.setattr(store._commitlog.queue, "commit", counted_commit)
    bodies = [os.urandom(700 + i % 300) for i in range(400)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        while not stop.is_set():
            try:
                store.flush_to_end()
            except BaseException as error:
                errors.append(error)
                return

    threads = [threading.Thread(target=flusher) for _ in range(3)]
    try:
        for thread in threads:
            thread.start()
        for index, body in enumerate(bodies):
            put(store, "Pool", index % 2, body)
        stop.set()
        for thread in threads:
            thread.join(10)
        store.flush_to_end()
        wait_until(lambda: store.dispatch_behind_bytes == 0, 5)
        assert errors == [] and most[0] == 1, (errors, most[0])
        assert _bodies_in(store, "Pool", 2) == bodies
    finally:
        stop.set()
        store.shutdown()


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "thread"])
def test_durable_soon_starts_the_group_commit_before_later_loop_work(
    tmp_path: Path, small_settings: SettingsFactory, inline: bool
) -> None:
    """Goal: a SYNC_FLUSH put's group commit starts when `durable_soon` is called, not when the
    future is awaited, so work scheduled after it (a send's dispatch) does not delay it. Method:
    with the inline group commit, a callback scheduled right after `durable_soon` already sees
    the record flushed; with either waiter the future answers PUT_OK once the record is flushed;
    nothing to wait for under ASYNC_FLUSH, for a refused put, or with WAIT=false."""
    store = open_store(
        small_settings(tmp_path / "store", flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_inline=inline)
    )
    try:

        async def main() -> tuple[int, int, PutStatus]:
            result = store.append_message(MessageToStore("Soon", 0, b"durable"))
            assert result.append is not None
            durable = store.durable_soon(result)
            assert durable is not None
            seen: list[int] = []
            asyncio.get_running_loop().call_soon(lambda: seen.append(store._flusher.flushed_offset))
            status = await durable
            assert store._flusher.flushed_offset >= result.append.next_offset
            return seen[0], result.append.next_offset, status

        seen_flushed, end, status = asyncio.run(main())
        assert status is PutStatus.PUT_OK
        if inline:
            assert seen_flushed >= end

        async def nothing_to_wait_for() -> None:
            result = store.append_message(MessageToStore("Soon", 0, b"no wait"))
            assert store.durable_soon(result, wait=False) is None
            refused = store.append_message(MessageToStore("Soon", 0, b"x" * (17 * 1024)))
            assert refused.append is None
            assert store.durable_soon(refused) is None

        asyncio.run(nothing_to_wait_for())
    finally:
        store.shutdown()
    async_store = open_store(small_settings(tmp_path / "async"))
    try:

        async def under_async_flush() -> None:
            result = async_store.append_message(MessageToStore("Soon", 0, b"async"))
            assert result.append is not None
            assert async_store.durable_soon(result) is None

        asyncio.run(under_async_flush())
    finally:
        async_store.shutdown()
