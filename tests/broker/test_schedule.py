"""Delayed delivery: level tables, the park/unpark rewrites, tagsCode, the timer index, and the
ScheduleMessageService on a real in-process store (offset clamping, durability, restarts)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from shoal.broker.config import DEFAULT_MESSAGE_DELAY_LEVEL, load_broker_settings, parse_delay_levels
from shoal.broker.schedule import (
    ScheduleMessageService,
    Timing,
    may_be_timed,
    park,
    schedule_tags_code_hook,
    schedule_tags_code_rule,
    timing_of,
    unpark,
)
from shoal.broker.timer import TimerIndex, TimerProgress, load_timer_progress
from shoal.formats.properties import TIMER_DELIVER_MS, decode_properties, encode_properties
from shoal.formats.record import RecordHeader, decode_header, encode_host
from shoal.formats.topics import SCHEDULE_TOPIC, TIMER_TOPIC, TRANS_HALF_TOPIC
from shoal.store import MessageStore, MessageToStore, StoreSettings
from tests.conftest import async_wait_until

WAIT_S = 10.0
TIMER_MAX_MS = 3 * 24 * 3600 * 1000


def test_default_table_has_rocketmq_s_eighteen_levels() -> None:
    """Goal: messageDelayLevel parses as ScheduleMessageService.parseDelayLevel. Method: the default."""
    levels = parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL)
    assert len(levels) == 18
    assert levels[:5] == (1_000, 5_000, 10_000, 30_000, 60_000)
    assert levels[-1] == 2 * 3600 * 1000
    assert parse_delay_levels("250ms 1s 2m 1h 1d") == (250, 1_000, 120_000, 3_600_000, 86_400_000)


@pytest.mark.parametrize("text", ["", "1x", "s", "1.5s", "-1s", "1 s"])
def test_bad_level_tables_are_refused_naming_the_key(text: str) -> None:
    """Goal: a broken messageDelayLevel fails at load. Method: broker.conf values Java rejects."""
    with pytest.raises(ValueError, match="messageDelayLevel"):
        load_broker_settings({"messageDelayLevel": text})


def test_only_properties_that_can_delay_are_decoded() -> None:
    """Goal: ordinary sends skip the decode. Method: may_be_timed on wire property strings."""
    assert not may_be_timed(None)
    assert not may_be_timed("TAGS\x01a\x02KEYS\x01k")
    assert may_be_timed("TAGS\x01a\x02DELAY\x013")
    assert may_be_timed("TIMER_DELAY_SEC\x015")
    assert may_be_timed("__STARTDELIVERTIME\x011")


@pytest.mark.parametrize(
    ("properties", "expected"),
    [
        ({}, None),
        ({"DELAY": "0"}, None),
        ({"DELAY": "-2"}, None),
        ({"DELAY": "3"}, Timing(level=3)),
        ({"TIMER_DELIVER_MS": "1005000"}, Timing(deliver_ms=1_005_000)),
        ({"TIMER_DELAY_SEC": "7"}, Timing(deliver_ms=1_007_000)),
        ({"TIMER_DELAY_MS": "1500"}, Timing(deliver_ms=1_001_500)),
        ({"__STARTDELIVERTIME": "1002000"}, Timing(deliver_ms=1_002_000)),
        ({"TIMER_DELIVER_MS": "999000"}, None),  # in the past: at once
        ({"TIMER_DELAY_SEC": "0", "DELAY": "2"}, Timing(level=2)),  # a past time does not conflict
        ({"TIMER_DELIVER_MS": "1003000", "TIMER_DELAY_SEC": "60"}, Timing(deliver_ms=1_003_000)),
    ],
)
def test_timing_of_levels_and_delivery_times(properties: dict[str, str], expected: Timing | None) -> None:
    """Goal: DELAY and the RocketMQ 5 timer properties give the right timing. Method: now = 1,000,000 ms."""
    assert timing_of(properties, 1_000_000, timer_enabled=True, timer_max_delay_ms=TIMER_MAX_MS) == expected


@pytest.mark.parametrize(
    ("properties", "reason"),
    [
        ({"DELAY": "two"}, "not an integer"),
        ({"TIMER_DELAY_MS": "1e3"}, "not an integer"),
        ({"DELAY": "1", "TIMER_DELAY_SEC": "5"}, "both"),
        ({"TIMER_DELAY_SEC": str(4 * 24 * 3600)}, "timerMaxDelaySec"),
    ],
)
def test_timing_of_refuses_garbage_conflicts_and_far_future(properties: dict[str, str], reason: str) -> None:
    """Goal: bad timing properties are refused (MESSAGE_ILLEGAL at the send). Method: each kind."""
    with pytest.raises(ValueError, match=reason):
        timing_of(properties, 1_000_000, timer_enabled=True, timer_max_delay_ms=TIMER_MAX_MS)


def test_timer_properties_are_ignored_when_the_timer_is_off() -> None:
    """Goal: timerWheelEnable=false behaves like a 4.x broker. Method: a timer and a level."""
    assert timing_of({"TIMER_DELAY_SEC": "5"}, 0, timer_enabled=False, timer_max_delay_ms=1) is None
    assert timing_of({"TIMER_DELAY_SEC": "5", "DELAY": "1"}, 0, timer_enabled=False, timer_max_delay_ms=1) == Timing(
        level=1
    )


def _message(properties: dict[str, str], topic: str = "T", queue_id: int = 3) -> MessageToStore:
    return MessageToStore(
        topic,
        queue_id,
        b"body",
        encode_properties(properties),
        flag=7,
        born_timestamp_ms=123,
        born_host=encode_host("10.0.0.1", 5),
        reconsume_times=2,
    )


def test_park_for_a_level_moves_the_message_to_its_schedule_queue() -> None:
    """Goal: CommitLog.asyncPutMessage's delay rewrite (spec §10.2). Method: park levels 2 and 40."""
    parked = park(_message({"TAGS": "a", "DELAY": "2"}), Timing(level=2), 18)
    assert (parked.topic, parked.queue_id) == (SCHEDULE_TOPIC, 1)
    assert decode_properties(parked.properties) == {"TAGS": "a", "DELAY": "2", "REAL_TOPIC": "T", "REAL_QID": "3"}
    assert (parked.body, parked.flag, parked.born_timestamp_ms, parked.reconsume_times) == (b"body", 7, 123, 2)
    clamped = park(_message({"DELAY": "40"}), Timing(level=40), 18)
    assert clamped.queue_id == 17
    assert decode_properties(clamped.properties)["DELAY"] == "18"


