"""Tests of shoal.store.message_store: the facade, end to end on real files (spec §1, §2, §4, §5)."""

from __future__ import annotations

import dataclasses
import mmap
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from shoal.formats.batch import decode_batch_body, encode_batch_body
from shoal.formats.errors import BatchBodyError
from shoal.formats.java_hash import java_string_hash
from shoal.formats.message_id import decode_offset_msg_id
from shoal.formats.properties import decode_properties, join_properties
from shoal.formats.record import decode_header, record_length
from shoal.formats.sysflag import TransactionType
from shoal.store import (
    BatchEntry,
    GetMessageStatus,
    GetResult,
    MessageStore,
    MessageToStore,
    PutStatus,
    StoreLockedError,
)
from tests.store.conftest import SettingsFactory, WaitUntil, body_of, open_store, props, put, settle

START_MS = 1_700_000_000_000


class FakeClock:
    """Wall time set by the test; monotonic time stays real so the services keep their pace."""

    def __init__(self, now_ms: int = START_MS) -> None:
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now

    def monotonic_s(self) -> float:
        return time.monotonic()


def properties_of(view: memoryview) -> dict[str, str]:
    header = decode_header(view, 0)
    return decode_properties(view[header.properties_position : header.properties_position + header.properties_length])


# --- put / get ---


def test_put_then_get_round_trips_body_topic_properties_and_offsets(store: MessageStore) -> None:
    """Goal: a put comes back byte-identical with topic, properties and offsets. Method: put 3, get."""
    bodies = [b"first", b"", os.urandom(3000)]
    results = [
        put(store, "RoundTrip", 2, body, KEYS="k1 k2", TAGS="TagA", UNIQ_KEY=f"U{i}") for i, body in enumerate(bodies)
    ]
    settle(store)
    got = store.get_messages("RoundTrip", 2, 0, 32)
    assert got.status is GetMessageStatus.FOUND
    assert got.queue_offsets == [0, 1, 2]
    assert got.commitlog_offsets == [r.append.wrote_offset for r in results if r.append]
    assert got.next_begin_offset == 3
    for index, (view, body) in enumerate(zip(got.messages, bodies, strict=True)):
        header = decode_header(view, 0)
        assert len(view) == header.total_size == results[index].append.wrote_bytes  # type: ignore[union-attr]
        assert header.topic == "RoundTrip"
        assert header.queue_id == 2
        assert header.queue_offset == index
        assert header.physical_offset == got.commitlog_offsets[index]
        assert header.body_crc == zlib.crc32(body) & 0x7FFFFFFF
        assert body_of(view) == body
        assert properties_of(view) == {"KEYS": "k1 k2", "TAGS": "TagA", "UNIQ_KEY": f"U{index}"}
    got.release()


def test_queue_offsets_are_consecutive_per_queue_and_independent_across_queues(store: MessageStore) -> None:
    """Goal: each (topic, queue) numbers its messages from 0. Method: interleave puts to six queues."""
    seen: dict[tuple[str, int], list[int]] = {}
    for i in range(30):
        key = (("A", "B")[i % 2], i % 3)
        result = put(store, key[0], key[1], b"m%d" % i)
        seen.setdefault(key, []).append(result.append.queue_offset)  # type: ignore[union-attr]
    for offsets in seen.values():
        assert offsets == list(range(len(offsets)))
    settle(store)
    for (topic, queue_id), offsets in seen.items():
        assert store.max_offset_in_queue(topic, queue_id) == len(offsets)
        assert store.min_offset_in_queue(topic, queue_id) == 0
    assert store.max_offset_in_queue("Nope", 0) == 0
    assert store.min_offset_in_queue("Nope", 0) == 0


