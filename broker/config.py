"""Broker and NameServer settings from RocketMQ-style `broker.conf` / `namesrv.conf` files.

The files are Java properties (`key=value`, `#` comments). Keys keep RocketMQ's names; store keys
(`storePathRootDir`, `flushDiskType`, ...) go to `shoal.store.StoreSettings.from_broker_conf`.
Unknown keys are reported in `unknown_keys` and logged, never silently dropped.

Every key Shoal reads is checked at load against one declaration, an `Allowed` (the words an
error shows and a test of the parsed value): broker and NameServer keys carry theirs in their
field's metadata, store keys in `STORE_KEY_ALLOWED`. Relations between keys (haListenPort !=
listenPort, ...) are checked after. Any failure is a `ConfigError`, one line naming the key, the
value as written and what the key takes.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal.acl import limits as acl_limits
from shoal.broker import limits
from shoal.remoting import limits as remoting_limits
from shoal.remoting.settings import (
    BOOLEAN,
    FILE_OR_EMPTY,
    FILE_PATH_OR_EMPTY,
    HOST,
    HOST_OR_EMPTY,
    INTERVAL_MS,
    INTERVAL_OR_ZERO_MS,
    PORT_OR_ANY,
    Allowed,
    ConfigError,
    between,
    build_settings,
    is_address,
    java_split,
    load_tls_config,
    max_connections_field,
    max_idle_field,
    one_of,
    parse_properties,
    parse_settings,
    partial_frame_timeout_field,
)
from shoal.remoting.tls import TlsSettings, is_tls_key
from shoal.store import FlushDiskType, StoreSettings
from shoal.store import limits as store_limits
from shoal.store.settings import BROKER_CONF_KEYS as STORE_KEYS


class BrokerRole(enum.Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
DELAY_LEVELS_MAX_COUNT = 1_000
"""Levels map to SCHEDULE_TOPIC_XXXX queues; a table this long is surely a mistake."""
_DELAY_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """`messageDelayLevel` ("1s 5s ... 2h") as milliseconds per level (ScheduleMessageService.parseDelayLevel).

    RocketMQ accepts s/m/h/d; Shoal also accepts `ms` so tests and latency-sensitive users can
    use sub-second levels. A value Java would reject is a ValueError here too."""
    levels = []
    for token in text.split():
        unit = "ms" if token.endswith("ms") else token[-1:]
        factor = _DELAY_UNIT_MS.get(unit)
        number = token[: -len(unit)]
        if factor is None or not number.isdigit():
            raise ValueError(f"messageDelayLevel={text!r}: {token!r} is not a whole number with unit ms/s/m/h/d")
        levels.append(int(number) * factor)
    if not 1 <= len(levels) <= DELAY_LEVELS_MAX_COUNT:
        raise ValueError(f"messageDelayLevel={text!r}: give 1..{DELAY_LEVELS_MAX_COUNT} levels")
    return tuple(levels)


def _local_ip() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def _is_address_list(text: str) -> bool:
    return all(is_address(part) for part in java_split(text))


def _is_hour_list(text: str) -> bool:
    """deleteWhen as UtilAll.isItTimeToDo reads it: `;`-separated Integer.parseInt hours."""
    hours = java_split(text)
    return bool(hours) and all(len(h) <= 2 and h.isdigit() and int(h) <= 23 for h in hours)


def _is_delay_table(text: str) -> bool:
    try:
        parse_delay_levels(text)
    except ValueError:
        return False
    return True


_NAME = re.compile(rf"[%|a-zA-Z0-9_-]{{1,{limits.NAME_LENGTH_MAX}}}")  # RocketMQ's topic name rule

PORT_HA = between(-1, remoting_limits.PORT_MAX, note="-1: listenPort + 1, 0: any free port")
METRICS_PORT_OFFSET = 100
"""A broker's /metrics listens on listenPort + this unless metricsPort says otherwise."""
PORT_METRICS = between(-1, remoting_limits.PORT_MAX, note="-1: no metrics, 0: listenPort + 100")
PORT_FAST = between(-1, remoting_limits.PORT_MAX, note="-1: listenPort - 2, 0: no VIP channel")
PORT_GRPC = between(-1, remoting_limits.PORT_MAX, note="-1: no gRPC port, 0: any free port")
HA_INTERVAL_MS = between(limits.HA_INTERVAL_MIN_MS, remoting_limits.CONFIG_INTERVAL_MAX_MS, "ms")
NAME = Allowed(
    f"1..{limits.NAME_LENGTH_MAX} characters of [%|a-zA-Z0-9_-] (it is also a topic name)",
    lambda value: isinstance(value, str) and bool(_NAME.fullmatch(value)),
)
ADDRESS_LIST = Allowed(
    "';'-separated host:port addresses with ports 1..65535, e.g. 127.0.0.1:9876;10.0.0.2:9876",
    lambda value: isinstance(value, str) and _is_address_list(value),
)
ADDRESS_OR_EMPTY = Allowed(
    "host:port with a port 1..65535, or nothing to learn it from the NameServer",
    lambda value: isinstance(value, str) and (value.strip() == "" or is_address(value.strip())),
)
DELAY_TABLE = Allowed(
    f"1..{DELAY_LEVELS_MAX_COUNT} space-separated whole delays with a unit ms/s/m/h/d, e.g. 1s 5s 10s 2h",
    lambda value: isinstance(value, str) and _is_delay_table(value),
)
ACL_KEY = Allowed(
    f"nothing, or {acl_limits.ACL_KEY_LENGTH_MIN_EXCLUSIVE + 1}..{acl_limits.ACL_KEY_LENGTH_MAX} characters "
    "without blanks (RocketMQ's rule for ACL keys)",
    lambda value: (
        isinstance(value, str)
        and (value == "" or (acl_limits.ACL_KEY_LENGTH_MIN_EXCLUSIVE < len(value) <= acl_limits.ACL_KEY_LENGTH_MAX))
        and not any(character.isspace() for character in value)
    ),
)
PERMISSION = Allowed(
    "a permission: 6 (read and write), 4 (read only), 2 (write only) or 0, plus 1 to inherit",
    lambda value: type(value) is int and 0 <= value <= 7,
)


