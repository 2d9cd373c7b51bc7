"""Tests of shoal.store.index_file: one IndexFile's header, slots, entries and lookups (spec §3)."""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal.formats.index_entry import index_file_name
from shoal.formats.java_hash import index_key_hash
from shoal.store.errors import StoreCorruptionError
from shoal.store.index_file import IndexFile

HASH_SLOTS = 8
ENTRIES = 6
T0 = 1_700_000_000_000
ENTRIES_AT = 40 + HASH_SLOTS * 4


@pytest.fixture
def index(tmp_path: Path) -> Iterator[IndexFile]:
    """A new index file with 8 slots and 6 entries (room for 5 keys)."""
    created = IndexFile(tmp_path / "20231114221320000", HASH_SLOTS, ENTRIES, create=True)
    yield created
    created.close()


@pytest.fixture
def local_time_zone() -> Iterator[None]:
    """Restore the process time zone after a test changes TZ."""
    saved = os.environ.get("TZ")
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = saved
        time.tzset()


def raw(index: IndexFile) -> bytes:
    return index.path.read_bytes()


def slot_of(key: str, slots: int = HASH_SLOTS) -> int:
    return index_key_hash(key) % slots


def entry(data: bytes, number: int, slots: int = HASH_SLOTS) -> tuple[int, int, int, int]:
    return struct.unpack_from(">iqii", data, 40 + slots * 4 + number * 20)


# --- naming and creation ---


@pytest.mark.parametrize(
    ("zone", "name"),
    [("UTC0", "20231114221320123"), ("CST-8", "20231115061320123"), ("EST5", "20231114171320123")],
)
def test_file_name_is_local_time_to_the_millisecond(local_time_zone: None, zone: str, name: str) -> None:
    """yyyyMMddHHmmssSSS in the local zone: 1700000000123 ms under three TZ settings."""
    os.environ["TZ"] = zone
    time.tzset()
    assert index_file_name(T0 + 123) == name


def test_new_file_has_the_configured_size_and_a_zero_header(index: IndexFile) -> None:
    """40 + slots*4 + entries*20 bytes, all zero until the first insert; index_count starts at 1."""
    assert index.file_size == 40 + 8 * 4 + 6 * 20
    assert raw(index) == bytes(index.file_size)
    assert index.index_count == 1
    assert (index.begin_timestamp, index.end_timestamp) == (0, 0)
    assert not index.is_full


def test_default_sizes_give_the_rocketmq_file_size() -> None:
    """5,000,000 slots and 20,000,000 entries make a 420,000,040-byte file (computed, not created)."""
    assert 40 + 5_000_000 * 4 + 20_000_000 * 20 == 420_000_040


def test_creating_over_an_existing_file_is_refused(index: IndexFile) -> None:
    """create=True uses O_EXCL: an existing name raises FileExistsError and keeps the file."""
    with pytest.raises(FileExistsError):
        IndexFile(index.path, HASH_SLOTS, ENTRIES, create=True)
    assert index.path.stat().st_size == index.file_size


def test_opening_a_file_of_the_wrong_size_is_corruption(tmp_path: Path) -> None:
    """A file whose size does not match the settings raises StoreCorruptionError naming it."""
    path = tmp_path / "20231114221320000"
    path.write_bytes(bytes(100))
    with pytest.raises(StoreCorruptionError) as raised:
        IndexFile(path, HASH_SLOTS, ENTRIES, create=False)
    assert str(path) in str(raised.value)


# --- layout after inserts ---