def test_park_for_a_time_keeps_only_the_absolute_delivery_time() -> None:
    """Goal: relative timer properties become TIMER_DELIVER_MS, so a re-sent copy is not delayed
    again. Method: park a message sent with TIMER_DELAY_SEC."""
    parked = park(_message({"TIMER_DELAY_SEC": "5", "u": "v"}), Timing(deliver_ms=5_000), 18)
    assert (parked.topic, parked.queue_id) == (TIMER_TOPIC, 0)
    assert decode_properties(parked.properties) == {
        "u": "v",
        "TIMER_DELIVER_MS": "5000",
        "REAL_TOPIC": "T",
        "REAL_QID": "3",
    }


def test_unpark_restores_the_real_topic_without_delay() -> None:
    """Goal: messageTimeup's copy: real topic and queue, DELAY removed, fields kept; half-topic and
    broken records are dropped (spec §10.2, §11.6). Method: unpark parked records."""
    parked = park(_message({"TAGS": "a", "DELAY": "2"}), Timing(level=2), 18)
    header = _header_of(parked)
    delivered = unpark(header, b"body", decode_properties(parked.properties))
    assert delivered is not None
    assert (delivered.topic, delivered.queue_id, delivered.flag, delivered.reconsume_times) == ("T", 3, 7, 2)
    assert (delivered.born_timestamp_ms, delivered.born_host) == (123, encode_host("10.0.0.1", 5))
    assert decode_properties(delivered.properties) == {"TAGS": "a", "REAL_TOPIC": "T", "REAL_QID": "3"}
    half = park(_message({"DELAY": "1"}, topic=TRANS_HALF_TOPIC, queue_id=0), Timing(level=1), 18)
    assert unpark(header, b"", decode_properties(half.properties)) is None
    assert unpark(header, b"", {"DELAY": "1"}) is None


