"""Listening ports for the servers a bench starts: tests/ports.py's picker, loaded by path.

`bind(0)` hands out a port from the kernel's ephemeral range, where any outgoing connection (a sender's
local port, a JVM's) may take it between the pick and the server's bind, and a Shoal broker also binds
listenPort - 2 (its VIP channel), which `bind(0)` never checked. tests/ports.py picks below that range,
checks the neighbours a broker binds, and claims each pick in a directory every process on the machine
shares, so a bench that runs beside `make test` (tests/bench runs the benches in CI) cannot collide
with it either.
"""

from __future__ import annotations

import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

_PORTS: dict[str, Any] = runpy.run_path(str(Path(__file__).resolve().parents[1] / "tests" / "ports.py"))
free_port: Callable[[], int] = _PORTS["free_port"]
"""A port nobody listens on and no other picker holds."""
free_broker_port: Callable[[], int] = _PORTS["free_broker_port"]
"""A broker listenPort with listenPort - 2 (the VIP channel) and listenPort + 1 free and claimed too."""
