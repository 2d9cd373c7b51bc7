"""Tests of shoal.store.index_service: keys from messages, rolling files, queries, retention, load."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal.formats.index_entry import index_file_name
from shoal.store.index_file import IndexFile
from shoal.store.index_service import IndexService
from shoal.store.settings import IndexSettings

T0 = 1_700_000_000_000
ALL_TIME = (0, 2**62)
SETTINGS = IndexSettings(hash_slots=8, entries=4)  # 3 keys per file


class FakeClock:
    """Wall clock the test moves by hand (index file names come from it)."""

    def __init__(self, now_ms: int = T0) -> None:
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now

    def monotonic_s(self) -> float:
        return self.now / 1000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "index"


@pytest.fixture
def service(directory: Path, clock: FakeClock) -> Iterator[IndexService]:
    """An IndexService over small files (8 slots, 4 entries = 3 keys each)."""
    opened = IndexService(directory, SETTINGS, clock)
    yield opened
    opened.close()


def build_messages(service: IndexService, clock: FakeClock, count: int, first: int = 0) -> None:
    """Message n: offset n*100, stored at T0 + n s, one key 'k<n>'; the clock advances 1 ms each."""
    for n in range(first, first + count):
        clock.now += 1
        service.build("T", n * 100, T0 + n * 1000, None, f"k{n}")


def query(service: IndexService, key: str, count_max: int = 64) -> list[int]:
    return service.query("T", key, count_max, *ALL_TIME)


# --- building and querying ---


def test_build_indexes_the_uniq_key_and_every_key(service: IndexService) -> None:
    """UNIQ_KEY and each space-separated KEYS token become 'topic#key' entries."""
    service.build("T", 500, T0, "UNIQ1", "a b  c")
    for key in ("UNIQ1", "a", "b", "c"):
        assert query(service, key) == [500]
    assert query(service, "d") == []
    assert service.query("Other", "a", 64, *ALL_TIME) == []
    assert sum(len(f.entries_iter()) for f in service.files) == 4


def test_message_without_keys_indexes_nothing(service: IndexService) -> None:
    """No UNIQ_KEY and no KEYS: no entry anywhere."""
    service.build("T", 0, T0, None, None)
    assert sum(len(f.entries_iter()) for f in service.files) == 0


def test_query_returns_offsets_ascending_and_honours_count_max(service: IndexService) -> None:
    """Three messages with the same key across files: sorted ascending, count_max limits them."""
    for n in range(3):
        service.build("T", n * 100, T0 + n, None, "same")
    assert query(service, "same") == [0, 100, 200]
    assert len(query(service, "same", count_max=2)) == 2


def test_query_filters_by_time_window(service: IndexService) -> None:
    """Keys stored at T0, T0+10 s, T0+20 s; a window around T0+10 s returns only that one."""
    for n in range(3):
        service.build("T", n * 100, T0 + n * 10_000, None, "k")
    assert service.query("T", "k", 64, T0 + 5_000, T0 + 15_000) == [100]


def test_messages_already_indexed_are_skipped(service: IndexService) -> None:
    """Re-dispatch after recovery: an older offset, or the newest one again, adds no entry."""
    service.build("T", 500, T0, None, "k")
    service.build("T", 100, T0, None, "old")
    service.build("T", 500, T0, None, "k")
    assert query(service, "old") == []
    assert query(service, "k") == [500]
    service.build("T", 600, T0, None, "k")
    assert query(service, "k") == [500, 600]


def test_last_update_is_the_newest_file_end(service: IndexService) -> None:
    """(indexLastUpdateTimestamp, indexLastUpdatePhyoffset) come from the newest file."""
    assert service.last_update == (0, 0)
    service.build("T", 300, T0 + 7, None, "k")
    assert service.last_update == (T0 + 7, 300)
    assert service.end_physical_offset == 300


# --- rolling to a new file ---


def test_full_file_rolls_to_a_new_file(service: IndexService, clock: FakeClock, directory: Path) -> None:
    """5 keys with 3 per file: two files named by the clock, each holding entries-1 keys at most."""
    build_messages(service, clock, 5)
    assert len(service.files) == 2
    first, second = service.files
    assert first.path.name == index_file_name(T0 + 1)
    assert second.path.name == index_file_name(T0 + 4)
    assert sorted(p.name for p in directory.iterdir()) == [first.path.name, second.path.name]
    assert first.index_count == SETTINGS.entries
    assert len(first.entries_iter()) == SETTINGS.entries - 1
    assert second.index_count == 3
    assert [query(service, f"k{n}") for n in range(5)] == [[n * 100] for n in range(5)]


def test_full_file_reports_its_end_time_once_flushed(service: IndexService, clock: FakeClock) -> None:
    """on_file_full receives the full file's endTimestamp (it becomes checkpoint.indexMsgTimestamp)."""
    reported: list[int] = []
    service.on_file_full = reported.append
    build_messages(service, clock, 3)
    assert reported == []
    build_messages(service, clock, 1, first=3)
    assert reported == [T0 + 2_000]


