"""shoal.remoting: remoting connections over asyncio, shared by the broker and the client.

Above `shoal.protocol` (the sans-I/O codec), below `shoal.broker` and `shoal.client`. `connection`
holds what both ends of a connection do (frames in through one FrameDecoder, responses matched to
requests by opaque, bounded waits); `client` opens connections by address (`RemotingClient`); the
broker's server side (`shoal.remoting.server`) builds on `Connection`. Errors: `errors`.
"""

from __future__ import annotations

from shoal.remoting.client import RemotingClient, RemotingConnection, RequestHandler, split_address
from shoal.remoting.connection import Connection
from shoal.remoting.errors import RemotingConnectError, RemotingError, RemotingTimeoutError

__all__ = [
    "Connection",
    "RemotingClient",
    "RemotingConnectError",
    "RemotingConnection",
    "RemotingError",
    "RemotingTimeoutError",
    "RequestHandler",
    "split_address",
]
