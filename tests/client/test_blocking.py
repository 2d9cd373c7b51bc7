"""The blocking facade: its event-loop thread, and the facades' behaviour without a cluster."""

from __future__ import annotations

import asyncio
import threading

import pytest

from shoal.client.blocking import BlockingAdmin, BlockingProducer, BlockingPushConsumer, EventLoopThread
from shoal.client.errors import ClientStateError, RemotingTimeoutError
from shoal.client.message import Message


def test_loop_thread_runs_coroutines_and_functions_on_its_thread() -> None:
    """Goal: results come back; work happens on the loop's thread. Method: run and call."""
    loop_thread = EventLoopThread("test-loop")

    async def where() -> threading.Thread:
        await asyncio.sleep(0)
        return threading.current_thread()

    try:
        assert loop_thread.run(where(), 5.0) is not threading.current_thread()
        assert loop_thread.call(lambda: 41 + 1) == 42
    finally:
        loop_thread.stop()


def test_loop_thread_bounds_every_wait() -> None:
    """Goal: a stuck coroutine times out instead of hanging the caller. Method: wait 0.05 s."""
    loop_thread = EventLoopThread("test-loop")
    try:
        with pytest.raises(RemotingTimeoutError):
            loop_thread.run(asyncio.sleep(10), 0.05)
    finally:
        loop_thread.stop()


def test_stopped_loop_thread_refuses_work() -> None:
    """Goal: use after shutdown is a clear state error. Method: stop, then run."""
    loop_thread = EventLoopThread("test-loop")
    loop_thread.stop()
    loop_thread.stop()
    with pytest.raises(ClientStateError):
        loop_thread.run(asyncio.sleep(0), 1.0)


def test_blocking_producer_refuses_sends_before_start_and_after_shutdown() -> None:
    """Goal: state errors surface synchronously. Method: send before start; shutdown; send again."""
    producer = BlockingProducer("pg", "127.0.0.1:1")
    with pytest.raises(ClientStateError):
        producer.send(Message("T", b"x"))
    producer.shutdown()
    with pytest.raises(ClientStateError):
        producer.send(Message("T", b"x"))


def test_blocking_push_consumer_needs_a_listener() -> None:
    """Goal: start() without a listener fails clearly. Method: start a consumer without one."""
    consumer = BlockingPushConsumer("cg", "127.0.0.1:1")
    consumer.subscribe("T", "TagA || TagB")
    try:
        with pytest.raises(ClientStateError, match="listener"):
            consumer.start()
    finally:
        consumer.shutdown()


def test_blocking_admin_without_start_is_refused() -> None:
    """Goal: admin calls need start(). Method: call topic_list on a fresh admin."""
    admin = BlockingAdmin("127.0.0.1:1")
    try:
        with pytest.raises(ClientStateError):
            admin.topic_list()
    finally:
        admin.shutdown()


def test_a_failing_constructor_stops_the_loop_thread() -> None:
    """Goal: no thread leaks when the client cannot be built. Method: a bad group name; count threads."""
    before = threading.active_count()
    with pytest.raises(ValueError, match="group"):
        BlockingProducer("bad group", "127.0.0.1:1")
    assert threading.active_count() == before
