"""shoal.broker.replication: master/slave replication with RocketMQ 4.9's HA protocol (spec §9),
SYNC_MASTER acks, slave metadata sync, and Shoal's epoch-fenced promotion (docs/replication.md).

`ReplicationService` is what the BrokerController wires; the codec is pure and reusable.
"""

from shoal.broker.replication.codec import (
    EpochEntry,
    Hello,
    MasterState,
    RecordAligner,
    SlaveStreamDecoder,
    TransferDecoder,
    TransferFrame,
)
from shoal.broker.replication.epoch import EpochFile, EpochState, divergence_offset
from shoal.broker.replication.errors import (
    HAProtocolError,
    OffsetMismatchError,
    PromotionRefusedError,
    ReplicationError,
    StaleEpochError,
)
from shoal.broker.replication.service import ReplicatedBroker, ReplicationService
from shoal.broker.replication.settings import HASettings

__all__ = [
    "EpochEntry",
    "EpochFile",
    "EpochState",
    "HAProtocolError",
    "HASettings",
    "Hello",
    "MasterState",
    "OffsetMismatchError",
    "PromotionRefusedError",
    "RecordAligner",
    "ReplicatedBroker",
    "ReplicationError",
    "ReplicationService",
    "SlaveStreamDecoder",
    "StaleEpochError",
    "TransferDecoder",
    "TransferFrame",
    "divergence_offset",
]
