"""What `shoal dashboard` is told on its command line."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from shoal.dashboard.limits import DEFAULT_HOST, DEFAULT_PORT, SAMPLE_INTERVAL_S


@dataclass(frozen=True, slots=True)
class DashboardSettings:
    namesrv: str
    """`host:port[;host:port]`: the NameServers of the cluster shown."""
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    acl_file: Path | None = None
    """plain_acl.yml whose accounts may log in; None: no login, everyone is admin (loopback only)."""
    access_key: str = ""
    secret_key: str = ""
    """The dashboard's own keys, for the background sampling of brokers with aclEnable."""
    sample_interval_s: float = SAMPLE_INTERVAL_S

    def __post_init__(self) -> None:
        if self.acl_file is None and not is_loopback(self.host):
            raise ValueError(
                f"refusing to serve on {self.host} without accounts: give --acl-file (plain_acl.yml) "
                "so that people log in, or bind a loopback address"
            )
        if not 0 < self.port < 65536:
            raise ValueError(f"port {self.port} is not in 1..65535")
        if self.sample_interval_s <= 0:
            raise ValueError("the sample interval must be positive")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
