"""Shared fixtures: small store settings on real files, and a bounded wait helper."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shoal.store import (
    CommitLogSettings,
    ConsumeQueueSettings,
    FlushDiskType,
    FlushSettings,
    IndexSettings,
    MessageStore,
    StoreSettings,
)

SMALL_SEGMENT_BYTES = 64 * 1024


def small_settings(
    root: Path, *, flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH, **flush: object
) -> StoreSettings:
    """Settings with tiny files so tests roll segments, CQ files and index files quickly."""
    return StoreSettings(
        root_dir=root,
        commitlog=CommitLogSettings(segment_size_bytes=SMALL_SEGMENT_BYTES, message_body_size_max_bytes=16 * 1024),
        consume_queue=ConsumeQueueSettings(units_per_file=64),
        index=IndexSettings(hash_slots=64, entries=256),
        flush=FlushSettings(flush_disk_type=flush_disk_type, **flush),  # type: ignore[arg-type]
    )


def wait_until(predicate: Callable[[], bool], timeout_s: float = 10.0, interval_s: float = 0.005) -> None:
    """Poll `predicate` until true; fail the test after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        time.sleep(interval_s)


@pytest.fixture
def store_settings(tmp_path: Path) -> StoreSettings:
    return small_settings(tmp_path / "store")


@pytest.fixture
def store(store_settings: StoreSettings) -> Iterator[MessageStore]:
    """An open, started store on small segments; shut down after the test."""
    opened = MessageStore(store_settings)
    opened.open()
    opened.start()
    yield opened
    opened.shutdown()


@pytest.fixture(name="wait_until")
def wait_until_fixture() -> Callable[..., None]:
    return wait_until


@pytest.fixture(name="small_settings")
def small_settings_fixture() -> Callable[..., StoreSettings]:
    return small_settings
