"""Queue allocation strategies (spec §13) and broker grouping for lock batches."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal.client.rebalance import allocate_averagely, allocate_averagely_by_circle, group_by_broker
from shoal.protocol import MessageQueue

STRATEGIES = [allocate_averagely, allocate_averagely_by_circle]


def queues(count: int, brokers: int = 1) -> list[MessageQueue]:
    return sorted(MessageQueue("T", f"broker-{index % brokers}", index // brokers) for index in range(count))


def test_spec_example_eight_queues_three_consumers() -> None:
    """Goal: spec §13's example n=8, c=3 -> [0,1,2], [3,4,5], [6,7]. Method: allocate for each cid."""
    mq_all = queues(8)
    cids = ["c0", "c1", "c2"]
    result = [[mq.queue_id for mq in allocate_averagely("g", cid, mq_all, cids)] for cid in cids]
    assert result == [[0, 1, 2], [3, 4, 5], [6, 7]]


@pytest.mark.parametrize(
    ("n", "c", "expected"),
    [
        (4, 4, [[0], [1], [2], [3]]),
        (3, 5, [[0], [1], [2], [], []]),
        (10, 4, [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]),
        (1, 1, [[0]]),
    ],
)
def test_averagely_gives_contiguous_runs(n: int, c: int, expected: list[list[int]]) -> None:
    """Goal: more cases of Java's arithmetic. Method: allocate for every consumer."""
    mq_all = queues(n)
    cids = [f"c{index}" for index in range(c)]
    assert [[mq.queue_id for mq in allocate_averagely("g", cid, mq_all, cids)] for cid in cids] == expected


def test_by_circle_deals_queues_round_robin() -> None:
    """Goal: AllocateMessageQueueAveragelyByCircle. Method: n=8, c=3."""
    mq_all = queues(8)
    cids = ["c0", "c1", "c2"]
    result = [[mq.queue_id for mq in allocate_averagely_by_circle("g", cid, mq_all, cids)] for cid in cids]
    assert result == [[0, 3, 6], [1, 4, 7], [2, 5]]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_consumer_missing_from_the_list_gets_nothing(strategy: object) -> None:
    """Goal: Java returns an empty list when the current id is not registered. Method: allocate."""
    assert strategy("g", "stranger", queues(4), ["c0", "c1"]) == []  # type: ignore[operator]


@pytest.mark.parametrize("strategy", STRATEGIES)
@given(n=st.integers(min_value=0, max_value=64), c=st.integers(min_value=1, max_value=20), brokers=st.integers(1, 4))
def test_every_queue_is_assigned_exactly_once(strategy: object, n: int, c: int, brokers: int) -> None:
    """Goal: a partition of the queues. Method: hypothesis over sizes; union equals all, no overlap."""
    mq_all = queues(n, brokers)
    cids = [f"cid-{index:03d}" for index in range(c)]
    assigned: list[MessageQueue] = []
    for cid in cids:
        assigned.extend(strategy("g", cid, mq_all, cids))  # type: ignore[operator]
    assert sorted(assigned) == mq_all
    assert len(set(assigned)) == len(assigned)


@given(n=st.integers(min_value=1, max_value=64), c=st.integers(min_value=1, max_value=20))
def test_averagely_shares_differ_by_at_most_one(n: int, c: int) -> None:
    """Goal: balance. Method: hypothesis; max share - min share <= 1."""
    mq_all = queues(n)
    cids = [f"c{index:02d}" for index in range(c)]
    sizes = [len(allocate_averagely("g", cid, mq_all, cids)) for cid in cids]
    assert max(sizes) - min(sizes) <= 1


def test_group_by_broker_sorts_and_groups() -> None:
    """Goal: one lock request per broker. Method: queues of two brokers."""
    mqs = [MessageQueue("T", "b", 1), MessageQueue("T", "a", 0), MessageQueue("T", "b", 0)]
    assert group_by_broker(mqs) == {
        "a": [MessageQueue("T", "a", 0)],
        "b": [MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)],
    }
