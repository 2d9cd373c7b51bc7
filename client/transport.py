"""The client's connections: `shoal.remoting`'s, with its errors translated into the client's tree.

This is the one boundary where transport trouble becomes `shoal.client.errors.RemotingError` (and
its `RemotingConnectError` / `RemotingTimeoutError`): every request of the client goes through
`ClientRemoting.invoke`, `invoke_oneway` or `invoke_soon`, whose failures pass through `failed`.
"""

from __future__ import annotations

from typing import NoReturn

from shoal import remoting
from shoal.client.errors import RemotingConnectError, RemotingError, RemotingTimeoutError

__all__ = ["ClientRemoting", "TransportError"]

TransportError = remoting.RemotingError
"""A transport failure not yet translated: what the future of `ClientRemoting.invoke_soon` raises;
its awaiter passes it to `failed`, as `invoke` does."""

_TRANSLATED: dict[type[remoting.RemotingError], type[RemotingError]] = {
    remoting.RemotingConnectError: RemotingConnectError,
    remoting.RemotingTimeoutError: RemotingTimeoutError,
}


class ClientRemoting(remoting.RemotingClient):
    """A `RemotingClient` whose requests raise the client's errors (same messages)."""

    def failed(self, error: remoting.RemotingError) -> NoReturn:
        raise _TRANSLATED.get(type(error), RemotingError)(str(error)) from None
