"""Exceptions of shoal.operator.

    OperatorError                  everything the operator raises on purpose
    ├── InvalidSpecError           the spec can never work as written: handlers raise
    │   │                          kopf.PermanentError and set Ready=False, reason InvalidSpec
    │   └── HostPathNotAllowedError  storage.hostPath.root is outside the operator's allow-list
    └── NotReadyError              a dependency is not there yet (a pod, a node, a NameServer):
                                   handlers raise kopf.TemporaryError(delay=...) and retry

Handlers translate these at one boundary (handlers.py); manifests.py, status.py and spec.py never
import kopf.
"""

from __future__ import annotations


class OperatorError(Exception):
    """Base of every exception the operator raises on purpose."""


class InvalidSpecError(OperatorError):
    """The spec can never be reconciled as written (a retry would not help)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class HostPathNotAllowedError(InvalidSpecError):
    """storage.hostPath.root is not under one of the operator's allowed host roots."""


class NotReadyError(OperatorError):
    """Something the reconcile depends on is not ready yet; retry after `delay_s`."""

    def __init__(self, message: str, delay_s: float = 10.0) -> None:
        super().__init__(message)
        self.delay_s = delay_s