def test_header_slot_and_entries_after_two_inserts(index: IndexFile) -> None:
    """Two keys 2.5 s apart: check the header, both slots and both entries byte by byte."""
    assert index.put_key("T#k1", 1000, T0)
    assert index.put_key("T#k2", 2000, T0 + 2500)
    data = raw(index)
    slots_used = len({slot_of("T#k1"), slot_of("T#k2")})
    assert data[:40] == struct.pack(">qqqqii", T0, T0 + 2500, 1000, 2000, slots_used, 3)
    assert struct.unpack_from(">i", data, 40 + slot_of("T#k2") * 4)[0] == 2
    if slot_of("T#k1") != slot_of("T#k2"):
        assert struct.unpack_from(">i", data, 40 + slot_of("T#k1") * 4)[0] == 1
    assert entry(data, 0) == (0, 0, 0, 0)  # entry 0 is never used
    assert entry(data, 1) == (index_key_hash("T#k1"), 1000, 0, 0)
    previous = 1 if slot_of("T#k1") == slot_of("T#k2") else 0
    assert entry(data, 2) == (index_key_hash("T#k2"), 2000, 2, previous)


def test_first_entry_time_diff_uses_the_old_begin_timestamp(index: IndexFile) -> None:
    """Java quirk: entry 1's timeDiff is computed before beginTimestamp is set, so it is 0."""
    index.put_key("T#k", 1, T0 + 99_000)
    assert entry(raw(index), 1)[2] == 0
    assert index.begin_timestamp == T0 + 99_000


def test_time_diff_is_clamped_to_zero_and_int_max(index: IndexFile) -> None:
    """A store time before the file's begin gives 0; one 100 years later gives Integer.MAX_VALUE."""
    index.put_key("T#a", 1, T0)
    index.put_key("T#b", 2, T0 - 5_000)
    index.put_key("T#c", 3, T0 + 100 * 365 * 86_400_000)
    data = raw(index)
    assert entry(data, 2)[2] == 0
    assert entry(data, 3)[2] == 2**31 - 1


def test_header_survives_reopening(index: IndexFile) -> None:
    """Insert three keys, open the file again: header fields and entries are read back."""
    for n in range(3):
        index.put_key(f"T#k{n}", 100 * n, T0 + 1000 * n)
    reopened = IndexFile(index.path, HASH_SLOTS, ENTRIES, create=False)
    try:
        assert reopened.begin_timestamp == T0
        assert reopened.end_timestamp == T0 + 2000
        assert reopened.begin_physical_offset == 0
        assert reopened.end_physical_offset == 200
        assert reopened.index_count == 4
        assert reopened.hash_slot_count == index.hash_slot_count
        assert reopened.lookup("T#k1", 10, 0, 2**62) == [100]
        assert [e[1] for e in reopened.entries_iter()] == [0, 100, 200]
    finally:
        reopened.close()


def test_hash_slot_count_counts_slots_that_were_empty(tmp_path: Path) -> None:
    """With a single slot every key collides: hashSlotCount stays 1 and the chain links all entries."""
    single = IndexFile(tmp_path / "1", 1, ENTRIES, create=True)
    try:
        for n in range(4):
            single.put_key(f"T#k{n}", n, T0)
        assert single.hash_slot_count == 1
        data = raw(single)
        assert struct.unpack_from(">i", data, 40)[0] == 4
        assert [entry(data, n, slots=1)[3] for n in range(1, 5)] == [0, 1, 2, 3]
    finally:
        single.close()


def test_corrupt_slot_value_is_treated_as_empty(index: IndexFile) -> None:
    """A slot pointing past indexCount (garbage) does not become a chain link: prevIndex 0."""
    key = "T#k"
    struct.pack_into(">i", index.view, 40 + slot_of(key) * 4, 99)
    index.put_key(key, 5, T0)
    assert entry(raw(index), 1)[3] == 0
    assert index.hash_slot_count == 1


# --- lookups ---


