"""Real resource limits for test processes: cgroup v1 blkio throttles and memory limits.

    with blkio_cgroup("slow-disk") as group:
        group.throttle_writes(device_of(path), 64 * 1024)
        group.add(process.pid)

The kernel enforces them, so a test sees what a slow disk or a small memory limit really does to
a broker (issue 25: an fdatasync that takes seconds; a store several times the memory limit).
Needs root and a cgroup v1 hierarchy (these machines have both); `unavailable_reason()` names what
is missing so the tests that need it skip with that reason, and CI (root) never skips.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
GROUP_PREFIX = "shoal-test-"
EMPTY_TIMEOUT_S = 10.0
"""A group is removed once its processes are gone; they normally leave within milliseconds."""


def unavailable_reason(controller: str) -> str | None:
    """Why a `controller` (blkio, memory) group cannot be made here, or None when it can."""
    if os.geteuid() != 0:
        return f"cgroup {controller} limits need root (running as uid {os.geteuid()})"
    if not (CGROUP_ROOT / controller / "cgroup.procs").exists():
        return f"no cgroup v1 {controller} hierarchy at {CGROUP_ROOT / controller}"
    return None


def device_of(path: Path) -> str:
    """'major:minor' of the whole disk holding `path` (blkio throttles whole disks, not partitions)."""
    st_dev = path.stat().st_dev
    node = Path(f"/sys/dev/block/{os.major(st_dev)}:{os.minor(st_dev)}")
    if (node / "partition").exists():
        return (node.resolve().parent / "dev").read_text().strip()
    return f"{os.major(st_dev)}:{os.minor(st_dev)}"


@dataclass
class Group:
    """One cgroup v1 directory of one controller."""

    path: Path

    def add(self, pid: int) -> None:
        """Move a process (all its threads) into the group."""
        (self.path / "cgroup.procs").write_text(str(pid))

    def write(self, name: str, value: str) -> None:
        (self.path / name).write_text(value)

    def read(self, name: str) -> str:
        return (self.path / name).read_text()

    def throttle_writes(self, device: str, bytes_per_s: int) -> None:
        """blkio: at most `bytes_per_s` written to `device` by the group's processes (0: no limit)."""
        self.write("blkio.throttle.write_bps_device", f"{device} {bytes_per_s}")

    def limit_memory(self, limit_bytes: int) -> None:
        """memory: RSS plus page cache charged to the group stays under `limit_bytes` (swap too)."""
        self.write("memory.limit_in_bytes", str(limit_bytes))
        with contextlib.suppress(OSError):  # no swap accounting on this kernel: nothing to cap
            self.write("memory.memsw.limit_in_bytes", str(limit_bytes))


@contextlib.contextmanager
def cgroup(controller: str, name: str) -> Iterator[Group]:
    """A fresh group under `controller`; afterwards its processes go back to the root group and it
    is removed (a test that failed half-way must not leave a throttle behind)."""
    reason = unavailable_reason(controller)
    assert reason is None, reason
    path = CGROUP_ROOT / controller / f"{GROUP_PREFIX}{name}-{os.getpid()}"
    path.mkdir()
    try:
        yield Group(path)
    finally:
        _remove(path, CGROUP_ROOT / controller)


def _remove(path: Path, root: Path) -> None:
    deadline = time.monotonic() + EMPTY_TIMEOUT_S
    while True:
        pids = [pid for pid in (path / "cgroup.procs").read_text().split() if pid]
        for pid in pids:
            with contextlib.suppress(OSError):  # the process exited meanwhile
                (root / "cgroup.procs").write_text(pid)
        try:
            path.rmdir()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