def _header_of(message: MessageToStore) -> RecordHeader:
    return RecordHeader(
        0, 0, 0, message.queue_id, message.flag, 0, 42, 0, message.born_timestamp_ms, message.born_host,
        0, message.born_host, message.reconsume_times, 0, 0, 0, message.topic, 0, 0,
    )  # fmt: skip


def test_tags_code_of_parked_messages_is_their_delivery_time() -> None:
    """Goal: spec §2.2 for SCHEDULE_TOPIC_XXXX (unknown level: +1 s) and the timer topic; other
    topics keep the tag hash. Method: call the hook."""
    hook = schedule_tags_code_hook((1_000, 5_000))
    assert hook(SCHEDULE_TOPIC, {"DELAY": "2"}, 10_000, 99) == 15_000
    assert hook(SCHEDULE_TOPIC, {"DELAY": "9"}, 10_000, 99) == 11_000
    assert hook(SCHEDULE_TOPIC, {}, 10_000, 99) == 11_000
    assert hook(TIMER_TOPIC, {TIMER_DELIVER_MS: "77777"}, 10_000, 99) == 77_777
    assert hook(TIMER_TOPIC, {}, 10_000, 99) == 10_000
    assert hook("T", {"DELAY": "2"}, 10_000, 99) is None


def test_timer_index_pops_by_time_and_reports_a_safe_progress() -> None:
    """Goal: the heap orders by delivery time; progress says where a restart must scan and what
    was delivered. Method: index units out of time order, pop some."""
    index = TimerIndex(pending_max_count=10)
    for offset, deliver_ms in [(0, 500), (1, 100), (5000, 300), (5001, 300), (2, 900)]:
        index.index(offset, deliver_ms)
    index.indexed_offset = 5002
    assert index.next_deliver_ms() == 100
    assert [index.pop() for _ in range(3)] == [(100, 1), (300, 5000), (300, 5001)]
    assert index.progress(now_ms=400) == TimerProgress(scan_from_offset=0, indexed_offset=5002, delivered_up_to_ms=400)
    assert index.pop() == (500, 0)
    assert index.progress(now_ms=800) == TimerProgress(0, 5002, 800)  # offset 2 still pending
    assert index.pop() == (900, 2)
    assert index.progress(now_ms=950) == TimerProgress(5002, 5002, 950)
    assert index.room == 10


def test_timer_index_restore_skips_what_was_delivered() -> None:
    """Goal: after a restart, units below indexedOffset due by deliveredUpToMs are not indexed
    again, later ones always are. Method: restore, then index a mix."""
    index = TimerIndex()
    index.restore(TimerProgress(scan_from_offset=10, indexed_offset=20, delivered_up_to_ms=1000), queue_min_offset=0)
    assert index.indexed_offset == 10
    assert not index.index(11, 900)
    assert index.index(12, 1500)
    assert index.index(25, 900)
    assert len(index) == 2


# --- the service on a real store ---


@asynccontextmanager
async def running_service(
    settings: StoreSettings, levels_ms: tuple[int, ...], *, start: bool = True
) -> AsyncIterator[tuple[MessageStore, ScheduleMessageService]]:
    """A store driven by the loop (as the broker drives it) and a started schedule service."""
    store = MessageStore(settings, tags_code=schedule_tags_code_rule(levels_ms))
    store.open()
    loop = asyncio.get_running_loop()
    store.start(dispatch_loop=loop)
    service = ScheduleMessageService(store, levels_ms, settings.config_dir, persist_interval_s=3600)
    if start:
        service.start(loop)
    try:
        yield store, service
    finally:
        await service.stop()
        await store.shutdown_from_loop()


def put_parked(store: MessageStore, service: ScheduleMessageService, key: str, timing: Timing) -> None:
    message = _message({"KEYS": key, "DELAY": str(timing.level)} if timing.level else {"KEYS": key}, queue_id=0)
    result = store.append_message(service.park(message, timing))
    assert result.append is not None
    store.dispatch_soon()


def delivered(store: MessageStore, topic: str = "T", queue_id: int = 0) -> list[tuple[str, int, dict[str, str]]]:
    """(KEYS, store timestamp, properties) of every record in the real queue."""
    found = []
    for offset in range(store.max_offset_in_queue(topic, queue_id)):
        unit = store.unit_at(topic, queue_id, offset)
        assert unit is not None
        record = store.message_at(unit.physical_offset)
        assert record is not None
        header, view = record
        start = header.properties_position
        properties = decode_properties(view[start : start + header.properties_length])
        view.release()
        found.append((properties.get("KEYS", ""), header.store_timestamp, properties))
    return found