def test_lookup_follows_the_chain_newest_first(tmp_path: Path) -> None:
    """k1, k2, k1 in one bucket: looking up k1 returns its two offsets, newest first."""
    single = IndexFile(tmp_path / "1", 1, ENTRIES, create=True)
    try:
        single.put_key("T#k1", 100, T0)
        single.put_key("T#k2", 200, T0)
        single.put_key("T#k1", 300, T0)
        assert single.lookup("T#k1", 10, 0, 2**62) == [300, 100]
        assert single.lookup("T#k2", 10, 0, 2**62) == [200]
        assert single.lookup("T#k1", 1, 0, 2**62) == [300]
        assert single.lookup("T#absent", 10, 0, 2**62) == []
    finally:
        single.close()


def test_hash_collisions_are_returned(index: IndexFile) -> None:
    """'Aa' and 'BB' have the same String.hashCode: a lookup of one returns the other's offset too."""
    assert index_key_hash("T#Aa") == index_key_hash("T#BB")
    index.put_key("T#Aa", 111, T0)
    assert index.lookup("T#BB", 10, 0, 2**62) == [111]


def test_lookup_filters_by_time_window(index: IndexFile) -> None:
    """Entries at T0, T0+10 s, T0+20 s: windows select by entry time (begin + timeDiff seconds)."""
    index.put_key("T#k", 1, T0)
    index.put_key("T#k", 2, T0 + 10_000)
    index.put_key("T#k", 3, T0 + 20_000)
    assert index.lookup("T#k", 10, T0 + 5_000, T0 + 15_000) == [2]
    assert index.lookup("T#k", 10, T0 + 10_000, T0 + 20_000) == [3, 2]
    assert index.lookup("T#k", 10, T0 + 21_000, T0 + 99_000) == []
    assert index.lookup("T#k", 10, 0, T0 - 1) == []


def test_lookup_of_an_empty_file_finds_nothing(index: IndexFile) -> None:
    """indexCount <= 1: nothing to look up."""
    assert index.lookup("T#k", 10, 0, 2**62) == []


def test_lookup_stops_on_a_self_referencing_entry(index: IndexFile) -> None:
    """A damaged entry whose prevIndex points at itself ends the chain instead of looping."""
    index.put_key("T#k", 7, T0)
    index.put_key("T#k", 8, T0)
    struct.pack_into(">i", index.view, ENTRIES_AT + 2 * 20 + 16, 2)
    assert index.lookup("T#k", 10, 0, 2**62) == [8]


@pytest.mark.parametrize(
    ("begin", "end", "matches"),
    [
        (T0 - 10, T0 + 100_000, True),  # window covers the file
        (T0 + 5, T0 + 6, True),  # window inside the file
        (T0 - 10, T0 + 5, True),  # overlaps the start
        (T0 + 5, T0 + 100_000, True),  # overlaps the end
        (T0 - 100, T0 - 10, False),  # entirely before
        (T0 + 20_001, T0 + 30_000, False),  # entirely after
    ],
)
def test_matches_time_is_rocketmq_is_time_matched(index: IndexFile, begin: int, end: int, matches: bool) -> None:
    """File spanning [T0, T0+20 s]: the four overlap cases match, disjoint windows do not."""
    index.put_key("T#a", 1, T0)
    index.put_key("T#b", 2, T0 + 20_000)
    assert index.matches_time(begin, end) is matches


# --- capacity ---


def test_file_holds_entries_minus_one_keys(index: IndexFile) -> None:
    """With 6 entries the 6th put fails: 5 keys fit, indexCount reaches 6 and the file is full."""
    results = [index.put_key(f"T#k{n}", n, T0) for n in range(6)]
    assert results == [True] * 5 + [False]
    assert index.is_full
    assert index.index_count == ENTRIES
    assert len(index.entries_iter()) == ENTRIES - 1
    assert struct.unpack_from(">i", raw(index), 36)[0] == ENTRIES


def test_destroy_deletes_the_file(tmp_path: Path) -> None:
    """destroy() closes and unlinks the file."""
    other = IndexFile(tmp_path / "2", HASH_SLOTS, ENTRIES, create=True)
    other.destroy()
    assert not (tmp_path / "2").exists()
