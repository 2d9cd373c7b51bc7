"""Retention (spec §6): expired CommitLog segments go oldest first with their ConsumeQueue and index
files; disk pressure forces cleaning and, past 90 %, stops writes; a really full disk fails a put
without losing what was acknowledged.

Time is injected: the store's clock decides the hour (deleteWhen) and "now", and segment ages are
set with os.utime. Cleaning rounds are run directly (`store._cleaner.run_round()`), except where
the background service itself is under test.
"""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from shoal.formats.properties import encode_properties
from shoal.formats.record import decode_header
from shoal.store import (
    CommitLogSettings,
    ConsumeQueueSettings,
    FlushDiskType,
    FlushSettings,
    GetMessageStatus,
    IndexSettings,
    MessageStore,
    MessageToStore,
    PutResult,
    PutStatus,
    RetentionSettings,
    StoreSettings,
)
from tests.scenarios.conftest import run_command

WaitUntil = Callable[..., None]
SEGMENT_BYTES = 64 * 1024
HOUR_MS = 3600 * 1000
NOW_MS = 1_700_000_000_000
NOW_HOUR = time.localtime(NOW_MS / 1000).tm_hour
OTHER_HOUR = (NOW_HOUR + 12) % 24
RESERVED_HOURS = 72
NEVER_MS = 3_600_000  # the background cleaner would first run after an hour


class FakeClock:
    """Wall time fixed by the test; monotonic time stays real so the services keep their pace."""

    def __init__(self, now_ms: int = NOW_MS) -> None:
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now

    def monotonic_s(self) -> float:
        return time.monotonic()


class Stored(NamedTuple):
    queue_offset: int
    commitlog_offset: int


def retention_settings(root: Path, delete_hour: int = NOW_HOUR, **changes: object) -> StoreSettings:
    fields: dict[str, object] = {
        "file_reserved_time_hours": RESERVED_HOURS,
        "delete_when": f"{delete_hour:02d}",
        "clean_resource_interval_ms": NEVER_MS,
        "delete_files_interval_ms": 0,  # no pause between deletions unless a test asks for one
        **changes,
    }
    retention = RetentionSettings(**fields)  # type: ignore[arg-type]
    return StoreSettings(
        root_dir=root,
        commitlog=CommitLogSettings(segment_size_bytes=SEGMENT_BYTES, message_body_size_max_bytes=16 * 1024),
        consume_queue=ConsumeQueueSettings(units_per_file=64),
        index=IndexSettings(hash_slots=64, entries=256),
        retention=retention,
    )


def open_store(settings: StoreSettings, **kwargs: object) -> MessageStore:
    """Started store on the fake clock; the disk looks 10% full unless the test says otherwise
    (the real disk's usage is not ours to rely on)."""
    kwargs.setdefault("disk_usage", lambda _path: 0.10)
    store = MessageStore(settings, clock=FakeClock(), **kwargs)  # type: ignore[arg-type]
    store.open()
    store.start()
    return store


def fill_segments(store: MessageStore, full_segments: int) -> list[Stored]:
    """1 KiB messages to Ret/0 until `full_segments` segments are full, then settle."""
    stored: list[Stored] = []
    while store.max_offset < full_segments * SEGMENT_BYTES + 1:
        index = len(stored)
        message = MessageToStore("Ret", 0, b"r" * 1000, encode_properties({"KEYS": f"ret{index}"}))
        result = store.put_message(message)
        assert result.status is PutStatus.PUT_OK and result.append is not None
        stored.append(Stored(result.append.queue_offset, result.append.wrote_offset))
    store.dispatch_now()
    return stored


def segments(store: MessageStore) -> list[int]:
    return [mapped.file_from_offset for mapped in store._commitlog.queue.files]


def age_segments(store: MessageStore, hours_by_index: dict[int, float]) -> None:
    """Set segment k's mtime to `hours` before the clock's now (the others: one hour old)."""
    for index, mapped in enumerate(store._commitlog.queue.files):
        hours = hours_by_index.get(index, 1.0)
        stamp_ns = (NOW_MS - int(hours * HOUR_MS)) * 1_000_000
        os.utime(mapped.path, ns=(stamp_ns, stamp_ns))


def expired(count: int) -> dict[int, float]:
    return dict.fromkeys(range(count), RESERVED_HOURS + 1.0)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    """A store whose deleteWhen hour is the clock's current hour, with 14 full segments."""
    opened = open_store(retention_settings(tmp_path / "store"))
    yield opened
    opened.shutdown()


