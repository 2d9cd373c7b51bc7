"""MessageStore.delete_topic (DELETE_TOPIC_IN_BROKER) on a real store."""

from __future__ import annotations

from pathlib import Path

from tests.store.conftest import SettingsFactory, open_store, put, settle


def test_a_deleted_topic_comes_back_at_queue_offset_zero_without_its_old_units(
    tmp_path: Path, small_settings: SettingsFactory
) -> None:
    """Goal: deleting a topic drops its ConsumeQueues and next queue offsets, including units of
    messages appended but not yet dispatched, so the topic created again starts at offset 0 and its
    queue holds only new messages; another topic is untouched. Method: append without dispatching,
    delete, append again, dispatch, read the queue's units."""
    store = open_store(small_settings(tmp_path / "store"))
    try:
        for index in range(3):
            put(store, "Gone", 0, b"dispatched-%d" % index)
            put(store, "Stays", 0, b"stays-%d" % index)
        settle(store)
        for index in range(2):
            put(store, "Gone", 0, b"pending-%d" % index)  # not dispatched yet
        assert store.dispatch_behind_bytes > 0

        assert store.delete_topic("Gone") == 1

        assert not (store.settings.consume_queue_dir / "Gone").exists()
        assert store._consume_queues.find("Gone", 0) is None
        assert put(store, "Gone", 0, b"new").append.queue_offset == 0  # type: ignore[union-attr]
        settle(store)
        assert store.max_offset_in_queue("Gone", 0) == 1
        queue = store._consume_queues.find("Gone", 0)
        assert queue is not None
        unit = queue.last_unit()
        assert unit is not None and unit.physical_offset == store.max_offset - unit.size
        assert store.max_offset_in_queue("Stays", 0) == 3
        assert store.delete_topic("Never") == 0
    finally:
        store.shutdown()
