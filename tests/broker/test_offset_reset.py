"""Resetting a group's offsets by time, the pure part: which offset each queue gets (Broker2Client.resetOffset)."""

from __future__ import annotations

from shoal.broker.offset_reset import ResetPlan, plan_reset


def test_force_moves_every_queue_to_the_offset_for_the_time_both_ways() -> None:
    """Goal: with isForce each queue goes to the store's offset, back or forward. Method: one queue each way."""
    plan = plan_reset(2, {0: 5, 1: 1}, {0: 2, 1: 4}.__getitem__, force=True)
    assert plan == ResetPlan({0: 2, 1: 4})


def test_without_force_a_queue_only_moves_backwards() -> None:
    """Goal: without isForce an offset ahead of (or at) the committed one keeps the committed one. Method: 3 queues."""
    plan = plan_reset(3, {0: 5, 1: 1, 2: 3}, {0: 2, 1: 4, 2: 3}.__getitem__, force=False)
    assert plan == ResetPlan({0: 2, 1: 1, 2: 3})


def test_a_negative_store_answer_counts_as_zero() -> None:
    """Goal: a queue the store cannot place the time in (negative answer) resets to 0. Method: target -1."""
    assert plan_reset(1, {0: 7}, lambda _queue_id: -1, force=False) == ResetPlan({0: 0})


def test_a_queue_the_group_never_committed_refuses_the_whole_reset() -> None:
    """Goal: RocketMQ answers "consumer group not exist" when any write queue has no committed offset. Method: queue 1
    missing, then a committed -1."""
    assert plan_reset(3, {0: 1, 2: 1}, lambda _queue_id: 0, force=True) == ResetPlan({}, never_committed_queue_id=1)
    assert plan_reset(1, {0: -1}, lambda _queue_id: 0, force=True).never_committed_queue_id == 0


def test_only_write_queues_are_planned_and_no_queues_give_an_empty_plan() -> None:
    """Goal: the plan covers queues 0..queue_count-1 only (a committed read-only queue is left out). Method: 1 of 2."""
    assert plan_reset(1, {0: 3, 1: 3}, lambda _queue_id: 0, force=True) == ResetPlan({0: 0})
    assert plan_reset(0, {}, lambda _queue_id: 0, force=True) == ResetPlan({})