def test_expired_segments_go_oldest_first_ten_per_round_never_the_last(store: MessageStore) -> None:
    """Goal: expired segments go oldest first, 10 per round, never the last. Method: 15 expired, 3 rounds."""
    fill_segments(store, 14)
    before = segments(store)
    assert len(before) == 15
    age_segments(store, expired(15))
    first = store._cleaner.run_round()
    assert first.commitlog_files_deleted == 10
    assert segments(store) == before[10:]
    assert store.min_offset == before[10]
    assert not any((store.settings.commitlog_dir / f"{offset:020d}").exists() for offset in before[:10])
    second = store._cleaner.run_round()
    assert second.commitlog_files_deleted == 4
    assert segments(store) == before[14:]
    assert store._cleaner.run_round().commitlog_files_deleted == 0
    assert (store.settings.commitlog_dir / f"{before[14]:020d}").exists()


DELETE_INTERVAL_MS = 300


def test_deletions_in_a_round_are_spaced_by_delete_commitlog_files_interval(tmp_path: Path) -> None:
    """Goal: deleteCommitLogFilesInterval pauses between two deleted segments (RocketMQ spreads a
    round's unlinks out); it was accepted and ignored. Method: 4 expired segments, one timed round."""
    store = open_store(retention_settings(tmp_path / "store", delete_files_interval_ms=DELETE_INTERVAL_MS))
    try:
        fill_segments(store, 4)
        age_segments(store, expired(4))
        started = time.monotonic()
        assert store._cleaner.run_round().commitlog_files_deleted == 4
        assert time.monotonic() - started >= 3 * DELETE_INTERVAL_MS / 1000  # at least the pauses between
    finally:
        store.shutdown()


def test_deletion_stops_at_the_first_unexpired_segment(store: MessageStore) -> None:
    """Goal: deletion stops at the first unexpired segment. Method: segments 0-2 and 4 expired, 3 fresh."""
    fill_segments(store, 6)
    before = segments(store)
    age_segments(store, {**expired(3), 4: RESERVED_HOURS + 5.0})
    assert store._cleaner.run_round().commitlog_files_deleted == 3
    assert segments(store) == before[3:]


def test_expired_segments_wait_for_a_delete_when_hour_or_a_manual_request(
    tmp_path: Path, wait_until: WaitUntil
) -> None:
    """Goal: expired segments wait for deleteWhen or a manual request. Method: off-hour, then request."""
    store = open_store(retention_settings(tmp_path / "store", delete_hour=OTHER_HOUR))
    try:
        fill_segments(store, 5)
        before = segments(store)
        age_segments(store, expired(2))
        assert store._cleaner.run_round().commitlog_files_deleted == 0
        assert segments(store) == before
        store._cleaner.request_manual_delete()
        wait_until(lambda: segments(store) == before[2:], 5)
        assert store._cleaner.run_round().commitlog_files_deleted == 0
    finally:
        store.shutdown()


def test_disk_usage_above_max_used_ratio_deletes_expired_segments_at_any_hour(tmp_path: Path) -> None:
    """Goal: at 75-85% disk usage only expired segments go, at any hour. Method: usage 0.80, off-hour."""
    usage = [0.80]
    store = open_store(
        retention_settings(tmp_path / "store", delete_hour=OTHER_HOUR), disk_usage=lambda _path: usage[0]
    )
    try:
        fill_segments(store, 5)
        before = segments(store)
        age_segments(store, expired(2))
        assert store._cleaner.run_round().commitlog_files_deleted == 2
        assert segments(store) == before[2:]
    finally:
        store.shutdown()


def test_disk_usage_above_clean_forcibly_ratio_deletes_fresh_segments(tmp_path: Path) -> None:
    """Goal: above 85% disk usage even fresh segments go, 10 per round. Method: usage 0.87, none expired."""
    store = open_store(retention_settings(tmp_path / "store", delete_hour=OTHER_HOUR), disk_usage=lambda _path: 0.87)
    try:
        fill_segments(store, 12)
        before = segments(store)
        age_segments(store, {})
        cleaning = store._cleaner.run_round()
        assert cleaning.forced and not cleaning.disk_full
        assert cleaning.commitlog_files_deleted == 10
        assert segments(store) == before[10:]
        assert store._cleaner.run_round().commitlog_files_deleted == 2
        assert segments(store) == before[12:]
        assert store.put_message(MessageToStore("Ret", 0, b"still writable")).status is PutStatus.PUT_OK
    finally:
        store.shutdown()