@dataclass(frozen=True)
class BrokerConfig:
    """Broker settings (RocketMQ BrokerConfig / NettyServerConfig names in `java_name`)."""

    broker_cluster_name: str = field(default="DefaultCluster", metadata={"java": "brokerClusterName", "allowed": NAME})
    broker_name: str = field(default="broker-a", metadata={"java": "brokerName", "allowed": NAME})
    broker_id: int = field(
        default=0,
        metadata={"java": "brokerId", "allowed": between(0, limits.JAVA_LONG_MAX, note="0: master, above 0: slave")},
    )
    broker_role: BrokerRole = field(
        default=BrokerRole.ASYNC_MASTER, metadata={"java": "brokerRole", "allowed": one_of(BrokerRole)}
    )
    namesrv_addr: str = field(default="127.0.0.1:9876", metadata={"java": "namesrvAddr", "allowed": ADDRESS_LIST})
    """`;`-separated NameServer addresses."""
    listen_port: int = field(default=10911, metadata={"java": "listenPort", "allowed": PORT_OR_ANY})
    listen_host: str = field(default="0.0.0.0", metadata={"java": "listenHost", "allowed": HOST})
    """Shoal: the interface to bind (RocketMQ binds all)."""
    fast_listen_port: int = field(default=-1, metadata={"java": "fastListenPort", "allowed": PORT_FAST})
    """Shoal: the VIP channel's port. -1: listenPort - 2, where RocketMQ 4.9.7 always listens and where
    clients with `com.rocketmq.sendMessageWithVIPChannel=true` send (they derive it from the
    registered address; any other port only helps behind a port mapping); 0: no VIP channel (such
    clients then fail to send). With listenPort 0 (any free port) -1 means none: clients could not
    derive it."""
    broker_ip1: str = field(default="", metadata={"java": "brokerIP1", "allowed": HOST_OR_EMPTY})
    """Address clients use to reach this broker; default: the host's address."""
    auto_create_topic_enable: bool = field(default=True, metadata={"java": "autoCreateTopicEnable", "allowed": BOOLEAN})
    enable_mixed_message_type: bool = field(
        default=False, metadata={"java": "enableMixedMessageType", "allowed": BOOLEAN}
    )
    """5.x: a topic may be created with `message.type=MIXED` (every message type on one topic)."""
    enable_topic_message_type_check: bool = field(
        default=True, metadata={"java": "enableTopicMessageTypeCheck", "allowed": BOOLEAN}
    )
    """RocketMQ 5's proxy key, for the gRPC port (grpcServerPort): a v5 client's send must match its
    topic's `message.type` (NORMAL when unset)."""
    auto_create_subscription_group: bool = field(
        default=True, metadata={"java": "autoCreateSubscriptionGroup", "allowed": BOOLEAN}
    )
    default_topic_queue_nums: int = field(
        default=8, metadata={"java": "defaultTopicQueueNums", "allowed": between(1, limits.TOPIC_QUEUES_MAX_COUNT)}
    )
    cluster_topic_enable: bool = field(default=True, metadata={"java": "clusterTopicEnable", "allowed": BOOLEAN})
    broker_topic_enable: bool = field(default=True, metadata={"java": "brokerTopicEnable", "allowed": BOOLEAN})
    broker_permission: int = field(default=6, metadata={"java": "brokerPermission", "allowed": PERMISSION})
    register_name_server_period_ms: int = field(
        default=30_000, metadata={"java": "registerNameServerPeriod", "allowed": INTERVAL_MS}
    )
    long_polling_enable: bool = field(default=True, metadata={"java": "longPollingEnable", "allowed": BOOLEAN})
    short_polling_time_ms: int = field(
        default=1_000, metadata={"java": "shortPollingTimeMills", "allowed": INTERVAL_MS}
    )
    flush_consumer_offset_interval_ms: int = field(
        default=5_000, metadata={"java": "flushConsumerOffsetInterval", "allowed": INTERVAL_MS}
    )
    notify_consumer_ids_changed_enable: bool = field(
        default=True, metadata={"java": "notifyConsumerIdsChangedEnable", "allowed": BOOLEAN}
    )
    enable_property_filter: bool = field(default=False, metadata={"java": "enablePropertyFilter", "allowed": BOOLEAN})
    """SQL92 subscriptions (`MessageSelector.bySql`); off, as in RocketMQ: such consumers fail to
    start ("The broker does not support consumer to filter message by SQL92"). docs/filters.md."""
    filter_support_retry: bool = field(default=False, metadata={"java": "filterSupportRetry", "allowed": BOOLEAN})
    """Also filter a group's %RETRY% messages by its SQL92 filter of their original topic (RocketMQ: false)."""
    region_id: str = field(default="DefaultRegion", metadata={"java": "regionId", "allowed": NAME})
    trace_on: bool = field(default=True, metadata={"java": "traceOn", "allowed": BOOLEAN})
    slave_read_enable: bool = field(default=False, metadata={"java": "slaveReadEnable", "allowed": BOOLEAN})
    channel_expired_timeout_ms: int = field(
        default=120_000, metadata={"java": "channelExpiredTimeout", "allowed": INTERVAL_MS}
    )
    server_channel_max_idle_time_s: int = max_idle_field()
    """A client connection with no read or write this long is closed (RocketMQ: 120 s)."""
    server_channel_partial_frame_timeout_s: int = partial_frame_timeout_field()
    """Shoal: a connection whose request frame is still incomplete this long after it began is closed."""
    metrics_port: int = field(default=0, metadata={"java": "metricsPort", "allowed": PORT_METRICS})
    """Shoal: HTTP port for /metrics and /healthz (0: listenPort + 100; -1: off)."""
    grpc_server_port: int = field(default=-1, metadata={"java": "grpcServerPort", "allowed": PORT_GRPC})
    """Shoal: also serve RocketMQ 5 clients (gRPC MessagingService) on this port from the broker's
    process, as RocketMQ 5's local proxy mode does (the key is its proxy's; -1: off). With
    tls.server.certPath set and tls.server.mode not disabled, the port speaks TLS only."""
    metrics_host: str = field(default="0.0.0.0", metadata={"java": "metricsHost", "allowed": HOST})
    """Shoal: the interface of the metrics/health port; all, so Prometheus and kubelet reach it from
    other hosts (`shoal local`: 127.0.0.1). docs/security.md §5."""
    metrics_token_file: str = field(default="", metadata={"java": "metricsTokenFile", "allowed": FILE_OR_EMPTY})
    """Shoal: a file holding a bearer token that /metrics then requires (`Authorization: Bearer ...`);
    /healthz stays open for probes. Empty: /metrics is open."""
    max_connections: int = max_connections_field()
    """Shoal: connections beyond this are closed at once (bounded resources)."""
    # --- replication (spec §9; shoal.broker.replication) ---
    ha_listen_port: int = field(default=-1, metadata={"java": "haListenPort", "allowed": PORT_HA})
    """Port of the HA listener: -1 = listenPort + 1 (RocketMQ's rule; any free port when listenPort is 0)."""
    ha_master_address: str = field(default="", metadata={"java": "haMasterAddress", "allowed": ADDRESS_OR_EMPTY})
    """A slave's master HA address (host:port); empty: learned from the NameServer at registration."""
    ha_send_heartbeat_interval_ms: int = field(
        default=limits.HA_HEARTBEAT_INTERVAL_DEFAULT_MS,
        metadata={"java": "haSendHeartbeatInterval", "allowed": HA_INTERVAL_MS},
    )
    ha_housekeeping_interval_ms: int = field(
        default=limits.HA_HOUSEKEEPING_INTERVAL_DEFAULT_MS,
        metadata={"java": "haHousekeepingInterval", "allowed": HA_INTERVAL_MS},
    )
    """An HA link silent this long is closed (master: no ack; Shoal slave: no frame)."""
    ha_transfer_batch_size_bytes: int = field(
        default=limits.HA_TRANSFER_BATCH_DEFAULT_BYTES,
        metadata={"java": "haTransferBatchSize", "allowed": between(1, limits.HA_TRANSFER_BATCH_MAX_BYTES, "bytes")},
    )
    ha_slave_fallbehind_max_bytes: int = field(
        default=limits.HA_SLAVE_FALLBEHIND_DEFAULT_BYTES,
        metadata={"java": "haSlaveFallbehindMax", "allowed": between(1, limits.JAVA_LONG_MAX, "bytes")},
    )
    """SYNC_MASTER answers SLAVE_NOT_AVAILABLE at once when the best slave is this far behind."""
    slave_timeout_ms: int = field(
        default=limits.HA_SLAVE_TIMEOUT_DEFAULT_MS, metadata={"java": "slaveTimeout", "allowed": HA_INTERVAL_MS}
    )
    """SYNC_MASTER: how long a send waits for a slave before FLUSH_SLAVE_TIMEOUT (4.9.3+)."""
    ha_reconnect_interval_ms: int = field(
        default=limits.HA_RECONNECT_INTERVAL_DEFAULT_MS,
        metadata={"java": "haReconnectInterval", "allowed": HA_INTERVAL_MS},
    )
    """Shoal: a slave retries a lost master link after this (RocketMQ: a fixed 5 s)."""
    slave_sync_interval_ms: int = field(
        default=limits.HA_SLAVE_SYNC_INTERVAL_DEFAULT_MS,
        metadata={"java": "slaveSyncInterval", "allowed": HA_INTERVAL_MS},
    )
    """Shoal: how often a slave copies topics, offsets and groups (RocketMQ: a fixed 10 s)."""
    ha_shoal_extension_enable: bool = field(
        default=True, metadata={"java": "haShoalExtensionEnable", "allowed": BOOLEAN}
    )
    """Shoal: epochs on the HA link (fencing, confirmed offset). Set false on a slave of a Java master."""
    message_delay_level: str = field(
        default=DEFAULT_MESSAGE_DELAY_LEVEL, metadata={"java": "messageDelayLevel", "allowed": DELAY_TABLE}
    )
    """Delay of each level (1-based), space-separated with units s/m/h/d (Shoal also takes ms).
    Level i parks messages in SCHEDULE_TOPIC_XXXX queue i-1 (spec §10.1)."""
    flush_delay_offset_interval_ms: int = field(
        default=10_000, metadata={"java": "flushDelayOffsetInterval", "allowed": INTERVAL_MS}
    )
    """How often delayOffset.json / timerOffset.json are written (RocketMQ: 10 s); also at shutdown."""
    timer_wheel_enable: bool = field(default=True, metadata={"java": "timerWheelEnable", "allowed": BOOLEAN})
    """RocketMQ 5's arbitrary delivery times (TIMER_DELIVER_MS, ...). Off: those properties are
    ignored and the message is delivered at once, as a 4.x broker does."""
    timer_max_delay_s: int = field(
        default=259_200, metadata={"java": "timerMaxDelaySec", "allowed": between(1, limits.TIMER_DELAY_MAX_S, "s")}
    )
    """A delivery time further ahead than this is refused (RocketMQ 5: 3 days)."""
    # --- transactions (spec §11; shoal.broker.transactions) ---
    transaction_timeout_ms: int = field(
        default=6_000, metadata={"java": "transactionTimeOut", "allowed": INTERVAL_OR_ZERO_MS}
    )
    """A half message this old (since its producer sent it) with no commit or rollback is checked
    back with a live producer of its group (CHECK_TRANSACTION_STATE). 6 s as RocketMQ."""
    transaction_check_interval_ms: int = field(
        default=60_000, metadata={"java": "transactionCheckInterval", "allowed": INTERVAL_MS}
    )
    """How often the check-back service looks for such half messages. 60 s as RocketMQ."""
    transaction_check_max: int = field(
        default=15, metadata={"java": "transactionCheckMax", "allowed": between(0, limits.TRANSACTION_CHECK_MAX_COUNT)}
    )
    """Checks per half message; then it goes to TRANS_CHECK_MAX_TIME_TOPIC (rolled back). 15 as RocketMQ."""
    store_reply_message_enable: bool = field(
        default=True, metadata={"java": "storeReplyMessageEnable", "allowed": BOOLEAN}
    )
    """Request-reply: also store each reply in its `<cluster>_REPLY_TOPIC` after pushing it to the
    requester (RocketMQ's default)."""
    trace_topic_enable: bool = field(default=False, metadata={"java": "traceTopicEnable", "allowed": BOOLEAN})
    """Create the message-trace topic (`msgTraceTopicName`, 1 queue) at start, as RocketMQ does;
    off, traced clients' records land in a topic auto-created through TBW102."""
    msg_trace_topic_name: str = field(
        default="RMQ_SYS_TRACE_TOPIC", metadata={"java": "msgTraceTopicName", "allowed": NAME}
    )
    reject_transaction_message: bool = field(
        default=False, metadata={"java": "rejectTransactionMessage", "allowed": BOOLEAN}
    )
    """Refuse half messages with NO_PERMISSION (RocketMQ's switch for brokers without transactions)."""
    # --- plain ACL (spec §14; shoal.acl, docs/security.md §2) ---
    acl_enable: bool = field(default=False, metadata={"java": "aclEnable", "allowed": BOOLEAN})
    """Check every request against plain_acl.yml (signature, permissions, admin codes), as RocketMQ."""
    plain_acl_file: str = field(default="", metadata={"java": "plainAclFile", "allowed": FILE_PATH_OR_EMPTY})
    """Shoal: where plain_acl.yml is; empty: ${ROCKETMQ_HOME}/conf/plain_acl.yml, RocketMQ's place.
    Reloaded within a second of a change; a file that does not parse keeps the last good rules."""
    access_key: str = field(default="", metadata={"java": "accessKey", "allowed": ACL_KEY})
    """Shoal: the account this broker signs its own requests with (registration with NameServers
    that have aclEnable, a slave's sync from its master). Empty: unsigned, as 4.9.7's broker."""
    secret_key: str = field(default="", metadata={"java": "secretKey", "allowed": ACL_KEY}, repr=False)

    def __post_init__(self) -> None:
        parse_delay_levels(self.message_delay_level)  # a bad table fails at load, naming the key
        if self.flush_delay_offset_interval_ms <= 0 or self.timer_max_delay_s <= 0:
            raise ValueError("flushDelayOffsetInterval and timerMaxDelaySec must be positive")

    @property
    def delay_levels_ms(self) -> tuple[int, ...]:
        """The delay of each level in milliseconds; index 0 is level 1."""
        return parse_delay_levels(self.message_delay_level)

    @property
    def namesrv_addresses(self) -> list[str]:
        return [part.strip() for part in self.namesrv_addr.split(";") if part.strip()]

    @property
    def advertised_address(self) -> str:
        host = self.broker_ip1 or _local_ip()
        return f"{host}:{self.listen_port}"

    @property
    def ha_address(self) -> str:
        host = self.broker_ip1 or _local_ip()
        return f"{host}:{self.listen_port + 1}"

    def fast_port_for(self, listen_port: int) -> int:
        """The VIP channel's port when the broker listens on `listen_port`; 0: none."""
        if self.fast_listen_port != -1:
            return self.fast_listen_port
        return listen_port - 2 if listen_port > 2 else 0

    @property
    def metrics_port_effective(self) -> int:
        """metricsPort, else listenPort + 100; any free port when listenPort is 0 (not port 100)."""
        if self.metrics_port != 0:
            return self.metrics_port
        return 0 if self.listen_port == 0 else self.listen_port + METRICS_PORT_OFFSET


