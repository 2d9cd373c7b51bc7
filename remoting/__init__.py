"""shoal.remoting: remoting over asyncio, shared by the two servers and the client.

Above `shoal.protocol` (the sans-I/O codec), below `shoal.acl`, `shoal.broker`, `shoal.namesrv`
and `shoal.client`. `connection` holds what both ends of a connection do (frames in through one
FrameDecoder, responses matched to requests by opaque, bounded waits); `client` opens connections
by address (`RemotingClient`); `server` is the servers' side (`RemotingServer`, built on
`Connection`) and `tls_listener` its TLS ports; `tls` the TLS settings and contexts; `heap` a
serving process's garbage collection; `settings` the config machinery broker.conf and namesrv.conf
share. Errors: `errors`.
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
