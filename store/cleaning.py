"""Retention: delete expired CommitLog segments, then the ConsumeQueue and index files they fed (spec §6).

A segment may go when it is older than `fileReservedTime` and the local hour is in `deleteWhen`,
or at any hour when the disk holding the store is fuller than `diskMaxUsedSpaceRatio` (or a
manual request). Deletion runs oldest first, never skips one, never deletes the newest segment,
and removes at most ten per round. Above `diskSpaceWarningLevelRatio` the store refuses writes
until space comes back.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from shoal.store import limits
from shoal.store.clock import Clock
from shoal.store.commitlog import CommitLog
from shoal.store.consume_queue_table import ConsumeQueueTable
from shoal.store.index_service import IndexService
from shoal.store.mapped_file import MappedFile
from shoal.store.service import ServiceThread
from shoal.store.settings import RetentionSettings

log = logging.getLogger(__name__)

DiskUsage = Callable[[Path], float]


def disk_usage_ratio(path: Path) -> float:
    """Use of the file system holding `path` as `df` reports it (see `usage_ratio`); -1 if unknown."""
    try:
        return usage_ratio(os.statvfs(path))
    except OSError:
        return -1.0


def usage_ratio(stat: os.statvfs_result) -> float:
    """`df`'s Use%: used / (used + available to unprivileged writers); -1 if unknown. Counting
    reserved blocks as used (total - avail) would call a file system with a large reservation
    nearly full while it is mostly empty."""
    used = stat.f_blocks - stat.f_bfree
    usable = used + stat.f_bavail
    return used / usable if usable > 0 else -1.0


@dataclass
class CleaningRound:
    commitlog_files_deleted: int = 0
    consume_queue_files_deleted: int = 0
    index_files_deleted: int = 0
    disk_usage_ratio: float = 0.0
    disk_full: bool = False
    forced: bool = False


class CleaningService(ServiceThread):
    name = "shoal-clean"

    def __init__(
        self,
        commitlog: CommitLog,
        consume_queues: ConsumeQueueTable,
        index: IndexService | None,
        settings: RetentionSettings,
        clock: Clock,
        *,
        disk_usage: DiskUsage = disk_usage_ratio,
    ) -> None:
        super().__init__()
        self.commitlog = commitlog
        self.consume_queues = consume_queues
        self.index = index
        self.settings = settings
        self.clock = clock
        self.disk_usage = disk_usage
        self.disk_full = False
        """True while usage is above the warning level: puts answer SERVICE_NOT_AVAILABLE."""
        self.manual_delete_rounds = 0
        self.last_round = CleaningRound()
        self.round_lock = threading.Lock()
        """Held by each round, and by whoever else removes ConsumeQueues (no two deleters of one file)."""

    def request_manual_delete(self, rounds: int = 20) -> None:
        """DELETE_EXPIRED_COMMITLOG: the next rounds delete expired files whatever the hour."""
        self.manual_delete_rounds = rounds
        self.wakeup()

    def check_disk(self) -> tuple[float, bool, bool]:
        """(usage ratio, clean immediately, space pressure); updates the disk-full flag.

        Above diskMaxUsedSpaceRatio expired files go at any hour (space pressure); above
        diskSpaceCleanForciblyRatio (or the warning level) files go even before they expire."""
        ratio = max(
            self.disk_usage(self.commitlog.queue.directory),
            self.disk_usage(self.consume_queues.directory),
        )
        settings = self.settings
        clean_now = False
        if ratio > settings.disk_space_warning_level_ratio:
            if not self.disk_full:
                log.error(
                    "disk usage %.1f%% is above %.0f%%: refusing writes until space is freed",
                    ratio * 100,
                    settings.disk_space_warning_level_ratio * 100,
                )
            self.disk_full = True
            clean_now = True
        else:
            if self.disk_full:
                log.warning("disk usage %.1f%%: accepting writes again", ratio * 100)
            self.disk_full = False
            clean_now = ratio > settings.disk_space_clean_forcibly_ratio
        return ratio, clean_now, clean_now or ratio > settings.disk_max_used_ratio

    def run_round(self) -> CleaningRound:
        """One cleaning round (what the service does every `cleanResourceInterval`)."""
        with self.round_lock:
            return self._run_round_locked()

    def _run_round_locked(self) -> CleaningRound:
        result = CleaningRound()
        ratio, clean_now, space_pressure = self.check_disk()
        result.disk_usage_ratio, result.disk_full = ratio, self.disk_full
        manual = self.manual_delete_rounds > 0
        if manual:
            self.manual_delete_rounds -= 1
        hour = time.localtime(self.clock.now_ms() / 1000).tm_hour
        time_up = hour in self.settings.delete_hours
        forced = clean_now and self.settings.clean_file_forcibly_enable
        result.forced = forced
        if time_up or space_pressure or manual:
            result.commitlog_files_deleted = self._delete_commitlog(forced)
        if result.commitlog_files_deleted:
            min_offset = self.commitlog.min_offset
            for queue in self.consume_queues:
                result.consume_queue_files_deleted += queue.delete_expired(min_offset)
            if self.index is not None:
                result.index_files_deleted = self.index.delete_expired(min_offset)
        self.last_round = result
        return result

    def _delete_commitlog(self, forced: bool) -> int:
        reserved_ms = self.settings.file_reserved_time_hours * 3600 * 1000
        now_ms = self.clock.now_ms()

        def expired(mapped: MappedFile) -> bool:
            return forced or now_ms >= mapped.last_modified_ms + reserved_ms

        interval_s = self.settings.delete_files_interval_ms / 1000
        count = 0
        while count < limits.DELETE_FILES_PER_RUN_MAX_COUNT:
            deleted = self.commitlog.queue.delete_first_files(expired, 1)
            if not deleted:
                break
            count += 1
            log.info(
                "deleted CommitLog segment %s (retention%s)",
                deleted[0].path.name,
                ", disk pressure" if forced else "",
            )
            # deleteCommitLogFilesInterval: unlinking a GiB-sized file is heavy work for the file
            # system, so spread a round's deletions out, as RocketMQ does; a stop cuts the pause short.
            if interval_s > 0 and not self.pause(interval_s):
                break
        return count

    def run_once(self) -> None:
        self.wait_for_running(self.settings.clean_resource_interval_ms / 1000)
        if not self.stopped:
            self.run_round()