def test_consume_queue_and_index_files_are_cleaned_with_their_segments(store: MessageStore) -> None:
    """Goal: ConsumeQueue and index files go with their segments. Method: delete 10 segments, list files."""
    stored = fill_segments(store, 14)
    cq_dir = store.settings.consume_queue_dir / "Ret" / "0"
    index_dir = store.settings.index_dir
    cq_before = sorted(p.name for p in cq_dir.iterdir())
    index_before = sorted(p.name for p in index_dir.iterdir())
    assert len(cq_before) > 10 and len(index_before) >= 3
    age_segments(store, expired(15))
    cleaning = store._cleaner.run_round()
    assert cleaning.commitlog_files_deleted == 10
    commitlog_min = store.min_offset
    survivors = [s for s in stored if s.commitlog_offset >= commitlog_min]
    cq_after = sorted(p.name for p in cq_dir.iterdir())
    units_per_file = store.settings.consume_queue.units_per_file
    first_kept_file = survivors[0].queue_offset // units_per_file
    assert cleaning.consume_queue_files_deleted == first_kept_file
    assert cq_after == cq_before[first_kept_file:]
    assert store.min_offset_in_queue("Ret", 0) == survivors[0].queue_offset
    assert store.max_offset_in_queue("Ret", 0) == len(stored)
    assert store._index is not None
    assert cleaning.index_files_deleted == len(index_before) - len(store._index.files) > 0
    assert sorted(p.name for p in index_dir.iterdir()) == index_before[cleaning.index_files_deleted :]
    assert all(f.end_physical_offset >= commitlog_min for f in store._index.files[:-1])
    assert store.query_by_key("Ret", "ret0", 4) == []
    last_key = f"ret{len(stored) - 1}"
    assert [h.queue_offset for h, _v in store.query_by_key("Ret", last_key, 4)] == [len(stored) - 1]


def test_reads_below_the_new_min_offset_are_offset_too_small(store: MessageStore) -> None:
    """Goal: reads below the new min are OFFSET_TOO_SMALL with next = min. Method: delete 10, read at 0."""
    stored = fill_segments(store, 12)
    age_segments(store, expired(13))
    assert store._cleaner.run_round().commitlog_files_deleted == 10
    minimum = store.min_offset_in_queue("Ret", 0)
    assert minimum > 0
    for offset in (0, minimum - 1):
        small = store.get_messages("Ret", 0, offset, 32)
        assert small.status is GetMessageStatus.OFFSET_TOO_SMALL
        assert (small.next_begin_offset, small.min_offset, small.max_offset) == (minimum, minimum, len(stored))
    found = store.get_messages("Ret", 0, minimum, 32)
    assert found.status is GetMessageStatus.FOUND
    assert found.queue_offsets[0] == minimum
    assert found.commitlog_offsets[0] == stored[minimum].commitlog_offset >= store.min_offset
    found.release()
    badly = store.get_messages("Ret", 0, len(stored) + 5, 32)
    assert badly.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY
    assert badly.next_begin_offset == len(stored)


def test_disk_usage_above_the_warning_level_refuses_writes_until_space_returns(
    tmp_path: Path, wait_until: WaitUntil
) -> None:
    """Goal: above 90% usage puts are refused ('disk full') until it drops. Method: injected usage."""
    usage: dict[str, float] = {"commitlog": 0.5, "consumequeue": 0.5}
    settings = retention_settings(tmp_path / "store", delete_hour=OTHER_HOUR, clean_resource_interval_ms=20)
    store = open_store(settings, disk_usage=lambda path: usage[path.name])
    try:
        before = store.put_message(MessageToStore("Full", 0, b"before"))
        assert before.status is PutStatus.PUT_OK
        for full in ("consumequeue", "commitlog"):
            usage[full] = 0.95
            wait_until(lambda: store.disk_full, 5)
            refused = store.put_message(MessageToStore("Full", 0, b"refused"))
            assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
            assert "disk full" in refused.remark
            usage[full] = 0.5
            wait_until(lambda: not store.disk_full, 5)
            accepted = store.put_message(MessageToStore("Full", 0, b"accepted"))
            assert accepted.status is PutStatus.PUT_OK
        store.dispatch_now()
        got = store.get_messages("Full", 0, 0, 32)
        assert got.queue_offsets == [0, 1, 2]
        bodies = [body_of(view) for view in got.messages]
        got.release()
        assert bodies == [b"before", b"accepted", b"accepted"]
    finally:
        store.shutdown()


def body_of(view: memoryview) -> bytes:
    header = decode_header(view, 0)
    return bytes(view[header.body_position : header.body_position + header.body_length])


REFUSED_WHILE_FULL = 500


