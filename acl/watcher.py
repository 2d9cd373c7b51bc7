"""Loads plain_acl.yml and reloads it when it changes (RocketMQ's AclFileWatchService), thin I/O.

The file is polled every `ACL_RELOAD_INTERVAL_S` (500 ms, as RocketMQ): a change of mtime, size or
inode (an editor's rename, a Kubernetes Secret's symlink swap) triggers a reload. A file that does
not parse keeps the last good rules and logs one line saying why (once per change, not per poll);
a file that disappears keeps them too. The first load at start raises instead: a broker with
aclEnable must not start without rules it can read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from shoal.acl import limits
from shoal.acl.plain_acl import AclFileError, AclRules, parse_plain_acl

__all__ = ["AclFileWatcher", "load_acl_file"]

log = logging.getLogger(__name__)

_Stamp = tuple[int, int, int]


def load_acl_file(path: Path) -> AclRules:
    """The rules in `path`; AclFileError naming the file when it is missing, too large or wrong."""
    try:
        size = path.stat().st_size
        if size > limits.ACL_FILE_SIZE_MAX_BYTES:
            raise AclFileError(f"{path}: {size} bytes, more than {limits.ACL_FILE_SIZE_MAX_BYTES}")
        data = path.read_bytes()
    except OSError as error:
        raise AclFileError(f"{path}: cannot read: {error.strerror or error}") from None
    try:
        return parse_plain_acl(data)
    except AclFileError as error:
        raise AclFileError(f"{path}: {error}") from None


def _stamp(path: Path) -> _Stamp | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size, status.st_ino


class AclFileWatcher:
    """Polls `path`; hands each good new set of rules to `on_rules`."""

    def __init__(self, path: Path, on_rules: Callable[[AclRules], None]) -> None:
        self.path = path
        self.on_rules = on_rules
        self.reloads_total = 0
        self.failed_reloads_total = 0
        self._stamp: _Stamp | None = None
        self._task: asyncio.Task[None] | None = None

    def load(self) -> AclRules:
        """First load (at start): raises AclFileError rather than running without rules."""
        self._stamp = _stamp(self.path)
        rules = load_acl_file(self.path)
        self.on_rules(rules)
        log.info(
            "ACL: %d accounts and %d global white addresses from %s",
            len(rules.accounts),
            len(rules.global_white),
            self.path,
        )
        return rules

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(limits.ACL_RELOAD_INTERVAL_S)
            try:
                self.poll()
            except Exception:  # never let the watcher die: the next change must still load
                log.exception("ACL: checking %s failed", self.path)

    def poll(self) -> bool:
        """Reload when the file changed; True when new rules were taken."""
        stamp = _stamp(self.path)
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        if stamp is None:
            log.warning("ACL: %s is gone; keeping the last rules", self.path)
            return False
        try:
            rules = load_acl_file(self.path)
        except AclFileError as error:
            self.failed_reloads_total += 1
            log.warning("ACL: keeping the last good rules: %s", error)
            return False
        self.on_rules(rules)
        self.reloads_total += 1
        log.info(
            "ACL: reloaded %s: %d accounts, %d global white addresses",
            self.path,
            len(rules.accounts),
            len(rules.global_white),
        )
        return True
