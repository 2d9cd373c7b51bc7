"""Power loss, simulated: recovery on the file states a power cut could leave (docs/reliability.md).

A deterministic workload (puts rolling 64 KiB segments, dispatch, ConsumeQueue/index flushes, the
checkpoint, consumerOffset.json and topics.json persisted) runs under `DiskRecorder`; every
durability call and every put is a crash point. For each, images are materialised (nothing
unsynced kept, everything kept, random page subsets, torn pages; directory changes not synced
kept or undone) and recovered as after a crash. Knobs: SHOAL_POWER_LOSS_PUTS (messages per
workload), SHOAL_POWER_LOSS_RANDOM (random images per crash point), SHOAL_POWER_LOSS_SEED.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

from shoal.formats.properties import encode_properties
from shoal.formats.record import RecordKind, check_record
from shoal.store import (
    CommitLogSettings,
    ConsumeQueueSettings,
    FlushDiskType,
    FlushSettings,
    GetMessageStatus,
    IndexSettings,
    MessageStore,
    MessageToStore,
    StoreSettings,
)
from shoal.store.checkpoint import StoreCheckpoint
from shoal.store.clock import SYSTEM_CLOCK
from shoal.store.index_file import IndexFile
from shoal.store.index_service import IndexService
from shoal.store.inspection import verify_store
from shoal.store.metadata import ConsumerOffsetTable, TopicConfig, TopicConfigTable


def _load_simulator() -> ModuleType:
    """power_loss.py as a module (it is a helper, not a test module)."""
    spec = importlib.util.spec_from_file_location("power_loss", Path(__file__).with_name("power_loss.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["power_loss"] = module
    spec.loader.exec_module(module)
    return module


power_loss = _load_simulator()
if TYPE_CHECKING:  # the same file, as mypy can follow it
    from tests.store.power_loss import CrashPoint, DiskRecorder
else:
    CrashPoint = power_loss.CrashPoint
    DiskRecorder = power_loss.DiskRecorder

PUTS = int(os.environ.get("SHOAL_POWER_LOSS_PUTS", "160"))
RANDOM_IMAGES = int(os.environ.get("SHOAL_POWER_LOSS_RANDOM", "2"))
SEED = int(os.environ.get("SHOAL_POWER_LOSS_SEED", "12"))
TOPICS = ("PowerA", "PowerB")
QUEUES = 3
GROUP = "power-group"
INDEX_HASH_SLOTS = 64
SEGMENT_BYTES = 64 * 1024


@dataclass(frozen=True)
class Sent:
    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    size: int
    body: bytes

    @property
    def end(self) -> int:
        return self.physical_offset + self.size


@dataclass
class Outcome:
    images: int = 0
    acked_checked: int = 0
    unflushed_lost: int = 0
    reported_losses: int = 0
    unreported: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)


def _settings(root: Path, flush: FlushDiskType) -> StoreSettings:
    """tests/conftest.py's small_settings, without preallocation (one thread: the same events in
    the same order every run)."""
    return StoreSettings(
        root_dir=root,
        commitlog=CommitLogSettings(
            segment_size_bytes=SEGMENT_BYTES,
            message_body_size_max_bytes=16 * 1024,
            preallocate_next_segment=False,
        ),
        consume_queue=ConsumeQueueSettings(units_per_file=64),
        index=IndexSettings(hash_slots=INDEX_HASH_SLOTS, entries=256),
        flush=FlushSettings(flush_disk_type=flush),
    )


def _offsets_document(table: ConsumerOffsetTable) -> dict[str, dict[int, int]]:
    return table.all()


def run_workload(root: Path, flush: FlushDiskType, puts: int) -> tuple[DiskRecorder, list[Sent]]:
    """Drive a store by hand (what its services do, in one thread) under the recorder."""
    recorder = DiskRecorder(root)
    rng = random.Random(SEED)
    sent: list[Sent] = []
    recorder.facts.update(sent=0, acked=0, flushed=0, offsets=(None, None), topics=(None, None))
    with recorder.installed():
        store = MessageStore(_settings(root, flush))
        store.open()
        store._abort.create()  # what start() does, without the timer-driven threads
        config = root / "config"
        offsets = ConsumerOffsetTable(config / "consumerOffset.json")
        topics = TopicConfigTable(config / "topics.json", store.clock.now_ms)

        def persist(name: str, table: ConsumerOffsetTable | TopicConfigTable, document: Any) -> None:
            last = recorder.facts[name][0]
            recorder.facts[name] = (last, document)
            table.persist()
            recorder.facts[name] = (document, None)

        for topic in TOPICS:
            topics.put(TopicConfig(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES))
            persist("topics", topics, sorted(topics.all()))
        for number in range(puts):
            topic, queue_id = TOPICS[number % 2], number % QUEUES
            body = rng.randbytes(rng.choice((40, 300, 900, 2500)))
            properties = encode_properties({"KEYS": f"k{number}", "UNIQ_KEY": f"U{number:08d}"})
            result = store.append_message(MessageToStore(topic, queue_id, body, properties))
            assert result.ok and result.append is not None, result
            append = result.append
            sent.append(Sent(topic, queue_id, append.queue_offset, append.wrote_offset, append.wrote_bytes, body))
            recorder.facts["sent"] = len(sent)
            recorder.crash_point(f"appended #{number}")
            if flush is FlushDiskType.SYNC_FLUSH or number % 9 == 8:
                store._flusher.flush_to_end(0 if flush is FlushDiskType.SYNC_FLUSH or number % 27 == 26 else 4)
            flushed = store.flushed_offset
            if flush is FlushDiskType.SYNC_FLUSH:
                assert flushed >= append.next_offset
                recorder.facts["acked"] = len(sent)  # put_message would return PUT_OK now
            recorder.facts["flushed"] = flushed
            if number % 5 == 4:
                store.dispatch_now()
            if number % 17 == 16:
                store._cq_flusher.flush_all(0)  # ConsumeQueues, index, checkpoint
            if number % 23 == 22:
                for queue_id in range(QUEUES):
                    offsets.commit(GROUP, topic, queue_id, number + queue_id)
                persist("offsets", offsets, _offsets_document(offsets))
            if number == puts // 2:
                topics.put(TopicConfig("PowerLate", read_queue_nums=1, write_queue_nums=1))
                persist("topics", topics, sorted(topics.all()))
        recorder.crash_point("end of workload")
        store._commitlog.queue.close()
        store._consume_queues.close()
        if store._index is not None:
            store._index.close()
        store._lock.release()
    assert not recorder.unmodelled, recorder.unmodelled[:5]
    return recorder, sent


def _intact_in_image(root: Path, sent: list[Sent]) -> set[int]:
    """Positions of sent records whose bytes are intact (CRC, position) in the crash image."""
    intact: set[int] = set()
    segments: dict[int, bytes] = {}
    for path in (root / "commitlog").glob("*"):
        if path.name.isdigit():
            segments[int(path.name)] = path.read_bytes()
    for message in sent:
        base = message.physical_offset - message.physical_offset % SEGMENT_BYTES
        data = segments.get(base)
        if data is None or len(data) != SEGMENT_BYTES:
            continue
        check = check_record(
            data,
            message.physical_offset - base,
            len(data),
            check_crc=True,
            expected_physical_offset=message.physical_offset,
        )
        if check.kind is RecordKind.MESSAGE:
            intact.add(message.physical_offset)
    return intact


def _offsets_by_key(store: MessageStore, topic: str, key: str) -> list[int]:
    found = store.query_by_key(topic, key, 64)
    offsets = [header.physical_offset for header, _view in found]
    for _header, view in found:
        view.release()
    return offsets


def check_image(
    root: Path, flush: FlushDiskType, point: CrashPoint, sent: list[Sent], outcome: Outcome, where: str = ""
) -> None:
    """Recover one crash image and check every promise; raises AssertionError on a broken one."""
    facts = point.facts
    known = sent[: facts["sent"]]
    must_survive = [m for m in known if m.end <= facts["flushed"]]
    assert len(must_survive) >= facts["acked"], "acknowledged messages are durable ones"
    checkpoint_path = root / "checkpoint"
    if checkpoint_path.exists():
        assert StoreCheckpoint(checkpoint_path).trusted, "checkpoint half-written"
    intact_before = _intact_in_image(root, known)
    store = MessageStore(_settings(root, flush))
    report = store.open()  # any exception fails the image
    try:
        present = set()
        for message in known:
            found = store.get_messages(message.topic, message.queue_id, message.queue_offset, 1)
            if (
                found.status is GetMessageStatus.FOUND
                and found.commitlog_offsets[0] == message.physical_offset
                and bytes(found.messages[0][-message.size :]).find(message.body) >= 0
            ):
                present.add(message.physical_offset)
            for view in found.messages:
                view.release()
        # Keys of every durable message are found (an unflushed record may survive with its body,
        # which the CRC covers, but torn properties: nothing can find that one by key).
        store.dispatch_now()
        unfindable = [
            number
            for number, message in enumerate(known)
            if message.end <= facts["flushed"]
            and message.physical_offset not in _offsets_by_key(store, message.topic, f"k{number}")
        ]
        assert not unfindable, f"{len(unfindable)} durable messages not found by key, first k{unfindable[0]}"
        lost_durable = [m for m in must_survive if m.physical_offset not in present]
        assert not lost_durable, (
            f"{len(lost_durable)} durable messages lost, first {lost_durable[0]}\n{report.summary()}"
        )
        dropped_intact = [m for m in known if m.physical_offset in intact_before and m.physical_offset not in present]
        if dropped_intact:
            if report.lossless:
                outcome.unreported.append(
                    f"crash point {point.index} ({point.label}){where}: recovery dropped {len(dropped_intact)} intact "
                    f"records without reporting it:\n{report.summary()}"
                )
            else:
                outcome.reported_losses += 1
        outcome.unflushed_lost += len(known) - len(present)
        outcome.acked_checked += facts["acked"]
    finally:
        store.shutdown()
    verified = verify_store(root, hash_slots=INDEX_HASH_SLOTS)
    if not verified.ok:
        outcome.unverified.append(f"crash point {point.index} ({point.label}){where}: verify: {verified.problems[:3]}")
    _check_metadata(root, facts)
    outcome.images += 1


def _check_metadata(root: Path, facts: dict[str, Any]) -> None:
    offsets = ConsumerOffsetTable(root / "config" / "consumerOffset.json")
    offsets.load()
    last, in_flight = facts["offsets"]
    allowed = [{} if last is None else last, *([] if in_flight is None else [in_flight])]
    assert offsets.all() in allowed, f"consumerOffset.json is neither the old nor the new version: {offsets.all()}"
    topics = TopicConfigTable(root / "config" / "topics.json", lambda: 0)
    topics.load()
    last_topics, in_flight_topics = facts["topics"]
    allowed_topics = [
        [] if last_topics is None else last_topics,
        *([] if in_flight_topics is None else [in_flight_topics]),
    ]
    assert sorted(topics.all()) in allowed_topics, (
        f"topics.json is neither the old nor the new version: {sorted(topics.all())}"
    )


def run_campaign(tmp_path: Path, flush: FlushDiskType, puts: int, random_images: int) -> Outcome:
    started = time.monotonic()
    recorder, sent = run_workload(tmp_path / "recorded", flush, puts)
    outcome = Outcome()
    modes = ["synced", "latest"] + ["random" if i % 2 == 0 else "torn" for i in range(random_images)]
    image_root = _scratch_directory(tmp_path) / "image"
    for point in recorder.crash_points:
        for image_number, mode in enumerate(modes):
            seed = SEED * 1_000_003 + point.index * 101 + image_number
            shutil.rmtree(image_root, ignore_errors=True)
            recorder.materialise(point, image_root, random.Random(seed), mode)
            try:
                check_image(image_root, flush, point, sent, outcome, f", mode {mode}, image seed {seed}")
            except BaseException as error:
                raise AssertionError(
                    f"{flush.name} crash point {point.index} ({point.label}), mode {mode}, image seed {seed} "
                    f"(SHOAL_POWER_LOSS_SEED={SEED}, PUTS={puts}): {error!r}"
                ) from error
    shutil.rmtree(image_root.parent, ignore_errors=True)
    elapsed = time.monotonic() - started
    print(
        json.dumps(
            {
                "flush": flush.name,
                "puts": puts,
                "events": recorder.events,
                "crash_points": len(recorder.crash_points),
                "images": outcome.images,
                "acked_checks": outcome.acked_checked,
                "unflushed_messages_lost": outcome.unflushed_lost,
                "images_with_reported_loss": outcome.reported_losses,
                "images_with_unreported_loss": len(outcome.unreported),
                "images_failing_verify": len(outcome.unverified),
                "seconds": round(elapsed, 1),
            }
        )
    )
    return outcome


def _scratch_directory(fallback: Path) -> Path:
    """Crash images are written and deleted thousands of times: on tmpfs when there is one."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return Path(tempfile.mkdtemp(prefix="shoal-power-loss-", dir=shm))
    return fallback


