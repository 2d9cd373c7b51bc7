"""Tests of shoal.store.consume_queue (and the table of queues in consume_queue_table)."""

from __future__ import annotations

import contextlib
import logging
import signal
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal.formats.consume_queue_unit import BLANK_UNIT, BLANK_UNIT_SIZE_FIELD, UNIT_SIZE, Unit, is_blank_unit
from shoal.formats.store_layout import offset_to_file_name
from shoal.store.consume_queue import ConsumeQueue
from shoal.store.consume_queue_table import ConsumeQueueTable

UNITS_PER_FILE = 8
FILE_SIZE = UNITS_PER_FILE * UNIT_SIZE
MESSAGE_SIZE = 100
A1_CQ_UNIT = bytes.fromhex("00000000000000000000009c000000000027a807")


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "consumequeue" / "TopicTest" / "0"


@pytest.fixture
def cq(directory: Path) -> Iterator[ConsumeQueue]:
    """An empty queue with 8 units (160 bytes) per file."""
    queue = ConsumeQueue("TopicTest", 0, directory, UNITS_PER_FILE)
    yield queue
    queue.close()


def put_messages(queue: ConsumeQueue, count: int, first: int = 0) -> None:
    """Queue offset n points at CommitLog offset n*100, size 100, tagsCode n."""
    for n in range(first, first + count):
        assert queue.put(n * MESSAGE_SIZE, MESSAGE_SIZE, n, n)


