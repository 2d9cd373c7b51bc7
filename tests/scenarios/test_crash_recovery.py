"""Crash recovery: SIGKILL a writer process at random moments, then check nothing acknowledged is lost.

The writer (crash_writer.py) appends to a SYNC_FLUSH store and records each acknowledged put in
an fsynced ack file. Each round kills it, reopens the same (growing) store in this process and
checks every acknowledged message, every ConsumeQueue unit and the index, then writes and
closes cleanly so the next round starts from a normal exit.
"""

from __future__ import annotations

import importlib.util
import os
import random
import signal
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import pytest

from shoal.formats.properties import decode_properties, encode_properties
from shoal.store import GetMessageStatus, MessageStore, MessageToStore, PutStatus, RecoveryReport

WRITER = Path(__file__).with_name("crash_writer.py")
ROUNDS = 24
KILL_DELAY_MIN_S = 0.050
KILL_DELAY_MAX_S = 0.400
OLD_KEYS_SAMPLED_PER_ROUND = 60
SEED = 20240611
WRITER_START_TIMEOUT_S = 20.0
KILL_FROM_START_EVERY = 4  # every 4th round the kill may land in start-up or recovery


WaitUntil = Callable[..., None]


class Acked(NamedTuple):
    commitlog_offset: int
    crc: int


