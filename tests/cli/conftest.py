"""Helpers shared by the CLI tests."""

from __future__ import annotations

from pathlib import Path

from shoal.store import CommitLogSettings, MessageStore, MessageToStore, StoreSettings

SEGMENT_BYTES = 1024 * 1024


def write_segmented_store(root: Path) -> list[Path]:
    """A store of three 1 MiB CommitLog segments (2,500 messages of 1000 bytes), shut down cleanly;
    returns its segment files, oldest first."""
    settings = StoreSettings(
        root_dir=root,
        commitlog=CommitLogSettings(segment_size_bytes=SEGMENT_BYTES, message_body_size_max_bytes=64 * 1024),
    )
    store = MessageStore(settings)
    store.open()
    store.start()
    for _ in range(2500):
        assert store.put_message(MessageToStore("Cut", 0, bytes(1000))).ok
    store.shutdown()
    return sorted((root / "commitlog").iterdir())