def reopen(directory: Path) -> ConsumeQueue:
    queue = ConsumeQueue("TopicTest", 0, directory, UNITS_PER_FILE)
    queue.load()
    return queue


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail instead of hanging: SIGALRM raises TimeoutError in the (main) test thread."""

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def raw_units(directory: Path, start: int = 0) -> list[tuple[int, int, int]]:
    data = (directory / offset_to_file_name(start)).read_bytes()
    return [(int(a), int(b), int(c)) for a, b, c in struct.iter_unpack(">qiq", data)]


def write_raw(directory: Path, start: int, position: int, data: bytes) -> None:
    """Overwrite bytes of a closed queue file with plain file I/O."""
    with (directory / offset_to_file_name(start)).open("r+b") as file:
        file.seek(position)
        file.write(data)


# --- layout ---


def test_unit_for_the_appendix_a1_record_is_byte_exact(cq: ConsumeQueue, directory: Path) -> None:
    """A.1 at offset 0, size 156, tagsCode hash('TagA'): the 20 bytes of the spec."""
    assert cq.put(0, 156, 2598919, 0)
    data = (directory / "00000000000000000000").read_bytes()
    assert data[:20] == A1_CQ_UNIT
    assert len(data) == FILE_SIZE


def test_blank_unit_is_offset_zero_size_int_max_tags_zero() -> None:
    """The padding unit is (0, 0x7FFFFFFF, 0)."""
    assert bytes.fromhex("00000000000000007fffffff0000000000000000") == BLANK_UNIT
    assert BLANK_UNIT_SIZE_FIELD == 0x7FFFFFFF
    assert is_blank_unit(0, 0x7FFFFFFF)
    assert not is_blank_unit(1, 0x7FFFFFFF)
    assert not is_blank_unit(0, 100)


def test_negative_tags_code_is_stored_sign_extended(cq: ConsumeQueue, directory: Path) -> None:
    """tagsCode of 'TopicTest#KEY1' (-1656969516) is written as a signed long."""
    cq.put(0, 10, -1656969516, 0)
    assert (directory / offset_to_file_name(0)).read_bytes()[12:20] == bytes.fromhex("ffffffff9d3ca6d4")
    assert cq.unit_at(0) == Unit(0, 10, -1656969516)


# --- put, offsets and reads ---


def test_put_advances_max_offset_and_reads_back(cq: ConsumeQueue) -> None:
    """Five units: min 0, max 5, max_physical_offset 500, each unit readable."""
    put_messages(cq, 5)
    assert cq.min_offset == 0
    assert cq.max_offset == 5
    assert cq.max_physical_offset == 500
    assert [cq.unit_at(n) for n in range(5)] == [Unit(n * 100, 100, n) for n in range(5)]
    assert cq.unit_at(5) is None
    assert cq.last_unit() == Unit(400, 100, 4)


def test_empty_queue_has_no_units(cq: ConsumeQueue) -> None:
    """A new queue: offsets 0, no last unit, max_physical_offset -1."""
    assert (cq.min_offset, cq.max_offset, cq.max_physical_offset) == (0, 0, -1)
    assert cq.last_unit() is None
    assert cq.units_from(0) is None


def test_units_from_stops_at_the_end_of_its_file(cq: ConsumeQueue, directory: Path) -> None:
    """20 units over 3 files: a read at 5 returns units 5..7 only (a pull never crosses files)."""
    put_messages(cq, 20)
    assert sorted(p.name for p in directory.iterdir()) == [offset_to_file_name(i * FILE_SIZE) for i in range(3)]
    found = cq.units_from(5)
    assert found is not None
    view, first = found
    assert first == 5
    assert len(view) == 3 * UNIT_SIZE
    assert [u[0] for u in struct.iter_unpack(">qiq", view)] == [500, 600, 700]
    view.release()
    second = cq.units_from(8)
    assert second is not None
    assert len(second[0]) == FILE_SIZE
    second[0].release()
    assert cq.max_offset == 20


def test_duplicate_put_is_skipped(cq: ConsumeQueue) -> None:
    """Re-dispatching an indexed message (same CommitLog range) returns False and writes nothing."""
    put_messages(cq, 3)
    assert not cq.put(100, 100, 1, 1)
    assert not cq.put(200, 100, 2, 2)
    assert cq.max_offset == 3


def test_put_for_an_already_written_queue_offset_is_skipped(cq: ConsumeQueue) -> None:
    """A unit for queue offset 1 with a new CommitLog offset is still a duplicate: False."""
    put_messages(cq, 3)
    assert not cq.put(10_000, 100, 9, 1)
    assert cq.unit_at(1) == Unit(100, 100, 1)
    assert cq.max_offset == 3


def test_put_past_the_end_is_logged_and_appended(cq: ConsumeQueue, caplog: pytest.LogCaptureFixture) -> None:
    """Queue offset 5 after 3 units: logged as a gap and written at the end (Java's append-only rule)."""
    put_messages(cq, 3)
    with caplog.at_level(logging.ERROR, logger="shoal.store.consume_queue"):
        assert cq.put(500, 100, 5, 5)
    assert "gap" in caplog.text
    assert cq.max_offset == 4
    assert cq.unit_at(3) == Unit(500, 100, 5)


def test_queue_starting_past_zero_is_padded_with_blank_units(cq: ConsumeQueue, directory: Path) -> None:
    """First unit at queue offset 10 (file 160): 2 blank units precede it; min offset is 10."""
    assert cq.put(1000, 50, 7, 10)
    assert sorted(p.name for p in directory.iterdir()) == [offset_to_file_name(FILE_SIZE)]
    units = raw_units(directory, FILE_SIZE)
    assert units[:3] == [(0, 0x7FFFFFFF, 0), (0, 0x7FFFFFFF, 0), (1000, 50, 7)]
    assert (directory / offset_to_file_name(FILE_SIZE)).read_bytes()[:20] == BLANK_UNIT
    assert cq.min_offset == 10
    assert cq.max_offset == 11
    assert cq.unit_at(9) is None
    assert cq.unit_at(10) == Unit(1000, 50, 7)
    assert cq.last_unit() == Unit(1000, 50, 7)


def test_padding_within_the_first_file(cq: ConsumeQueue, directory: Path) -> None:
    """First unit at queue offset 3: file 0 holds 3 blank units then the message."""
    cq.put(777, 10, 0, 3)
    assert raw_units(directory)[:4] == [(0, 0x7FFFFFFF, 0)] * 3 + [(777, 10, 0)]
    assert cq.min_offset == 3
    assert cq.units_from(2) is None


# --- recovery ---


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">qiq", -5, 100, 0),  # negative CommitLog offset
        struct.pack(">qiq", 500, 0, 0),  # zero size
        struct.pack(">qiq", 500, -1, 0),  # negative size
        struct.pack(">qiq", 500, 100, 0)[:10],  # torn: half a unit, the rest still zeros
    ],
)
def test_recover_drops_an_invalid_tail(directory: Path, garbage: bytes) -> None:
    """Five units then garbage (and a valid-looking unit after it): recovery keeps exactly five."""
    queue = ConsumeQueue("TopicTest", 0, directory, UNITS_PER_FILE)
    put_messages(queue, 5)
    queue.close()
    write_raw(directory, 0, 5 * UNIT_SIZE, garbage)
    if len(garbage) == UNIT_SIZE:
        write_raw(directory, 0, 6 * UNIT_SIZE, struct.pack(">qiq", 600, 100, 6))
    recovered = reopen(directory)
    try:
        recovered.recover()
        assert recovered.max_offset == 5
        assert recovered.max_physical_offset == 500
        assert recovered.last_unit() == Unit(400, 100, 4)
        assert (directory / offset_to_file_name(0)).read_bytes()[5 * UNIT_SIZE :] == bytes(3 * UNIT_SIZE)
        assert recovered.put(500, 100, 5, 5)
        assert recovered.max_offset == 6
    finally:
        recovered.close()