def test_a_key_that_does_not_fit_goes_to_the_next_file(service: IndexService, clock: FakeClock) -> None:
    """A message with 4 keys and 3 slots free: the 4th key lands in a new file, all are found."""
    service.build("T", 0, T0, None, "a b c d")
    assert len(service.files) == 2
    assert all(query(service, key) == [0] for key in "abcd")


def test_same_millisecond_file_names_do_not_collide(service: IndexService) -> None:
    """A frozen clock: the second file's name is bumped by 1 ms instead of failing."""
    for n in range(4):
        service.build("T", n * 100, T0, None, f"k{n}")
    names = [f.path.name for f in service.files]
    assert names == [index_file_name(T0), index_file_name(T0 + 1)]


def test_query_walks_from_the_newest_file_to_older_ones(service: IndexService, clock: FakeClock) -> None:
    """Five messages a minute apart over two files: a window inside the older file finds its key."""
    for n in range(5):
        clock.now += 1
        service.build("T", n * 100, T0 + n * 60_000, None, "shared")
    assert len(service.files) == 2
    assert query(service, "shared") == [0, 100, 200, 300, 400]
    assert service.query("T", "shared", 64, T0 + 50_000, T0 + 70_000) == [100]
    assert service.query("T", "shared", 64, T0 + 290_000, T0 + 300_000) == []


def test_new_file_carries_over_the_previous_end(service: IndexService, clock: FakeClock) -> None:
    """A rolled file starts at the previous end: its first timeDiff counts from it (Java quirk, kept)."""
    for n in range(5):
        clock.now += 1
        service.build("T", n * 100, T0 + n * 60_000, None, "shared")
    rolled = service.files[-1]
    assert rolled.begin_timestamp == T0 + 180_000
    assert [e[2] for e in rolled.entries_iter()] == [60, 60]  # (180 s - 120 s) and (240 s - 180 s)
    assert service.query("T", "shared", 64, T0 + 230_000, T0 + 250_000) == [300, 400]


# --- retention and truncation ---


def test_delete_expired_removes_old_files_but_never_the_newest(
    service: IndexService, clock: FakeClock, directory: Path
) -> None:
    """Files ending at offsets 200, 500, 600: a CommitLog start of 10_000 deletes the first two."""
    build_messages(service, clock, 7)
    assert [f.end_physical_offset for f in service.files] == [200, 500, 600]
    assert service.delete_expired(300) == 1
    assert service.delete_expired(10_000) == 1
    assert len(service.files) == 1
    assert len(list(directory.iterdir())) == 1
    assert query(service, "k6") == [600]
    assert query(service, "k0") == []