def _check_broker_relations(config: BrokerConfig) -> None:
    """Rules between keys (RocketMQ's BrokerStartup checks and what our ports need)."""
    listen, ha, metrics = config.listen_port, config.ha_listen_port, config.metrics_port
    if config.broker_role is BrokerRole.SLAVE and config.broker_id <= 0:
        raise ConfigError(
            f"brokerId={config.broker_id} is not allowed with brokerRole=SLAVE: a slave's brokerId is above 0"
        )
    if ha > 0 and ha == listen:
        raise ConfigError(f"haListenPort={ha} is not allowed: it equals listenPort; give the HA listener its own port")
    if ha == -1 and listen == remoting_limits.PORT_MAX:
        raise ConfigError(f"listenPort={listen} leaves no port for HA (listenPort + 1): set haListenPort")
    if metrics == 0 and listen + METRICS_PORT_OFFSET > remoting_limits.PORT_MAX:
        raise ConfigError(
            f"listenPort={listen} leaves no port for metrics (listenPort + {METRICS_PORT_OFFSET}): "
            "set metricsPort, or -1 for none"
        )
    if metrics > 0 and metrics in (listen, ha):
        other = "listenPort" if metrics == listen else "haListenPort"
        raise ConfigError(f"metricsPort={metrics} is not allowed: it equals {other}; give metrics their own port")
    _check_fast_port(config)
    _check_grpc_port(config)
    if config.ha_send_heartbeat_interval_ms >= config.ha_housekeeping_interval_ms:
        raise ConfigError(
            f"haSendHeartbeatInterval={config.ha_send_heartbeat_interval_ms} is not allowed: it must be shorter "
            f"than haHousekeepingInterval={config.ha_housekeeping_interval_ms}, or idle HA links are closed"
        )
    if bool(config.access_key) != bool(config.secret_key):
        raise ConfigError("accessKey and secretKey go together: set both (the broker signs its requests) or neither")