_OUTCOMES: dict[FlushDiskType, Outcome] = {}


def campaign(tmp_path_factory: pytest.TempPathFactory, flush: FlushDiskType) -> Outcome:
    """One campaign per flush mode, shared by the tests below."""
    if flush not in _OUTCOMES:
        _OUTCOMES[flush] = run_campaign(tmp_path_factory.mktemp(f"power-{flush.name}"), flush, PUTS, RANDOM_IMAGES)
    return _OUTCOMES[flush]


def test_sync_flush_power_loss_loses_no_acknowledged_message(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Goal: SYNC_FLUSH keeps every acked message, metadata whole, recovery clean. Method: crash images."""
    outcome = campaign(tmp_path_factory, FlushDiskType.SYNC_FLUSH)
    assert outcome.images > 0 and outcome.acked_checked > 0
    assert not outcome.unreported, f"{len(outcome.unreported)} images; first: {outcome.unreported[0]}"
    assert not outcome.unverified, f"{len(outcome.unverified)} images; first: {outcome.unverified[0]}"


def test_async_flush_power_loss_loses_only_unflushed_messages(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Goal: ASYNC_FLUSH loses only what was not flushed, metadata whole, no crash. Method: crash images."""
    outcome = campaign(tmp_path_factory, FlushDiskType.ASYNC_FLUSH)
    assert outcome.images > 0 and outcome.unflushed_lost > 0


def test_async_flush_power_loss_reports_loss_and_verifies_clean(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Goal: what ASYNC recovery drops is reported, and the store verifies clean. Method: crash images."""
    outcome = campaign(tmp_path_factory, FlushDiskType.ASYNC_FLUSH)
    assert not outcome.unreported, f"{len(outcome.unreported)} images; first: {outcome.unreported[0]}"
    assert not outcome.unverified, f"{len(outcome.unverified)} images; first: {outcome.unverified[0]}"


def test_power_cut_while_creating_an_index_file_never_leaves_a_short_one(tmp_path: Path) -> None:
    """Goal: a new IndexFile is whole or absent after any power cut (was: 0 bytes, start failed). Method: recorder."""
    recorder = DiskRecorder(tmp_path / "recorded")
    tiny = IndexSettings(hash_slots=INDEX_HASH_SLOTS, entries=8)
    with recorder.installed():
        service = IndexService(recorder.root / "index", tiny, SYSTEM_CLOCK)
        for number in range(20):  # fills and creates three files
            service.build("T", 100 * number, 1_000 + number, f"U{number}", None)
        service.close()
    expected_bytes = IndexFile(next((recorder.root / "index").iterdir()), INDEX_HASH_SLOTS, 8, create=False).file_size
    images = 0
    for point in recorder.crash_points:
        for mode in ("synced", "latest", "random"):
            image = tmp_path / f"image-{point.index}-{mode}"
            recorder.materialise(point, image, random.Random(point.index), mode)
            for path in (image / "index").glob("*") if (image / "index").is_dir() else []:
                if path.name.isdigit():
                    assert path.stat().st_size == expected_bytes, (point.label, mode, path.name)
            reopened = IndexService(image / "index", tiny, SYSTEM_CLOCK)
            reopened.load(False, 0)
            reopened.close()
            images += 1
    assert images > 30


def test_power_cut_after_start_always_leaves_the_abort_marker(tmp_path: Path) -> None:
    """Goal: once a store runs, any power cut leaves `abort` (abnormal recovery). Method: recorder, restarted store."""
    recorder = DiskRecorder(tmp_path / "recorded")
    settings = _settings(recorder.root, FlushDiskType.SYNC_FLUSH)
    with recorder.installed():
        with MessageStore(settings) as store:
            store.put_message(MessageToStore("T", 0, b"first run"))
        restarted = MessageStore(settings)
        restarted.open()
        restarted.start()  # no new directory in the root now: nothing else syncs it
        recorder.crash_point("running")
        restarted.shutdown()
    running = next(point for point in recorder.crash_points if point.label == "running")
    for seed in range(20):
        image = tmp_path / f"image-{seed}"
        recorder.materialise(running, image, random.Random(seed), "synced" if seed == 0 else "random")
        assert (image / "abort").exists(), f"seed {seed}: a power cut while running lost the abort marker"
