"""Delayed-message benchmark: how fast the schedule service drains a backlog of due messages.

    python bench/delay.py [--messages N] [--dir PATH]

The broker's own parts, in one process, as the broker wires them (the Dispatcher driven on the
event loop, ScheduleMessageService on the same loop), on a real store with ASYNC_FLUSH:
  1. delay levels: N messages parked in SCHEDULE_TOPIC_XXXX (4 levels), all due when the service
     starts; time until every one is re-put to its real topic and dispatched to its ConsumeQueue
  2. timer: N messages parked in rmq_sys_wheel_timer, all due; the index rebuild at start counts
  3. timer index rebuild alone: N pending (not due) timer messages indexed at start
Bodies are 128 random bytes with a TAGS and KEYS property, as a typical small business message.
Prints one line per case and a SUMMARY line (numbers vary +-15% between runs on this VM).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path

from shoal.broker.schedule import ScheduleMessageService, Timing, schedule_tags_code_rule
from shoal.formats.properties import encode_properties
from shoal.store import FlushSettings, MessageStore, MessageToStore, StoreSettings

BODY_BYTES = 128
LEVELS_MS = (1, 2, 3, 4)
REAL_TOPIC = "BenchDelayed"
REAL_QUEUES = 8
POLL_S = 0.001


def _open(root: Path, loop: asyncio.AbstractEventLoop) -> MessageStore:
    settings = StoreSettings(root_dir=root, flush=FlushSettings())
    store = MessageStore(settings, tags_code=schedule_tags_code_rule(LEVELS_MS))
    store.open()
    store.start(dispatch_loop=loop)
    return store


def _park_all(store: MessageStore, service: ScheduleMessageService, count: int, timing_of: object) -> None:
    body = os.urandom(BODY_BYTES)
    assert callable(timing_of)
    for index in range(count):
        properties = encode_properties({"TAGS": "TagA", "KEYS": f"key-{index}", "UNIQ_KEY": f"U{index:020d}"})
        message = MessageToStore(REAL_TOPIC, index % REAL_QUEUES, body, properties, born_timestamp_ms=1)
        result = store.append_message(service.park(message, timing_of(index)))
        assert result.append is not None, result.status
    store.dispatch_now()


def _delivered(store: MessageStore) -> int:
    return sum(store.max_offset_in_queue(REAL_TOPIC, queue_id) for queue_id in range(REAL_QUEUES))


async def drain(root: Path, count: int, timer: bool) -> tuple[float, int]:
    """Seconds from service start until `count` due messages are delivered and dispatched."""
    loop = asyncio.get_running_loop()
    store = _open(root, loop)
    service = ScheduleMessageService(store, LEVELS_MS, store.settings.config_dir)
    now_ms = store.clock.now_ms()
    if timer:
        _park_all(store, service, count, lambda index: Timing(deliver_ms=now_ms + 1 + index % 50))
    else:
        _park_all(store, service, count, lambda index: Timing(level=index % len(LEVELS_MS) + 1))
    await asyncio.sleep(0.06)  # every message is due now (longest delay 50 ms)
    started = time.perf_counter()
    service.start(loop)
    while _delivered(store) < count:
        await asyncio.sleep(POLL_S)
    elapsed_s = time.perf_counter() - started
    delivered = service.delivered_count
    await service.stop()
    await store.shutdown_from_loop()
    return elapsed_s, delivered


async def rebuild(root: Path, count: int) -> tuple[float, int]:
    """Seconds to index `count` pending timer messages when the service starts."""
    loop = asyncio.get_running_loop()
    store = _open(root, loop)
    service = ScheduleMessageService(store, LEVELS_MS, store.settings.config_dir)
    later_ms = store.clock.now_ms() + 3_600_000
    _park_all(store, service, count, lambda index: Timing(deliver_ms=later_ms + index))
    started = time.perf_counter()
    service.start(loop)
    elapsed_s = time.perf_counter() - started
    pending = len(service.timer)
    await service.stop()
    await store.shutdown_from_loop()
    return elapsed_s, pending


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000, help="messages per case (default 200,000)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir under ./build)")
    args = parser.parse_args()
    parent = args.dir or Path("build")
    parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-delay-", dir=parent))
    count = args.messages
    try:
        level_s, level_count = asyncio.run(drain(work / "levels", count, timer=False))
        print(f"{'delay levels: due backlog delivered':<40}: {level_count / level_s:9.0f} msgs/s ({level_s:.2f} s)")
        timer_s, timer_count = asyncio.run(drain(work / "timer", count, timer=True))
        print(f"{'timer: due backlog delivered':<40}: {timer_count / timer_s:9.0f} msgs/s ({timer_s:.2f} s)")
        index_s, pending = asyncio.run(rebuild(work / "rebuild", count))
        print(f"{'timer: index rebuilt at start':<40}: {pending / index_s:9.0f} msgs/s ({index_s:.2f} s)")
        print(
            f"SUMMARY delay messages={count} levels_msgs_per_s={level_count / level_s:.0f} "
            f"timer_msgs_per_s={timer_count / timer_s:.0f} rebuild_msgs_per_s={pending / index_s:.0f}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
