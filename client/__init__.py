"""shoal.client: producers, consumers and admin that talk to brokers over the remoting protocol.

asyncio at the core (`Producer`, `PushConsumer`, `PullConsumer`, `Admin`), with synchronous
facades for scripts (`BlockingProducer`, ...). Everything goes over the wire: this package never
imports the broker or the store. Errors form one tree rooted at `MQClientError` (see `errors`).
"""

from __future__ import annotations

from shoal.client.admin import Admin, Connection, ConsumerConnection, HaStatus, Promotion, QueueProgress, SlaveLink
from shoal.client.blocking import (
    BlockingAdmin,
    BlockingProducer,
    BlockingPullConsumer,
    BlockingPushConsumer,
    BlockingTransactionProducer,
)
from shoal.client.consume_service import ConsumeOrderlyStatus, ConsumeStatus, Listener
from shoal.client.credentials import Credentials
from shoal.client.errors import (
    ClientStateError,
    InvalidMessageError,
    InvalidSubscriptionError,
    MessageDecodeError,
    MQBrokerError,
    MQClientError,
    NoRouteError,
    NoWritableQueueError,
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
    UnsupportedCompressionError,
)
from shoal.client.message import Message, MessageExt, decode_messages, encode_batch
from shoal.client.producer import (
    MessageQueueSelector,
    Producer,
    SendResult,
    SendStatus,
    select_by_hash,
    select_by_random,
)
from shoal.client.pull import PullResult, PullStatus
from shoal.client.pull_consumer import PullConsumer
from shoal.client.push_consumer import PushConsumer
from shoal.client.rebalance import AllocateStrategy, allocate_averagely, allocate_averagely_by_circle
from shoal.client.settings import ClientSettings, ConsumerSettings, ProducerSettings
from shoal.client.subscription import Subscription
from shoal.client.transaction_producer import (
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)
from shoal.formats.message_id import (
    UniqueIdGenerator,
    create_uniq_id,
    decode_offset_msg_id,
    offset_msg_id,
    uniq_id_ip,
    uniq_id_nearly_time_ms,
)
from shoal.formats.topics import retry_topic
from shoal.protocol import ConsumeFromWhere, MessageModel, MessageQueue
from shoal.remoting.tls import ClientTlsSettings

__all__ = [
    "Admin",
    "AllocateStrategy",
    "BlockingAdmin",
    "BlockingProducer",
    "BlockingPullConsumer",
    "BlockingPushConsumer",
    "BlockingTransactionProducer",
    "ClientSettings",
    "ClientStateError",
    "ClientTlsSettings",
    "Connection",
    "ConsumeFromWhere",
    "ConsumeOrderlyStatus",
    "ConsumeStatus",
    "ConsumerConnection",
    "ConsumerSettings",
    "Credentials",
    "HaStatus",
    "InvalidMessageError",
    "InvalidSubscriptionError",
    "Listener",
    "LocalTransactionState",
    "MQBrokerError",
    "MQClientError",
    "Message",
    "MessageDecodeError",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageQueueSelector",
    "NoRouteError",
    "NoWritableQueueError",
    "Producer",
    "ProducerSettings",
    "Promotion",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "QueueProgress",
    "RemotingConnectError",
    "RemotingError",
    "RemotingTimeoutError",
    "SendResult",
    "SendStatus",
    "SlaveLink",
    "Subscription",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "UniqueIdGenerator",
    "UnsupportedCompressionError",
    "allocate_averagely",
    "allocate_averagely_by_circle",
    "create_uniq_id",
    "decode_messages",
    "decode_offset_msg_id",
    "encode_batch",
    "offset_msg_id",
    "retry_topic",
    "select_by_hash",
    "select_by_random",
    "uniq_id_ip",
    "uniq_id_nearly_time_ms",
]
