"""Resetting a consumer group's offsets by time (INVOKE_BROKER_TO_RESET_OFFSET), the pure part.

RocketMQ's Broker2Client.resetOffset: for every write queue of the topic, the offset of the first
message stored at or after the timestamp (each queue's max offset for timestamp -1, "now"); a
negative store answer counts as 0. With `isForce` the group moves there; without it only
backwards (an offset ahead of the committed one keeps the committed one). A queue the group never
committed refuses the whole reset. The broker then pushes the table to the group's live consumers
(RESET_CONSUMER_CLIENT_OFFSET), which apply it; it does not write committed offsets itself. For a
group with no live consumer it answers CONSUMER_NOT_ONLINE and mqadmin falls back to committing
the offsets itself (ResetOffsetByTimeOldCommand).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

RESET_TO_MAX_OFFSET_TIMESTAMP = -1
"""The timestamp mqadmin sends for `-s now`: each queue's max offset."""


@dataclass(frozen=True, slots=True)
class ResetPlan:
    """The new offset of each queue (by queue id), or the first queue the group never committed."""

    offsets: dict[int, int]
    never_committed_queue_id: int | None = None


def plan_reset(
    queue_count: int,
    committed: Mapping[int, int],
    target_of: Callable[[int], int],
    *,
    force: bool,
) -> ResetPlan:
    """Offsets for queues 0..queue_count-1: `committed` holds the group's committed offsets,
    `target_of(queue_id)` the store's offset for the timestamp (or the max offset)."""
    assert queue_count >= 0
    offsets: dict[int, int] = {}
    for queue_id in range(queue_count):
        current = committed.get(queue_id, -1)
        if current < 0:
            return ResetPlan({}, never_committed_queue_id=queue_id)
        target = max(target_of(queue_id), 0)
        offsets[queue_id] = target if force or target < current else current
    return ResetPlan(offsets)
