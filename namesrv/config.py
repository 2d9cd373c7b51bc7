"""NameServer settings from a RocketMQ-style `namesrv.conf` (Java properties, RocketMQ's key
names), each key checked at load as the broker's are (`shoal.remoting.settings`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from shoal.namesrv import limits
from shoal.remoting.settings import (
    ANY_TEXT,
    BOOLEAN,
    FILE_PATH_OR_EMPTY,
    HOST,
    INTERVAL_MS,
    PORT_OR_ANY,
    build_settings,
    max_connections_field,
    max_idle_field,
    partial_frame_timeout_field,
)
from shoal.remoting.tls import is_tls_key


@dataclass(frozen=True)
class NamesrvConfig:
    listen_port: int = field(default=9876, metadata={"java": "listenPort", "allowed": PORT_OR_ANY})
    listen_host: str = field(default="0.0.0.0", metadata={"java": "listenHost", "allowed": HOST})
    broker_expired_timeout_ms: int = field(
        default=limits.BROKER_EXPIRED_TIMEOUT_MS,
        metadata={"java": "brokerChannelExpiredTime", "allowed": INTERVAL_MS},
    )
    scan_interval_ms: int = field(
        default=10_000, metadata={"java": "scanNotActiveBrokerInterval", "allowed": INTERVAL_MS}
    )
    kv_config_path: str = field(default="", metadata={"java": "kvConfigPath", "allowed": ANY_TEXT})
    server_channel_max_idle_time_s: int = max_idle_field()
    server_channel_partial_frame_timeout_s: int = partial_frame_timeout_field()
    max_connections: int = max_connections_field()
    """The three connection settings mean what the broker's do."""
    acl_enable: bool = field(default=False, metadata={"java": "aclEnable", "allowed": BOOLEAN})
    """Shoal: REGISTER_BROKER and the other codes that change routes or this NameServer's config need
    a signed admin account of plain_acl.yml (`shoal.acl.NAMESRV_CHECKED_CODES`); route queries
    stay open. 4.9.7's NameServer checks nothing."""
    plain_acl_file: str = field(default="", metadata={"java": "plainAclFile", "allowed": FILE_PATH_OR_EMPTY})
    """As the broker's: empty means ${ROCKETMQ_HOME}/conf/plain_acl.yml."""


def load_namesrv_config(conf: Mapping[str, str]) -> tuple[NamesrvConfig, list[str]]:
    """NameServer settings from namesrv.conf keys, each checked (`ConfigError` as for the broker);
    the tls.* keys are `load_tls_config`'s."""
    config, unknown = build_settings(NamesrvConfig, {k: v for k, v in conf.items() if not is_tls_key(k)})
    return config, unknown
