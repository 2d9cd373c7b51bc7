"""Tests of shoal.store.recovery: what a reopen reports and rebuilds (a clean shutdown, a store
copied file by file), through a real store on real files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from shoal.store import MessageStore
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
    end = store.commitlog.max_offset
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