def test_recover_deletes_files_after_the_damage(directory: Path) -> None:
    """Damage in the middle file: the file after it is deleted and the queue ends at the damage."""
    queue = ConsumeQueue("TopicTest", 0, directory, UNITS_PER_FILE)
    put_messages(queue, 20)
    queue.close()
    write_raw(directory, FILE_SIZE, 2 * UNIT_SIZE, struct.pack(">qiq", -1, -1, -1))
    recovered = reopen(directory)
    try:
        recovered.recover()
        assert sorted(p.name for p in directory.iterdir()) == [offset_to_file_name(0), offset_to_file_name(FILE_SIZE)]
        assert recovered.max_offset == 10
        assert recovered.max_physical_offset == 1000
    finally:
        recovered.close()


def test_recover_of_a_clean_queue_keeps_every_unit(directory: Path) -> None:
    """20 units over 3 files survive a reopen; appends continue at 20."""
    queue = ConsumeQueue("TopicTest", 0, directory, UNITS_PER_FILE)
    put_messages(queue, 20)
    queue.close()
    recovered = reopen(directory)
    try:
        recovered.recover()
        assert recovered.max_offset == 20
        assert recovered.max_physical_offset == 2000
        assert recovered.put(2000, 100, 20, 20)
        assert recovered.unit_at(20) == Unit(2000, 100, 20)
    finally:
        recovered.close()


def test_recover_of_a_queue_ending_on_a_file_boundary(directory: Path) -> None:
    """Exactly one full file: recovery ends at its end and the next put creates file 160."""
    queue = ConsumeQueue("TopicTest", 0, directory, UNITS_PER_FILE)
    put_messages(queue, UNITS_PER_FILE)
    queue.close()
    recovered = reopen(directory)
    try:
        recovered.recover()
        assert recovered.max_offset == UNITS_PER_FILE
        put_messages(recovered, 1, first=UNITS_PER_FILE)
        assert (directory / offset_to_file_name(FILE_SIZE)).exists()
    finally:
        recovered.close()


def test_recover_keeps_blank_padding_units(directory: Path) -> None:
    """A padded queue reopens with its blanks (valid: size > 0); correct_min_offset skips them."""
    queue = ConsumeQueue("TopicTest", 0, directory, UNITS_PER_FILE)
    queue.put(1000, 50, 7, 10)
    queue.close()
    recovered = reopen(directory)
    try:
        recovered.recover()
        assert recovered.max_offset == 11
        assert recovered.max_physical_offset == 1050
        recovered.correct_min_offset(0)
        assert recovered.min_offset == 10
    finally:
        recovered.close()


def test_recover_of_an_empty_directory_does_nothing(cq: ConsumeQueue) -> None:
    """No files: recover() drops nothing and the queue stays empty."""
    assert cq.load() == []
    assert cq.recover() == 0
    assert cq.max_offset == 0


def test_recover_reports_only_units_actually_dropped(directory: Path) -> None:
    """A clean queue drops 0 units; one garbage unit after 5 good ones drops exactly 1."""
    queue = ConsumeQueue("TopicTest", 0, directory, UNITS_PER_FILE)
    put_messages(queue, 5)
    queue.close()
    clean = reopen(directory)
    assert clean.recover() == 0
    clean.close()
    write_raw(directory, 0, 5 * UNIT_SIZE, struct.pack(">qiq", -1, 1, 0))
    damaged = reopen(directory)
    try:
        assert damaged.recover() == 1
    finally:
        damaged.close()


# --- truncation against the CommitLog ---


def test_truncate_dirty_drops_units_at_or_after_the_physical_offset(cq: ConsumeQueue, directory: Path) -> None:
    """Units at 0..500 in one file; truncate at 450 keeps 0..400 (5 units), drops 1, zeroes its bytes."""
    put_messages(cq, 6)
    assert cq.truncate_dirty(450) == 1
    assert cq.max_offset == 5
    assert cq.max_physical_offset == 500
    assert (directory / offset_to_file_name(0)).read_bytes()[5 * UNIT_SIZE :] == bytes(3 * UNIT_SIZE)
    assert cq.put(500, 100, 5, 5)


