"""What the configured file sizes need from the disk, said once at start-up.

A CommitLog segment (`mappedFileSizeCommitLog`, 1 GiB), an IndexFile (`maxHashSlotNum`,
`maxIndexNum`: about 420 MiB) and a ConsumeQueue file per queue (`mappedFileSizeConsumeQueue`,
5.7 MiB) are each allocated whole when first needed. On a small volume the first one that does not
fit stops writes (issue 25: on 64 MiB only one message fit, because the default IndexFile did
not), so the broker says at start what the sizes need and what the disk has.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from shoal.store.settings import StoreSettings

log = logging.getLogger(__name__)

MIB = 1024 * 1024


def space_needed(settings: StoreSettings) -> list[tuple[str, int]]:
    """(what, bytes) for each file kind the store allocates whole, with its setting's name."""
    needs = [
        ("a CommitLog segment (mappedFileSizeCommitLog)", settings.commitlog.segment_size_bytes),
        ("a ConsumeQueue file per queue (mappedFileSizeConsumeQueue)", settings.consume_queue.file_size_bytes),
    ]
    if settings.index.enabled:
        needs.append(("an IndexFile (maxHashSlotNum, maxIndexNum)", settings.index.file_size_bytes))
    return needs


def space_report(settings: StoreSettings, free_bytes: int) -> tuple[int, str]:
    """(log level, one line): WARNING when the next file of each kind would not fit together."""
    needs = space_needed(settings)
    total = sum(size for _what, size in needs)
    sizes = ", ".join(f"{what} {size / MIB:.1f} MiB" for what, size in needs)
    if free_bytes < total:
        return logging.WARNING, (
            f"store space: {free_bytes / MIB:.1f} MiB free under {settings.root_dir}, less than the "
            f"{total / MIB:.1f} MiB one more file of each kind needs ({sizes}); writes will be refused "
            "when a file that does not fit is needed: give the store more space or lower those settings"
        )
    return logging.INFO, f"store space: {free_bytes / MIB:.1f} MiB free under {settings.root_dir}; {sizes}"


def free_bytes_under(path: Path) -> int:
    """Bytes an unprivileged writer may still allocate on the file system holding `path`."""
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def log_space(settings: StoreSettings) -> None:
    """Log `space_report` for the file system holding the CommitLog (the store's largest files)."""
    try:
        free = free_bytes_under(settings.commitlog_dir if settings.commitlog_dir.exists() else settings.root_dir)
    except OSError as error:
        log.warning("store space: cannot stat %s: %s", settings.root_dir, error)
        return
    level, line = space_report(settings, free)
    log.log(level, "%s", line)
