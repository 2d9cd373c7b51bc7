"""Tests of shoal.store.recovery: what a reopen reports and rebuilds (a clean shutdown, a store
copied file by file, a crash with a lagging ConsumeQueue and index), through a real store on real files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from shoal.formats.consume_queue_unit import UNIT_SIZE
from shoal.store import MessageStore, RecoveryReport, StoreSettings
from shoal.store.checkpoint import StoreCheckpoint
from shoal.store.index_file import IndexFile
from shoal.store.inspection import verify_store
from tests.store.conftest import SettingsFactory, cq_files, open_store, put, settle


def test_reopen_after_clean_shutdown_is_lossless_and_continues_offsets(
    tmp_path: Path, small_settings: SettingsFactory
) -> None:
    """Goal: a clean reopen is lossless and continues all offsets. Method: write, shut down, reopen, write."""
    settings = small_settings(tmp_path / "store")
    store = open_store(settings)
    assert settings.abort_path.exists()
    for i in range(150):
        put(store, "Reopen", i % 3, b"r" * 500, KEYS=f"r{i}")
    end = store.max_offset
    store.shutdown()
    assert not settings.abort_path.exists()
    reopened = MessageStore(settings)
    report = reopened.open()
    reopened.start()
    try:
        assert report.last_exit_ok and report.lossless
        assert (report.damage, report.commitlog_bytes_dropped, report.consume_queue_units_dropped) == ("", 0, 0)
        assert report.recovered_end_offset == end
        assert report.messages_redispatched == 0
        assert [reopened.max_offset_in_queue("Reopen", q) for q in range(3)] == [50, 50, 50]
        result = put(reopened, "Reopen", 1, b"next")
        assert result.append.queue_offset == 50  # type: ignore[union-attr]
        assert result.append.wrote_offset == end  # type: ignore[union-attr]
        settle(reopened)
        assert [h.queue_offset for h, _v in reopened.query_by_key("Reopen", "r149", 4)] == [49]
    finally:
        reopened.shutdown()


def test_recovery_fills_a_consume_queue_copied_before_the_others(
    tmp_path: Path, small_settings: SettingsFactory
) -> None:
    """Goal: a store copied file by file (one topic's ConsumeQueues older than another's and than
    the CommitLog) recovers complete queues, not queues with a gap. Method: 600 messages over two
    topics; Topic1's consumequeue/ is copied after 300 of them, the rest after all 600; on open the
    dispatcher finds Topic1 behind, dispatches again from its end, and every CQ file equals the
    original's."""
    original_settings = small_settings(tmp_path / "original")
    original = open_store(original_settings)
    snapshot = tmp_path / "early-Topic1"
    for i in range(600):
        if i == 300:
            settle(original)
            shutil.copytree(original_settings.consume_queue_dir / "Topic1", snapshot)
        put(original, f"Topic{i % 2}", (i // 2) % 2, os.urandom(i % 700), KEYS=f"key{i}")
    original.shutdown()
    copy_settings = small_settings(tmp_path / "copy")
    copy_settings.root_dir.mkdir()
    shutil.copytree(original_settings.commitlog_dir, copy_settings.commitlog_dir)
    shutil.copytree(original_settings.consume_queue_dir, copy_settings.consume_queue_dir)
    shutil.copytree(original_settings.index_dir, copy_settings.index_dir)
    shutil.rmtree(copy_settings.consume_queue_dir / "Topic1")
    shutil.copytree(snapshot, copy_settings.consume_queue_dir / "Topic1")
    copy = MessageStore(copy_settings)
    report = copy.open()
    try:
        assert 0 < report.messages_redispatched < 600, "only the lagging queue's stretch is dispatched again"
        assert cq_files(copy_settings.consume_queue_dir) == cq_files(original_settings.consume_queue_dir)
        assert [copy.max_offset_in_queue("Topic1", q) for q in (0, 1)] == [150, 150]
        put(copy, "Topic1", 0, b"after the restore")
        settle(copy)
        assert copy.max_offset_in_queue("Topic1", 0) == 151
    finally:
        copy.shutdown()


class TickingClock:
    """A wall clock one millisecond later at every reading: store and index times strictly increase."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now = now_ms

    def now_ms(self) -> int:
        self.now += 1
        return self.now

    def monotonic_s(self) -> float:
        return self.now / 1000


TOPICS = ("CrashT0", "CrashT1")
MESSAGES = 400


def crash_image(
    tmp_path: Path, small_settings: SettingsFactory, *, keys_every: int = 1
) -> tuple[StoreSettings, StoreSettings]:
    """(original, crashed copy): MESSAGES messages over two topics x two queues, each with a
    UNIQ_KEY and every `keys_every`-th with KEYS too, all dispatched; the copy is the store as a
    SIGKILL leaves it (every file as the page cache holds it, `abort` present, no shutdown)."""
    original = small_settings(tmp_path / "original")
    store = MessageStore(original, clock=TickingClock())
    store.open()  # no background services: nothing writes while the files are copied
    for i in range(MESSAGES):
        keys = {"KEYS": f"key{i}"} if i % keys_every == 0 else {}
        put(store, TOPICS[i % 2], (i // 2) % 2, os.urandom(i % 300), **keys, UNIQ_KEY=f"UNIQ{i:028d}")
    settle(store)
    copy = small_settings(tmp_path / "crashed")
    shutil.copytree(original.root_dir, copy.root_dir, ignore=shutil.ignore_patterns("lock"))
    copy.abort_path.touch()
    store.shutdown()
    return original, copy


def reopen(settings: StoreSettings) -> tuple[MessageStore, RecoveryReport]:
    store = MessageStore(settings, clock=TickingClock(1_800_000_000_000))
    report = store.open()
    assert not report.last_exit_ok and report.lossless
    return store, report


def assert_every_key_found(store: MessageStore, keys_every: int = 1) -> None:
    for i in range(MESSAGES):
        for key in (f"key{i}", f"UNIQ{i:028d}") if i % keys_every == 0 else (f"UNIQ{i:028d}",):
            found = store.query_by_key(TOPICS[i % 2], key, 4)
            assert [h.queue_offset for h, _view in found] == [i // 4], key


def test_recovery_after_a_crash_skips_records_already_in_their_consume_queue_and_the_index(
    tmp_path: Path, small_settings: SettingsFactory
) -> None:
    """Goal: when everything was dispatched before the crash, recovery walks every record but decodes
    only those whose index keys are gone (the newest index file, which recovery deletes as RocketMQ
    does) plus one per topic. Method: a crash image; reopen; count decodes; compare CQ files, query keys."""
    original, copy = crash_image(tmp_path, small_settings)
    store, report = reopen(copy)
    try:
        assert report.messages_redispatched == MESSAGES
        keys_per_file = copy.index.entries - 1
        assert 0 < report.messages_redispatch_decoded <= keys_per_file // 2 + len(TOPICS)
        assert cq_files(copy.consume_queue_dir) == cq_files(original.consume_queue_dir)
        assert_every_key_found(store)
    finally:
        store.shutdown()
    verified = verify_store(copy.root_dir, hash_slots=copy.index.hash_slots)
    assert verified.ok and verified.records == MESSAGES, verified.problems


def test_recovery_fills_a_lagging_consume_queue_and_rebuilds_deleted_index_files(
    tmp_path: Path, small_settings: SettingsFactory
) -> None:
    """Goal: records missing from one ConsumeQueue or from the index are dispatched again, even
    where the other already holds them. Method: in a crash image, zero the last 60 units of
    CrashT1-0 (its flush lagged: 100 -> 40 units) and move the checkpoint's index time back two
    full index files (their flush was not recorded, so recovery deletes them); reopen; every CQ
    file equals the original's, every KEYS and UNIQ_KEY key is found, `verify_store` is clean."""
    original, copy = crash_image(tmp_path, small_settings)
    lagging = sorted((copy.consume_queue_dir / "CrashT1" / "0").iterdir())
    units_per_file = copy.consume_queue.units_per_file
    assert len(lagging) == 2  # 64 + 36 units
    first, second = lagging
    first.write_bytes(first.read_bytes()[: 40 * UNIT_SIZE] + bytes((units_per_file - 40) * UNIT_SIZE))
    second.write_bytes(bytes(units_per_file * UNIT_SIZE))
    index_files = sorted(p for p in copy.index_dir.iterdir() if p.name.isdigit())
    assert len(index_files) >= 4
    checkpoint = StoreCheckpoint(copy.checkpoint_path)
    checkpoint.index_msg_timestamp = IndexFile(
        index_files[-4], copy.index.hash_slots, copy.index.entries, create=False
    ).end_timestamp
    checkpoint.flush()
    store, report = reopen(copy)
    try:
        assert sum("deleted index file" in note for note in report.notes) == 3
        assert report.messages_redispatched == MESSAGES
        assert 60 <= report.messages_redispatch_decoded < MESSAGES
        assert cq_files(copy.consume_queue_dir) == cq_files(original.consume_queue_dir)
        assert [store.max_offset_in_queue("CrashT1", q) for q in (0, 1)] == [100, 100]
        assert_every_key_found(store)
    finally:
        store.shutdown()
    verified = verify_store(copy.root_dir, hash_slots=copy.index.hash_slots)
    assert verified.ok and verified.records == MESSAGES, verified.problems


def test_index_files_lost_in_a_crash_are_rebuilt_from_unique_keys_byte_for_byte(
    tmp_path: Path, small_settings: SettingsFactory
) -> None:
    """Goal: a crash soon after a burst (no checkpoint recorded the index, so recovery deletes its
    files, as RocketMQ does, while the ConsumeQueues survive) rebuilds the index as the dispatch
    had built it: the messages with only a unique key are skipped in runs with their keys handed
    to the index together, those with KEYS are dispatched one by one, in CommitLog order.
    Method: a crash image where one message in five has KEYS; move the checkpoint's index time
    back to the end of the first index file; reopen; every key is found, the ConsumeQueues are
    unchanged, and the index files hold the same bytes as the original's (names aside: they are
    creation times)."""
    original, copy = crash_image(tmp_path, small_settings, keys_every=5)
    index_files = sorted(p for p in copy.index_dir.iterdir() if p.name.isdigit())
    assert len(index_files) >= 2
    checkpoint = StoreCheckpoint(copy.checkpoint_path)
    checkpoint.index_msg_timestamp = IndexFile(
        index_files[0], copy.index.hash_slots, copy.index.entries, create=False
    ).end_timestamp
    checkpoint.flush()
    store, report = reopen(copy)
    try:
        assert sum("deleted index file" in note for note in report.notes) == len(index_files) - 1
        assert report.messages_redispatched == MESSAGES
        assert cq_files(copy.consume_queue_dir) == cq_files(original.consume_queue_dir)
        assert_every_key_found(store, keys_every=5)
    finally:
        store.shutdown()
    rebuilt = [p.read_bytes() for p in sorted(p for p in copy.index_dir.iterdir() if p.name.isdigit())]
    built = [p.read_bytes() for p in sorted(p for p in original.index_dir.iterdir() if p.name.isdigit())]
    assert rebuilt == built
