"""`shoal local` is for this machine only: every port it opens (NameServer, broker, VIP, HA,
metrics, gRPC) listens on 127.0.0.1, never on all interfaces."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.ports import free_broker_port, free_port

pytestmark = pytest.mark.slow

LOOPBACK_HEX = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it (little-endian hex)
MAPPED_LOOPBACK_HEX = "0000000000000000FFFF00000100007F"
"""::ffff:127.0.0.1 in /proc/net/tcp6: gRPC binds 127.0.0.1 on an IPv6 socket; still loopback only."""
LISTEN_STATE = "0A"


def listening_addresses(ports: set[int]) -> dict[int, set[str]]:
    """For each of `ports`, the local addresses of LISTEN sockets on it (hex, from /proc/net/tcp and tcp6)."""
    found: dict[int, set[str]] = {port: set() for port in ports}
    for table in (Path("/proc/net/tcp"), Path("/proc/net/tcp6")):
        if not table.exists():
            continue
        for line in table.read_text().splitlines()[1:]:
            fields = line.split()
            address, _, port_hex = fields[1].rpartition(":")
            port = int(port_hex, 16)
            if port in found and fields[3] == LISTEN_STATE:
                found[port].add(address)
    return found


def non_loopback_address() -> str | None:
    """An address of this machine other than loopback, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent, the kernel picks a source
            address = str(probe.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") else address


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc/net/tcp")
def test_shoal_local_listens_on_loopback_only(tmp_path: Path) -> None:
    """Goal: `shoal local` binds 127.0.0.1 on all six ports (the gRPC proxy's too). Method: start it, read the LISTEN
    sockets of its ports from /proc/net/tcp (each must be 127.0.0.1 only); where the machine has
    another address, connecting there to the broker port is refused."""
    namesrv_port, broker_port, grpc_port = free_port(), free_broker_port(), free_port()
    log_path = tmp_path / "local.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "shoal.cli.main",
                "local",
                "--data-dir",
                str(tmp_path / "data"),
                "--namesrv-port",
                str(namesrv_port),
                "--broker-port",
                str(broker_port),
                "--grpc-port",
                str(grpc_port),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(
            lambda: "local cluster up" in log_path.read_text() or process.poll() is not None, 60, 0.1, what="start"
        )
        assert process.poll() is None, log_path.read_text()
        ports = {namesrv_port, broker_port, broker_port - 2, broker_port + 1, broker_port + 100, grpc_port}
        addresses = listening_addresses(ports)
        loopback = {
            port: ({LOOPBACK_HEX} if MAPPED_LOOPBACK_HEX not in found else {MAPPED_LOOPBACK_HEX})
            for port, found in addresses.items()
        }
        assert addresses == loopback, log_path.read_text()[-3000:]
        other = non_loopback_address()
        if other is not None:
            with pytest.raises(OSError):
                socket.create_connection((other, broker_port), timeout=5).close()
    finally:
        process.terminate()
        process.wait(60)