def test_truncate_from_deletes_files_with_keys_at_or_after_the_offset(
    service: IndexService, clock: FakeClock, directory: Path
) -> None:
    """Files ending at 200 and 500: truncating at 450 deletes the second (and its stale keys) only."""
    build_messages(service, clock, 6)
    assert service.truncate_from(450) == 1
    assert [f.end_physical_offset for f in service.files] == [200]
    assert len(list(directory.iterdir())) == 1
    assert query(service, "k5") == []
    assert query(service, "k1") == [100]


def test_truncate_from_past_the_end_keeps_everything(service: IndexService, clock: FakeClock) -> None:
    """A CommitLog end after every key deletes nothing."""
    build_messages(service, clock, 4)
    assert service.truncate_from(10_000) == 0
    assert len(service.files) == 2


def test_keys_are_rebuilt_after_truncate_from(service: IndexService, clock: FakeClock) -> None:
    """Full file ending at 200, keyless message at 300, truncate at 150: a rebuilt key at 160 is found."""
    build_messages(service, clock, 3)
    clock.now += 1
    service.build("T", 300, T0 + 3_000, None, None)
    service.truncate_from(150)
    service.build("T", 160, T0 + 1_600, None, "rebuilt")
    assert query(service, "rebuilt") == [160]


# --- loading ---


def test_load_after_a_normal_exit_opens_every_file(directory: Path, clock: FakeClock) -> None:
    """Files written by one service load in name order in a second one, keys still found."""
    writer = IndexService(directory, SETTINGS, clock)
    build_messages(writer, clock, 5)
    writer.close()
    (directory / "not-an-index").write_text("x")
    reader = IndexService(directory, SETTINGS, clock)
    try:
        assert reader.load(last_exit_ok=True, index_checkpoint_ms=0) == []
        assert len(reader.files) == 2
        assert [query(reader, f"k{n}") for n in range(5)] == [[n * 100] for n in range(5)]
        assert reader.last_update == (T0 + 4_000, 400)
    finally:
        reader.close()


def test_load_after_abnormal_exit_deletes_files_newer_than_the_checkpoint(directory: Path, clock: FakeClock) -> None:
    """Crash: files whose endTimestamp > checkpoint.indexMsgTimestamp are deleted (and noted)."""
    writer = IndexService(directory, SETTINGS, clock)
    build_messages(writer, clock, 7)  # files end at T0+2 s, T0+5 s, T0+6 s
    names = [f.path.name for f in writer.files]
    writer.close()
    reader = IndexService(directory, SETTINGS, clock)
    try:
        notes = reader.load(last_exit_ok=False, index_checkpoint_ms=T0 + 2_000)
        assert [f.path.name for f in reader.files] == names[:1]
        assert sorted(p.name for p in directory.iterdir()) == names[:1]
        assert len(notes) == 2
        assert all("deleted index file" in note for note in notes)
    finally:
        reader.close()


def test_load_after_normal_exit_ignores_the_checkpoint(directory: Path, clock: FakeClock) -> None:
    """Clean shutdown: every file is kept even if newer than the checkpoint."""
    writer = IndexService(directory, SETTINGS, clock)
    build_messages(writer, clock, 4)
    writer.close()
    reader = IndexService(directory, SETTINGS, clock)
    try:
        reader.load(last_exit_ok=True, index_checkpoint_ms=0)
        assert len(reader.files) == 2
    finally:
        reader.close()


def test_load_of_a_missing_directory_is_empty(tmp_path: Path, clock: FakeClock) -> None:
    """No index directory: nothing loaded, nothing created."""
    reader = IndexService(tmp_path / "absent", SETTINGS, clock)
    assert reader.load(last_exit_ok=False, index_checkpoint_ms=0) == []
    assert reader.files == []
    assert not (tmp_path / "absent").exists()


