"""Tests of shoal.store.dispatching: ConsumeQueues and the index built from the CommitLog alone,
through a real store on real files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from shoal.store import MessageStore
from tests.store.conftest import SettingsFactory, cq_files, open_store, put


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
