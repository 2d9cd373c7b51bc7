"""`shoal demo`: the store end to end, narrated: write with SYNC_FLUSH, crash, recover, read back.

A child process appends messages and prints each acknowledged offset; the demo kills it with
SIGKILL mid-stream, reopens the store, shows the recovery report and checks that every
acknowledged message is there, intact, through the ConsumeQueue and the index.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import click

from shoal.formats.properties import encode_properties
from shoal.formats.record import decode_header
from shoal.store import (
    CommitLogSettings,
    FlushDiskType,
    FlushSettings,
    MessageStore,
    MessageToStore,
    StoreSettings,
)

DEMO_TOPIC = "DemoTopic"
DEMO_QUEUES = 4
DEMO_RUN_S = 1.5  # how long the writer runs before it is killed
DEMO_SEGMENT_BYTES = 64 * 1024 * 1024  # small segments keep the demo's disk use and start-up short


def demo_settings(root: Path) -> StoreSettings:
    return StoreSettings(
        root_dir=root,
        commitlog=CommitLogSettings(segment_size_bytes=DEMO_SEGMENT_BYTES),
        flush=FlushSettings(flush_disk_type=FlushDiskType.SYNC_FLUSH),
    )


@click.command()
@click.option(
    "--data-dir",
    default="data",
    show_default=True,
    type=click.Path(path_type=Path),
    help="Store root directory.",
)
def demo(data_dir: Path) -> None:
    """Write, crash, recover and read back a store in DATA_DIR, explaining each step."""
    root = data_dir.resolve() / "store"
    click.echo(f"[1/4] store directory: {root} (RocketMQ 4.x layout, SYNC_FLUSH, 64 MiB segments)")
    click.echo(f"[2/4] a writer process appends to {DEMO_TOPIC}; it will be killed with SIGKILL after {DEMO_RUN_S} s")
    writer = subprocess.Popen(
        [sys.executable, "-u", "-m", "shoal.cli.main", "demo-writer", str(root)],
        stdout=subprocess.PIPE,
        text=True,
    )
    acked: list[tuple[int, int, int, int]] = []
    deadline = time.monotonic() + DEMO_RUN_S
    assert writer.stdout is not None
    for line in writer.stdout:
        if line.startswith("ACK "):
            queue_id, queue_offset, commitlog_offset, crc = (int(x) for x in line.split()[1:])
            acked.append((queue_id, queue_offset, commitlog_offset, crc))
        else:
            click.echo(f"      writer: {line.rstrip()}")
        if time.monotonic() > deadline and acked:
            writer.send_signal(signal.SIGKILL)
            break
    writer.wait()
    writer.stdout.close()
    click.echo(f"      killed the writer (exit {writer.returncode}) after {len(acked)} acknowledged messages")

    click.echo("[3/4] reopening the store: recovery")
    store = MessageStore(demo_settings(root))
    report = store.open()
    for line in report.summary().splitlines():
        click.echo(f"      {line}")
    store.start()
    try:
        missing = _check_acknowledged(store, acked)
        click.echo(
            f"[4/4] read back {len(acked)} acknowledged messages through the ConsumeQueues: "
            f"{len(acked) - missing} intact, {missing} missing"
        )
        for queue_id in range(DEMO_QUEUES):
            click.echo(
                f"      {DEMO_TOPIC}/{queue_id}: offsets {store.min_offset_in_queue(DEMO_TOPIC, queue_id)}"
                f"..{store.max_offset_in_queue(DEMO_TOPIC, queue_id)}"
            )
        if acked:
            key = f"order-{len(acked) - 1}"
            found = store.query_by_key(DEMO_TOPIC, key, 4)
            click.echo(f"      index lookup of key {key!r}: {len(found)} message(s)")
        result = store.put_message(
            MessageToStore(DEMO_TOPIC, 0, b"after the crash", encode_properties({"KEYS": "after"}))
        )
        where = result.append.queue_offset if result.append is not None else "-"
        click.echo(f"      a new write after recovery: {result.status.value} at queue offset {where}")
    finally:
        store.shutdown()
    click.echo("done: `shoal store verify` checks every CRC; `shoal store inspect` decodes the files")
    if missing:
        sys.exit(1)


def _check_acknowledged(store: MessageStore, acked: list[tuple[int, int, int, int]]) -> int:
    missing = 0
    for queue_id, queue_offset, commitlog_offset, crc in acked:
        found = store.get_messages(DEMO_TOPIC, queue_id, queue_offset, 1)
        if not found.messages or found.commitlog_offsets[0] != commitlog_offset:
            missing += 1
            continue
        view = found.messages[0]
        header = decode_header(view, 0)
        body = view[header.body_position : header.body_position + header.body_length]
        if zlib.crc32(body) != crc:
            missing += 1
        body.release()
        found.release()
    return missing


@click.command(name="demo-writer", hidden=True)
@click.argument("root", type=click.Path(path_type=Path))
def demo_writer(root: Path) -> None:
    """Append messages forever, printing `ACK queueId queueOffset commitlogOffset crc32` per durable put."""
    store = MessageStore(demo_settings(root))
    report = store.open()
    store.start()
    click.echo(f"opened ({'clean' if report.last_exit_ok else 'after a crash'}), appending")
    number = 0
    while True:
        body = os.urandom(200 + number % 800)
        message = MessageToStore(
            DEMO_TOPIC,
            number % DEMO_QUEUES,
            body,
            encode_properties({"KEYS": f"order-{number}", "TAGS": "demo"}),
        )
        result = store.put_message(message)
        if result.ok and result.append is not None:
            append = result.append
            click.echo(f"ACK {number % DEMO_QUEUES} {append.queue_offset} {append.wrote_offset} {zlib.crc32(body)}")
        number += 1