async def stays_true(predicate: Callable[[], bool], duration_s: float = 0.2) -> None:
    """Fail if `predicate` turns false within `duration_s` (nothing more arrives: no duplicate)."""
    deadline = time.monotonic() + duration_s
    while time.monotonic() < deadline:
        assert predicate(), "changed while it should have stayed"
        await asyncio.sleep(0.005)


def test_each_level_is_delivered_when_due_without_delay(tmp_path: Path, small_settings: Callable[..., Any]) -> None:
    """Goal: messages of three levels arrive at their real queue no earlier than their delay, with
    DELAY removed and the record's fields kept. Method: park 5 per level, wait, read the queue."""
    levels = (50, 150, 300)

    async def scenario() -> None:
        async with running_service(small_settings(tmp_path / "s"), levels) as (store, service):
            sent_ms = store.clock.now_ms()
            for index in range(15):
                put_parked(store, service, f"k{index}", Timing(level=index % 3 + 1))
            await async_wait_until(lambda: len(delivered(store)) == 15, WAIT_S)
            for key, stored_ms, properties in delivered(store):
                level = int(key[1:]) % 3 + 1
                assert stored_ms - sent_ms >= levels[level - 1], key
                assert "DELAY" not in properties and properties["REAL_TOPIC"] == "T"
            header = _first_delivered_header(store)
            assert (header.flag, header.reconsume_times, header.born_timestamp) == (7, 2, 123)
            assert service.delivered_count == 15

    asyncio.run(scenario())


def _first_delivered_header(store: MessageStore) -> Any:
    unit = store.unit_at("T", 0, 0)
    assert unit is not None
    view = store.read(unit.physical_offset, unit.size)
    assert view is not None
    header = decode_header(view, 0)
    view.release()
    return header


def test_offsets_are_clamped_into_each_queue_at_start(tmp_path: Path, small_settings: Callable[..., Any]) -> None:
    """Goal: delayOffset.json offsets beyond a queue are clamped ([min, max]); a level dropped
    from the table is still delivered. Method: park 3 on level 2 (not due), restart with a bad
    offset file and a one-level table: level 2's delivery time (+1 h) is beyond now + the longest
    delay, so the clock guard delivers them at once."""
    settings = small_settings(tmp_path / "s")

    async def first() -> None:
        async with running_service(settings, (60_000, 3_600_000)) as (store, service):
            for index in range(3):
                put_parked(store, service, f"k{index}", Timing(level=2))
            await async_wait_until(lambda: store.max_offset_in_queue(SCHEDULE_TOPIC, 1) == 3, WAIT_S)

    async def second() -> None:
        async with running_service(settings, (100,), start=False) as (store, service):
            service.start(asyncio.get_running_loop())
            assert service.offsets[1] == 0  # its queue is empty: 7 clamped to 0
            assert service.offsets[2] == 0
            await async_wait_until(lambda: len(delivered(store)) == 3, WAIT_S)

    asyncio.run(first())
    (settings.config_dir / "delayOffset.json").write_text(json.dumps({"offsetTable": {"1": 7, "2": 0}}))
    asyncio.run(second())