def test_truncate_dirty_deletes_whole_files_past_the_offset(cq: ConsumeQueue, directory: Path) -> None:
    """20 units in 3 files; truncate at 250 deletes files 160 and 320 and keeps 3 units of file 0."""
    put_messages(cq, 20)
    with deadline(2.0):  # this once looped forever (the emptied last file was never deleted)
        dropped = cq.truncate_dirty(250)
    assert dropped == 17
    assert sorted(p.name for p in directory.iterdir()) == [offset_to_file_name(0)]
    assert cq.max_offset == 3
    assert cq.max_physical_offset == 300


def test_truncate_dirty_at_zero_empties_the_queue(cq: ConsumeQueue, directory: Path) -> None:
    """Truncating at CommitLog offset 0 removes every file; the queue restarts at 0."""
    put_messages(cq, 3)
    with deadline(2.0):
        dropped = cq.truncate_dirty(0)
    assert dropped == 3
    assert cq.max_offset == 0
    assert cq.max_physical_offset == -1
    assert not any(directory.iterdir())
    put_messages(cq, 1)
    assert cq.unit_at(0) == Unit(0, 100, 0)


def test_truncate_dirty_past_the_end_keeps_everything(cq: ConsumeQueue) -> None:
    """A CommitLog end beyond every unit drops nothing."""
    put_messages(cq, 4)
    assert cq.truncate_dirty(10_000) == 0
    assert cq.max_offset == 4


def test_truncate_dirty_keeps_blank_padding(cq: ConsumeQueue) -> None:
    """A padded queue truncated before its message keeps the blanks; max_physical_offset is -1."""
    cq.put(1000, 50, 7, 10)
    assert cq.truncate_dirty(1000) == 1
    assert cq.max_offset == 10
    assert cq.max_physical_offset == -1


# --- retention ---


def test_delete_expired_removes_files_below_the_commitlog_start(cq: ConsumeQueue, directory: Path) -> None:
    """CommitLog now starts at 850: file 0 (last unit 700) goes, file 160 (last unit 1500) stays."""
    put_messages(cq, 20)
    assert cq.delete_expired(850) == 1
    expected = [offset_to_file_name(FILE_SIZE), offset_to_file_name(2 * FILE_SIZE)]
    assert sorted(p.name for p in directory.iterdir()) == expected
    assert cq.min_offset == 9  # unit 8 points at 800 < 850; unit 9 at 900 is the first still readable
    assert cq.unit_at(8) is None
    assert cq.unit_at(9) == Unit(900, 100, 9)
    assert cq.max_offset == 20


def test_delete_expired_never_deletes_the_last_file(cq: ConsumeQueue, directory: Path) -> None:
    """Everything expired: the last file stays and min offset reaches max offset (an empty queue)."""
    put_messages(cq, 20)
    assert cq.delete_expired(10**9) == 2
    assert sorted(p.name for p in directory.iterdir()) == [offset_to_file_name(2 * FILE_SIZE)]
    assert cq.min_offset == cq.max_offset == 20


def test_correct_min_offset_skips_units_below_the_commitlog_start(cq: ConsumeQueue) -> None:
    """No file deleted, CommitLog start 350: the min offset moves to unit 4 (offset 400)."""
    put_messages(cq, 6)
    cq.correct_min_offset(350)
    assert cq.min_offset == 4
    assert cq.units_from(3) is None


def test_correct_min_offset_never_moves_backwards(cq: ConsumeQueue) -> None:
    """After moving to 4, a lower CommitLog start does not bring units 0..3 back."""
    put_messages(cq, 6)
    cq.correct_min_offset(350)
    cq.correct_min_offset(0)
    assert cq.min_offset == 4


# --- search by time ---


def store_times(base_ms: int = 1_000, step_ms: int = 10) -> dict[int, int]:
    """Fake CommitLog: the message at n*100 was stored at base + n*step."""
    return {n * MESSAGE_SIZE: base_ms + n * step_ms for n in range(50)}


