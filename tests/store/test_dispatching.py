"""Tests of shoal.store.dispatching: ConsumeQueues and the index built from the CommitLog alone,
through a real store on real files."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from shoal.store import MessageStore, durability
from tests.store.conftest import SettingsFactory, body_of, cq_files, open_store, put


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
