"""Broker and NameServer settings from RocketMQ-style `broker.conf` / `namesrv.conf` files.

The files are Java properties (`key=value`, `#` comments). Keys keep RocketMQ's names; store keys
(`storePathRootDir`, `flushDiskType`, ...) go to `shoal.store.StoreSettings.from_broker_conf`.
Unknown keys are reported in `unknown_keys` and logged, never silently dropped.
"""

from __future__ import annotations

import enum
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from shoal.store import StoreSettings
from shoal.store.settings import BROKER_CONF_KEYS as STORE_KEYS


class BrokerRole(enum.Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


def parse_properties(text: str) -> dict[str, str]:
    """Java properties, the subset broker.conf files use: `key=value` or `key: value`, `#`/`!` comments."""
    result: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for separator in ("=", ":"):
            if separator in line:
                key, _, value = line.partition(separator)
                break
        else:
            raise ValueError(f"line {number}: {raw!r} is not key=value")
        result[key.strip()] = value.strip()
    return result


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


@dataclass(frozen=True)
class BrokerConfig:
    """Broker settings (RocketMQ BrokerConfig / NettyServerConfig names in `java_name`)."""

    broker_cluster_name: str = field(default="DefaultCluster", metadata={"java": "brokerClusterName"})
    broker_name: str = field(default="broker-a", metadata={"java": "brokerName"})
    broker_id: int = field(default=0, metadata={"java": "brokerId"})
    broker_role: BrokerRole = field(default=BrokerRole.ASYNC_MASTER, metadata={"java": "brokerRole"})
    namesrv_addr: str = field(default="127.0.0.1:9876", metadata={"java": "namesrvAddr"})
    """`;`-separated NameServer addresses."""
    listen_port: int = field(default=10911, metadata={"java": "listenPort"})
    listen_host: str = field(default="0.0.0.0", metadata={"java": "listenHost"})
    """Shoal: the interface to bind (RocketMQ binds all)."""
    broker_ip1: str = field(default="", metadata={"java": "brokerIP1"})
    """Address clients use to reach this broker; default: the host's address."""
    auto_create_topic_enable: bool = field(default=True, metadata={"java": "autoCreateTopicEnable"})
    auto_create_subscription_group: bool = field(default=True, metadata={"java": "autoCreateSubscriptionGroup"})
    default_topic_queue_nums: int = field(default=8, metadata={"java": "defaultTopicQueueNums"})
    cluster_topic_enable: bool = field(default=True, metadata={"java": "clusterTopicEnable"})
    broker_topic_enable: bool = field(default=True, metadata={"java": "brokerTopicEnable"})
    broker_permission: int = field(default=6, metadata={"java": "brokerPermission"})
    register_name_server_period_ms: int = field(default=30_000, metadata={"java": "registerNameServerPeriod"})
    long_polling_enable: bool = field(default=True, metadata={"java": "longPollingEnable"})
    short_polling_time_ms: int = field(default=1_000, metadata={"java": "shortPollingTimeMills"})
    flush_consumer_offset_interval_ms: int = field(default=5_000, metadata={"java": "flushConsumerOffsetInterval"})
    notify_consumer_ids_changed_enable: bool = field(default=True, metadata={"java": "notifyConsumerIdsChangedEnable"})
    region_id: str = field(default="DefaultRegion", metadata={"java": "regionId"})
    trace_on: bool = field(default=True, metadata={"java": "traceOn"})
    slave_read_enable: bool = field(default=False, metadata={"java": "slaveReadEnable"})
    channel_expired_timeout_ms: int = field(default=120_000, metadata={"java": "channelExpiredTimeout"})
    server_channel_max_idle_time_s: int = field(default=120, metadata={"java": "serverChannelMaxIdleTimeSeconds"})
    metrics_port: int = field(default=0, metadata={"java": "metricsPort"})
    """Shoal: HTTP port for /metrics and /healthz (0: listenPort + 100; -1: off)."""
    metrics_host: str = field(default="0.0.0.0", metadata={"java": "metricsHost"})
    max_connections: int = field(default=10_000, metadata={"java": "maxConnections"})
    """Shoal: connections beyond this are closed at once (bounded resources)."""
    # --- replication (spec §9; shoal.broker.replication) ---
    ha_listen_port: int = field(default=-1, metadata={"java": "haListenPort"})
    """Port of the HA listener: -1 = listenPort + 1 (RocketMQ's rule; any free port when listenPort is 0)."""
    ha_master_address: str = field(default="", metadata={"java": "haMasterAddress"})
    """A slave's master HA address (host:port); empty: learned from the NameServer at registration."""
    ha_send_heartbeat_interval_ms: int = field(default=5_000, metadata={"java": "haSendHeartbeatInterval"})
    ha_housekeeping_interval_ms: int = field(default=20_000, metadata={"java": "haHousekeepingInterval"})
    """An HA link silent this long is closed (master: no ack; Shoal slave: no frame)."""
    ha_transfer_batch_size_bytes: int = field(default=32 * 1024, metadata={"java": "haTransferBatchSize"})
    ha_slave_fallbehind_max_bytes: int = field(default=256 * 1024 * 1024, metadata={"java": "haSlaveFallbehindMax"})
    """SYNC_MASTER answers SLAVE_NOT_AVAILABLE at once when the best slave is this far behind."""
    slave_timeout_ms: int = field(default=3_000, metadata={"java": "slaveTimeout"})
    """SYNC_MASTER: how long a send waits for a slave before FLUSH_SLAVE_TIMEOUT (4.9.3+)."""
    ha_reconnect_interval_ms: int = field(default=5_000, metadata={"java": "haReconnectInterval"})
    """Shoal: a slave retries a lost master link after this (RocketMQ: a fixed 5 s)."""
    slave_sync_interval_ms: int = field(default=10_000, metadata={"java": "slaveSyncInterval"})
    """Shoal: how often a slave copies topics, offsets and groups (RocketMQ: a fixed 10 s)."""
    ha_shoal_extension_enable: bool = field(default=True, metadata={"java": "haShoalExtensionEnable"})
    """Shoal: epochs on the HA link (fencing, confirmed offset). Set false on a slave of a Java master."""
    message_delay_level: str = field(default=DEFAULT_MESSAGE_DELAY_LEVEL, metadata={"java": "messageDelayLevel"})
    """Delay of each level (1-based), space-separated with units s/m/h/d (Shoal also takes ms).
    Level i parks messages in SCHEDULE_TOPIC_XXXX queue i-1 (spec §10.1)."""
    flush_delay_offset_interval_ms: int = field(default=10_000, metadata={"java": "flushDelayOffsetInterval"})
    """How often delayOffset.json / timerOffset.json are written (RocketMQ: 10 s); also at shutdown."""
    timer_wheel_enable: bool = field(default=True, metadata={"java": "timerWheelEnable"})
    """RocketMQ 5's arbitrary delivery times (TIMER_DELIVER_MS, ...). Off: those properties are
    ignored and the message is delivered at once, as a 4.x broker does."""
    timer_max_delay_s: int = field(default=259_200, metadata={"java": "timerMaxDelaySec"})
    """A delivery time further ahead than this is refused (RocketMQ 5: 3 days)."""
    # --- transactions (spec §11; shoal.broker.transactions) ---
    transaction_timeout_ms: int = field(default=6_000, metadata={"java": "transactionTimeOut"})
    """A half message this old (since its producer sent it) with no commit or rollback is checked
    back with a live producer of its group (CHECK_TRANSACTION_STATE). 6 s as RocketMQ."""
    transaction_check_interval_ms: int = field(default=60_000, metadata={"java": "transactionCheckInterval"})
    """How often the check-back service looks for such half messages. 60 s as RocketMQ."""
    transaction_check_max: int = field(default=15, metadata={"java": "transactionCheckMax"})
    """Checks per half message; then it goes to TRANS_CHECK_MAX_TIME_TOPIC (rolled back). 15 as RocketMQ."""
    reject_transaction_message: bool = field(default=False, metadata={"java": "rejectTransactionMessage"})
    """Refuse half messages with NO_PERMISSION (RocketMQ's switch for brokers without transactions)."""

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

    @property
    def metrics_port_effective(self) -> int:
        return self.listen_port + 100 if self.metrics_port == 0 else self.metrics_port


@dataclass(frozen=True)
class NamesrvConfig:
    listen_port: int = field(default=9876, metadata={"java": "listenPort"})
    listen_host: str = field(default="0.0.0.0", metadata={"java": "listenHost"})
    broker_expired_timeout_ms: int = field(default=120_000, metadata={"java": "brokerChannelExpiredTime"})
    scan_interval_ms: int = field(default=10_000, metadata={"java": "scanNotActiveBrokerInterval"})
    kv_config_path: str = field(default="", metadata={"java": "kvConfigPath"})


def _convert(kind: Any, raw: str, key: str) -> Any:
    try:
        if kind is bool:
            lowered = raw.lower()
            if lowered not in ("true", "false"):
                raise ValueError("expected true or false")
            return lowered == "true"
        if kind is int:
            return int(raw)
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            return kind(raw)
        return raw
    except ValueError as exc:
        raise ValueError(f"{key}={raw!r}: {exc}") from None


_TYPES = {"bool": bool, "int": int, "str": str, "BrokerRole": BrokerRole}


def _build(cls: type[Any], conf: Mapping[str, str]) -> tuple[Any, list[str]]:
    by_java = {f.metadata["java"]: f for f in fields(cls)}
    values: dict[str, Any] = {}
    unknown: list[str] = []
    for key, raw in conf.items():
        spec = by_java.get(key)
        if spec is None:
            unknown.append(key)
            continue
        values[spec.name] = _convert(_TYPES.get(str(spec.type), str), raw, key)
    return cls(**values), unknown


@dataclass(frozen=True)
class BrokerSettings:
    broker: BrokerConfig
    store: StoreSettings
    unknown_keys: tuple[str, ...] = ()


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
fileReservedTime=48
"""


def load_broker_settings(conf: Mapping[str, str], root_dir: Path | None = None) -> BrokerSettings:
    """Settings from broker.conf keys over the embedded defaults; store keys go to the store."""
    merged = {**parse_properties(EMBEDDED_BROKER_CONF), **conf}
    broker_keys = {k: v for k, v in merged.items() if k not in STORE_KEYS}
    broker, unknown = _build(BrokerConfig, broker_keys)
    if root_dir is None and "storePathRootDir" not in merged:
        root_dir = Path.home() / "store"
    store = StoreSettings.from_broker_conf({k: v for k, v in merged.items() if k in STORE_KEYS}, root_dir=root_dir)
    return BrokerSettings(broker, store, tuple(sorted(unknown)))


def load_namesrv_config(conf: Mapping[str, str]) -> tuple[NamesrvConfig, list[str]]:
    config, unknown = _build(NamesrvConfig, conf)
    return config, unknown
