"""The POP journal: replay gives back the leases, torn tails and junk are skipped, compaction keeps
what is live."""

from __future__ import annotations

from pathlib import Path

from shoal.broker.pop.journal import PopJournal, ack_record, lease_record, replay, snapshot
from shoal.broker.pop.leases import Lease, PopLeases


def sample() -> PopLeases:
    leases = PopLeases()
    queue = leases.open("G", "T", 0, 0)
    for offset in range(5):
        queue.lease(offset, Lease(10, 100, 1))
    queue.ack(0, 10)
    queue.ack(3, 10)
    queue.lease(4, Lease(20, 200, 2))
    leases.open("G", "U", 1, 7)
    return leases


def as_tuples(leases: PopLeases) -> dict[tuple[str, str, int], tuple[int, int, dict[int, Lease], set[int]]]:
    return {key: (q.floor, q.cursor, dict(q.leases), set(q.acked)) for key, q in leases.items()}


def test_a_snapshot_replays_to_the_same_state() -> None:
    leases = sample()
    again = PopLeases()
    assert replay(snapshot(leases), again) == 0
    assert as_tuples(again) == as_tuples(leases)


def test_records_written_through_the_journal_survive_a_reopen(tmp_path: Path) -> None:
    journal = PopJournal(tmp_path)
    leases = PopLeases()
    journal.load(leases)
    queue = leases.open("G", "T", 2, 40)
    lease = Lease(1_000, 31_000, 1)
    queue.lease(40, lease)
    queue.lease(41, lease)
    journal.append(lease_record("G", "T", 2, 40, lease) + lease_record("G", "T", 2, 41, lease))
    queue.ack(40, 1_000)
    journal.append(ack_record("G", "T", 2, 40))
    # no close: a killed process leaves the file as written
    reopened = PopLeases()
    PopJournal(tmp_path).load(reopened)
    back = reopened.get("G", "T", 2)
    assert back is not None
    assert (back.floor, back.cursor, back.leases) == (41, 42, {41: lease})


def test_a_torn_last_record_and_junk_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    path.write_bytes(b"L G T 0 0 10 100 1\nX what is this\nA G T 0\nA G T 0 0\nL G T 0 1 10 10")
    leases = PopLeases()
    journal = PopJournal(tmp_path)
    journal.load(leases)
    queue = leases.get("G", "T", 0)
    assert queue is not None
    assert (queue.floor, queue.cursor, queue.leases) == (1, 1, {})
    journal.append(ack_record("G", "T", 0, 5))
    journal.close()
    assert path.read_bytes().endswith(b"L G T 0 1 10 10\nA G T 0 5\n")  # the torn line ended, not merged


def test_compaction_rewrites_the_file_as_the_live_state(tmp_path: Path) -> None:
    journal = PopJournal(tmp_path)
    leases = PopLeases()
    journal.load(leases)
    queue = leases.open("G", "T", 0, 0)
    for offset in range(1_000):
        lease = Lease(offset, offset + 10, 1)
        queue.lease(offset, lease)
        journal.append(lease_record("G", "T", 0, offset, lease))
        queue.ack(offset, offset)
        journal.append(ack_record("G", "T", 0, offset))
    big = journal.path.stat().st_size
    journal.rewrite(leases)
    assert journal.path.stat().st_size < big // 100
    journal.append(lease_record("G", "T", 0, 1_000, Lease(5, 6, 1)))
    journal.close()
    again = PopLeases()
    PopJournal(tmp_path).load(again)
    back = again.get("G", "T", 0)
    assert back is not None
    assert (back.floor, back.cursor, back.leases) == (1_000, 1_001, {1_000: Lease(5, 6, 1)})
