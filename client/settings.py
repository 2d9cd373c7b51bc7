"""Client settings: frozen dataclasses grouped by concern, defaults as the Java 4.9.x client.

Each field says its unit, default and why. Tests shorten the intervals; applications rarely need
to touch anything here beyond what the producer/consumer constructors take.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shoal.client import limits
from shoal.protocol.acl_signature import Credentials
from shoal.remoting.tls import ClientTlsSettings


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """What every client (producer, consumer, admin) shares: transport, nameserver, heartbeats."""

    connect_timeout_s: float = 3.0
    """TCP connect timeout. Java NettyClientConfig.connectTimeoutMillis = 3000."""
    request_timeout_s: float = 3.0
    """Timeout of ordinary requests (routes, offsets, locks, admin). Java uses 3 s for most."""
    route_refresh_interval_s: float = 30.0
    """pollNameServerInterval: how often the routes of topics in use are fetched again."""
    heartbeat_interval_s: float = 30.0
    """heartbeatBrokerInterval: brokers drop clients not heard from for 120 s."""
    instance_name: str | None = None
    """The part of the client id after '@'; None: `<pid>#<nanos>` (Java's changeInstanceNameToPID)."""
    client_ip: str | None = None
    """The address in the client id and message ids; None: the host's outbound IPv4 address."""
    credentials: Credentials | None = None
    """ACL keys (RocketMQ plain ACL): when set, every request to brokers and NameServers is signed
    as Java's AclClientRPCHook signs it. None: requests go unsigned (brokers without aclEnable)."""
    tls: ClientTlsSettings = field(default_factory=ClientTlsSettings)
    """TLS to NameServers and brokers: `ClientTlsSettings(enable=True)` is the Java client's
    -Dtls.enable=true (any server certificate trusted, as RocketMQ's default test mode);
    auth_server + trust_cert_path check the chain. Off by default, as in Java."""

    def __post_init__(self) -> None:
        for name in ("connect_timeout_s", "request_timeout_s", "route_refresh_interval_s", "heartbeat_interval_s"):
            value = getattr(self, name)
            if not 0 < value <= limits.REQUEST_TIMEOUT_MAX_S:
                raise ValueError(f"{name} = {value} is outside (0, {limits.REQUEST_TIMEOUT_MAX_S}]")


@dataclass(frozen=True, slots=True)
class ProducerSettings:
    """Sending: retries, compression, the auto-create template."""

    retries_when_send_failed: int = 2
    """retryTimesWhenSendFailed: a failed synchronous send is tried this many more times."""
    compress_body_over_bytes: int = limits.COMPRESS_BODY_OVER_BYTES
    """compressMsgBodyOverHowmuch: single-message bodies this large or larger are zlib'd."""
    body_size_max_bytes: int = limits.MESSAGE_BODY_SIZE_MAX_BYTES
    """maxMessageSize: larger bodies are refused before sending (the broker would refuse them)."""
    default_topic: str = "TBW102"
    """createTopicKey: the template topic whose route is used for topics that have none yet."""
    default_topic_queue_nums: int = limits.DEFAULT_TOPIC_QUEUE_NUMS
    """defaultTopicQueueNums: how many queues an auto-created topic gets."""
    retry_another_broker_when_not_store_ok: bool = False
    """retryAnotherBrokerWhenNotStoreOK: a send answered FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or
    SLAVE_NOT_AVAILABLE (stored, but not as durably as asked) is sent again to another broker.
    Off by default, as in Java: the retry stores a duplicate."""
    send_latency_fault_enable: bool = False
    """sendLatencyFaultEnable (MQFaultStrategy): keep brokers that failed or answered slowly out of
    the queue choice for a while (`limits.SEND_NOT_AVAILABLE_DURATION_MS`). Off by default, as in
    Java: without it only the broker of the failed attempt is skipped by the retry."""

    def __post_init__(self) -> None:
        if not 0 <= self.retries_when_send_failed <= limits.SEND_RETRIES_MAX_COUNT:
            raise ValueError(f"retries_when_send_failed must be in [0, {limits.SEND_RETRIES_MAX_COUNT}]")
        if not 0 < self.body_size_max_bytes <= limits.MESSAGE_BODY_SIZE_MAX_BYTES:
            raise ValueError(f"body_size_max_bytes must be in (0, {limits.MESSAGE_BODY_SIZE_MAX_BYTES}]")
        if self.compress_body_over_bytes <= 0:
            raise ValueError("compress_body_over_bytes must be positive")


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """Push consumers: rebalance, pulling, flow control, offsets, locks, retries."""

    rebalance_interval_s: float = 20.0
    """rocketmq.client.rebalance.waitInterval; NOTIFY_CONSUMER_IDS_CHANGED also triggers one."""
    offset_persist_interval_s: float = 5.0
    """persistConsumerOffsetInterval: consumed offsets are written to the broker (or file)."""
    pull_suspend_timeout_ms: int = limits.BROKER_SUSPEND_MAX_MS
    """How long the broker may hold a pull that found nothing (long polling)."""
    pull_rpc_timeout_s: float = 30.0
    """CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND: a long-polled pull fails after this long without answer."""
    pull_delay_on_error_s: float = 1.0
    """pullTimeDelayMillsWhenException (4.9.7): wait after a failed pull."""
    pull_delay_on_flow_control_s: float = 0.5
    """When a queue's cache is full, the pull waits for consumption to free space, at most this long."""
    offset_moved_delay_s: float = 10.0
    """After OFFSET_ILLEGAL Java waits 10 s before pulling the queue again from the new offset."""
    cached_count_max_per_queue: int = limits.PROCESS_QUEUE_CACHED_COUNT_MAX
    """pullThresholdForQueue: pulls pause while this many messages of one queue are unconsumed."""
    cached_size_max_bytes_per_queue: int = limits.PROCESS_QUEUE_CACHED_SIZE_MAX_BYTES
    """pullThresholdSizeForQueue: the same in body bytes."""
    consume_concurrently_max_span: int = limits.CONSUME_CONCURRENTLY_MAX_SPAN
    """consumeConcurrentlyMaxSpan: pulls pause while cached offsets span more than this."""
    consume_concurrency: int = 20
    """consumeThreadMax: listener calls running at once (threads for a synchronous listener)."""
    local_retry_delay_s: float = 5.0
    """A message whose send-back failed is consumed again locally after this delay."""
    suspend_current_queue_s: float = 1.0
    """suspendCurrentQueueTimeMillis: orderly SUSPEND waits this long before the retry."""
    lock_interval_s: float = 20.0
    """rocketmq.client.rebalance.lockInterval: orderly queues are locked again this often."""
    lock_max_live_s: float = 30.0
    """rocketmq.client.rebalance.lockMaxLiveTime: a lock not renewed for this long is expired."""
    lock_retry_delay_s: float = 1.0
    """An orderly queue whose lock was refused is tried again after this delay."""
    shutdown_await_s: float = 10.0
    """How long shutdown waits for running listener calls before giving up on them."""

    def __post_init__(self) -> None:
        if not 0 <= self.pull_suspend_timeout_ms <= limits.BROKER_SUSPEND_MAX_MS * 4:
            raise ValueError("pull_suspend_timeout_ms is out of range")
        if not 0 < self.consume_concurrency <= limits.CONSUME_CONCURRENCY_MAX_COUNT:
            raise ValueError(f"consume_concurrency must be in [1, {limits.CONSUME_CONCURRENCY_MAX_COUNT}]")
        if not 0 < self.cached_count_max_per_queue <= limits.PROCESS_QUEUE_CACHED_COUNT_MAX * 50:
            raise ValueError("cached_count_max_per_queue is out of range")
        if self.pull_rpc_timeout_s < self.pull_suspend_timeout_ms / 1000 + limits.LONG_POLL_RESPONSE_MARGIN_S:
            raise ValueError("pull_rpc_timeout_s must exceed the suspend timeout by the broker's answer margin")
        if self.lock_interval_s >= self.lock_max_live_s:
            raise ValueError("lock_interval_s must be shorter than lock_max_live_s, or locks lapse")
