"""The errors of a remoting connection, raised by `shoal.remoting` to its callers.

    RemotingError                 no usable answer: connect failure, timeout, connection closed
     +-- RemotingConnectError     the TCP connection could not be opened
     +-- RemotingTimeoutError     no response within the timeout

The broker catches these as they are; `shoal.client` translates them into its own tree
(`shoal.client.errors`, rooted at `MQClientError`) at one boundary, `shoal.client.transport`.
"""

from __future__ import annotations


class RemotingError(Exception):
    """A request could not be completed: connect failure, timeout, or the connection closed."""


class RemotingConnectError(RemotingError):
    """The connection could not be opened."""


class RemotingTimeoutError(RemotingError):
    """No response arrived within the timeout."""
