"""Corruption: cut the CommitLog at every offset of its last record, flip bytes, break files.

A pristine store (a few hundred messages, shut down cleanly) is built once; every case works on
a copy of it, damages the copy, reopens it and checks that recovery never crashes, keeps every
intact record (before the damage, and after it when the damage is in the middle), drops a torn
tail (ConsumeQueue units and index keys included), reports the loss, and leaves a store that
accepts writes.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from shoal.formats.consume_queue_unit import UNIT
from shoal.formats.properties import encode_properties
from shoal.formats.record import decode_header
from shoal.store import (
    CommitLogSettings,
    ConsumeQueueSettings,
    GetMessageStatus,
    IndexSettings,
    MessageStore,
    MessageToStore,
    PutStatus,
    RecoveryReport,
    StoreCorruptionError,
    StoreSettings,
)
from shoal.store.recovery import LostMessage

SEGMENT_BYTES = 64 * 1024
MESSAGE_COUNT = 300
TOPICS = ("CorruptA", "CorruptB")
QUEUES_PER_TOPIC = 3
FLIP_CASES = 60
START_MS = 1_700_000_000_000


def store_settings(root: Path) -> StoreSettings:
    return StoreSettings(
        root_dir=root,
        commitlog=CommitLogSettings(segment_size_bytes=SEGMENT_BYTES, message_body_size_max_bytes=16 * 1024),
        consume_queue=ConsumeQueueSettings(units_per_file=64),
        index=IndexSettings(hash_slots=64, entries=256),
    )


class Record(NamedTuple):
    topic: str
    queue_id: int
    queue_offset: int
    start: int
    size: int
    crc: int
    key: str

    @property
    def end(self) -> int:
        return self.start + self.size


class Pristine(NamedTuple):
    root: Path
    records: list[Record]


class FakeClock:
    def __init__(self, now_ms: int = START_MS) -> None:
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now

    def monotonic_s(self) -> float:
        return time.monotonic()


def write_messages(
    store: MessageStore, count: int, rng: random.Random, prefix: str = "key", last_body_bytes: int = 0
) -> list[Record]:
    """`count` messages with non-zero random bodies (so any cut or flip inside one is visible);
    the last body is `last_body_bytes` long when given (fewer cut offsets to try)."""
    records = []
    for i in range(count):
        topic, queue_id = TOPICS[i % 2], (i // 2) % QUEUES_PER_TOPIC
        size = last_body_bytes if i == count - 1 and last_body_bytes else rng.randrange(20, 300)
        body = bytes(rng.randrange(1, 256) for _ in range(size))
        key = f"{prefix}{i}"
        result = store.put_message(MessageToStore(topic, queue_id, body, encode_properties({"KEYS": key})))
        assert result.status is PutStatus.PUT_OK and result.append is not None
        append = result.append
        records.append(
            Record(topic, queue_id, append.queue_offset, append.wrote_offset, append.wrote_bytes, zlib.crc32(body), key)
        )
    return records


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    """A store of MESSAGE_COUNT messages in two CommitLog segments, cleanly shut down."""
    root = tmp_path_factory.mktemp("pristine") / "store"
    store = MessageStore(store_settings(root))
    store.open()
    store.start()
    records = write_messages(store, MESSAGE_COUNT, random.Random(7), last_body_bytes=40)
    store.shutdown()
    assert records[-1].end // SEGMENT_BYTES == 1, "the cases assume two segments (all in the recovery scan)"
    return Pristine(root, records)


@pytest.fixture
def work(tmp_path: Path, pristine: Pristine) -> Iterator[Path]:
    """A private copy of the pristine store to damage."""
    root = tmp_path / "store"
    shutil.copytree(pristine.root, root)
    yield root


def segment_path(root: Path, offset: int) -> Path:
    return root / "commitlog" / f"{offset - offset % SEGMENT_BYTES:020d}"


def read_at(root: Path, offset: int, size: int) -> bytes:
    with segment_path(root, offset).open("rb") as handle:
        handle.seek(offset % SEGMENT_BYTES)
        return handle.read(size)


def write_at(root: Path, offset: int, data: bytes) -> None:
    with segment_path(root, offset).open("r+b") as handle:
        handle.seek(offset % SEGMENT_BYTES)
        handle.write(data)


def zero_from(root: Path, offset: int) -> None:
    """Cut the log at `offset`: zeros up to the end of its segment, the file keeps its size."""
    write_at(root, offset, bytes(SEGMENT_BYTES - offset % SEGMENT_BYTES))
    assert segment_path(root, offset).stat().st_size == SEGMENT_BYTES


def open_store(root: Path, **kwargs: object) -> tuple[MessageStore, RecoveryReport]:
    store = MessageStore(store_settings(root), **kwargs)  # type: ignore[arg-type]
    report = store.open()
    store.start()
    return store, report


def queue_contents(store: MessageStore) -> dict[tuple[str, int], list[tuple[int, int, int]]]:
    """(queue offset, CommitLog offset, body CRC) of every readable message, per queue."""
    contents: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    for topic in TOPICS:
        for queue_id in range(QUEUES_PER_TOPIC):
            found = contents.setdefault((topic, queue_id), [])
            offset = store.min_offset_in_queue(topic, queue_id)
            while True:
                got = store.get_messages(topic, queue_id, offset, 32)
                if got.status is not GetMessageStatus.FOUND:
                    break
                for queue_offset, commitlog_offset, view in zip(
                    got.queue_offsets, got.commitlog_offsets, got.messages, strict=True
                ):
                    header = decode_header(view, 0)
                    assert (header.topic, header.queue_id, header.queue_offset) == (topic, queue_id, queue_offset)
                    body = view[header.body_position : header.body_position + header.body_length]
                    found.append((queue_offset, commitlog_offset, zlib.crc32(body)))
                    body.release()
                offset = got.next_begin_offset
                got.release()
    return contents


def expected_contents(records: list[Record]) -> dict[tuple[str, int], list[tuple[int, int, int]]]:
    contents: dict[tuple[str, int], list[tuple[int, int, int]]] = {
        (topic, queue_id): [] for topic in TOPICS for queue_id in range(QUEUES_PER_TOPIC)
    }
    for record in records:
        contents[(record.topic, record.queue_id)].append((record.queue_offset, record.start, record.crc))
    return contents


def key_offsets(store: MessageStore, record: Record) -> list[int]:
    found = store.query_by_key(record.topic, record.key, 8)
    offsets = [header.physical_offset for header, _view in found]
    for _header, view in found:
        view.release()
    return offsets


def check_kept_exactly(store: MessageStore, kept: list[Record], dropped: list[Record]) -> None:
    """Everything in `kept` is readable and indexed, nothing of `dropped` is; then a new put lands
    where the first dropped record was, with its queue offset, and is readable."""
    assert queue_contents(store) == expected_contents(kept)
    for record in kept[:: max(1, len(kept) // 10)] + kept[-1:]:
        assert key_offsets(store, record) == [record.start], record
    for record in dropped[:10]:
        assert key_offsets(store, record) == [], record
    target = dropped[0] if dropped else None
    topic, queue_id = (target.topic, target.queue_id) if target else (TOPICS[0], 0)
    result = store.put_message(MessageToStore(topic, queue_id, b"after recovery", encode_properties({"KEYS": "new"})))
    assert result.status is PutStatus.PUT_OK and result.append is not None
    if target is not None:
        assert (result.append.wrote_offset, result.append.queue_offset) == (target.start, target.queue_offset)
    store.dispatch_now()
    got = store.get_messages(topic, queue_id, result.append.queue_offset, 1)
    assert got.status is GetMessageStatus.FOUND
    assert got.commitlog_offsets == [result.append.wrote_offset]
    got.release()


def check_kept_after_damage(store: MessageStore, kept: list[Record], lost: list[Record]) -> None:
    """Everything in `kept` is readable and indexed under its own queue offset, nothing of `lost`
    is; a new put lands after the last record and is readable."""
    assert queue_contents(store) == expected_contents(kept)
    for record in kept[:: max(1, len(kept) // 10)] + kept[-1:]:
        assert key_offsets(store, record) == [record.start], record
    for record in lost[:10]:
        assert key_offsets(store, record) == [], record
    topic, queue_id = (lost[0].topic, lost[0].queue_id) if lost else (TOPICS[0], 0)
    next_queue_offset = store.max_offset_in_queue(topic, queue_id)
    result = store.put_message(MessageToStore(topic, queue_id, b"after recovery", encode_properties({"KEYS": "new"})))
    assert result.status is PutStatus.PUT_OK and result.append is not None
    assert result.append.wrote_offset == max(r.end for r in kept + lost)
    assert result.append.queue_offset == next_queue_offset
    store.dispatch_now()
    got = store.get_messages(topic, queue_id, result.append.queue_offset, 1)
    assert got.status is GetMessageStatus.FOUND
    assert got.commitlog_offsets == [result.append.wrote_offset]
    got.release()


def last_nonzero_end(data: bytes) -> int:
    stripped = data.rstrip(b"\x00")
    return len(stripped)


# --- (a) cut the last record at every offset ---


def test_cutting_the_last_record_anywhere_before_its_properties_drops_only_that_record(
    tmp_path: Path, pristine: Pristine
) -> None:
    """Goal: a torn last record is dropped with its unit and key, loss reported. Method: cut at each offset."""
    # Cut = zeros from an offset inside the last record to the end of its segment (the file keeps its size).
    *kept, last = pristine.records
    original = read_at(pristine.root, last.start, last.size)
    header = decode_header(original, 0)
    cut_limit = header.properties_position  # from here on, only the unprotected properties change
    assert cut_limit > 100
    for cut in range(cut_limit):
        root = tmp_path / f"cut-{cut}"
        shutil.copytree(pristine.root, root)
        zero_from(root, last.start + cut)
        store, report = open_store(root)
        try:
            context = f"cut at byte {cut} of the last record: {report.summary()}"
            assert report.recovered_end_offset == last.start, context
            assert report.consume_queue_units_dropped == 1, context
            torn = original[:cut]
            if any(torn[:8]):
                assert report.damage and not report.lossless, context
                assert report.commitlog_bytes_dropped == last_nonzero_end(torn), context
            else:  # the surviving bytes are zeros: indistinguishable from never written
                assert report.damage == "" and report.lossless, context
            check_kept_exactly(store, kept, [last])
        finally:
            store.shutdown()
        shutil.rmtree(root)


def test_cutting_inside_the_last_records_properties_keeps_it_with_its_body_intact(
    tmp_path: Path, pristine: Pristine
) -> None:
    """Goal: a cut inside the properties keeps the record, body intact. Method: cut at each offset."""
    # RocketMQ's record has no checksum over the properties: zeroing their tail leaves a record whose
    # lengths add up and whose body CRC holds, so recovery keeps it (a format limit, not a store bug).
    last = pristine.records[-1]
    original = read_at(pristine.root, last.start, last.size)
    header = decode_header(original, 0)
    for cut in range(header.properties_position, last.size):
        root = tmp_path / f"cut-{cut}"
        shutil.copytree(pristine.root, root)
        zero_from(root, last.start + cut)
        store, report = open_store(root)
        try:
            context = f"cut at byte {cut}: {report.summary()}"
            assert report.recovered_end_offset == last.end, context
            assert queue_contents(store) == expected_contents(pristine.records), context
            result = store.put_message(MessageToStore(last.topic, last.queue_id, b"after"))
            assert result.status is PutStatus.PUT_OK and result.append is not None
            assert result.append.queue_offset == last.queue_offset + 1
        finally:
            store.shutdown()
        shutil.rmtree(root)


# --- (b) flip a byte inside a record ---

CHECKED_FIELDS: dict[str, tuple[int, int]] = {
    "TOTALSIZE": (0, 4),
    "MAGICCODE": (4, 8),
    "BODYCRC": (8, 12),
    "PHYSICALOFFSET": (28, 36),
    "BODYLENGTH": (84, 88),
}
"""Header fields recovery can check (the others, e.g. FLAG or timestamps, carry no redundancy)."""


def flip_position(rng: random.Random, record_bytes: bytes) -> tuple[str, int]:
    """A byte recovery must notice: a checked header field, the body, or a length field."""
    header = decode_header(record_bytes, 0)
    regions = {
        **CHECKED_FIELDS,
        "BODY": (header.body_position, header.body_position + header.body_length),
        "TOPICLENGTH": (header.body_position + header.body_length, header.body_position + header.body_length + 1),
        "PROPERTIESLENGTH": (header.properties_position - 2, header.properties_position),
    }
    name = rng.choice(sorted(regions))
    start, end = regions[name]
    return name, rng.randrange(start, end)


@pytest.mark.parametrize("seed", range(FLIP_CASES))
def test_a_flipped_byte_loses_only_its_record_and_reports_it(seed: int, work: Path, pristine: Pristine) -> None:
    """Goal: a flipped checked byte loses that record alone (the last one: the log ends there), reported.
    Method: seeded record, field, byte."""
    # Only bytes recovery can check are flipped (see CHECKED_FIELDS); half the cases follow an abnormal exit.
    rng = random.Random(seed)
    records = pristine.records
    index = rng.randrange(len(records))
    if seed < 4:
        index = len(records) - 1 - seed % 2  # the last record (a torn tail) and the one before it
    target = records[index]
    original = read_at(work, target.start, target.size)
    field, position = flip_position(rng, original)
    write_at(work, target.start + position, bytes([original[position] ^ rng.randrange(1, 256)]))
    abnormal = seed % 2 == 1
    if abnormal:
        (work / "abort").touch()
    damaged = read_at(work, target.start, target.size)
    store, report = open_store(work)
    try:
        context = f"record {index} field {field} byte {position}: {report.summary()}"
        assert report.last_exit_ok is not abnormal
        assert not report.lossless, context
        if target is records[-1]:  # nothing intact follows: a torn tail, cut as RocketMQ does
            assert report.recovered_end_offset == target.start, context
            assert report.damage and report.damaged_ranges == [], context
            assert report.commitlog_bytes_dropped == target.size, context
            assert report.consume_queue_units_dropped == 1, context
            check_kept_exactly(store, records[:index], [target])
        else:
            assert report.recovered_end_offset == records[-1].end, context
            assert report.damage == "" and report.commitlog_bytes_dropped == 0, context
            assert [(d.start_offset, d.end_offset) for d in report.damaged_ranges] == [(target.start, target.end)]
            assert target.start in report.damaged_ranges[0].record_offsets, context
            assert report.lost_messages == [
                LostMessage(target.topic, target.queue_id, target.queue_offset, target.start)
            ], context
            assert report.consume_queue_units_blanked == 1, context
            assert Path(report.damaged_ranges[0].saved_as).read_bytes() == damaged
            check_kept_after_damage(store, [r for r in records if r is not target], [target])
    finally:
        store.shutdown()
    reopened, again = open_store(work)
    try:
        assert again.lossless and again.last_exit_ok, again.summary()
        assert len(again.known_damaged_ranges) == (0 if target is records[-1] else 1)
        assert again.index_files_deleted == 0
    finally:
        reopened.shutdown()


@pytest.mark.parametrize("damage", ["abnormal exit", "cut last record"])
def test_every_key_is_found_exactly_once_after_the_index_is_rebuilt(
    work: Path, pristine: Pristine, damage: str
) -> None:
    """Goal: after an index rebuild a key query finds its message once. Method: recover, query all keys."""
    kept = pristine.records
    if damage == "abnormal exit":
        (work / "abort").touch()
    else:
        zero_from(work, kept[-1].start + 10)
        kept = kept[:-1]
    store, report = open_store(work)
    try:
        assert report.messages_redispatched > 0
        duplicated = [r.key for r in kept if key_offsets(store, r) != [r.start]]
        assert duplicated == []
    finally:
        store.shutdown()


# --- (c) broken files ---


def test_a_wrong_magic_code_mid_log_loses_only_that_record_with_a_damage_report(work: Path, pristine: Pristine) -> None:
    """Goal: an unknown magic mid-log is reported damage, later records kept. Method: overwrite one magic."""
    target = pristine.records[150]
    write_at(work, target.start + 4, bytes.fromhex("0BADF00D"))
    store, report = open_store(work)
    try:
        assert report.recovered_end_offset == pristine.records[-1].end
        assert [d.reason for d in report.damaged_ranges] == ["magic 0x0BADF00D is neither message nor blank"], (
            report.summary()
        )
        assert not report.lossless
        check_kept_after_damage(store, [r for r in pristine.records if r is not target], [target])
    finally:
        store.shutdown()


def test_a_segment_of_the_wrong_size_in_the_middle_refuses_to_open(work: Path, pristine: Pristine) -> None:
    """Goal: a wrong-size middle segment is StoreCorruptionError naming it. Method: shorten, open, repair."""
    (work / "commitlog" / f"{2 * SEGMENT_BYTES:020d}").write_bytes(bytes(SEGMENT_BYTES))
    middle = segment_path(work, SEGMENT_BYTES)
    saved = middle.read_bytes()
    os.truncate(middle, SEGMENT_BYTES // 2)
    with pytest.raises(StoreCorruptionError, match=re.escape(str(middle))):
        MessageStore(store_settings(work)).open()
    assert middle.stat().st_size == SEGMENT_BYTES // 2
    middle.write_bytes(saved)
    store, report = open_store(work)  # the lock was released by the failed open
    try:
        assert report.lossless
        check_kept_exactly(store, pristine.records, [])
    finally:
        store.shutdown()


def test_a_missing_segment_in_the_middle_refuses_to_open(work: Path) -> None:
    """Goal: a gap between segments is StoreCorruptionError naming the file. Method: delete segment 1."""
    after_gap = work / "commitlog" / f"{2 * SEGMENT_BYTES:020d}"
    after_gap.write_bytes(bytes(SEGMENT_BYTES))
    segment_path(work, SEGMENT_BYTES).unlink()
    with pytest.raises(StoreCorruptionError, match=re.escape(str(after_gap))):
        MessageStore(store_settings(work)).open()


CUT_AT_BYTES = 1000
"""Where the last segment is cut: inside its records (the pristine store writes well past it)."""


@pytest.mark.parametrize("which", ["empty preallocated", "holding data"])
def test_a_short_last_segment_is_a_torn_tail_extended_and_reported(work: Path, pristine: Pristine, which: str) -> None:
    """Goal: a newest segment cut short (a copy that ran out of space) opens as a torn tail: the
    records before the cut kept, the rest dropped with their units and keys, the cut reported, the
    store writable, as RocketMQ carries on. Method: truncate the newest segment, open, check."""
    segments = sorted((work / "commitlog").iterdir())
    assert len(segments) == 2, "two data segments (the unused preallocated one went at shutdown)"
    records = pristine.records
    if which == "empty preallocated":
        extra = work / "commitlog" / f"{2 * SEGMENT_BYTES:020d}"  # as if an allocation was cut short
        extra.write_bytes(bytes(SEGMENT_BYTES))
        segments.append(extra)
    last = segments[-1]
    os.truncate(last, CUT_AT_BYTES)
    cut_offset = int(last.name) + CUT_AT_BYTES
    kept = [record for record in records if record.end <= cut_offset]
    dropped = [record for record in records if record.end > cut_offset]
    assert which == "empty preallocated" or (kept and dropped)
    store, report = open_store(work)
    try:
        # extended, or (holding nothing) deleted as any segment past the end of the data is
        assert last.stat().st_size == SEGMENT_BYTES if dropped else not last.exists()
        assert not report.lossless and report.segments_cut, report.summary()
        assert f"cut to {CUT_AT_BYTES} of {SEGMENT_BYTES} bytes" in report.summary()
        assert report.recovered_end_offset == (dropped[0].start if dropped else records[-1].end), report.summary()
        assert report.consume_queue_units_dropped == len(dropped), report.summary()
        check_kept_exactly(store, kept, dropped)
    finally:
        store.shutdown()
    reopened, again = open_store(work)  # the repair holds: a second start is clean
    try:
        assert again.lossless and not again.segments_cut, again.summary()
    finally:
        reopened.shutdown()


def test_a_leftover_tmp_segment_is_removed_and_noted(work: Path, pristine: Pristine) -> None:
    """Goal: leftover .tmp segments are removed with a note, lossless. Method: plant two .tmp files."""
    leftovers = [
        work / "commitlog" / f"{3 * SEGMENT_BYTES:020d}.tmp",
        work / "consumequeue" / TOPICS[0] / "0" / f"{64 * 20 * 9:020d}.tmp",
    ]
    for leftover in leftovers:
        leftover.write_bytes(b"\x01" * 1000)
    store, report = open_store(work)
    try:
        assert report.lossless
        assert sum("removed" in note and ".tmp" in note for note in report.notes) == 2, report.notes
        assert not any(leftover.exists() for leftover in leftovers)
        check_kept_exactly(store, pristine.records, [])
    finally:
        store.shutdown()


def test_a_corrupted_checkpoint_is_distrusted_and_recovery_scans_everything(tmp_path: Path) -> None:
    """Goal: a checkpoint failing its CRC is distrusted, recovery scans all. Method: flip a byte."""
    # Segments are stamped a minute apart by an injected clock, so a trusted checkpoint makes abnormal
    # recovery start at a late segment; a flipped checkpoint byte must make it start at the first.
    clock = FakeClock()
    root = tmp_path / "store"
    store, _report = open_store(root, clock=clock)
    rng = random.Random(3)
    records: list[Record] = []
    while store.max_offset < 3 * SEGMENT_BYTES + 1000:
        clock.now = START_MS + (store.max_offset // SEGMENT_BYTES) * 60_000
        records += write_messages(store, 1, rng, prefix=f"k{len(records)}-")
    store.shutdown()
    for corrupt in (False, True):
        case = tmp_path / f"corrupt-{corrupt}"
        shutil.copytree(root, case)
        (case / "abort").touch()
        if corrupt:
            checkpoint = bytearray((case / "checkpoint").read_bytes())
            checkpoint[3] ^= 0x40
            (case / "checkpoint").write_bytes(bytes(checkpoint))
        reopened, report = open_store(case, clock=clock)
        try:
            assert not report.last_exit_ok
            assert reopened._checkpoint.trusted is not corrupt
            if corrupt:
                assert report.scan_start_offset == 0
                assert any("checkpoint" in note for note in report.notes), report.notes
            else:
                assert report.scan_start_offset >= 2 * SEGMENT_BYTES
            assert report.lossless
            assert report.recovered_end_offset == records[-1].end
            assert queue_contents(reopened) == expected_contents(records)
        finally:
            reopened.shutdown()


@pytest.mark.parametrize("garbage", ["units past the CommitLog end", "random bytes"])
def test_garbage_units_at_a_consume_queue_tail_are_dropped(work: Path, pristine: Pristine, garbage: str) -> None:
    """Goal: garbage units after a ConsumeQueue's tail are dropped. Method: write garbage, reopen, put."""
    topic, queue_id = TOPICS[1], 2
    mine = [r for r in pristine.records if (r.topic, r.queue_id) == (topic, queue_id)]
    assert len(mine) % 64 != 0, "the garbage must land inside the last ConsumeQueue file"
    queue_dir = work / "consumequeue" / topic / str(queue_id)
    last_file = sorted(queue_dir.iterdir())[-1]
    position = (len(mine) % 64) * UNIT.size
    end = pristine.records[-1].end
    if garbage == "random bytes":
        data = random.Random(11).randbytes(3 * UNIT.size)
    else:
        data = b"".join(UNIT.pack(end + 500 * n, 200, 0) for n in range(3))
    with last_file.open("r+b") as handle:
        handle.seek(position)
        handle.write(data)
    store, report = open_store(work)
    try:
        assert store.max_offset_in_queue(topic, queue_id) == len(mine)
        if garbage != "random bytes":
            assert report.consume_queue_units_dropped == 3
        check_kept_exactly(store, pristine.records, [])
        result = store.put_message(MessageToStore(topic, queue_id, b"next"))
        assert result.append is not None and result.append.queue_offset == len(mine)
    finally:
        store.shutdown()


