"""The one client lifecycle: start once, shut down once, `async with`, the running check."""

from __future__ import annotations

import asyncio

import pytest

from shoal.client.admin import Admin
from shoal.client.blocking import BlockingAdmin
from shoal.client.errors import ClientStateError
from shoal.client.lifecycle import ClientLifecycle
from shoal.client.producer import Producer
from shoal.client.pull_consumer import PullConsumer
from shoal.client.push_consumer import PushConsumer
from shoal.protocol import MessageQueue


class CountingClient(ClientLifecycle):
    """Counts what the lifecycle asks of it; refuses to start while `startable` is False."""

    def __init__(self) -> None:
        super().__init__("counting client")
        self.starts = 0
        self.shutdowns = 0
        self.startable = True

    def _check_startable(self) -> None:
        if not self.startable:
            raise ClientStateError("not startable")

    async def _start_client(self) -> None:
        self.starts += 1

    async def _shutdown_client(self) -> None:
        self.shutdowns += 1

    async def work(self) -> str:
        self._check_running()
        return "done"


def test_a_second_start_is_refused_and_starts_nothing() -> None:
    """Goal: start twice is a state error naming the client. Method: start, start again."""
    client = CountingClient()

    async def scenario() -> None:
        await client.start()
        with pytest.raises(ClientStateError, match=r"^counting client is already running$"):
            await client.start()

    asyncio.run(scenario())
    assert client.starts == 1


def test_shutdown_stops_once_and_only_what_was_started() -> None:
    """Goal: shutdown is idempotent and a no-op before start. Method: shutdown, start, shutdown twice."""
    client = CountingClient()

    async def scenario() -> None:
        await client.shutdown()
        assert client.shutdowns == 0
        await client.start()
        await client.shutdown()
        await client.shutdown()

    asyncio.run(scenario())
    assert (client.starts, client.shutdowns) == (1, 1)


def test_work_is_refused_before_start_and_after_shutdown() -> None:
    """Goal: a clear error outside the running span. Method: work before, during and after."""
    client = CountingClient()
    message = r"^counting client is not running; call start\(\) first$"

    async def scenario() -> None:
        with pytest.raises(ClientStateError, match=message):
            await client.work()
        await client.start()
        assert await client.work() == "done"
        await client.shutdown()
        with pytest.raises(ClientStateError, match=message):
            await client.work()

    asyncio.run(scenario())


def test_async_with_starts_and_shuts_down_even_on_error() -> None:
    """Goal: `async with` gives the client and always shuts it down. Method: raise inside the block."""
    client = CountingClient()

    async def scenario() -> None:
        async with client as entered:
            assert entered is client
            assert await client.work() == "done"
            raise RuntimeError("inside")

    with pytest.raises(RuntimeError, match="inside"):
        asyncio.run(scenario())
    assert (client.starts, client.shutdowns) == (1, 1)


def test_a_refused_start_leaves_the_client_not_running() -> None:
    """Goal: `_check_startable` runs before the flag is set. Method: refuse, then allow and start."""
    client = CountingClient()
    client.startable = False

    async def scenario() -> None:
        with pytest.raises(ClientStateError, match="not startable"):
            await client.start()
        with pytest.raises(ClientStateError):
            await client.work()
        client.startable = True
        await client.start()
        await client.shutdown()

    asyncio.run(scenario())
    assert (client.starts, client.shutdowns) == (1, 1)


async def _call_before_start(name: str) -> None:
    """One call that needs a running client, on a new client named `name` in its errors."""
    if name == "admin":
        await Admin("127.0.0.1:1").topic_list()
    elif name == "producer pg":
        await Producer("pg", "127.0.0.1:1").fetch_publish_queues("T")
    else:
        await PullConsumer("cg", "127.0.0.1:1").max_offset(MessageQueue("T", "b", 0))


@pytest.mark.parametrize("name", ["producer pg", "pull consumer cg", "admin"])
def test_every_client_names_itself_when_used_before_start(name: str) -> None:
    """Goal: each client's state error keeps its wording. Method: one call before start."""
    with pytest.raises(ClientStateError, match=rf"^{name} is not running; call start\(\) first$"):
        asyncio.run(_call_before_start(name))


def test_push_consumer_without_listener_stays_stopped() -> None:
    """Goal: the listener check comes before the client counts as running. Method: start twice, no listener."""
    consumer = PushConsumer("cg", "127.0.0.1:1")

    async def scenario() -> None:
        for _ in range(2):
            with pytest.raises(ClientStateError, match="listener"):
                await consumer.start()
        await consumer.shutdown()

    asyncio.run(scenario())


def test_blocking_client_shut_down_cannot_start_again() -> None:
    """Goal: the facade's shutdown stops its loop thread once; later use is a state error. Method:
    shutdown twice, then start."""
    admin = BlockingAdmin("127.0.0.1:1")
    admin.shutdown()
    admin.shutdown()
    with pytest.raises(ClientStateError, match="shut down"):
        admin.start()
