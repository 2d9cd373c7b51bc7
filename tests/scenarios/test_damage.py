"""Damage in the middle of the CommitLog: recovery and dispatch keep every intact record after it.

Stores are written by the real MessageStore; bytes are then overwritten in the segment files
(garbage, zeros, copies of other records) and the store is reopened (recovery) or dispatch meets
the damage while the store runs. Checks: exactly the records the damage touched are lost, every
other message is consumable under its own queue offset and findable by key, the report and
`verify_store` list the range and the lost records, the bytes are copied to `damaged/`, no
ConsumeQueue unit or index key points into the range, and a second recovery is lossless.
"""

from __future__ import annotations

import logging
import random
import shutil
import zlib
from pathlib import Path
from typing import NamedTuple

import pytest
from click.testing import CliRunner

from shoal.cli.main import cli
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
    StoreSettings,
)
from shoal.store.damage import DAMAGED_DIRECTORY_NAME
from shoal.store.inspection import verify_store
from shoal.store.recovery import LostMessage

SEGMENT_BYTES = 256 * 1024
HASH_SLOTS = 256
TOPICS = ("DamageA", "DamageB")
QUEUES = 3
MESSAGE_COUNT = 2400  # three 256 KiB segments: all inside the normal recovery scan


def settings(root: Path) -> StoreSettings:
    return StoreSettings(
        root_dir=root,
        commitlog=CommitLogSettings(segment_size_bytes=SEGMENT_BYTES, message_body_size_max_bytes=16 * 1024),
        consume_queue=ConsumeQueueSettings(units_per_file=64),
        index=IndexSettings(hash_slots=HASH_SLOTS, entries=1024),
    )


class Sent(NamedTuple):
    topic: str
    queue_id: int
    queue_offset: int
    start: int
    size: int
    key: str
    crc: int

    @property
    def end(self) -> int:
        return self.start + self.size