# --- (d) abnormal exit ---


def test_a_copy_taken_while_the_store_runs_recovers_as_an_abnormal_exit(tmp_path: Path) -> None:
    """Goal: a copy of a running store recovers abnormally, lossless. Method: copy, stop, open the copy."""
    running, _report = open_store(tmp_path / "running")
    records = write_messages(running, 200, random.Random(5))
    running.dispatch_now()
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "running", copy)
    running.shutdown()
    assert (copy / "abort").exists()
    store, report = open_store(copy)
    try:
        assert not report.last_exit_ok
        assert report.lossless and report.consume_queue_units_dropped == 0
        assert report.recovered_end_offset == records[-1].end
        check_kept_exactly(store, records, [])
    finally:
        store.shutdown()


CHILD_EXITING_WITHOUT_SHUTDOWN = """
import os, sys
from pathlib import Path
from shoal.store import (CommitLogSettings, ConsumeQueueSettings, IndexSettings, MessageStore,
                         MessageToStore, PutStatus, StoreSettings)
from shoal.formats.properties import encode_properties
settings = StoreSettings(
    root_dir=Path(sys.argv[1]),
    commitlog=CommitLogSettings(segment_size_bytes=64 * 1024, message_body_size_max_bytes=16 * 1024),
    consume_queue=ConsumeQueueSettings(units_per_file=64),
    index=IndexSettings(hash_slots=64, entries=256),
)
store = MessageStore(settings)
store.open()
store.start()
for i in range(int(sys.argv[2])):
    body = b"child-%d-" % i + bytes(range(1, 200))
    result = store.put_message(MessageToStore("Child", i % 3, body, encode_properties({"KEYS": f"c{i}"})))
    assert result.status is PutStatus.PUT_OK
os._exit(0)  # no shutdown: the abort marker stays, nothing is flushed or checkpointed
"""


