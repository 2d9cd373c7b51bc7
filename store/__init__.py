"""shoal.store: the RocketMQ 4.x compatible storage engine (CommitLog, ConsumeQueue, IndexFile).

Byte-compatible with RocketMQ 4.9's store directory (docs/formats.md); stdlib plus crc32c only.
`MessageStore` is the facade; the record codec (`shoal.formats.record`) is what Spark reads with.
"""

from shoal.store.clock import SYSTEM_CLOCK, Clock, SystemClock
from shoal.store.commitlog import CommitLog
from shoal.store.errors import (
    MessageIllegalError,
    PropertiesTooLargeError,
    PutStatus,
    StoreCorruptionError,
    StoreError,
    StoreLockedError,
    StoreUnavailableError,
)
from shoal.store.message import AppendResult, BatchEntry, GetMessageStatus, GetResult, MessageToStore, PutResult
from shoal.store.message_store import MessageStore
from shoal.store.recovery import RecoveryReport
from shoal.store.settings import (
    CommitLogSettings,
    ConsumeQueueSettings,
    FlushDiskType,
    FlushSettings,
    IndexSettings,
    RetentionSettings,
    StoreSettings,
)

__all__ = [
    "SYSTEM_CLOCK",
    "AppendResult",
    "BatchEntry",
    "Clock",
    "CommitLog",
    "CommitLogSettings",
    "ConsumeQueueSettings",
    "FlushDiskType",
    "FlushSettings",
    "GetMessageStatus",
    "GetResult",
    "IndexSettings",
    "MessageIllegalError",
    "MessageStore",
    "MessageToStore",
    "PropertiesTooLargeError",
    "PutResult",
    "PutStatus",
    "RecoveryReport",
    "RetentionSettings",
    "StoreCorruptionError",
    "StoreError",
    "StoreLockedError",
    "StoreSettings",
    "StoreUnavailableError",
    "SystemClock",
]
