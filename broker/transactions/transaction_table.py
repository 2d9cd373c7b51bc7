"""Which transactions are unresolved, and how far the check-back has come: pure state, no I/O.

Two progress offsets, kept as consumer offsets of `CID_RMQ_SYS_TRANS` like RocketMQ:

* half progress H (half queue): every half copy below H is settled — resolved, discarded, or
  superseded by a later copy. Every unresolved transaction therefore has its latest copy >= H.
* op progress P (op queue): every op message below P resolved a transaction whose copies all lie
  below H. An op is forgotten once H passes its transaction's latest copy.

In memory: `pending` maps each unresolved transaction's key (the half-queue offset of its first
copy) to its latest copy; `ops` lists the op messages at or after P with that latest copy. An
END_TRANSACTION is valid exactly when its transaction is pending, which answers "already
resolved" for any copy, however old. A restart rebuilds both from the op queue (from P) and
the half queue (from H): `rebuild`.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

from shoal.broker.transactions.op_message import OpEntry


class CheckDecision(enum.Enum):
    """What the check-back does with one half copy."""

    SKIP = "settled: resolved, discarded or superseded by a later copy"
    WAIT = "too young to check: stop here, later copies are younger still"
    RENEW = "young but immune (CHECK_IMMUNITY_TIME_IN_SECONDS): re-put without a check, go on"
    CHECK = "old enough: re-put with one more check counted and ask the producer group"
    DISCARD = "checked transactionCheckMax times: move to TRANS_CHECK_MAX_TIME_TOPIC (rolled back)"


def check_decision(
    *,
    latest_of_pending: bool,
    check_times: int,
    check_max: int,
    age_ms: int,
    immunity_ms: int,
    has_immunity_property: bool,
) -> CheckDecision:
    """RocketMQ's per-message choice in `TransactionalMessageServiceImpl.check` (spec §11.5).

    `age_ms` is now minus the born timestamp (the producer's clock, kept by every copy, so checks
    after the first come every transactionCheckInterval); a negative age (clock skew) checks at
    once, as RocketMQ does, rather than waiting for an unknowable time."""
    if not latest_of_pending:
        return CheckDecision.SKIP
    if check_times >= check_max:
        return CheckDecision.DISCARD
    if 0 <= age_ms < immunity_ms:
        return CheckDecision.RENEW if has_immunity_property else CheckDecision.WAIT
    return CheckDecision.CHECK


class OpRecord(NamedTuple):
    op_offset: int
    latest: int


class TransactionTable:
    """Unresolved transactions and the two progress offsets (module docstring)."""

    def __init__(self) -> None:
        self.pending: dict[int, int] = {}
        """Transaction key -> queue offset of its latest half copy."""
        self.ops: deque[OpRecord] = deque()
        """Op messages at or after the op progress, in op-queue order."""
        self.half_progress = 0
        self.op_end = 0
        """The op-queue offset after the last op message known."""

    @property
    def op_progress(self) -> int:
        return self.ops[0].op_offset if self.ops else self.op_end

    @property
    def tracked_count(self) -> int:
        return len(self.pending) + len(self.ops)

    def is_pending(self, key: int) -> bool:
        return key in self.pending

    def is_latest(self, key: int, copy_offset: int) -> bool:
        """True when `copy_offset` is the latest copy of unresolved transaction `key`."""
        return self.pending.get(key) == copy_offset

    def add_copy(self, key: int, copy_offset: int) -> None:
        """A half message was stored: a new transaction (key == copy) or a renewed copy of one."""
        assert copy_offset >= key >= 0, (key, copy_offset)
        previous = self.pending.get(key)
        assert previous is None or previous < copy_offset, "copies are appended in order"
        assert previous is not None or key == copy_offset, "a renewed copy of an unknown transaction"
        self.pending[key] = copy_offset

    def resolve(self, key: int, op_offset: int | None) -> int:
        """Transaction `key` is resolved (its op message is at `op_offset`; None: the op could not
        be written, the resolution holds until a restart). Returns its latest copy."""
        latest = self.pending.pop(key)
        if op_offset is not None:
            assert op_offset >= self.op_end, "op messages are appended in order"
            self.ops.append(OpRecord(op_offset, latest))
            self.op_end = op_offset + 1
        return latest

    def forget_below(self, half_progress: int) -> list[int]:
        """Drop unresolved transactions whose latest copy is below `half_progress` (their half
        messages were deleted by retention); returns their keys."""
        gone = [key for key, latest in self.pending.items() if latest < half_progress]
        for key in gone:
            del self.pending[key]
        return gone

    def advance(self, half_progress: int) -> None:
        """The check-back settled every copy below `half_progress`; forget ops that only concern
        copies below it (their transactions can no longer be met in the half queue)."""
        assert half_progress >= self.half_progress, "progress never goes back"
        for latest in self.pending.values():
            assert latest >= half_progress, "an unresolved transaction's latest copy is never passed"
        self.half_progress = half_progress
        while self.ops and self.ops[0].latest < half_progress:
            self.ops.popleft()

    @classmethod
    def rebuild(
        cls,
        half_progress: int,
        op_progress: int,
        ops: Iterable[tuple[int, OpEntry]],
        copies: Iterable[tuple[int, int]],
        op_end: int,
    ) -> TransactionTable:
        """The state after a restart, from the op messages from P (`(op offset, entry)`, in order)
        and the half copies from H (`(copy offset, key)`, in order)."""
        table = cls()
        table.half_progress = half_progress
        table.op_end = max(op_progress, op_end)
        resolved: set[int] = set()
        for op_offset, entry in ops:
            resolved.add(entry.key)
            if entry.latest >= half_progress and (not table.ops or table.ops[-1].op_offset <= op_offset):
                table.ops.append(OpRecord(op_offset, entry.latest))
        for copy_offset, key in copies:
            if key in resolved or key > copy_offset:
                continue
            table.pending[key] = max(table.pending.get(key, copy_offset), copy_offset)
        return table