def put_messages(store: MessageStore, count: int, rng: random.Random, prefix: str) -> list[Sent]:
    """`count` acknowledged messages with non-zero random bodies of 50..250 bytes."""
    sent = []
    for i in range(count):
        topic, queue_id = TOPICS[i % 2], (i // 2) % QUEUES
        body = bytes(rng.randrange(1, 256) for _ in range(rng.randrange(50, 250)))
        key = f"{prefix}{i}"
        result = store.put_message(MessageToStore(topic, queue_id, body, encode_properties({"KEYS": key})))
        assert result.status is PutStatus.PUT_OK and result.append is not None
        append = result.append
        sent.append(
            Sent(topic, queue_id, append.queue_offset, append.wrote_offset, append.wrote_bytes, key, zlib.crc32(body))
        )
    return sent


def write_store(root: Path, count: int, seed: int = 1) -> list[Sent]:
    store = MessageStore(settings(root))
    store.open()
    store.start()
    try:
        return put_messages(store, count, random.Random(seed), "key")
    finally:
        store.shutdown()


def overwrite(root: Path, offset: int, data: bytes) -> None:
    """Write `data` at a CommitLog offset, across segment files if it must."""
    while data:
        base = offset - offset % SEGMENT_BYTES
        room = base + SEGMENT_BYTES - offset
        with (root / "commitlog" / f"{base:020d}").open("r+b") as handle:
            handle.seek(offset - base)
            handle.write(data[:room])
        data, offset = data[room:], offset + room


def read_log(root: Path, offset: int, size: int) -> bytes:
    out = b""
    while size > 0:
        base = offset - offset % SEGMENT_BYTES
        take = min(size, base + SEGMENT_BYTES - offset)
        with (root / "commitlog" / f"{base:020d}").open("rb") as handle:
            handle.seek(offset - base)
            out += handle.read(take)
        offset, size = offset + take, size - take
    return out


def touched(sent: list[Sent], start: int, end: int) -> list[Sent]:
    return [s for s in sent if s.start < end and s.end > start]


def consumable(store: MessageStore) -> dict[tuple[str, int], list[tuple[int, int, int]]]:
    """(queue offset, CommitLog offset, body CRC) of every message a consumer can pull, per queue."""
    found: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    for topic in TOPICS:
        for queue_id in range(QUEUES):
            rows = found.setdefault((topic, queue_id), [])
            offset = store.min_offset_in_queue(topic, queue_id)
            while offset < store.max_offset_in_queue(topic, queue_id):
                got = store.get_messages(topic, queue_id, offset, 32)
                for queue_offset, commitlog_offset, view in zip(
                    got.queue_offsets, got.commitlog_offsets, got.messages, strict=True
                ):
                    header = decode_header(view, 0)
                    assert (header.topic, header.queue_id, header.queue_offset) == (topic, queue_id, queue_offset)
                    body = view[header.body_position : header.body_position + header.body_length]
                    rows.append((queue_offset, commitlog_offset, zlib.crc32(body)))
                    body.release()
                assert got.next_begin_offset > offset
                offset = got.next_begin_offset
                got.release()
    return found


def expected(sent: list[Sent]) -> dict[tuple[str, int], list[tuple[int, int, int]]]:
    rows: dict[tuple[str, int], list[tuple[int, int, int]]] = {(t, q): [] for t in TOPICS for q in range(QUEUES)}
    for s in sorted(sent, key=lambda s: s.start):
        rows[(s.topic, s.queue_id)].append((s.queue_offset, s.start, s.crc))
    return rows


def key_offsets(store: MessageStore, sent: Sent) -> list[int]:
    found = store.query_by_key(sent.topic, sent.key, 8)
    offsets = [header.physical_offset for header, _view in found]
    for _header, view in found:
        view.release()
    return offsets


def check_store(store: MessageStore, kept: list[Sent], lost: list[Sent]) -> None:
    """Every kept message consumable and indexed, no lost one; a new put is readable."""
    assert consumable(store) == expected(kept)
    for s in kept[:: max(1, len(kept) // 25)] + kept[-1:]:
        assert key_offsets(store, s) == [s.start], s
    for s in lost:
        assert key_offsets(store, s) == [], s
    result = store.put_message(MessageToStore(TOPICS[0], 0, b"after", encode_properties({"KEYS": "after"})))
    assert result.status is PutStatus.PUT_OK and result.append is not None
    assert result.append.wrote_offset == max(s.end for s in kept + lost)
    store.dispatch_now()
    got = store.get_messages(TOPICS[0], 0, result.append.queue_offset, 1)
    assert got.status is GetMessageStatus.FOUND and got.commitlog_offsets == [result.append.wrote_offset]
    got.release()


def reopen(root: Path) -> MessageStore:
    store = MessageStore(settings(root))
    store.open()
    store.start()
    return store


def check_recovered(root: Path, sent: list[Sent], range_start: int, range_end: int) -> None:
    """Reopen after damage: the range [range_start, range_end) is reported, copied aside, and
    exactly the records in it are lost; verify agrees; a second recovery is lossless."""
    lost = touched(sent, range_start, range_end)
    kept = [s for s in sent if s not in lost]
    assert lost and kept
    damaged_bytes = read_log(root, range_start, range_end - range_start)
    store = reopen(root)
    try:
        report = store.recovery_report
        assert report is not None
        summary = report.summary()
        assert not report.lossless and report.damage == "" and report.commitlog_bytes_dropped == 0, summary
        assert report.recovered_end_offset == sent[-1].end, summary
        assert [(d.start_offset, d.end_offset) for d in report.damaged_ranges] == [(range_start, range_end)], summary
        assert report.lost_messages == [LostMessage(s.topic, s.queue_id, s.queue_offset, s.start) for s in lost]
        assert report.damaged_ranges[0].record_offsets == [s.start for s in lost], summary
        saved = Path(report.damaged_ranges[0].saved_as)
        assert saved == root / DAMAGED_DIRECTORY_NAME / f"{range_start:020d}-{range_end - range_start}.bin"
        assert saved.read_bytes() == damaged_bytes
        check_store(store, kept, lost)
    finally:
        store.shutdown()
    verified = verify_store(root, hash_slots=HASH_SLOTS)
    assert [(d.start_offset, d.end_offset, d.saved_as) for d in verified.damaged_ranges] == [
        (range_start, range_end, str(saved))
    ]
    assert verified.problems == [], verified.problems  # handled by recovery: listed, not a problem
    assert set(verified.damaged_ranges[0].record_offsets) <= {s.start for s in lost}
    assert verified.records == len(kept) + 1
    shown = CliRunner().invoke(cli, ["store", "verify", str(root), "--hash-slots", str(HASH_SLOTS)])
    assert shown.exit_code == 0 and "store OK (1 damaged range(s) recovered earlier)" in shown.output, shown.output
    assert f"RECOVERED DAMAGE: CommitLog offset {range_start}:" in shown.output and str(saved) in shown.output
    again = reopen(root)
    try:
        report = again.recovery_report
        assert report is not None and report.lossless, report.summary() if report else "no recovery report"
        assert [(d.start_offset, d.end_offset) for d in report.known_damaged_ranges] == [(range_start, range_end)]
        assert report.index_files_deleted == 0 and report.messages_redispatched == 0
        assert sum(len(rows) for rows in consumable(again).values()) == len(kept) + 1
    finally:
        again.shutdown()


def test_4k_of_garbage_mid_segment_loses_only_the_records_it_covers(tmp_path: Path) -> None:
    """Goal: the issue's case at small scale: 4 KiB of garbage mid-segment loses only what it covers
    (not the ~half of the log after it). Method: 2,400 messages, random garbage, reopen."""
    root = tmp_path / "store"
    sent = write_store(root, MESSAGE_COUNT)
    assert sent[-1].end > 2 * SEGMENT_BYTES, "the garbage goes mid-way in the second of three segments"
    start = SEGMENT_BYTES + SEGMENT_BYTES // 2 + 17
    overwrite(root, start, random.Random(4).randbytes(4096))
    lost = touched(sent, start, start + 4096)
    assert len(lost) <= 4096 // (91 + 50) + 2
    check_recovered(root, sent, lost[0].start, lost[-1].end)


@pytest.mark.parametrize(
    "where",
    ["tail of a segment and its blank record", "across the segment boundary", "head of a segment"],
)
def test_damage_at_a_segment_boundary_resumes_at_the_next_intact_record(tmp_path: Path, where: str) -> None:
    """Goal: damage touching a segment boundary loses only what it covers. Method: garbage around
    the end of segment 0 / start of segment 1, reopen."""
    root = tmp_path / "store"
    sent = write_store(root, MESSAGE_COUNT)
    boundary = SEGMENT_BYTES
    last_in_segment = max(s for s in sent if s.end <= boundary)
    if where == "tail of a segment and its blank record":
        start, end = last_in_segment.start - 500, boundary
    elif where == "across the segment boundary":
        start, end = last_in_segment.start + 10, boundary + 700
    else:
        start, end = boundary, boundary + 700
    overwrite(root, start, random.Random(5).randbytes(end - start))
    lost = touched(sent, start, end)
    check_recovered(root, sent, lost[0].start, boundary if end == boundary else lost[-1].end)


def test_garbage_made_of_valid_records_at_wrong_positions_is_not_taken_for_records(tmp_path: Path) -> None:
    """Goal: copies of intact records (right CRC, wrong PHYSICALOFFSET) in damage are not resync
    points nor messages. Method: overwrite 3 KiB mid-log with a shifted copy of earlier records."""
    root = tmp_path / "store"
    sent = write_store(root, MESSAGE_COUNT)
    start = SEGMENT_BYTES + 10_000 + 3
    copy = read_log(root, sent[5].start, 3000) + read_log(root, sent[40].start + 1, 200)
    overwrite(root, start, copy)
    lost = touched(sent, start, start + len(copy))
    check_recovered(root, sent, lost[0].start, lost[-1].end)


def test_a_zeroed_page_mid_log_is_damage_not_the_end(tmp_path: Path) -> None:
    """Goal: a lost 4 KiB page (zeros) with intact records after it is damage, not a clean end.
    Method: zero one page mid-log, reopen."""
    root = tmp_path / "store"
    sent = write_store(root, MESSAGE_COUNT)
    # From a record's start: zeros over the end of a record's properties go unnoticed (no checksum there).
    start = min(s.start for s in sent if s.start >= 2 * SEGMENT_BYTES + 4096 * 3)
    overwrite(root, start, bytes(4096))
    lost = touched(sent, start, start + 4096)
    check_recovered(root, sent, lost[0].start, lost[-1].end)


def test_dispatch_skips_damage_it_meets_counts_it_and_logs_it_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Goal: dispatch never stops at damage while puts are acknowledged: it resyncs, counts, logs once.
    Method: store without background dispatch; garbage over undispatched records; more puts; dispatch."""
    root = tmp_path / "store"
    store = MessageStore(settings(root))
    store.open()
    store.start(background_dispatch=False)
    rng = random.Random(9)
    try:
        before = put_messages(store, 300, rng, "a")
        store.dispatch_now()
        middle = put_messages(store, 300, rng, "b")
        start = middle[100].start + 33
        overwrite(root, start, rng.randbytes(2000))
        lost = touched(middle, start, start + 2000)
        with caplog.at_level(logging.WARNING, logger="shoal.store"):
            dispatched = store.dispatch_now()
            store.dispatch_now()
            after = put_messages(store, 300, rng, "d")
            dispatched += store.dispatch_now()
        assert dispatched == len(middle) - len(lost) + len(after)
        skipped = store._dispatcher.damaged[lost[0].start]
        assert (skipped.start_offset, skipped.end_offset) == (lost[0].start, lost[-1].end)
        assert [r.getMessage() for r in caplog.records if "damage" in r.getMessage()] == [
            f"dispatch skipped damage: {skipped.describe()}"
        ]
        stats = store.stats()
        assert stats["commitlog_damaged_ranges"] == 1
        assert stats["commitlog_damaged_bytes"] == lost[-1].end - lost[0].start
        kept = [s for s in before + middle + after if s not in lost]
        check_store(store, kept, lost)
    finally:
        store.shutdown()
    verified = verify_store(root, hash_slots=HASH_SLOTS)
    assert verified.problems == [verified.damaged_ranges[0].describe()], verified.problems


def test_dispatch_waits_at_damage_at_the_end_of_the_log_and_resumes_with_the_next_put(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Goal: damage over the last readable records makes dispatch wait (logged once), the next put
    resumes it. Method: garbage over the last two records, dispatch twice, put, dispatch."""
    root = tmp_path / "store"
    store = MessageStore(settings(root))
    store.open()
    store.start(background_dispatch=False)
    rng = random.Random(10)
    try:
        first = put_messages(store, 100, rng, "a")
        start = first[-2].start
        overwrite(root, start, rng.randbytes(first[-1].end - start))
        with caplog.at_level(logging.WARNING, logger="shoal.store"):
            assert store.dispatch_now() == 98
            assert store.dispatch_now() == 0
            waits = [r for r in caplog.records if "waits at damaged" in r.getMessage()]
            assert len(waits) == 1
            after = put_messages(store, 5, rng, "b")
            assert store.dispatch_now() == 5
        check_store(store, first[:-2] + after, first[-2:])
    finally:
        store.shutdown()


def test_a_bad_crc_record_is_not_dispatched_when_consume_queues_are_rebuilt(tmp_path: Path) -> None:
    """Goal: damage recovery found by CRC stays out of rebuilt ConsumeQueues and the index (dispatch
    itself checks no CRC). Method: flip a body byte mid-log, delete consumequeue/ and index/, abort."""
    root = tmp_path / "store"
    sent = write_store(root, MESSAGE_COUNT)
    target = sent[len(sent) // 2]
    body_at = target.start + decode_header(read_log(root, target.start, target.size), 0).body_position + 1
    overwrite(root, body_at, bytes([read_log(root, body_at, 1)[0] ^ 0xFF]))
    for name in ("consumequeue", "index"):
        shutil.rmtree(root / name)
    (root / "abort").touch()
    store = reopen(root)
    try:
        report = store.recovery_report
        assert report is not None
        assert [(d.start_offset, d.end_offset) for d in report.damaged_ranges] == [(target.start, target.end)]
        assert "body CRC" in report.damaged_ranges[0].reason
        check_store(store, [s for s in sent if s is not target], [target])
    finally:
        store.shutdown()
    verified = verify_store(root, hash_slots=HASH_SLOTS)
    assert verified.ok, verified.problems


def test_a_torn_record_before_a_segment_end_whose_next_segment_never_landed_is_the_torn_tail(tmp_path: Path) -> None:
    """Goal: damage followed only by a blank end-of-file record (the next segment never made it to
    disk, as a power cut can leave under ASYNC_FLUSH) is cut as a torn tail, not reported as mid-log
    damage that verify then flags. Method: fill into a second segment, delete it, break the body
    of segment 0's last record, reopen after a crash, verify."""
    root = tmp_path / "store"
    sent = write_store(root, 1400)  # past the first 256 KiB segment
    first_segment = [s for s in sent if s.end <= SEGMENT_BYTES]
    assert len(first_segment) < len(sent)
    (root / "commitlog" / f"{SEGMENT_BYTES:020d}").unlink()
    victim = first_segment[-1]
    body_at = victim.start + decode_header(memoryview(read_log(root, victim.start, victim.size)), 0).body_position
    overwrite(root, body_at, bytes([read_log(root, body_at, 1)[0] ^ 0xFF]))
    (root / "abort").touch()
    store = reopen(root)
    try:
        report = store.recovery_report
        assert report is not None
        assert report.damaged_ranges == [], report.summary()
        assert report.recovered_end_offset == victim.start and "body CRC" in report.damage, report.summary()
        assert consumable(store) == expected(first_segment[:-1])
    finally:
        store.shutdown()
    verified = verify_store(root, hash_slots=HASH_SLOTS)
    assert verified.problems == [] and verified.damaged_ranges == [], verified.problems
