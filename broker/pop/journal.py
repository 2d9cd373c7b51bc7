"""The POP journal: every lease and ack, appended to one file before the broker answers.

RocketMQ 5 keeps POP state in its own system topics (check points in the revive topic, acks
beside them). Shoal keeps it in `<storePathRootDir>/pop/journal`, a text file of one record per
line, written with `os.write` on an `O_APPEND` descriptor before the pop, ack or change is
answered:

    L group topic queue offset popMs visibleAtMs attempt    a lease (a pop or a change)
    A group topic queue offset                               an ack (or a filtered-out skip)
    F group topic queue floor cursor                         a queue's floor and cursor (compaction)

A written record is in the page cache, so a SIGKILL loses none of them; the journal is fsynced
every `JOURNAL_SYNC_INTERVAL_S` and at compaction, so a machine crash loses at most that much:
a lost lease makes its message visible again early, a lost ack delivers it again. Either way
nothing acknowledged to a producer is lost, and no message is skipped (at-least-once, as POP is).
Replay applies the records in order; a torn last line (no newline) is ignored. When the file
passes `JOURNAL_COMPACT_BYTES` it is rewritten as F and L records of what is live (and the A
records above each floor), fsynced, and renamed over the old one.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from shoal.broker.pop.leases import Lease, PopLeases
from shoal.broker.pop.limits import JOURNAL_COMPACT_BYTES

log = logging.getLogger(__name__)

JOURNAL_NAME = "journal"


def lease_record(group: str, topic: str, queue_id: int, offset: int, lease: Lease) -> bytes:
    return f"L {group} {topic} {queue_id} {offset} {lease.pop_ms} {lease.visible_at_ms} {lease.attempt}\n".encode()


def ack_record(group: str, topic: str, queue_id: int, offset: int) -> bytes:
    return f"A {group} {topic} {queue_id} {offset}\n".encode()


def floor_record(group: str, topic: str, queue_id: int, floor: int, cursor: int) -> bytes:
    return f"F {group} {topic} {queue_id} {floor} {cursor}\n".encode()


def replay(data: bytes, leases: PopLeases) -> int:
    """Apply the journal's records to `leases`; the number of lines that could not be read."""
    bad = 0
    lines = data.split(b"\n")
    for line in lines[:-1]:  # the last piece has no newline: empty, or a torn record
        fields = line.decode("utf-8", "replace").split(" ")
        try:
            kind, group, topic, queue_id = fields[0], fields[1], fields[2], int(fields[3])
            numbers = [int(value) for value in fields[4:]]
            if kind == "L" and len(numbers) == 4:
                offset, pop_ms, visible_at_ms, attempt = numbers
                queue = leases.open(group, topic, queue_id, offset)
                queue.lease(offset, Lease(pop_ms, visible_at_ms, attempt))
            elif kind == "A" and len(numbers) == 1:
                queue = leases.open(group, topic, queue_id, numbers[0])
                queue.ack(numbers[0], None)
            elif kind == "F" and len(numbers) == 2:
                queue = leases.open(group, topic, queue_id, numbers[0])
                queue.move_to(numbers[0])
                queue.cursor = max(numbers[1], numbers[0])
            else:
                bad += 1
        except (IndexError, ValueError):
            bad += 1
    return bad


def snapshot(leases: PopLeases) -> bytes:
    """The live state as records: replayed alone, it gives the same leases."""
    parts: list[bytes] = []
    for (group, topic, queue_id), queue in leases.items():
        parts.append(floor_record(group, topic, queue_id, queue.floor, queue.cursor))
        parts.extend(ack_record(group, topic, queue_id, offset) for offset in sorted(queue.acked))
        parts.extend(
            lease_record(group, topic, queue_id, offset, lease) for offset, lease in sorted(queue.leases.items())
        )
    return b"".join(parts)


class PopJournal:
    """The journal file of one broker: `load` once, then `append`; `compact_if_due` and `sync`
    from the broker's timers, `close` at shutdown."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / JOURNAL_NAME
        self._fd = -1
        self._size = 0

    def load(self, leases: PopLeases) -> None:
        """Replay the file into `leases` and open it for appending."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            data = self.path.read_bytes()
            bad = replay(data, leases)
            if bad:
                log.warning("%s: %d unreadable records skipped", self.path, bad)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = os.fstat(self._fd).st_size
        if self._size and not self.path.read_bytes().endswith(b"\n"):
            os.write(self._fd, b"\n")  # end a torn record, so the next one starts on its own line

    def append(self, records: bytes) -> None:
        if records:
            os.write(self._fd, records)
            self._size += len(records)

    def compact_if_due(self, leases: PopLeases) -> bool:
        if self._size < JOURNAL_COMPACT_BYTES:
            return False
        self.rewrite(leases)
        return True

    def rewrite(self, leases: PopLeases) -> None:
        """Replace the file by a snapshot of `leases` (fsynced before the rename)."""
        data = snapshot(leases)
        partial = self.path.with_name(JOURNAL_NAME + ".compacting")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(partial, self.path)
        old, self._fd = self._fd, os.open(self.path, os.O_WRONLY | os.O_APPEND)
        os.close(old)
        self._size = len(data)
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def sync(self) -> None:
        fd = self._fd
        if fd >= 0:
            try:
                os.fsync(fd)
            except OSError as failure:  # closed by a compaction meanwhile: that one was fsynced
                log.debug("journal fsync skipped: %s", failure)

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1