def test_batch_put_gets_consecutive_offsets_one_segment_and_a_message_id_per_record(
    store: MessageStore,
) -> None:
    """Goal: a batch gets consecutive offsets, one segment, an id per record. Method: batch at a segment end."""
    segment = store.settings.commitlog.segment_size_bytes
    put(store, "Batch", 1, b"before")
    while True:
        last = put(store, "Filler", 0, b"x" * 1000)
        if last.append.next_offset > segment - 3000:  # type: ignore[union-attr]
            break
    entries = [BatchEntry(i, b"batch-%d-" % i + b"y" * 500, props(KEYS=f"bk{i}")) for i in range(5)]
    result = store.put_batch(MessageToStore("Batch", 1, b""), entries)
    assert result.status is PutStatus.PUT_OK
    append = result.append
    assert append is not None
    assert append.message_count == 5
    assert append.queue_offset == 1
    assert append.wrote_offset == segment  # moved whole to the next segment
    assert result.record_sizes is not None and sum(result.record_sizes) == append.wrote_bytes
    settle(store)
    got = store.get_messages("Batch", 1, 1, 32)
    assert got.queue_offsets == [1, 2, 3, 4, 5]
    assert {offset // segment for offset in got.commitlog_offsets} == {1}
    ids = result.message_ids()
    assert [decode_offset_msg_id(i)[1] for i in ids] == got.commitlog_offsets
    for index, view in enumerate(got.messages):
        header = decode_header(view, 0)
        assert header.flag == index
        assert header.queue_offset == 1 + index
        assert body_of(view) == entries[index].body
        assert properties_of(view) == {"KEYS": f"bk{index}"}
    got.release()


def test_batch_put_refuses_empty_and_transactional_batches(store: MessageStore) -> None:
    """Goal: empty and transactional batches are MESSAGE_ILLEGAL and write nothing. Method: put both."""
    before = store.max_offset
    assert store.put_batch(MessageToStore("Batch", 0, b""), []).status is PutStatus.MESSAGE_ILLEGAL
    prepared = MessageToStore("Batch", 0, b"", sysflag=int(TransactionType.PREPARED_TYPE))
    entries = [BatchEntry(0, b"x", b"")]
    assert store.put_batch(prepared, entries).status is PutStatus.MESSAGE_ILLEGAL
    assert store.max_offset == before


def test_a_batch_body_is_stored_as_its_entries_are_and_refused_alike(
    tmp_path: Path, small_settings: SettingsFactory
) -> None:
    """Goal: the broker's batch path (`append_batch_body`, the client's body written in one call)
    stores the records `append_batch` stores from the decoded entries, and refuses what it refuses
    with the same status. Method: the same batches into two stores, then compare bytes and answers."""
    shared = props(WAIT="true")
    items = [(i, b"body-%d" % i * (i + 1), props(KEYS=f"k{i}") if i % 2 else b"") for i in range(7)]
    size_max = small_settings(tmp_path / "probe").commitlog.message_body_size_max_bytes
    batches = {
        "ok": (MessageToStore("Batch", 2, b"", shared, born_timestamp_ms=5), encode_batch_body(items)),
        "not blocks": (MessageToStore("Batch", 2, b"", shared), b"\x00\x00\x00\x05junk"),
        "transactional": (
            MessageToStore("Batch", 2, b"", sysflag=int(TransactionType.PREPARED_TYPE)),
            encode_batch_body(items),
        ),
        "properties too long": (MessageToStore("Batch", 2, b"", b"K\x01" + b"v" * 32_000), encode_batch_body(items)),
        "bodies too big": (MessageToStore("Batch", 2, b""), encode_batch_body([(0, b"x" * (size_max // 2), b"")] * 3)),
        "topic too long": (MessageToStore("T" * 128, 0, b""), encode_batch_body(items)),
    }
    by_entries = open_store(small_settings(tmp_path / "entries"), clock=FakeClock())
    by_body = open_store(small_settings(tmp_path / "body"), clock=FakeClock())
    try:
        for name, (template, body) in batches.items():
            try:
                entries = [
                    BatchEntry(item.flag, item.body, join_properties(item.properties, template.properties))
                    for item in decode_batch_body(body, count_max=64)
                ]
            except BatchBodyError:
                entries = []
            expected = by_entries.append_batch(template, entries)
            got = by_body.append_batch_body(template, body, template.properties)
            assert (got.status, got.record_sizes) == (expected.status, expected.record_sizes), name
            assert got.status is (PutStatus.PUT_OK if name == "ok" else expected.status), name
            assert got.ok == (name == "ok"), (name, got.remark)
        settle(by_entries)
        settle(by_body)
        assert by_body.max_offset == by_entries.max_offset > 0
        one = by_entries.get_messages("Batch", 2, 0, 32)
        other = by_body.get_messages("Batch", 2, 0, 32)
        assert [bytes(v) for v in other.messages] == [bytes(v) for v in one.messages]
        assert len(other.messages) == len(items)
        one.release()
        other.release()
    finally:
        by_entries.shutdown()
        by_body.shutdown()


# --- get_messages statuses ---


def test_get_messages_on_an_unknown_queue_is_no_matched_logic_queue(store: MessageStore) -> None:
    """Goal: a never-written queue is NO_MATCHED_LOGIC_QUEUE. Method: get at offset 0."""
    got = store.get_messages("Unknown", 0, 0, 32)
    assert got.status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    assert got.messages == []
    assert (got.min_offset, got.max_offset, got.next_begin_offset) == (0, 0, 0)


def test_get_messages_on_an_unknown_queue_suggests_offset_zero(store: MessageStore) -> None:
    """Goal: a missing queue sends the consumer back to offset 0 (spec §8.8). Method: get at offset 7."""
    got = store.get_messages("Unknown", 0, 7, 32)
    assert got.status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    assert got.next_begin_offset == 0


def test_get_messages_on_an_empty_queue_is_no_message_in_queue(tmp_path: Path, small_settings: SettingsFactory) -> None:
    """Goal: a queue without units is NO_MESSAGE_IN_QUEUE, next 0. Method: reopen with an empty CQ dir."""
    settings = small_settings(tmp_path / "store")
    first = open_store(settings)
    put(first, "Other", 0, b"so the CommitLog is not empty")
    first.shutdown()
    (settings.consume_queue_dir / "Empty" / "3").mkdir(parents=True)
    store = open_store(settings)
    try:
        got = store.get_messages("Empty", 3, 5, 32)
        assert got.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
        assert (got.next_begin_offset, got.min_offset, got.max_offset) == (0, 0, 0)
    finally:
        store.shutdown()


def test_get_messages_found_returns_at_most_max_count_and_the_next_offset(store: MessageStore) -> None:
    """Goal: FOUND returns <= max_count, next = offset + scanned. Method: read 10 messages 4 at a time."""
    for i in range(10):
        put(store, "Paged", 0, b"p%d" % i)
    settle(store)
    offset, pages = 0, []
    while offset < 10:
        got = store.get_messages("Paged", 0, offset, 4)
        assert got.status is GetMessageStatus.FOUND
        pages.append(got.queue_offsets)
        assert got.next_begin_offset == offset + len(got.messages)
        offset = got.next_begin_offset
        got.release()
    assert pages == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_get_messages_at_and_past_the_end_overflows(store: MessageStore) -> None:
    """Goal: offset == max is OVERFLOW_ONE (next offset), > max OVERFLOW_BADLY (next max, as in 4.9.7,
    even when the queue starts at 0). Method: 3 msgs."""
    for i in range(3):
        put(store, "Edge", 0, b"e%d" % i)
    settle(store)
    one = store.get_messages("Edge", 0, 3, 32)
    assert one.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    assert (one.next_begin_offset, one.min_offset, one.max_offset) == (3, 0, 3)
    badly = store.get_messages("Edge", 0, 9, 32)
    assert badly.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY
    assert (badly.next_begin_offset, badly.min_offset, badly.max_offset) == (3, 0, 3)


def test_get_messages_below_the_min_offset_is_offset_too_small(tmp_path: Path, small_settings: SettingsFactory) -> None:
    """Goal: below min is OFFSET_TOO_SMALL (next min), past max BADLY (next max). Method: force a clean."""
    usage = [0.0]
    store = open_store(small_settings(tmp_path / "store"), disk_usage=lambda _path: usage[0])
    try:
        for i in range(200):
            put(store, "Old", 0, b"o" * 1000, KEYS=f"old{i}")
        settle(store)
        usage[0] = 0.87  # above diskSpaceCleanForciblyRatio: delete regardless of age
        assert store._cleaner.run_round().commitlog_files_deleted > 0
        minimum = store.min_offset_in_queue("Old", 0)
        assert minimum > 0
        small = store.get_messages("Old", 0, 0, 32)
        assert small.status is GetMessageStatus.OFFSET_TOO_SMALL
        assert (small.next_begin_offset, small.min_offset) == (minimum, minimum)
        badly = store.get_messages("Old", 0, 500, 32)
        assert badly.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY
        assert badly.next_begin_offset == 200
        found = store.get_messages("Old", 0, minimum, 1)
        assert found.status is GetMessageStatus.FOUND
        assert found.commitlog_offsets[0] >= store.min_offset
        found.release()
    finally:
        store.shutdown()


def test_get_messages_with_a_tag_filter_skips_and_may_match_nothing(store: MessageStore) -> None:
    """Goal: the tag filter skips units, none matching is NO_MATCHED_MESSAGE. Method: tags a/b, filter b, c."""
    for i in range(6):
        put(store, "Tagged", 0, b"t%d" % i, TAGS="a" if i % 2 else "b")
    settle(store)
    code_b = java_string_hash("b")
    only_b = store.get_messages("Tagged", 0, 0, 32, tag_filter=lambda code: code == code_b)
    assert only_b.status is GetMessageStatus.FOUND
    assert only_b.queue_offsets == [0, 2, 4]
    assert only_b.next_begin_offset == 6
    assert [properties_of(v)["TAGS"] for v in only_b.messages] == ["b", "b", "b"]
    only_b.release()
    code_c = java_string_hash("c")
    none = store.get_messages("Tagged", 0, 1, 32, tag_filter=lambda code: code == code_c)
    assert none.status is GetMessageStatus.NO_MATCHED_MESSAGE
    assert none.messages == []
    assert none.next_begin_offset == 6


def test_get_messages_returns_zero_copy_views_of_the_mapped_segment(store: MessageStore) -> None:
    """Goal: returned messages are views of the segment's mmap, not copies. Method: compare view.obj."""
    put(store, "ZeroCopy", 0, b"payload")
    settle(store)
    got = store.get_messages("ZeroCopy", 0, 0, 1)
    view = got.messages[0]
    assert isinstance(view, memoryview)
    assert isinstance(view.obj, mmap.mmap)
    segment = store._commitlog.queue.find_by_offset(got.commitlog_offsets[0])
    assert segment is not None
    assert view.obj is segment.mm
    assert bytes(view) == bytes(segment.view[0 : len(view)])
    got.release()


def test_get_messages_stops_at_the_in_memory_transfer_limits(store: MessageStore) -> None:
    """Goal: in memory a pull stops at 32 messages or 256 KiB. Method: 40 small, then 24 x 15 KiB messages."""
    for i in range(40):
        put(store, "Many", 0, b"s%d" % i)
    big = [put(store, "Big", 0, os.urandom(15 * 1024)) for _ in range(24)]
    settle(store)
    many = store.get_messages("Many", 0, 0, 1000)
    assert len(many.messages) == 32
    assert many.next_begin_offset == 32
    assert not many.suggest_pulling_from_slave
    many.release()
    size = big[0].append.wrote_bytes  # type: ignore[union-attr]
    got = store.get_messages("Big", 0, 0, 32)
    assert len(got.messages) == (256 * 1024) // size
    assert got.total_bytes <= 256 * 1024 < got.total_bytes + size
    got.release()


def test_get_messages_stops_at_the_on_disk_transfer_limits(tmp_path: Path, small_settings: SettingsFactory) -> None:
    """Goal: on disk a pull stops at 8 messages or 64 KiB, suggests a slave.
    Method: accessMessageInMemoryMaxRatio=0, so everything behind the head counts as on disk."""
    settings = small_settings(tmp_path / "disk")
    settings = settings.with_changes(
        commitlog=dataclasses.replace(settings.commitlog, access_message_in_memory_max_ratio_percent=0)
    )
    store = MessageStore(settings)
    store.open()
    store.start()
    try:
        _fill_and_check_on_disk_limits(store)
    finally:
        store.shutdown()


def test_the_transfer_limits_are_settings(tmp_path: Path, small_settings: SettingsFactory) -> None:
    """Goal: maxTransferCountOnMessageInMemory / ...BytesOnMessageInMemory and the on-disk pair
    (RocketMQ's MessageStoreConfig keys) bound a pull instead of the built-in 32 / 256 KiB / 8 /
    64 KiB. Method: in memory 48 messages or 1 MiB (the small settings' ConsumeQueue files hold 64
    units, and a pull never reads past one); on disk 3 messages."""
    settings = small_settings(tmp_path / "transfer")
    roomy = dataclasses.replace(
        settings.commitlog, max_transfer_count_in_memory=48, max_transfer_bytes_in_memory=1024 * 1024
    )
    store = MessageStore(settings.with_changes(commitlog=roomy))
    store.open()
    store.start()
    try:
        for i in range(60):
            put(store, "Roomy", 0, b"r%d" % i)
        settle(store)
        got = store.get_messages("Roomy", 0, 0, 1000)
        assert len(got.messages) == 48
        got.release()
    finally:
        store.shutdown()
    on_disk = dataclasses.replace(
        settings.commitlog, access_message_in_memory_max_ratio_percent=0, max_transfer_count_on_disk=3
    )
    store = MessageStore(settings.with_changes(commitlog=on_disk))
    store.open()
    store.start()
    try:
        got = store.get_messages("Roomy", 0, 0, 1000)
        assert len(got.messages) == 3
        got.release()
    finally:
        store.shutdown()


def _fill_and_check_on_disk_limits(store: MessageStore) -> None:
    for i in range(20):
        put(store, "Disk", 0, b"d%d" % i)
    for _ in range(8):
        put(store, "DiskBig", 0, os.urandom(15 * 1024))
    settle(store)
    small = store.get_messages("Disk", 0, 0, 32)
    assert len(small.messages) == 8
    assert small.suggest_pulling_from_slave
    small.release()
    big = store.get_messages("DiskBig", 0, 0, 32)
    assert len(big.messages) == 4  # 4 x 15 KiB fit in 64 KiB, a fifth does not
    assert big.total_bytes <= 64 * 1024
    big.release()


# --- lookups ---


def test_offset_by_time_finds_the_first_message_at_or_closest_to_a_time(
    tmp_path: Path, small_settings: SettingsFactory
) -> None:
    """Goal: offset_by_time finds exact, nearest and clamped offsets. Method: fake clock, 1 s apart."""
    clock = FakeClock()
    store = open_store(small_settings(tmp_path / "store"), clock=clock)
    try:
        for i in range(10):
            clock.now = START_MS + i * 1000
            put(store, "Timed", 0, b"t%d" % i)
        settle(store)
        assert store.offset_by_time("Timed", 0, START_MS + 4000) == 4
        assert store.offset_by_time("Timed", 0, START_MS + 4300) == 4
        assert store.offset_by_time("Timed", 0, START_MS + 4700) == 5
        assert store.offset_by_time("Timed", 0, 0) == 0
        assert store.offset_by_time("Timed", 0, START_MS + 99_000) == 9
        assert store.offset_by_time("Unknown", 0, START_MS) == 0
        assert store.earliest_message_time("Timed", 0) == START_MS
        assert store.earliest_message_time("Unknown", 0) == -1
    finally:
        store.shutdown()


def test_message_at_returns_the_record_named_by_its_offset_message_id(store: MessageStore) -> None:
    """Goal: the offset msgId decodes to the offset message_at reads; others give None. Method: 3 puts."""
    results = [put(store, "ById", 0, b"body-%d" % i, KEYS=f"id{i}") for i in range(3)]
    for index, result in enumerate(results):
        (msg_id,) = result.message_ids()
        host, offset = decode_offset_msg_id(msg_id)
        assert host == "127.0.0.1:10911"
        assert offset == result.append.wrote_offset  # type: ignore[union-attr]
        found = store.message_at(offset)
        assert found is not None
        header, view = found
        assert header.physical_offset == offset
        assert header.queue_offset == index
        assert bytes(view[header.body_position : header.body_position + header.body_length]) == (b"body-%d" % index)
        view.release()
    assert store.message_at(results[1].append.wrote_offset + 1) is None  # type: ignore[union-attr]
    assert store.message_at(store.max_offset) is None
    assert store.message_at(10 * store.settings.commitlog.segment_size_bytes) is None


def test_query_by_key_finds_keys_and_uniq_key_and_filters_hash_collisions(store: MessageStore) -> None:
    """Goal: KEYS tokens and UNIQ_KEY are found, hash collisions filtered. Method: keys Aa/BB, query."""
    first = put(store, "Keyed", 0, b"one", KEYS="Aa order-1", UNIQ_KEY="UNIQ1")
    second = put(store, "Keyed", 1, b"two", KEYS="BB order-2")
    put(store, "Other", 0, b"three", KEYS="Aa")
    settle(store)
    first_offset = first.append.wrote_offset  # type: ignore[union-attr]
    second_offset = second.append.wrote_offset  # type: ignore[union-attr]

    def offsets(key: str) -> list[int]:
        return [header.physical_offset for header, _view in store.query_by_key("Keyed", key, 32)]

    assert java_string_hash("Keyed#Aa") == java_string_hash("Keyed#BB")
    assert store._index is not None
    raw = store._index.query("Keyed", "Aa", 32, 0, 2**62)
    assert sorted(raw) == sorted([first_offset, second_offset])  # the collision is real
    assert offsets("Aa") == [first_offset]
    assert offsets("BB") == [second_offset]
    assert offsets("order-1") == [first_offset]
    assert offsets("order-2") == [second_offset]
    assert offsets("UNIQ1") == [first_offset]
    assert offsets("absent") == []


# --- refusals ---


def test_illegal_messages_are_refused_and_the_store_keeps_working(store: MessageStore) -> None:
    """Goal: over-limit messages are refused, at-limit ones kept, the store works. maxMessageSize
    bounds the whole record, as in RocketMQ. Method: alternate puts."""
    size_max = store.settings.commitlog.message_body_size_max_bytes
    overhead = record_length(0, len(b"Legal"), 0)
    long_properties = b"KEYS\x01" + b"k" * (32767 - 5)
    fitting_properties = b"KEYS\x01" + b"k" * (size_max - overhead - 1 - 5)
    cases = [
        (MessageToStore("Legal", 0, b"x" * (size_max - overhead + 1)), PutStatus.MESSAGE_ILLEGAL),
        (MessageToStore("T" * 128, 0, b"x"), PutStatus.MESSAGE_ILLEGAL),
        (MessageToStore("é" * 64, 0, b"x"), PutStatus.MESSAGE_ILLEGAL),  # 128 bytes in UTF-8
        (MessageToStore("", 0, b"x"), PutStatus.MESSAGE_ILLEGAL),
        (MessageToStore("Legal", 0, b"x", long_properties + b"k"), PutStatus.PROPERTIES_SIZE_EXCEEDED),
        (MessageToStore("Legal", 0, b"xx", fitting_properties), PutStatus.MESSAGE_ILLEGAL),
    ]
    expected_offset = 0
    for bad, status in cases:
        end_before = store.max_offset
        refused = store.put_message(bad)
        assert refused.status is status
        assert not refused.status.stored
        assert refused.append is None and refused.remark
        assert store.max_offset == end_before
        good = put(store, "Legal", 0, b"ok-%d" % expected_offset)
        assert good.append.queue_offset == expected_offset  # type: ignore[union-attr]
        expected_offset += 1
    at_limits = [
        MessageToStore("Legal", 0, b"x" * (size_max - overhead)),
        MessageToStore("T" * 127, 0, b"x"),
        MessageToStore("Legal", 0, b"x", fitting_properties),
    ]
    for message in at_limits:
        assert store.put_message(message).status is PutStatus.PUT_OK
    settle(store)
    assert store.max_offset_in_queue("Legal", 0) == expected_offset + 2
    got = store.get_messages("Legal", 0, 0, 64)
    assert [body_of(v) for v in got.messages[: len(cases)]] == [b"ok-%d" % i for i in range(len(cases))]
    assert properties_of(got.messages[-1]) == {"KEYS": "k" * (size_max - overhead - 1 - 5)}
    got.release()


def test_writes_are_refused_after_shutdown(tmp_path: Path, small_settings: SettingsFactory) -> None:
    """Goal: after shutdown every write is SERVICE_NOT_AVAILABLE. Method: put, append and batch."""
    store = open_store(small_settings(tmp_path / "store"))
    put(store, "Closed", 0, b"before")
    store.shutdown()
    message = MessageToStore("Closed", 0, b"after")
    assert store.put_message(message).status is PutStatus.SERVICE_NOT_AVAILABLE
    assert store.append_message(message).status is PutStatus.SERVICE_NOT_AVAILABLE
    batch = store.put_batch(message, [BatchEntry(0, b"x", b"")])
    assert batch.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert "shut" in batch.remark


# --- lifecycle ---


def test_a_second_store_in_the_same_process_is_refused(store: MessageStore) -> None:
    """Goal: a second store on one directory fails even in the same process. Method: open it twice."""
    second = MessageStore(store.settings)
    try:
        with pytest.raises(StoreLockedError):
            second.open()
    finally:
        if second.recovery_report is not None:
            second.shutdown()
    assert store.put_message(MessageToStore("Still", 0, b"ok")).status is PutStatus.PUT_OK


CHILD_HOLDING_THE_STORE = """
import sys
from pathlib import Path
from shoal.store import CommitLogSettings, MessageStore, StoreSettings
settings = StoreSettings(root_dir=Path(sys.argv[1]), commitlog=CommitLogSettings(
    segment_size_bytes=64 * 1024, message_body_size_max_bytes=16 * 1024))
store = MessageStore(settings)
store.open()
store.start()
Path(sys.argv[2]).write_text("ready")
sys.stdin.read()
store.shutdown()
"""


def test_a_second_store_on_a_locked_directory_raises_store_locked_error(
    tmp_path: Path, small_settings: SettingsFactory, wait_until: WaitUntil
) -> None:
    """Goal: a store held by another process raises StoreLockedError. Method: a child holds it open."""
    root = tmp_path / "store"
    ready = tmp_path / "ready"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD_HOLDING_THE_STORE, str(root), str(ready)],
        stdin=subprocess.PIPE,
    )
    try:
        wait_until(lambda: ready.exists() or child.poll() is not None, 20)
        assert child.poll() is None, "the child exited early"
        second = MessageStore(small_settings(root))
        with pytest.raises(StoreLockedError, match="lock"):
            second.open()
        assert (root / "abort").exists()  # the running child's marker is untouched
    finally:
        assert child.stdin is not None
        child.stdin.close()
        assert child.wait(30) == 0
    assert not (root / "abort").exists()
    reopened = MessageStore(small_settings(root))
    assert reopened.open().last_exit_ok
    reopened.shutdown()


def test_a_coalesced_read_answers_the_same_records_as_views_of_adjacent_runs(
    tmp_path: Path, small_settings: SettingsFactory
) -> None:
    """Goal: `get_messages(coalesce=True)` (what a pull sends) carries exactly the bytes, count,
    next offset and status of the per-record read, adjacent records (a batch's) as one view and
    never one view across CommitLog segments. Method: batches and single sends interleaved over
    two queues and several 64 KiB segments; read every offset with several limits and a tag filter."""
    store = open_store(small_settings(tmp_path / "store"))
    try:
        for round_number in range(70):
            items = [(0, os.urandom(300 + i * 40), props(TAGS=f"t{i % 3}")) for i in range(6)]
            template = MessageToStore("Runs", round_number % 2, b"")
            assert store.append_batch_body(template, encode_batch_body(items), b"").ok
            put(store, "Runs", 0, os.urandom(500), TAGS="t1")  # breaks queue 0's runs; queue 1's too
        settle(store)
        assert store.segment_count > 3
        segment_size = store.segment_size
        tag_t1 = java_string_hash("t1")
        merged_reads = 0
        for queue_id in (0, 1):
            end = store.max_offset_in_queue("Runs", queue_id)
            for offset in range(0, end, 5):
                for max_count, tag_filter in ((1, None), (7, None), (32, None), (32, tag_t1.__eq__)):
                    each = store.get_messages("Runs", queue_id, offset, max_count, tag_filter)
                    runs = store.get_messages("Runs", queue_id, offset, max_count, tag_filter, coalesce=True)
                    try:
                        assert (runs.status, runs.next_begin_offset, runs.count) == (
                            each.status,
                            each.next_begin_offset,
                            len(each.messages),
                        )
                        assert b"".join(runs.parts) == b"".join(each.messages)
                        assert runs.total_bytes == each.total_bytes and not runs.messages
                        assert len(runs.parts) <= len(each.messages)
                        if tag_filter is None and len(each.messages) >= 7:  # 7 in a row hold a batch's
                            assert len(runs.parts) < len(each.messages)  # which travel together
                            merged_reads += 1
                        at = each.commitlog_offsets[0] if each.commitlog_offsets else 0
                        for part in runs.parts:
                            assert at // segment_size == (at + len(part) - 1) // segment_size
                            at = _next_record_offset(each, at + len(part))
                    finally:
                        each.release()
                        runs.release()
        assert merged_reads > 10
    finally:
        store.shutdown()


def _next_record_offset(found: GetResult, after: int) -> int:
    """The CommitLog offset of the first record of `found` at or after `after` (0 past the last)."""
    return next((offset for offset in found.commitlog_offsets if offset >= after), 0)
