"""The one error the proxy's handlers raise: a v2 status code and a message for the client."""

from __future__ import annotations


class ProxyError(Exception):
    """Answered as `Status{code, message}`; `code` is an `apache.rocketmq.v2.Code`."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