def test_a_process_that_exits_without_shutdown_leaves_a_recoverable_store(tmp_path: Path) -> None:
    """Goal: a process exiting without shutdown leaves a recoverable store. Method: child calls os._exit."""
    root = tmp_path / "store"
    count = 300
    child = subprocess.run(
        [sys.executable, "-c", CHILD_EXITING_WITHOUT_SHUTDOWN, str(root), str(count)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == 0, child.stderr.decode()
    assert (root / "abort").exists()
    store, report = open_store(root)
    try:
        assert not report.last_exit_ok
        assert report.lossless
        for queue_id in range(3):
            assert store.max_offset_in_queue("Child", queue_id) == count // 3
        for i in range(0, count, 7):
            got = store.get_messages("Child", i % 3, i // 3, 1)
            assert got.status is GetMessageStatus.FOUND
            header = decode_header(got.messages[0], 0)
            body = bytes(got.messages[0][header.body_position : header.body_position + header.body_length])
            assert body == b"child-%d-" % i + bytes(range(1, 200))
            got.release()
            assert [h.queue_offset for h, _v in store.query_by_key("Child", f"c{i}", 4)] == [i // 3]
        result = store.put_message(MessageToStore("Child", 0, b"after"))
        assert result.append is not None and result.append.queue_offset == count // 3
    finally:
        store.shutdown()
