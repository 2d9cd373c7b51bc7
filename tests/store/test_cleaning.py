"""disk_usage_ratio: the file system's use as `df` reports it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from shoal.store.cleaning import disk_usage_ratio


def test_disk_usage_matches_df_use_percent(tmp_path: Path) -> None:
    """Goal: reserved blocks do not count as used (a mostly empty disk is not "full").
    Method: compare with `df`'s Use% for the same file system (it rounds up to whole percent)."""
    ratio = disk_usage_ratio(tmp_path)
    stat = os.statvfs(tmp_path)
    used = stat.f_blocks - stat.f_bfree
    assert ratio == used / (used + stat.f_bavail)
    output = subprocess.run(["df", "-P", str(tmp_path)], check=True, capture_output=True, text=True).stdout
    percent = int(output.splitlines()[-1].split()[4].rstrip("%"))
    assert percent - 1 <= ratio * 100 <= percent


def test_unknown_path_gives_minus_one(tmp_path: Path) -> None:
    """Goal: an unreadable path is "unknown", not "full". Method: a path that does not exist."""
    assert disk_usage_ratio(tmp_path / "missing" / "dir") == -1.0