@pytest.mark.parametrize(
    ("timestamp", "expected"),
    [
        (1_030, 3),  # exact hit
        (1_031, 3),  # closer to the left neighbour
        (1_038, 4),  # closer to the right neighbour
        (1_035, 3),  # a tie goes left
        (0, 0),  # before everything: the first
        (999_999, 9),  # after everything: the last
    ],
)
def test_offset_by_time_finds_the_closest_unit(cq: ConsumeQueue, timestamp: int, expected: int) -> None:
    """Ten units stored at 1000, 1010, ... ms: binary search with a fake store-time function."""
    put_messages(cq, 10)
    times = store_times()
    assert cq.offset_by_time(timestamp, times.get) == expected


def test_offset_by_time_of_an_empty_queue_is_zero(cq: ConsumeQueue) -> None:
    """Nothing to search: 0."""
    assert cq.offset_by_time(1_000, store_times().get) == 0


def test_offset_by_time_searches_from_the_min_offset(cq: ConsumeQueue) -> None:
    """A padded queue starting at 10: a time before everything gives 10, not a blank unit."""
    for n in range(10, 15):
        cq.put(n * MESSAGE_SIZE, MESSAGE_SIZE, 0, n)
    assert cq.offset_by_time(0, store_times().get) == 10
    assert cq.offset_by_time(1_120, store_times().get) == 12


def test_offset_by_time_treats_cleaned_messages_as_older(cq: ConsumeQueue) -> None:
    """Store time unknown (CommitLog cleaned) for the first 3 units: a search lands on unit 3 or later."""
    put_messages(cq, 10)
    times = {k: v for k, v in store_times().items() if k >= 300}
    assert cq.offset_by_time(1_000, times.get) == 3
    assert cq.offset_by_time(1_060, times.get) == 6


# --- the table of queues ---


def test_table_creates_queues_on_first_use_and_finds_them(tmp_path: Path) -> None:
    """find_or_create returns the same queue for the same (topic, id); find returns None before."""
    table = ConsumeQueueTable(tmp_path / "consumequeue", UNITS_PER_FILE)
    try:
        assert table.find("T", 1) is None
        queue = table.find_or_create("T", 1)
        assert table.find_or_create("T", 1) is queue
        assert table.find("T", 1) is queue
        assert queue.queue.directory == tmp_path / "consumequeue" / "T" / "1"
        assert len(table) == 1
    finally:
        table.close()


def test_table_load_ignores_directories_that_are_not_queue_ids(tmp_path: Path) -> None:
    """consumequeue/T/0 and T/3 load; T/abc and a stray file are ignored as in RocketMQ."""
    root = tmp_path / "consumequeue"
    first = ConsumeQueue("T", 0, root / "T" / "0", UNITS_PER_FILE)
    put_messages(first, 2)
    first.close()
    (root / "T" / "3").mkdir(parents=True)
    (root / "T" / "abc").mkdir()
    (root / "stray").write_text("x")
    table = ConsumeQueueTable(root, UNITS_PER_FILE)
    try:
        table.load()
        assert sorted((q.topic, q.queue_id) for q in table) == [("T", 0), ("T", 3)]
        for queue in table:
            queue.recover()
        assert table.max_physical_offset == 200
        assert [q.queue_id for q in table.queues_of("T")] == [0, 3]
        assert table.topics() == {"T"}
    finally:
        table.close()


@pytest.mark.parametrize("name", ["--1", "\u00b2"])
def test_table_load_skips_queue_directories_whose_name_is_not_an_int(tmp_path: Path, name: str) -> None:
    """consumequeue/T/<name> where int(name) fails is ignored, and T/0 still loads."""
    root = tmp_path / "consumequeue"
    (root / "T" / "0").mkdir(parents=True)
    (root / "T" / name).mkdir()
    table = ConsumeQueueTable(root, UNITS_PER_FILE)
    try:
        table.load()
        assert [(q.topic, q.queue_id) for q in table] == [("T", 0)]
    finally:
        table.close()


def test_table_remove_topic_deletes_its_directory(tmp_path: Path) -> None:
    """remove_topic destroys every queue of the topic and its directory, other topics stay."""
    root = tmp_path / "consumequeue"
    table = ConsumeQueueTable(root, UNITS_PER_FILE)
    try:
        put_messages(table.find_or_create("A", 0), 1)
        put_messages(table.find_or_create("A", 1), 1)
        put_messages(table.find_or_create("B", 0), 1)
        assert table.remove_topic("A") == 2
        assert not (root / "A").exists()
        assert (root / "B" / "0").exists()
        assert table.find("A", 0) is None
        assert table.topics() == {"B"}
    finally:
        table.close()
