"""The store's exception tree and the statuses callers see.

    StoreError
     +-- StoreLockedError        another process holds <root>/lock
     +-- StoreCorruptionError    a file cannot be used as it is (wrong size, bad checkpoint, ...)
     +-- MessageIllegalError     a message the store refuses before writing (-> MESSAGE_ILLEGAL)
     |    +-- PropertiesTooLargeError                                 (-> PROPERTIES_SIZE_EXCEEDED)
     +-- StoreUnavailableError   shut down, read-only, or disk above the hard limit
     |                                                                (-> SERVICE_NOT_AVAILABLE)
     +-- RecordEncodingError     the encoder wrote a record its own decoder cannot read; nothing
     |                           was made visible (a bug, never the message's fault) (-> UNKNOWN_ERROR)
     +-- SegmentNotReadyError    internal to dispatch: the next ConsumeQueue file is still being
                                 allocated off the event loop; the record is dispatched again later

Expected failures of a put never raise to the broker: `MessageStore.put_message` turns them
into a `PutStatus` (the table `STATUS_OF_ERROR`). An `OSError` while writing or syncing is not
expected: it propagates and the store stops accepting writes, because continuing could
acknowledge data that is not on disk.
"""

from __future__ import annotations

import enum


class StoreError(Exception):
    """Base of every error raised by shoal.store."""


class StoreLockedError(StoreError):
    """The store directory is in use by another process."""


class StoreCorruptionError(StoreError):
    """A store file is unusable as it stands; the message names the file and what is wrong."""


class MessageIllegalError(StoreError):
    """The message breaks a format limit (topic, body, properties) and is not written."""


class PropertiesTooLargeError(MessageIllegalError):
    """The encoded property string is longer than a signed short allows."""


class StoreUnavailableError(StoreError):
    """The store does not accept writes now (shut down, disk full, not writeable)."""


class RecordEncodingError(StoreError):
    """An encoded record failed the check before it became visible; the append did not happen."""


class SegmentNotReadyError(StoreError):
    """A segment file is being created in the background and was not ready within the caller's
    wait; nothing was written, and the same write succeeds once the file is there."""


class PutStatus(enum.Enum):
    """Outcome of a put, named as RocketMQ's PutMessageStatus (spec §5.4)."""

    # Members are singletons compared by identity: the identity hash is consistent with that and is
    # computed in C (Enum's own hashes the name in Python; these are dict keys on every request).
    __hash__ = object.__hash__

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    @property
    def stored(self) -> bool:
        """True when the bytes are in the CommitLog (a timeout still means written)."""
        return self in _STORED


_STORED = frozenset(
    {
        PutStatus.PUT_OK,
        PutStatus.FLUSH_DISK_TIMEOUT,
        PutStatus.FLUSH_SLAVE_TIMEOUT,
        PutStatus.SLAVE_NOT_AVAILABLE,
    }
)

STATUS_OF_ERROR: dict[type[StoreError], PutStatus] = {
    PropertiesTooLargeError: PutStatus.PROPERTIES_SIZE_EXCEEDED,
    MessageIllegalError: PutStatus.MESSAGE_ILLEGAL,
    StoreUnavailableError: PutStatus.SERVICE_NOT_AVAILABLE,
}


def status_of_error(error: StoreError) -> PutStatus:
    """The PutStatus for an expected failure; the most specific class wins."""
    for cls in type(error).__mro__:
        status = STATUS_OF_ERROR.get(cls)
        if status is not None:
            return status
    return PutStatus.UNKNOWN_ERROR
