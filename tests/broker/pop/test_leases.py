"""POP leases in memory: leasing, acks, expiry, stale receipt handles, the floor."""

from __future__ import annotations

from shoal.broker.pop.leases import Lease, QueueLeases


def leased(queue: QueueLeases, offsets: range, pop_ms: int, visible_at_ms: int) -> None:
    for offset in offsets:
        queue.lease(offset, Lease(pop_ms, visible_at_ms, 1))


def test_acks_in_any_order_raise_the_floor_only_over_a_closed_gap() -> None:
    queue = QueueLeases(floor=0, cursor=0)
    leased(queue, range(4), pop_ms=10, visible_at_ms=100)
    assert queue.cursor == 4
    assert queue.ack(2, 10) and queue.ack(1, 10)
    assert queue.floor == 0  # offset 0 still leased
    assert queue.ack(0, 10)
    assert queue.floor == 3
    assert queue.ack(3, 10)
    assert (queue.floor, queue.cursor, queue.leases, queue.acked) == (4, 4, {}, set())


def test_an_expired_lease_is_visible_again_and_a_live_one_is_not() -> None:
    queue = QueueLeases(floor=0, cursor=0)
    queue.lease(0, Lease(10, 100, 1))
    queue.lease(1, Lease(10, 200, 3))
    assert queue.visible_again(99) == []
    assert queue.visible_again(100) == [(0, 1)]
    assert queue.visible_again(500) == [(0, 1), (1, 3)]
    assert queue.next_visible_ms() == 100


def test_a_stale_handle_cannot_ack_a_message_leased_again() -> None:
    queue = QueueLeases(floor=0, cursor=0)
    queue.lease(0, Lease(10, 100, 1))
    queue.lease(0, Lease(150, 300, 2))  # expired and leased again at 150
    assert not queue.ack(0, 10)
    assert 0 in queue.leases
    assert queue.ack(0, 150)
    assert queue.floor == 1


def test_acking_twice_is_harmless_and_an_unknown_offset_past_the_cursor_is_refused() -> None:
    queue = QueueLeases(floor=0, cursor=0)
    queue.lease(0, Lease(10, 100, 1))
    assert queue.ack(0, 10)
    assert queue.ack(0, 10)  # below the floor: already acked
    assert not queue.ack(7, 10)  # never leased


def test_a_gap_without_lease_or_ack_is_visible_at_once() -> None:
    """What replay leaves when a lease record was lost with the machine: the message comes back."""
    queue = QueueLeases(floor=0, cursor=3)
    queue.lease(1, Lease(10, 1_000, 1))
    queue.ack(2, None)
    assert queue.visible_again(0) == [(0, 1)]


def test_fifo_lock_holds_while_any_lease_is_invisible() -> None:
    queue = QueueLeases(floor=0, cursor=0)
    assert not queue.locked(0)
    queue.lease(0, Lease(10, 100, 1))
    assert queue.locked(50)
    assert not queue.locked(100)


def test_skip_moves_the_cursor_and_the_floor_past_filtered_messages() -> None:
    queue = QueueLeases(floor=5, cursor=5)
    queue.skip(5)
    queue.skip(6)
    assert (queue.floor, queue.cursor) == (7, 7)