def test_persisted_progress_never_passes_the_flushed_commitlog(
    tmp_path: Path, small_settings: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: delayOffset.json only covers deliveries that are durable, so even a power loss cannot
    lose a delivered message. Method: no periodic flush and a flush that does nothing: persisting
    writes nothing new; once the flush works, the delivery is covered."""
    settings = small_settings(tmp_path / "s", flush_interval_ms=600_000, flush_thorough_interval_ms=600_000)
    path = settings.config_dir / "delayOffset.json"

    async def scenario() -> None:
        async with running_service(settings, (10,)) as (store, service):
            store.flush_to_end()
            put_parked(store, service, "k0", Timing(level=1))
            await async_wait_until(lambda: len(delivered(store)) == 1, WAIT_S)
            monkeypatch.setattr(store, "flush_to_end", lambda: None)
            await service._persist_durable()
            assert not path.exists() or json.loads(path.read_text())["offsetTable"].get("1", 0) == 0
            monkeypatch.undo()
            await service._persist_durable()
            assert json.loads(path.read_text())["offsetTable"]["1"] == 1

    asyncio.run(scenario())


def test_restart_delivers_pending_messages_once(tmp_path: Path, small_settings: Callable[..., Any]) -> None:
    """Goal: a graceful restart in the middle of pending delays loses nothing and repeats nothing,
    for levels and timers. Method: park 40 level and 40 timer messages, stop after the first half
    is delivered, restart, count deliveries per key."""
    settings = small_settings(tmp_path / "s")
    levels = (100, 1_500)

    async def first() -> None:
        async with running_service(settings, levels) as (store, service):
            now_ms = store.clock.now_ms()
            for index in range(40):
                put_parked(store, service, f"L{index}", Timing(level=1 if index % 2 else 2))
                put_parked(store, service, f"T{index}", Timing(deliver_ms=now_ms + (100 if index % 2 else 1_500)))
            await async_wait_until(lambda: len(delivered(store)) == 40, WAIT_S)

    async def second() -> None:
        async with running_service(settings, levels) as (store, _service):
            await async_wait_until(lambda: len(delivered(store)) >= 80, WAIT_S)
            await stays_true(lambda: len(delivered(store)) == 80)
            keys = [key for key, _, _ in delivered(store)]
            assert sorted(keys) == sorted([f"L{i}" for i in range(40)] + [f"T{i}" for i in range(40)])

    asyncio.run(first())
    progress = load_timer_progress(settings.config_dir / "timerOffset.json")
    assert progress.indexed_offset == 40 and progress.scan_from_offset == 0
    asyncio.run(second())


def test_a_due_backlog_is_delivered_in_rounds(tmp_path: Path, small_settings: Callable[..., Any]) -> None:
    """Goal: 20,000 due messages (levels and timers) are delivered in well under the time they
    took to arrive one by one, crossing many ConsumeQueue files. Method: park them with the
    service stopped, start it, time the delivery."""
    settings = small_settings(tmp_path / "s")
    count = 20_000

    async def scenario() -> None:
        async with running_service(settings, (1, 2), start=False) as (store, service):
            for index in range(count):
                timing = Timing(level=index % 2 + 1) if index % 4 else Timing(deliver_ms=store.clock.now_ms() + 1)
                store.append_message(service.park(_message({"KEYS": f"k{index}"}, queue_id=0), timing))
            store.dispatch_now()
            started = time.monotonic()
            service.start(asyncio.get_running_loop())
            await async_wait_until(lambda: store.max_offset_in_queue("T", 0) == count, 60)
            elapsed_s = time.monotonic() - started
            print(f"\n{count} due messages delivered in {elapsed_s:.2f} s ({count / elapsed_s:,.0f} msgs/s)")
            assert service.delivered_count == count

    asyncio.run(scenario())


def test_a_stopped_service_starts_again_from_its_files(tmp_path: Path, small_settings: Callable[..., Any]) -> None:
    """Goal: stop() then start() on the same store (a master demoted, then promoted again) loses
    and repeats nothing. Method: park timers and levels, stop before they are due, start again."""
    settings = small_settings(tmp_path / "s")
    due_after_ms = 3_000  # far enough that a busy machine still stops the service before they are due

    async def scenario() -> None:
        async with running_service(settings, (due_after_ms,)) as (store, service):
            now_ms = store.clock.now_ms()
            for index in range(10):
                put_parked(store, service, f"L{index}", Timing(level=1))
                put_parked(store, service, f"T{index}", Timing(deliver_ms=now_ms + due_after_ms))
            await async_wait_until(lambda: len(service.timer) == 10, WAIT_S)
            await service.stop()
            assert not service.running and delivered(store) == []
            service.start(asyncio.get_running_loop())
            assert service.running and len(service.timer) == 10
            await async_wait_until(lambda: len(delivered(store)) >= 20, WAIT_S)
            await stays_true(lambda: len(delivered(store)) == 20)
            assert sorted(key for key, _, _ in delivered(store)) == sorted(
                [f"L{i}" for i in range(10)] + [f"T{i}" for i in range(10)]
            )

    asyncio.run(scenario())
