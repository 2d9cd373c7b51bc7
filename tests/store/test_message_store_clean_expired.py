"""MessageStore.clean_expired_consume_queues (CLEAN_EXPIRED_CONSUMEQUEUE) on a real store."""

from __future__ import annotations

from pathlib import Path

from tests.store.conftest import SettingsFactory, open_store, put, settle


def test_queues_wholly_below_the_commitlog_go_and_live_ones_stay(
    tmp_path: Path, small_settings: SettingsFactory
) -> None:
    """Goal: a queue whose last message retention deleted is destroyed with its topic directory and
    queue offset; a queue with a live message, a kept topic's and an empty one stay. Method: fill
    segments with "Old", end with "Live", force a clean, then clean expired queues."""
    usage = [0.0]
    store = open_store(small_settings(tmp_path / "store"), disk_usage=lambda _path: usage[0])
    try:
        for _ in range(100):
            put(store, "Old", 0, b"o" * 1000)
            put(store, "Kept", 0, b"k" * 1000)
        for _ in range(150):
            put(store, "Live", 1, b"l" * 1000)
        settle(store)
        store._consume_queues.find_or_create("Empty", 0)
        usage[0] = 0.87  # above diskSpaceCleanForciblyRatio: delete all but the newest segment
        while store._cleaner.run_round().commitlog_files_deleted:
            pass
        old_end = store._consume_queues.find("Old", 0).max_physical_offset  # type: ignore[union-attr]
        assert old_end < store.min_offset
        assert (store.settings.consume_queue_dir / "Old" / "0").exists()  # retention keeps a queue's last file

        removed = store.clean_expired_consume_queues(frozenset({"Kept"}))

        assert removed == [("Old", 0)]
        assert not (store.settings.consume_queue_dir / "Old").exists()
        assert store._consume_queues.find("Old", 0) is None
        assert ("Old", 0) not in store._commitlog.topic_queue_table
        for topic, queue_id in (("Kept", 0), ("Live", 1), ("Empty", 0)):
            assert store._consume_queues.find(topic, queue_id) is not None, topic
        assert store.max_offset_in_queue("Live", 1) == 150
        assert put(store, "Old", 0, b"again").append.queue_offset == 0  # type: ignore[union-attr]
        settle(store)
        assert store.max_offset_in_queue("Old", 0) == 1
        assert store.clean_expired_consume_queues(frozenset()) == [("Kept", 0)]
    finally:
        store.shutdown()
