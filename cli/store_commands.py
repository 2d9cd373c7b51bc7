"""`shoal store ...`: look into a store directory without starting a broker."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from shoal.formats.consume_queue_unit import UNIT_SIZE
from shoal.store import limits
from shoal.store.inspection import (
    consume_queue_dirs,
    describe_record,
    iter_commitlog,
    iter_consume_queue,
    iter_index_entries,
    segment_paths,
    verify_store,
)


def _store_directory(directory: Path) -> Path:
    """DIRECTORY itself when it holds commitlog/; a pointer to the store inside it otherwise."""
    if (directory / "commitlog").is_dir():
        return directory
    for inner in (directory / "store", directory / "data" / "store"):
        if (inner / "commitlog").is_dir():
            raise click.ClickException(f"{directory} is not a store directory; the store is {inner}")
    raise click.ClickException(f"{directory} is not a store directory (no commitlog/ in it)")


@click.group(name="store")
def store_group() -> None:
    """Inspect and verify a RocketMQ-format store directory (read-only; safe on a live store)."""


@store_group.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--limit", default=20, show_default=True, help="Records / units / entries to print per section.")
@click.option("--topic", default=None, help="Only records and ConsumeQueues of this topic.")
@click.option(
    "--hash-slots",
    default=limits.INDEX_HASH_SLOTS_DEFAULT,
    show_default=True,
    help="maxHashSlotNum of the index.",
)
def inspect(directory: Path, limit: int, topic: str | None, hash_slots: int) -> None:
    """Decode CommitLog records, ConsumeQueue units and index entries of DIRECTORY (one JSON line each)."""
    directory = _store_directory(directory)
    segments = segment_paths(directory / "commitlog")
    click.echo(f"# CommitLog: {len(segments)} segment(s) in {directory / 'commitlog'}")
    shown = 0
    for item in iter_commitlog(directory / "commitlog", check_crc=True):
        if shown >= limit:
            break
        header = item.check.header
        if topic is not None and header is not None and header.topic != topic:
            continue
        click.echo(json.dumps(describe_record(item)))
        shown += 1
    for cq_topic, queue_id, queue_dir in consume_queue_dirs(directory):
        if topic is not None and cq_topic != topic:
            continue
        click.echo(f"# ConsumeQueue {cq_topic}/{queue_id} ({UNIT_SIZE}-byte units)")
        for index, (logical, offset, size, tags) in enumerate(iter_consume_queue(queue_dir)):
            if index >= limit:
                break
            click.echo(json.dumps({"queueOffset": logical, "commitLogOffset": offset, "size": size, "tagsCode": tags}))
    index_dir = directory / "index"
    if index_dir.is_dir():
        for path in sorted(p for p in index_dir.iterdir() if p.name.isdigit()):
            click.echo(f"# IndexFile {path.name}")
            for index, (key_hash, offset, diff, previous) in enumerate(iter_index_entries(path, hash_slots)):
                if index >= limit:
                    break
                click.echo(
                    json.dumps({"keyHash": key_hash, "phyOffset": offset, "timeDiff": diff, "prevIndex": previous})
                )


@store_group.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--hash-slots",
    default=limits.INDEX_HASH_SLOTS_DEFAULT,
    show_default=True,
    help="maxHashSlotNum of the index.",
)
def verify(directory: Path, hash_slots: int) -> None:
    """Check DIRECTORY: the CRC of every record, and that ConsumeQueues and the index agree with the
    CommitLog. Exits 1 and lists the problems when anything is damaged."""
    directory = _store_directory(directory)
    total = sum(p.stat().st_size for p in segment_paths(directory / "commitlog"))
    with click.progressbar(length=total, label="verifying CommitLog", file=sys.stderr) as bar:
        report = verify_store(directory, hash_slots=hash_slots, progress=bar.update)
    click.echo(
        f"{report.records} records ({report.bytes_checked} bytes), "
        f"{report.consume_queue_units} ConsumeQueue units, {report.index_entries} index entries checked"
    )
    handled = [damaged for damaged in report.damaged_ranges if damaged.saved_as]
    for damaged in handled:  # recovery already reported, copied and repaired these: a known loss
        click.echo(f"RECOVERED DAMAGE: {damaged.describe()}")
    if report.ok:
        click.echo(f"store OK ({len(handled)} damaged range(s) recovered earlier)" if handled else "store OK")
        return
    for problem in report.problems:
        click.echo(f"DAMAGE: {problem}", err=True)
    click.echo(f"store DAMAGED: {len(report.problems)} problem(s)", err=True)
    sys.exit(1)