def load_writer() -> ModuleType:
    """crash_writer.py as a module, for its settings and key scheme (it is not a test module)."""
    spec = importlib.util.spec_from_file_location("crash_writer", WRITER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_acks(ack_path: Path) -> list[tuple[str, int, int, Acked]]:
    """Complete ack lines; a line cut by the kill (no newline yet) was never acknowledged, so it
    is removed to keep the file appendable."""
    if not ack_path.exists():
        return []
    data = ack_path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    if len(complete) != len(data):
        with ack_path.open("r+b") as handle:
            handle.truncate(len(complete))
    acks = []
    for line in complete.decode().splitlines():
        topic, queue_id, queue_offset, commitlog_offset, crc = line.split()
        acks.append((topic, int(queue_id), int(queue_offset), Acked(int(commitlog_offset), int(crc))))
    return acks


def run_writer_until_killed(
    store_dir: Path,
    ack_path: Path,
    log_path: Path,
    delay_s: float,
    wait_until: WaitUntil,
    *,
    from_first_ack: bool,
) -> None:
    """Start the writer and SIGKILL it `delay_s` later, counted from its start (the kill may land
    in start-up or recovery) or from its first acknowledged put; fail if it died on its own."""
    size_before = ack_path.stat().st_size if ack_path.exists() else 0
    with log_path.open("wb") as log:
        writer = subprocess.Popen([sys.executable, str(WRITER), str(store_dir), str(ack_path)], stderr=log)
        try:
            if from_first_ack:
                wait_until(
                    lambda: writer.poll() is not None or (ack_path.exists() and ack_path.stat().st_size > size_before),
                    WRITER_START_TIMEOUT_S,
                )
            code = writer.wait(timeout=delay_s)
        except subprocess.TimeoutExpired:
            writer.send_signal(signal.SIGKILL)
            code = writer.wait(timeout=30)
            assert code == -signal.SIGKILL, f"writer ended with {code}"
            return
        finally:
            if writer.poll() is None:
                writer.kill()
                writer.wait(timeout=30)
    pytest.fail(f"the writer exited by itself with {code}:\n{log_path.read_text()}")


def check_acknowledged(store: MessageStore, key: tuple[str, int, int], acked: Acked) -> None:
    """The message is where the ack said, intact, and reachable through its ConsumeQueue."""
    topic, queue_id, queue_offset = key
    got = store.get_messages(topic, queue_id, queue_offset, 1)
    assert got.status is GetMessageStatus.FOUND, (key, got.status)
    assert got.queue_offsets == [queue_offset]
    assert got.commitlog_offsets == [acked.commitlog_offset], key
    got.release()
    found = store.message_at(acked.commitlog_offset)
    assert found is not None, key
    header, view = found
    body = view[header.body_position : header.body_position + header.body_length]
    assert zlib.crc32(body) == acked.crc, key
    assert (header.topic, header.queue_id, header.queue_offset) == key
    body.release()
    view.release()


def check_consume_queues(store: MessageStore, topics: tuple[str, ...], queue_count: int) -> int:
    """Every unit of every queue points at a valid record of that queue and offset; returns units."""
    units = 0
    for topic in topics:
        for queue_id in range(queue_count):
            queue = store._consume_queues.find(topic, queue_id)
            if queue is None:
                continue
            for queue_offset in range(queue.min_offset, queue.max_offset):
                unit = queue.unit_at(queue_offset)
                assert unit is not None, (topic, queue_id, queue_offset)
                found = store.message_at(unit.physical_offset)
                assert found is not None, (topic, queue_id, queue_offset, unit)
                header, view = found
                assert (header.topic, header.queue_id, header.queue_offset) == (topic, queue_id, queue_offset)
                assert header.total_size == unit.size
                view.release()
                units += 1
    return units


def check_index(store: MessageStore, key_of: Callable[[int], str], key: tuple[str, int, int], acked: Acked) -> None:
    topic = key[0]
    found = store.query_by_key(topic, key_of(acked.crc), 64)
    offsets = [header.physical_offset for header, view in found]
    for _header, view in found:
        view.release()
    assert acked.commitlog_offset in offsets, (key, acked)


@pytest.mark.slow
def test_sigkilled_writer_never_loses_an_acknowledged_message(tmp_path: Path, wait_until: WaitUntil) -> None:
    """Goal: SIGKILL never loses an acknowledged message, unit or key. Method: 24 kill rounds, verify each."""
    # Each round SIGKILLs the writer 50-400 ms after its first ack (every 4th round after its start, so
    # the kill may land in start-up or recovery), recovers here, checks every ack, unit and key, writes.
    writer = load_writer()
    store_dir = tmp_path / "store"
    ack_path = tmp_path / "acks"
    settings = writer.writer_settings(store_dir)
    rng = random.Random(SEED)
    expected: dict[tuple[str, int, int], Acked] = {}
    acked_total = 0
    abnormal_recoveries = 0
    for round_index in range(ROUNDS):
        delay_s = rng.uniform(KILL_DELAY_MIN_S, KILL_DELAY_MAX_S)
        run_writer_until_killed(
            store_dir,
            ack_path,
            tmp_path / f"writer-{round_index}.log",
            delay_s,
            wait_until,
            from_first_ack=round_index % KILL_FROM_START_EVERY != KILL_FROM_START_EVERY - 1,
        )
        new_keys = []
        for topic, queue_id, queue_offset, acked in read_acks(ack_path)[acked_total:]:
            key = (topic, queue_id, queue_offset)
            previous = expected.get(key)
            assert previous is None, f"queue offset {key} acknowledged twice: {previous} and {acked}"
            expected[key] = acked
            new_keys.append(key)
            acked_total += 1
        if not (store_dir / "lock").exists():
            continue  # killed before the store was even created
        store = MessageStore(settings)
        report = store.open()
        store.start()
        try:
            assert isinstance(report, RecoveryReport)
            abnormal_recoveries += not report.last_exit_ok
            if expected:
                assert report.recovered_end_offset >= max(a.commitlog_offset for a in expected.values())
            for key, acked in expected.items():
                check_acknowledged(store, key, acked)
            check_consume_queues(store, writer.TOPICS, writer.QUEUES_PER_TOPIC)
            older = [k for k in expected if k not in set(new_keys)]
            sampled = rng.sample(older, min(len(older), OLD_KEYS_SAMPLED_PER_ROUND))
            for key in [*new_keys, *sampled]:
                check_index(store, writer.key_of, key, expected[key])
            body = rng.randbytes(rng.randrange(1, 3000))
            crc = zlib.crc32(body)
            topic, queue_id = writer.TOPICS[round_index % len(writer.TOPICS)], round_index % 3
            probe = store.put_message(
                MessageToStore(topic, queue_id, body, encode_properties({"KEYS": writer.key_of(crc)}))
            )
            assert probe.status is PutStatus.PUT_OK and probe.append is not None, probe
            probe_key = (topic, queue_id, probe.append.queue_offset)
            assert probe_key not in expected
            expected[probe_key] = Acked(probe.append.wrote_offset, crc)
            store.dispatch_now()
            check_acknowledged(store, probe_key, expected[probe_key])
            check_index(store, writer.key_of, probe_key, expected[probe_key])
            found = store.message_at(probe.append.wrote_offset)
            assert found is not None
            header, view = found
            properties = view[header.properties_position : header.properties_position + header.properties_length]
            assert decode_properties(properties) == {"KEYS": writer.key_of(crc)}
            properties.release()
            view.release()
        finally:
            store.shutdown()
        assert not (store_dir / "abort").exists(), "the verifying store did not shut down cleanly"
    segments = sorted(os.listdir(settings.commitlog_dir))
    assert acked_total > 200, f"only {acked_total} acknowledged puts: the writer barely ran"
    assert len(segments) > 3, "the store never grew past a few segments"
    assert abnormal_recoveries >= ROUNDS // 2, "most rounds should have recovered from a kill"
