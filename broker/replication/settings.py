"""Replication settings, read from the broker.conf keys in `BrokerConfig` (RocketMQ's names where
it has them: haListenPort, haMasterAddress, haSendHeartbeatInterval, haHousekeepingInterval,
haTransferBatchSize, haSlaveFallbehindMax, slaveTimeout), in seconds and bytes."""

from __future__ import annotations

from dataclasses import dataclass

from shoal.broker.config import BrokerConfig
from shoal.broker.replication import limits

MIN_INTERVAL_MS = 10  # below this a heartbeat or housekeeping period is a typo, not a setting
HA_MASTER_ADDRESS_MIN_LENGTH = 6  # RocketMQ ignores a shorter haMasterAddress


@dataclass(frozen=True)
class HASettings:
    listen_port: int
    """-1: the remoting port + 1 (RocketMQ's fixed rule); 0: any free port."""
    master_address: str
    """haMasterAddress (host:port of the master's HA listener); '' = learn it from the NameServer."""
    heartbeat_interval_s: float
    housekeeping_interval_s: float
    reconnect_interval_s: float
    transfer_batch_bytes: int
    slave_fallbehind_max_bytes: int
    slave_timeout_s: float
    metadata_sync_interval_s: float
    extension_enable: bool

    @property
    def keepalive_interval_s(self) -> float:
        """How long we stay silent at most: a master then heartbeats, a slave reports (liveness.py)."""
        return min(self.heartbeat_interval_s, limits.KEEPALIVE_INTERVAL_MAX_S)

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> HASettings:
        for name in (
            "ha_send_heartbeat_interval_ms",
            "ha_housekeeping_interval_ms",
            "ha_reconnect_interval_ms",
            "slave_timeout_ms",
            "slave_sync_interval_ms",
        ):
            if getattr(config, name) < MIN_INTERVAL_MS:
                raise ValueError(f"{name}={getattr(config, name)} is below {MIN_INTERVAL_MS} ms")
        if config.ha_send_heartbeat_interval_ms >= config.ha_housekeeping_interval_ms:
            raise ValueError(
                "haSendHeartbeatInterval must be shorter than haHousekeepingInterval, or idle links are closed"
            )
        batch = config.ha_transfer_batch_size_bytes
        if not 0 < batch <= limits.TRANSFER_BATCH_MAX_BYTES:
            raise ValueError(f"haTransferBatchSize={batch} must be within 1..{limits.TRANSFER_BATCH_MAX_BYTES}")
        if not -1 <= config.ha_listen_port <= 65535:
            raise ValueError(f"haListenPort={config.ha_listen_port} is not a port")
        address = config.ha_master_address.strip()
        return cls(
            listen_port=config.ha_listen_port,
            master_address=address if len(address) >= HA_MASTER_ADDRESS_MIN_LENGTH else "",
            heartbeat_interval_s=config.ha_send_heartbeat_interval_ms / 1000,
            housekeeping_interval_s=config.ha_housekeeping_interval_ms / 1000,
            reconnect_interval_s=config.ha_reconnect_interval_ms / 1000,
            transfer_batch_bytes=batch,
            slave_fallbehind_max_bytes=config.ha_slave_fallbehind_max_bytes,
            slave_timeout_s=config.slave_timeout_ms / 1000,
            metadata_sync_interval_s=config.slave_sync_interval_ms / 1000,
            extension_enable=config.ha_shoal_extension_enable,
        )
