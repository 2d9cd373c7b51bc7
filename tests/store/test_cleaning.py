"""disk_usage_ratio: the file system's use as `df` reports it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from shoal.store.cleaning import disk_usage_ratio, usage_ratio

# statvfs_result fields: bsize, frsize, blocks, bfree, bavail, files, ffree, favail, flag, namemax
RESERVED_HEAVY = os.statvfs_result((4096, 4096, 1000, 900, 400, 0, 0, 0, 0, 255))


def test_reserved_blocks_do_not_count_as_used() -> None:
    """Goal: a mostly empty disk with a large root reservation is not "full".
    Method: 100 blocks used, 500 reserved, 400 free to users: df says 100 / (100 + 400) = 20 %."""
    assert usage_ratio(RESERVED_HEAVY) == 0.2


def test_an_empty_file_system_is_unknown() -> None:
    """Goal: no division by zero on a file system reporting no blocks. Method: all zero counts."""
    assert usage_ratio(os.statvfs_result((4096, 4096, 0, 0, 0, 0, 0, 0, 0, 255))) == -1.0


def test_disk_usage_agrees_with_df_use_percent(tmp_path: Path) -> None:
    """Goal: the live reading is df's Use%. Method: read both for the same file system; df rounds
    up to a whole percent, and another process may write in between, so one percent of slack."""
    ratio = disk_usage_ratio(tmp_path)
    output = subprocess.run(["df", "-P", str(tmp_path)], check=True, capture_output=True, text=True).stdout
    percent = int(output.splitlines()[-1].split()[4].rstrip("%"))
    assert percent - 2 <= ratio * 100 <= percent + 1


def test_unknown_path_gives_minus_one(tmp_path: Path) -> None:
    """Goal: an unreadable path is "unknown", not "full". Method: a path that does not exist."""
    assert disk_usage_ratio(tmp_path / "missing" / "dir") == -1.0
