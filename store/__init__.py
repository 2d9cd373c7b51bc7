"""shoal.store: the RocketMQ 4.x compatible storage engine (CommitLog, ConsumeQueue, IndexFile).

Byte-compatible with RocketMQ 4.9's store directory (docs/formats.md); stdlib plus crc32c only.
`MessageStore` is the one face the broker uses: its parts (CommitLog, ConsumeQueues, index,
dispatch, flush and cleaning services) are private to it. Besides this package the broker and
the cli import only the value modules `message`, `metadata`, `json_files`, `settings`, `errors`
and `limits`, and the cli the offline `inspection` (pyproject.toml's contracts say so). The
record codec (`shoal.formats.record`) is what Spark reads with.
"""

from shoal.store.cleaning import disk_usage_ratio
from shoal.store.clock import SYSTEM_CLOCK, Clock, SystemClock
from shoal.store.errors import (
    MessageIllegalError,
    PropertiesTooLargeError,
    PutStatus,
    StoreCorruptionError,
    StoreError,
    StoreLockedError,
    StoreUnavailableError,
)
from shoal.store.message import (
    AppendResult,
    Arrivals,
    BatchEntry,
    DispatchListener,
    DispatchRequest,
    GetMessageStatus,
    GetResult,
    IndexAnswer,
    MessageToStore,
    PutResult,
    TagsCodeHook,
    TagsCodeRule,
)
from shoal.store.message_store import MessageStore
from shoal.store.offset_waiters import OffsetWaiters
from shoal.store.recovery import RecoveryReport, TruncationReport
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
    "Arrivals",
    "BatchEntry",
    "Clock",
    "CommitLogSettings",
    "ConsumeQueueSettings",
    "DispatchListener",
    "DispatchRequest",
    "FlushDiskType",
    "FlushSettings",
    "GetMessageStatus",
    "GetResult",
    "IndexAnswer",
    "IndexSettings",
    "MessageIllegalError",
    "MessageStore",
    "MessageToStore",
    "OffsetWaiters",
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
    "TagsCodeHook",
    "TagsCodeRule",
    "TruncationReport",
    "disk_usage_ratio",
]
