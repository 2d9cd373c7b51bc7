"""Who holds which message of a POP-consumed queue, and until when (RocketMQ 5's POP, in memory).

POP consumption leases messages instead of moving a consumer offset: a popped message is
invisible to the group for its invisible time; an ack ends the lease for good, an expired lease
makes the message visible again with its delivery attempt counted. Per (group, topic, queue):

    floor     every offset below is acked (the group's consumer offset, what lag is measured from)
    cursor    the next offset never popped
    leases    popped and not acked: offset -> Lease(pop time, visible again at, attempt)
    acked     acked offsets at or above the floor (the floor passes them once the gap closes)

Offsets in [floor, cursor) with neither a lease nor an ack (a lease record lost with the machine,
never with the process: see `journal.py`) are visible at once. Pure state: the caller gives the
time, reads the store and writes the journal.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Lease:
    pop_ms: int
    """When it was leased: with the offset, the lease's identity (the receipt handle carries it)."""
    visible_at_ms: int
    attempt: int
    """Delivery attempt of this lease, 1 for the first delivery."""


@dataclass(slots=True)
class QueueLeases:
    floor: int
    cursor: int
    leases: dict[int, Lease] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)

    def visible_again(self, now_ms: int) -> list[tuple[int, int]]:
        """(offset, last attempt) of the popped, unacked messages visible at `now_ms`, in offset
        order: expired leases, and offsets whose lease was never recorded (attempt 0 unknown: 1)."""
        found = [(offset, lease.attempt) for offset, lease in self.leases.items() if lease.visible_at_ms <= now_ms]
        if len(self.leases) + len(self.acked) < self.cursor - self.floor:
            found.extend(
                (offset, 1)
                for offset in range(self.floor, self.cursor)
                if offset not in self.leases and offset not in self.acked
            )
        found.sort()
        return found

    def locked(self, now_ms: int) -> bool:
        """Whether a FIFO group must wait: some message of this queue is leased and invisible."""
        return any(lease.visible_at_ms > now_ms for lease in self.leases.values())

    def next_visible_ms(self) -> int | None:
        """When the earliest lease expires (None: no lease)."""
        return min((lease.visible_at_ms for lease in self.leases.values()), default=None)

    def lease(self, offset: int, lease: Lease) -> None:
        self.leases[offset] = lease
        self.acked.discard(offset)
        if offset >= self.cursor:
            self.cursor = offset + 1

    def skip(self, offset: int) -> None:
        """Move the cursor past an offset without leasing it (filtered out: the group never sees it)."""
        if offset >= self.cursor:
            self.cursor = offset + 1
        self.ack(offset, None)

    def ack(self, offset: int, pop_ms: int | None) -> bool:
        """End the lease of `offset` if `pop_ms` names it (None: whichever); False for a stale
        lease (the message was leased again since). Acking an acked offset is a no-op."""
        lease = self.leases.get(offset)
        if lease is not None:
            if pop_ms is not None and lease.pop_ms != pop_ms:
                return False
            del self.leases[offset]
        elif offset < self.floor or offset in self.acked:
            return True
        elif pop_ms is not None and offset >= self.cursor:
            return False  # never leased: a handle from another life of this queue
        if offset >= self.floor:
            self.acked.add(offset)
        self._raise_floor()
        return True

    def _raise_floor(self) -> None:
        while self.floor in self.acked:
            self.acked.discard(self.floor)
            self.floor += 1
        self.cursor = max(self.cursor, self.floor)

    def move_to(self, floor: int) -> None:
        """Start over at `floor` (an offset reset, a queue truncated below its old floor)."""
        self.floor = self.cursor = floor
        self.leases.clear()
        self.acked.clear()


@dataclass(slots=True)
class PopLeases:
    """Every POP-consumed queue's `QueueLeases`, by (group, topic, queue id)."""

    queues: dict[tuple[str, str, int], QueueLeases] = field(default_factory=dict)

    def get(self, group: str, topic: str, queue_id: int) -> QueueLeases | None:
        return self.queues.get((group, topic, queue_id))

    def open(self, group: str, topic: str, queue_id: int, start: int) -> QueueLeases:
        """The queue's leases, starting at `start` the first time the group pops it."""
        key = (group, topic, queue_id)
        queue = self.queues.get(key)
        if queue is None:
            queue = self.queues[key] = QueueLeases(floor=start, cursor=start)
        return queue

    def items(self) -> Iterator[tuple[tuple[str, str, int], QueueLeases]]:
        return iter(list(self.queues.items()))

    def forget_group(self, group: str) -> None:
        for key in [key for key in self.queues if key[0] == group]:
            del self.queues[key]

    def forget_topic(self, topic: str) -> None:
        for key in [key for key in self.queues if key[1] == topic]:
            del self.queues[key]