def test_loaded_file_keeps_accepting_keys(directory: Path, clock: FakeClock) -> None:
    """A half-full file loaded from disk is the one the next key goes to."""
    writer = IndexService(directory, SETTINGS, clock)
    build_messages(writer, clock, 1)
    writer.close()
    reader = IndexService(directory, SETTINGS, clock)
    try:
        reader.load(last_exit_ok=True, index_checkpoint_ms=0)
        build_messages(reader, clock, 1, first=1)
        assert len(reader.files) == 1
        assert isinstance(reader.files[0], IndexFile)
        assert reader.files[0].index_count == 3
    finally:
        reader.close()


# --- the durable mark: keeping the flushed part of the unfilled file after a crash ---

BIG = IndexSettings(hash_slots=8, entries=64)


def test_flush_returns_the_newest_files_number_and_count(directory: Path, clock: FakeClock) -> None:
    """The mark names the newest file by its name and counts what was written before the flush."""
    writer = IndexService(directory, BIG, clock)
    try:
        assert writer.flush() == (0, 0)
        build_messages(writer, clock, 5)
        assert writer.flush() == (int(writer.files[-1].path.name), 6)
    finally:
        writer.close()


def test_abnormal_load_keeps_the_keys_below_the_mark_and_rebuilds_the_rest(directory: Path, clock: FakeClock) -> None:
    """Crash after 10 keys with a mark at 6 (5 keys): the file stays with k0..k4 and its slots
    recomputed; k5..k9 are gone, the end offset is k4's, and rebuilding them chains correctly."""
    writer = IndexService(directory, BIG, clock)
    build_messages(writer, clock, 5)
    mark = writer.flush()
    build_messages(writer, clock, 5, first=5)
    writer.close()
    reader = IndexService(directory, BIG, clock)
    try:
        notes = reader.load(last_exit_ok=False, index_checkpoint_ms=0, durable=mark)
        assert notes == [f"kept 5 keys of index file {mark[0]} (flushed by the last checkpoint)"]
        assert [query(reader, f"k{n}") for n in range(10)] == [[n * 100] for n in range(5)] + [[]] * 5
        assert reader.last_indexed_offset == 400
        newest = reader.files[-1]
        assert (newest.index_count, newest.end_physical_offset) == (6, 400)
        assert T0 + 4_000 <= newest.end_timestamp < T0 + 5_000
        build_messages(reader, clock, 6, first=4)  # re-dispatch from the mark's message on
        assert [query(reader, f"k{n}") for n in range(10)] == [[n * 100] for n in range(10)]
        assert newest.index_count == 11
    finally:
        reader.close()


def test_abnormal_load_with_a_mark_of_another_file_deletes_the_unfilled_one(directory: Path, clock: FakeClock) -> None:
    """A mark naming a file that is not the unfilled one (or no keys) keeps nothing of it."""
    writer = IndexService(directory, BIG, clock)
    build_messages(writer, clock, 3)
    name = writer.files[-1].path.name
    writer.close()
    for durable in ((int(name) + 1, 3), (int(name), 1), (0, 0)):
        reader = IndexService(directory, BIG, clock)
        try:
            assert reader.load(last_exit_ok=False, index_checkpoint_ms=0, durable=durable) == [
                f"deleted index file {name}: it may hold keys of unflushed messages"
            ]
            assert reader.files == []
        finally:
            reader.close()
        writer = IndexService(directory, BIG, clock)
        build_messages(writer, clock, 3)
        name = writer.files[-1].path.name
        writer.close()


def test_keep_first_stops_at_an_entry_whose_offset_goes_backwards(directory: Path, clock: FakeClock) -> None:
    """Damage below the mark (an offset lower than its predecessor's): entries from there are dropped."""
    writer = IndexService(directory, BIG, clock)
    build_messages(writer, clock, 6)
    newest = writer.files[-1]
    entries_at = newest._entries_at
    struct.pack_into(">q", newest.view, entries_at + 4 * 20 + 4, 50)  # entry 4 (k3) now points below k2
    assert newest.keep_first(7) == 4
    assert [query(writer, f"k{n}") for n in range(6)] == [[0], [100], [200], [], [], []]
    writer.close()
