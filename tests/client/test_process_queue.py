"""ProcessQueue: committable offsets, orderly take/commit/retry, sizes."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from shoal.client.message import MessageExt
from shoal.client.process_queue import ProcessQueue
from shoal.protocol import MessageQueue

MQ = MessageQueue("T", "b", 0)


def messages(*offsets: int) -> list[MessageExt]:
    return [MessageExt(topic="T", body=b"xy", queue_offset=offset) for offset in offsets]


def test_commit_offset_stops_at_the_lowest_unconsumed_message() -> None:
    """Goal: offsets committed only up to the lowest unconsumed message. Method: consume out of order."""
    queue = ProcessQueue(MQ)
    batch = messages(10, 11, 12, 13)
    queue.put(batch)
    assert queue.remove([batch[1], batch[2]]) == 10  # 10 still unconsumed
    assert queue.remove([batch[0]]) == 13
    assert queue.remove([batch[3]]) == 14  # everything consumed: one past the highest
    assert queue.cached_count == 0
    assert queue.remove([]) == -1  # nothing cached


@given(st.permutations(list(range(20))))
def test_committable_offset_is_always_the_minimum_remaining(order: list[int]) -> None:
    """Goal: the invariant under any consume order. Method: hypothesis permutations of removal."""
    queue = ProcessQueue(MQ)
    batch = messages(*range(100, 120))
    queue.put(batch)
    remaining = set(range(100, 120))
    for index in order:
        remaining.discard(100 + index)
        offset = queue.remove([batch[index]])
        assert offset == (min(remaining) if remaining else 120)


def test_duplicates_are_cached_once_and_sizes_are_tracked() -> None:
    """Goal: a re-delivered offset is not cached twice. Method: put the same offsets twice."""
    queue = ProcessQueue(MQ)
    queue.put(messages(1, 2))
    queue.put(messages(2, 3))
    assert queue.cached_count == 3
    assert queue.cached_size_bytes == 6
    assert queue.max_span == 2


def test_orderly_take_commit_and_consume_again() -> None:
    """Goal: strict order; SUSPEND puts the same messages back first. Method: take, retry, commit."""
    queue = ProcessQueue(MQ)
    assert queue.put(messages(5, 6, 7)) is True  # start a consume task
    assert queue.put(messages(8)) is False  # one is running already
    first = queue.take(2)
    assert [message.queue_offset for message in first] == [5, 6]
    queue.make_consume_again(first)
    again = queue.take(2)
    assert [message.queue_offset for message in again] == [5, 6]
    assert queue.commit() == 7
    assert [message.queue_offset for message in queue.take(5)] == [7, 8]
    assert queue.commit() == 9
    assert queue.take(1) == []
    assert queue.consuming is False
    assert queue.commit() == -1


def test_wait_for_space_wakes_when_messages_leave() -> None:
    """Goal: back-pressure without busy polling. Method: a waiter woken by remove()."""

    async def run() -> None:
        queue = ProcessQueue(MQ)
        batch = messages(1)
        queue.put(batch)
        waiter = asyncio.create_task(queue.wait_for_space(10.0))
        await asyncio.sleep(0)
        queue.remove(batch)
        await asyncio.wait_for(waiter, 1.0)

    asyncio.run(run())


def test_offsets_filtered_out_after_the_last_message_are_committed_with_it() -> None:
    """Goal: a tag-filtered tail does not hold the offset back. Method: messages 5, 6 of a pull up to 20."""
    queue = ProcessQueue(MQ)
    batch = messages(5, 6)
    queue.put(batch)
    queue.pulled_until(20)
    assert queue.remove([batch[0]]) == 6
    assert queue.remove([batch[1]]) == 20