def _check_grpc_port(config: BrokerConfig) -> None:
    """The gRPC port must be its own (the others' derived values as the broker binds them)."""
    grpc = config.grpc_server_port
    if grpc <= 0:
        return
    listen = config.listen_port
    ha = config.ha_listen_port if config.ha_listen_port != -1 else (listen + 1 if listen else 0)
    taken = {
        "listenPort": listen,
        "haListenPort": ha,
        "metricsPort": config.metrics_port_effective,
        "fastListenPort": config.fast_port_for(config.listen_port),
    }
    for key, port in taken.items():
        if port == grpc:
            raise ConfigError(f"grpcServerPort={grpc} is not allowed: it equals {key}; give gRPC its own port")


def _check_fast_port(config: BrokerConfig) -> None:
    """The VIP channel's port must exist and be its own."""
    listen, fast = config.listen_port, config.fast_port_for(config.listen_port)
    derived = " (listenPort - 2)" if config.fast_listen_port == -1 else ""
    if config.fast_listen_port == -1 and 0 < listen <= 2:
        raise ConfigError(
            f"listenPort={listen} leaves no port for the VIP channel (listenPort - 2): set fastListenPort, 0 for none"
        )
    others = {
        "listenPort": listen,
        "haListenPort": config.ha_listen_port if config.ha_listen_port != -1 else listen + 1,
        "metricsPort": config.metrics_port_effective,
    }
    taken = [name for name, port in others.items() if port > 0 and port == fast]
    if taken:
        raise ConfigError(
            f"fastListenPort={fast}{derived} is not allowed: it equals {taken[0]}; give the VIP channel its own "
            "port, or fastListenPort=0 for none"
        )


