"""Listener invocation rules and message preparation before the listener (pure parts of consuming)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from shoal.client.consume_service import (
    ConsumeOrderlyStatus,
    ConsumeStatus,
    ListenerInvoker,
    prepare_for_listener,
)
from shoal.client.message import MessageExt


def batch() -> list[MessageExt]:
    return [MessageExt(topic="T", body=b"x")]


@pytest.mark.parametrize(
    ("status", "success"),
    [
        (ConsumeStatus.CONSUME_SUCCESS, True),
        (ConsumeStatus.RECONSUME_LATER, False),
        (ConsumeOrderlyStatus.SUCCESS, True),
        (ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, False),
        (None, False),
    ],
)
def test_statuses_map_to_success_or_retry(status: object, success: bool) -> None:
    """Goal: success statuses commit, everything else retries (None too, as Java). Method: each status."""

    async def run() -> bool:
        invoker = ListenerInvoker(lambda _messages: status, 2)
        try:
            return await invoker(batch())
        finally:
            invoker.shutdown()

    assert asyncio.run(run()) is success


def test_sync_listeners_run_off_the_event_loop_thread() -> None:
    """Goal: a blocking listener never blocks the loop. Method: record the listener's thread."""
    threads: list[threading.Thread] = []

    def listener(_messages: list[MessageExt]) -> ConsumeStatus:
        threads.append(threading.current_thread())
        return ConsumeStatus.CONSUME_SUCCESS

    async def run() -> None:
        invoker = ListenerInvoker(listener, 2)
        assert await invoker(batch())
        invoker.shutdown()

    asyncio.run(run())
    assert threads and threads[0] is not threading.main_thread()


def test_async_listeners_are_awaited_on_the_loop() -> None:
    """Goal: coroutine listeners run on the loop. Method: an async listener that awaits."""

    async def listener(messages: list[MessageExt]) -> ConsumeStatus:
        await asyncio.sleep(0)
        return ConsumeStatus.CONSUME_SUCCESS if messages else ConsumeStatus.RECONSUME_LATER

    async def run() -> bool:
        invoker = ListenerInvoker(listener, 2)
        return await invoker(batch())

    assert asyncio.run(run())


def test_listener_exceptions_count_as_retry() -> None:
    """Goal: a raising listener means RECONSUME_LATER / SUSPEND. Method: raise inside."""

    def listener(_messages: list[MessageExt]) -> ConsumeStatus:
        raise RuntimeError("boom")

    async def run() -> bool:
        invoker = ListenerInvoker(listener, 1)
        try:
            return await invoker(batch())
        finally:
            invoker.shutdown()

    assert asyncio.run(run()) is False


def test_retried_messages_show_their_original_topic() -> None:
    """Goal: resetRetryAndNamespace: %RETRY%<group> + RETRY_TOPIC -> original topic. Method: three cases."""
    retried = MessageExt(topic="%RETRY%cg", body=b"x", properties={"RETRY_TOPIC": "Orders"})
    other_group = MessageExt(topic="%RETRY%other", body=b"x", properties={"RETRY_TOPIC": "Orders"})
    plain = MessageExt(topic="Orders", body=b"x")
    prepare_for_listener([retried, other_group, plain], "cg")
    assert [retried.topic, other_group.topic, plain.topic] == ["Orders", "%RETRY%other", "Orders"]
    assert int(plain.properties["CONSUME_START_TIME"]) > 0
