"""The client's exception tree; every failure a caller sees is one of these.

    MQClientError                     base of everything shoal.client raises
     +-- ClientStateError             used before start(), after shutdown(), or started twice
     +-- InvalidMessageError          (also ValueError) a message the broker would refuse: topic
     |                                name, empty or oversized body, property names or values
     +-- InvalidSubscriptionError     (also ValueError) a tag expression that names no tag
     +-- MessageDecodeError           pulled or viewed bytes are not a valid record
     |    +-- UnsupportedCompressionError  an LZ4/ZSTD body and the module to inflate it is missing
     +-- NoRouteError                 neither the topic nor TBW102 has a route with a master broker
 |    +-- NoWritableQueueError    the route names no writable queue of a broker with a master
 |                                (retriable: a failover or a write-permission wipe in progress)
     +-- MQBrokerError                a broker or nameserver answered with an error code (`code`,
     |                                `remark`, `address`)
     +-- RemotingError                no usable answer: connect failure, timeout, connection closed
          +-- RemotingConnectError    the TCP connection could not be opened
          +-- RemotingTimeoutError    no response within the timeout

Errors are translated at one boundary: `broker_api` turns responses with an unexpected code into
`MQBrokerError`; `transport` turns `shoal.remoting`'s errors (socket trouble) into `RemotingError`.
Retrying policies (send retries, pull back-off) look at these types and at `MQBrokerError.code` only.
"""

from __future__ import annotations


class MQClientError(Exception):
    """Base of every error raised by shoal.client."""


class ClientStateError(MQClientError):
    """The producer, consumer or admin is not running (or is already running)."""


class InvalidMessageError(MQClientError, ValueError):
    """A message that cannot be sent as it is (checked before anything goes on the wire)."""


class InvalidSubscriptionError(MQClientError, ValueError):
    """A subscription expression that cannot be used."""


class MessageDecodeError(MQClientError):
    """Bytes that should hold CommitLog records do not."""


class UnsupportedCompressionError(MessageDecodeError):
    """A body compressed with LZ4 or ZSTD while the `lz4` / `zstandard` module is not installed."""


class NoRouteError(MQClientError):
    """No route to send to: the nameservers know neither the topic nor the TBW102 template."""


class NoWritableQueueError(NoRouteError):
    """The topic's route has no writable queue on a broker with a master: a master is gone and no
    slave is promoted yet, or writes are switched off. Retriable: the route is fetched again (at
    most every `ROUTE_REFRESH_AFTER_FAILURE_MIN_INTERVAL_S`) until a master appears."""


class MQBrokerError(MQClientError):
    """A broker or nameserver answered with response code `code` (a `ResponseCode` value)."""

    def __init__(self, code: int, remark: str | None, address: str | None = None) -> None:
        where = f" from {address}" if address else ""
        super().__init__(f"response code {code}{where}: {remark or ''}".rstrip(": "))
        self.code = code
        self.remark = remark
        self.address = address


class RemotingError(MQClientError):
    """A request could not be completed: connect failure, timeout, or the connection closed."""


class RemotingConnectError(RemotingError):
    """The connection could not be opened."""


class RemotingTimeoutError(RemotingError):
    """No response arrived within the timeout."""
