"""`ClientLifecycle`: start once, shut down once, `async with`, and the running check.

Every asyncio client (`Producer`, `TransactionProducer`, `PullConsumer`, `PushConsumer`, `Admin`)
derives from it, and the blocking facades (`blocking.py`) call only its `start()` and `shutdown()`:

- `start()` on a running client raises `ClientStateError` ("<name> is already running");
- `shutdown()` on a client that is not running (never started, or shut down) does nothing;
- `_check_running()`, called first by every method that talks to brokers, raises
  `ClientStateError` ("<name> is not running; call start() first") before start and after shutdown.

A subclass says what starting and stopping do (`_start_client`, `_shutdown_client`) and may refuse
to start (`_check_startable`). The running flag is set before `_start_client` runs and cleared
before `_shutdown_client` runs, so a second `shutdown()` during the first one returns at once.
A client that runs one `ClientInstance` from construction on (producer, pull consumer, admin)
derives from `InstanceLifecycle`; the push consumer builds its parts at each start.
"""

from __future__ import annotations

import abc
from typing import Self

from shoal.client.client_instance import ClientInstance
from shoal.client.errors import ClientStateError


class ClientLifecycle(abc.ABC):
    """The start/shutdown state of one client, named `client_name` in its errors."""

    def __init__(self, client_name: str) -> None:
        self._client_name = client_name
        self._running = False

    async def start(self) -> None:
        if self._running:
            raise ClientStateError(f"{self._client_name} is already running")
        self._check_startable()
        self._running = True
        await self._start_client()

    async def shutdown(self) -> None:
        """Stop the client; nothing happens when it is not running."""
        if not self._running:
            return
        self._running = False
        await self._shutdown_client()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.shutdown()

    def _check_running(self) -> None:
        if not self._running:
            raise ClientStateError(f"{self._client_name} is not running; call start() first")

    def _check_startable(self) -> None:  # noqa: B027 - optional hook, empty by default
        """Raise ClientStateError when the client cannot start yet (called before the flag is set)."""

    @abc.abstractmethod
    async def _start_client(self) -> None:
        """Start what the client runs (the flag is already set)."""

    @abc.abstractmethod
    async def _shutdown_client(self) -> None:
        """Stop what the client runs (the flag is already cleared)."""


class InstanceLifecycle(ClientLifecycle):
    """A client running the `ClientInstance` its constructor set as `_instance`: start starts it;
    shutdown unregisters the client's group (`_unregister`) and closes every connection."""

    _instance: ClientInstance

    async def _start_client(self) -> None:
        await self._instance.start()

    async def _shutdown_client(self) -> None:
        await self._unregister()
        await self._instance.shutdown()

    async def _unregister(self) -> None:
        """UNREGISTER_CLIENT for the client's group at every broker; a client without a group has none."""