def _is_path_text(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != ""


def _is_finite_hours(value: Any) -> bool:
    return isinstance(value, float) and math.isfinite(value) and 0 <= value <= limits.FILE_RESERVED_TIME_MAX_HOURS


_PAGES_MAX = limits.MAPPED_FILE_SIZE_MAX_BYTES // store_limits.OS_PAGE_SIZE_BYTES
_CQ_UNIT_BYTES = store_limits.CONSUME_QUEUE_UNIT_SIZE_BYTES
PATH = Allowed("a directory path (not empty)", _is_path_text, parse=str)
PAGES = between(0, _PAGES_MAX, "pages of 4 KiB")

STORE_KEY_ALLOWED: dict[str, Allowed] = {
    "storePathRootDir": PATH,
    "storePathCommitLog": PATH,
    "mappedFileSizeCommitLog": between(
        store_limits.COMMITLOG_SEGMENT_SIZE_MIN_BYTES, limits.COMMITLOG_SEGMENT_SIZE_MAX_BYTES, "bytes"
    ),
    "maxMessageSize": between(1, store_limits.MESSAGE_BODY_SIZE_MAX_BYTES, "bytes"),
    "checkCRCOnRecover": BOOLEAN,
    "warmMapedFileEnable": BOOLEAN,
    "accessMessageInMemoryMaxRatio": between(0, 100, "percent"),
    "maxTransferBytesOnMessageInMemory": between(1, limits.JAVA_INT_MAX, "bytes"),
    "maxTransferCountOnMessageInMemory": between(1, limits.JAVA_INT_MAX, "messages"),
    "maxTransferBytesOnMessageInDisk": between(1, limits.JAVA_INT_MAX, "bytes"),
    "maxTransferCountOnMessageInDisk": between(1, limits.JAVA_INT_MAX, "messages"),
    "warmRateBytesPerSecond": between(0, limits.JAVA_LONG_MAX, "bytes/s", "0: as fast as the disk goes"),
    "mappedFileSizeConsumeQueue": between(_CQ_UNIT_BYTES, limits.MAPPED_FILE_SIZE_MAX_BYTES, "bytes"),
    "messageIndexEnable": BOOLEAN,
    "maxHashSlotNum": between(1, limits.MAPPED_FILE_SIZE_MAX_BYTES // store_limits.INDEX_HASH_SLOT_SIZE_BYTES),
    "maxIndexNum": between(2, limits.MAPPED_FILE_SIZE_MAX_BYTES // store_limits.INDEX_ENTRY_SIZE_BYTES),
    "flushDiskType": one_of(FlushDiskType),
    "flushIntervalCommitLog": INTERVAL_MS,
    "flushCommitLogLeastPages": PAGES,
    "flushCommitLogThoroughInterval": INTERVAL_OR_ZERO_MS,
    "syncFlushTimeout": INTERVAL_MS,
    "syncFlushInline": BOOLEAN,
    "transientStorePoolEnable": BOOLEAN,
    "transientStorePoolSize": between(0, limits.TRANSIENT_STORE_POOL_MAX_COUNT),
    "commitIntervalCommitLog": INTERVAL_MS,
    "commitCommitLogLeastPages": PAGES,
    "commitCommitLogThoroughInterval": INTERVAL_OR_ZERO_MS,
    "flushIntervalConsumeQueue": INTERVAL_MS,
    "flushConsumeQueueLeastPages": PAGES,
    "flushConsumeQueueThoroughInterval": INTERVAL_OR_ZERO_MS,
    "fileReservedTime": Allowed(f"a number of hours 0..{limits.FILE_RESERVED_TIME_MAX_HOURS}", _is_finite_hours),
    "deleteWhen": Allowed(
        "';'-separated hours of the day 0..23, e.g. 04 or 01;02",
        lambda value: isinstance(value, str) and _is_hour_list(value),
    ),
    "diskMaxUsedSpaceRatio": between(0, 100, "percent", "used as 10..95, as RocketMQ does"),
    "cleanResourceInterval": INTERVAL_MS,
    "deleteCommitLogFilesInterval": INTERVAL_OR_ZERO_MS,
    "cleanFileForciblyEnable": BOOLEAN,
}
"""One declaration per store key (the store parses them: `shoal.store.settings.BROKER_CONF_KEYS`)."""

assert STORE_KEY_ALLOWED.keys() == STORE_KEYS.keys(), "every store key needs its Allowed"


def _check_store_keys(conf: Mapping[str, str]) -> None:
    for key, raw in conf.items():
        allowed = STORE_KEY_ALLOWED[key]
        parse = allowed.parse or STORE_KEYS[key][2]
        if key == "mappedFileSizeConsumeQueue":
            parse = int  # checked in bytes; the store rounds it up to whole 20-byte units
        try:
            value = parse(raw.strip())
        except ValueError:
            raise allowed.refuse(key, raw) from None
        allowed.check(key, raw, value)


def _check_store_relations(settings: StoreSettings) -> None:
    size = settings.index.file_size_bytes
    if size > limits.MAPPED_FILE_SIZE_MAX_BYTES:
        raise ConfigError(
            f"maxHashSlotNum={settings.index.hash_slots} and maxIndexNum={settings.index.entries} make a {size}-byte "
            f"IndexFile: the most is {limits.MAPPED_FILE_SIZE_MAX_BYTES} bytes"
        )


@dataclass(frozen=True)
class BrokerSettings:
    broker: BrokerConfig
    store: StoreSettings
    unknown_keys: tuple[str, ...] = ()
    config_path: Path | None = None
    """The broker.conf read at start (`-c`); UPDATE_BROKER_CONFIG rewrites it, as RocketMQ does."""
    tls: TlsSettings = field(default_factory=TlsSettings)
    """The tls.* keys (RocketMQ's system properties, here in broker.conf) and the tls.config.file."""


EMBEDDED_BROKER_CONF = """\
# Shoal's embedded default broker.conf (RocketMQ key names).
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
brokerRole=ASYNC_MASTER
flushDiskType=ASYNC_FLUSH
namesrvAddr=127.0.0.1:9876
listenPort=10911
brokerIP1=127.0.0.1
autoCreateTopicEnable=true
deleteWhen=04
# MessageStoreConfig's 72 h, as the store and the operator (RocketMQ's sample conf/broker.conf says 48)
fileReservedTime=72
"""


def load_broker_settings(
    conf: Mapping[str, str], root_dir: Path | None = None, *, config_path: Path | None = None
) -> BrokerSettings:
    """Settings from broker.conf keys over the embedded defaults; store keys go to the store.

    Every key is checked against its `Allowed`, then the relations between keys: a `ConfigError`
    (one line: key, value, what is allowed) for the first problem."""
    merged = {**parse_properties(EMBEDDED_BROKER_CONF), **conf}
    tls = load_tls_config({k: v for k, v in merged.items() if is_tls_key(k)})
    broker_keys = {k: v for k, v in merged.items() if k not in STORE_KEYS and not is_tls_key(k)}
    store_keys = {k: v for k, v in merged.items() if k in STORE_KEYS}
    broker, unknown = build_settings(BrokerConfig, broker_keys)
    _check_broker_relations(broker)
    _check_store_keys(store_keys)
    if root_dir is None and "storePathRootDir" not in merged:
        root_dir = Path.home() / "store"
    try:
        store = StoreSettings.from_broker_conf(store_keys, root_dir=root_dir)
    except ValueError as error:  # the store's own relations (maxMessageSize vs segment size)
        raise ConfigError(str(error)) from None
    _check_store_relations(store)
    return BrokerSettings(broker, store, tuple(sorted(unknown)), config_path, tls)


def apply_conf_changes(
    broker: BrokerConfig, store: StoreSettings, changes: Mapping[str, str]
) -> tuple[BrokerConfig, StoreSettings]:
    """Copies of `broker` and `store` with broker.conf `changes` (known keys only) applied, each
    key and every relation checked as at load: a `ConfigError` for the first problem."""
    values, _unknown = parse_settings(BrokerConfig, changes)  # known keys only: the caller refuses the others
    try:
        new_broker = dataclasses.replace(broker, **values)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    _check_broker_relations(new_broker)
    store_changes = {key: raw for key, raw in changes.items() if key in STORE_KEYS}
    _check_store_keys(store_changes)
    replacements: dict[str, Any] = {}  # top-level fields (group "") and replaced groups
    groups: dict[str, dict[str, Any]] = {}
    for key, raw in store_changes.items():
        group, name, parse = STORE_KEYS[key]
        if group:
            groups.setdefault(group, {})[name] = parse(raw.strip())
        else:
            replacements[name] = parse(raw.strip())
    for group, named in groups.items():
        replacements[group] = dataclasses.replace(getattr(store, group), **named)
    try:
        new_store = store.with_changes(**replacements)
    except ValueError as error:  # the store's own relations (maxMessageSize vs segment size)
        raise ConfigError(str(error)) from None
    _check_store_relations(new_store)
    return new_broker, new_store
