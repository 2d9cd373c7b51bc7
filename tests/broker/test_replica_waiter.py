"""SYNC_MASTER's wait for a slave (`ReplicaWaiter`): release by ack, timeouts, no slave, bounds."""

from __future__ import annotations

import asyncio

from shoal.broker.replication.replica_waiter import ReplicaWaiter
from shoal.store import PutStatus

TIMEOUT_S = 0.05


def test_acks_release_waiters_in_offset_order() -> None:
    """Goal: an ack answers PUT_OK to every waiter at or below it, no one else. Method: three
    waiters, acks at 150 then 300."""

    async def scenario() -> None:
        waiter = ReplicaWaiter(asyncio.get_running_loop(), 5.0, lambda _offset: True)
        futures = [waiter.wait(offset) for offset in (100, 200, 300)]
        waiter.on_ack(150)
        await asyncio.sleep(0)
        assert [f.done() for f in futures] == [True, False, False]
        waiter.on_ack(120)  # a lower ack from another slave changes nothing
        waiter.on_ack(300)
        assert [f.result() for f in futures] == [PutStatus.PUT_OK] * 3
        assert waiter.wait(250).result() is PutStatus.PUT_OK  # already acknowledged
        assert waiter.waiting_count == 0

    asyncio.run(scenario())


def test_timeout_answers_flush_slave_timeout() -> None:
    """Goal: a send never hangs when the slave stops acking. Method: wait past slaveTimeout."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        waiter = ReplicaWaiter(loop, TIMEOUT_S, lambda _offset: True)
        started = loop.time()
        status = await waiter.wait(10)
        assert status is PutStatus.FLUSH_SLAVE_TIMEOUT
        assert TIMEOUT_S <= loop.time() - started < TIMEOUT_S + 1.0
        assert waiter.timeouts_total == 1

    asyncio.run(scenario())


def test_no_usable_slave_answers_at_once() -> None:
    """Goal: without an OK slave the answer is SLAVE_NOT_AVAILABLE immediately (RocketMQ's isSlaveOK)."""

    async def scenario() -> None:
        waiter = ReplicaWaiter(asyncio.get_running_loop(), 5.0, lambda _offset: False)
        assert waiter.wait(10).result() is PutStatus.SLAVE_NOT_AVAILABLE
        assert waiter.unavailable_total == 1

    asyncio.run(scenario())


def test_giving_up_answers_every_waiter_flush_slave_timeout_at_once() -> None:
    """Goal: when the last slave is found gone, waiting sends are answered now, FLUSH_SLAVE_TIMEOUT as RocketMQ
    answers a wait that ended without an ack, and counted as slave timeouts (issue 25). Method: two waiters
    with a 5 s slaveTimeout, give_up."""

    async def scenario() -> None:
        waiter = ReplicaWaiter(asyncio.get_running_loop(), 5.0, lambda _offset: True)
        futures = [waiter.wait(offset) for offset in (100, 200)]
        waiter.give_up()
        assert [f.result() for f in futures] == [PutStatus.FLUSH_SLAVE_TIMEOUT] * 2
        assert waiter.waiting_count == 0 and waiter.timeouts_total == 2

    asyncio.run(scenario())


def test_fail_all_and_reset_answer_everyone() -> None:
    """Goal: a role change or shutdown answers every pending send. Method: fail_all, then reset."""

    async def scenario() -> None:
        waiter = ReplicaWaiter(asyncio.get_running_loop(), 5.0, lambda _offset: True)
        first = waiter.wait(10)
        waiter.fail_all(PutStatus.FLUSH_SLAVE_TIMEOUT)
        assert first.result() is PutStatus.FLUSH_SLAVE_TIMEOUT
        waiter.on_ack(50)
        second = waiter.wait(60)
        waiter.reset()
        assert second.result() is PutStatus.SLAVE_NOT_AVAILABLE
        assert waiter.acked_offset == 0

    asyncio.run(scenario())