def test_a_really_full_disk_fails_the_put_and_keeps_acknowledged_messages(
    tiny_tmpfs: Path, wait_until: WaitUntil, caplog: pytest.LogCaptureFixture
) -> None:
    """Goal: ENOSPC creating a segment refuses puts (SERVICE_NOT_AVAILABLE) with one log line in and
    one out, loses nothing, and puts pass again once space returns. Method: 2 MiB tmpfs, remount."""
    settings = retention_settings(tiny_tmpfs / "store").with_changes(
        flush=FlushSettings(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    )
    acknowledged: dict[int, int] = {}
    store = open_store(settings)
    try:
        for index in range(5000):
            body = index.to_bytes(4, "big") * 250
            result = store.put_message(MessageToStore("Tiny", index % 2, body))
            if result.status is not PutStatus.PUT_OK:
                break
            assert result.append is not None
            acknowledged[result.append.wrote_offset] = zlib.crc32(body)
        else:
            pytest.fail("5000 puts of 1 KiB fitted on a 2 MiB disk")
        assert len(acknowledged) > 1000
        assert result.status is PutStatus.SERVICE_NOT_AVAILABLE, result
        assert not result.status.stored and "No space left" in result.remark, result.remark
        for _ in range(REFUSED_WHILE_FULL):
            assert store.put_message(MessageToStore("Tiny", 0, b"still full")).status is PutStatus.SERVICE_NOT_AVAILABLE
        grown = run_command("mount", "-o", "remount,size=4m", str(tiny_tmpfs))
        assert grown.returncode == 0, grown.stderr
        attempts: list[PutResult] = []

        def stored_once_retried() -> bool:  # the outage retries segment creation once a second
            attempts.append(store.put_message(MessageToStore("Tiny", 0, b"space is back")))
            return attempts[-1].status.stored

        wait_until(stored_once_retried, 10)
        after = attempts.pop()
        assert after.status is PutStatus.PUT_OK and after.append is not None, after
        acknowledged[after.append.wrote_offset] = zlib.crc32(b"space is back")
        outage_lines = [r.getMessage() for r in caplog.records if r.name == "shoal.store.segment_outage"]
        assert len(outage_lines) == 2, outage_lines  # one when it starts, one when it ends
        refused = 1 + REFUSED_WHILE_FULL + len(attempts)  # the put that met the full disk, then the rest
        assert f" {refused} writes were refused" in outage_lines[1], outage_lines
        wait_until(lambda: store.dispatch_behind_bytes == 0, 5)
    finally:
        store.shutdown()
    reopened = MessageStore(settings, clock=FakeClock(), disk_usage=lambda _path: 0.10)
    report = reopened.open()
    try:
        assert report.last_exit_ok and report.lossless
        for offset, crc in acknowledged.items():
            found = reopened.message_at(offset)
            assert found is not None, offset
            _header, view = found
            assert zlib.crc32(body_of(view)) == crc
            view.release()
        assert sum(reopened.max_offset_in_queue("Tiny", q) for q in range(2)) == len(acknowledged)
    finally:
        reopened.shutdown()


def test_the_retention_horizon_survives_a_restart(tmp_path: Path) -> None:
    """Goal: the retention horizon survives a restart. Method: delete 10 segments, reopen, read, write."""
    settings = retention_settings(tmp_path / "store")
    store = open_store(settings)
    try:
        stored = fill_segments(store, 12)
        age_segments(store, expired(13))
        assert store._cleaner.run_round().commitlog_files_deleted == 10
        minimum = store.min_offset_in_queue("Ret", 0)
        commitlog_min = store.min_offset
    finally:
        store.shutdown()
    reopened = open_store(settings)
    try:
        report = reopened.recovery_report
        assert report is not None and report.last_exit_ok and report.lossless
        assert reopened.min_offset == commitlog_min
        assert reopened.min_offset_in_queue("Ret", 0) == minimum
        assert reopened.max_offset_in_queue("Ret", 0) == len(stored)
        small = reopened.get_messages("Ret", 0, 0, 32)
        assert (small.status, small.next_begin_offset) == (GetMessageStatus.OFFSET_TOO_SMALL, minimum)
        found = reopened.get_messages("Ret", 0, minimum, 1)
        assert found.commitlog_offsets == [stored[minimum].commitlog_offset]
        found.release()
        result = reopened.put_message(MessageToStore("Ret", 0, b"after restart"))
        assert result.append is not None and result.append.queue_offset == len(stored)
        last_key = f"ret{len(stored) - 1}"
        assert [h.queue_offset for h, _v in reopened.query_by_key("Ret", last_key, 4)] == [len(stored) - 1]
    finally:
        reopened.shutdown()
