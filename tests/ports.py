"""Listening ports for test servers, unique across every pytest process on the machine.

`make test` runs two pytest processes side by side (tests/interop/java beside the rest), and
importlib mode may load tests/conftest.py twice in one process, so an in-memory set of handed-out
ports cannot stop two pickers from choosing the same port before either server binds it (CI saw
RocketMQ's HA port taken that way: `BindException: Address already in use`). Two rules close that:

- Ports come from below the kernel's ephemeral range, so no outgoing connection (a client's local
  port) and no `bind(0)` elsewhere can take a port between its pick and its bind.
- A pick is claimed by creating a file named after the port in a directory shared by all processes
  (O_EXCL: exactly one creator wins). A claim older than CLAIM_TTL_S may be taken again: by then its
  server has bound it (and a bound port fails the bind probe) or never will. Taking one over holds
  an flock on the directory's lock file, so two takers of one stale claim cannot both win.

A broker's four ports (listenPort - 2, listenPort, listenPort + 1 and its /metrics on listenPort +
METRICS_PORT_OFFSET) all lie in the range: its listenPort is drawn from [PICK_LOW_PORT + 2, ephemeral
low - METRICS_PORT_OFFSET). CI once lost a run to a metrics port left unclaimed in the ephemeral range:
an outgoing connection held it when the broker came to bind. Claims a pick does not keep are
released at once, so a busy machine's failed probes do not fill the range.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
import time
from pathlib import Path

from shoal.broker.config import METRICS_PORT_OFFSET

PICK_LOW_PORT = 20_000
"""Lowest port handed out; the range ends below the ephemeral range's first port."""
EPHEMERAL_LOW_FALLBACK_PORT = 32_768  # Linux's default when /proc does not say
CLAIM_TTL_S = 600.0
"""A claim older than this is stale: servers bind their ports within seconds of the pick."""
PICK_ATTEMPTS_MAX_COUNT = 5_000
CLAIMS_DIR = Path(tempfile.gettempdir()) / f"shoal-test-ports-{os.getuid()}"
TAKEOVER_LOCK_NAME = ".takeover.lock"  # not a port number: no claim is ever named so
_RANDOM = random.Random()  # its own generator: tests that seed the module's do not make picks repeat


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return EPHEMERAL_LOW_FALLBACK_PORT


def bindable(port: int) -> bool:
    """Nobody listens on `port`, on 127.0.0.1 or on every interface (RocketMQ binds 0.0.0.0)."""
    for host in ("0.0.0.0", "127.0.0.1"):
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                return False
    return True


def _create(path: Path) -> bool:
    """Create `path`; False when it exists (O_EXCL: of two creators exactly one wins)."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    return True


def claim(port: int) -> bool:
    """Take `port` for this process unless another claim on it is live; True when taken."""
    CLAIMS_DIR.mkdir(parents=True, exist_ok=True)
    path = CLAIMS_DIR / str(port)
    if _create(path):
        return True
    fd = os.open(CLAIMS_DIR / TAKEOVER_LOCK_NAME, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # one taker at a time: else two could each see the stale
        try:  # claim, the second unlinking the claim the first had just made, and both win
            if time.time() - path.stat().st_mtime < CLAIM_TTL_S:
                return False
            path.unlink()
        except FileNotFoundError:
            pass
        return _create(path)
    finally:
        os.close(fd)  # releases the flock


def release(port: int) -> None:
    """Give back a claim this process made and does not use."""
    (CLAIMS_DIR / str(port)).unlink(missing_ok=True)


def _free_port_in(low: int, high: int) -> int:
    """A port in [low, high) nobody listens on and no other picker holds, claimed."""
    for _ in range(PICK_ATTEMPTS_MAX_COUNT):
        port = _RANDOM.randrange(low, high)
        if claim(port):
            if bindable(port):
                return port
            release(port)
    raise AssertionError(f"no free port in [{low}, {high}) after {PICK_ATTEMPTS_MAX_COUNT} tries")


def free_port() -> int:
    """A port nobody listens on and no other picker holds, in [PICK_LOW_PORT, ephemeral low)."""
    return _free_port_in(PICK_LOW_PORT, _ephemeral_low())


def free_broker_port() -> int:
    """A broker listenPort whose listenPort - 2 (the VIP channel), listenPort + 1 (RocketMQ's HA
    port) and listenPort + METRICS_PORT_OFFSET (Shoal's /metrics) are claimed and free too; all four
    in [PICK_LOW_PORT, ephemeral low)."""
    low, high = PICK_LOW_PORT + 2, _ephemeral_low() - METRICS_PORT_OFFSET
    for _ in range(PICK_ATTEMPTS_MAX_COUNT):
        port = _free_port_in(low, high)
        kept = [port]
        for neighbour in (port - 2, port + 1, port + METRICS_PORT_OFFSET):
            if not claim(neighbour):
                break
            kept.append(neighbour)
            if not bindable(neighbour):
                break
        else:
            return port
        for claimed in kept:
            release(claimed)
    raise AssertionError(f"no free port p with p-2 and p+1 free after {PICK_ATTEMPTS_MAX_COUNT} tries")
