"""The plain_acl.yml watcher: loads at start (raising on a bad file), reloads on change, keeps the
last good rules through a bad or deleted file."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.acl import AclFileError, AclRules
from shoal.acl.watcher import AclFileWatcher

GOOD = "accounts:\n  - {accessKey: firstKey, secretKey: firstSecret}\n"
BETTER = "accounts:\n  - {accessKey: secondKey, secretKey: secondSecret}\n"


def test_load_raises_on_a_missing_or_bad_file(tmp_path: Path) -> None:
    """Start-up never runs without rules: a missing file and a non-YAML one both raise, naming the file."""
    seen: list[AclRules] = []
    with pytest.raises(AclFileError, match="cannot read"):
        AclFileWatcher(tmp_path / "none.yml", seen.append).load()
    bad = tmp_path / "bad.yml"
    bad.write_text("accounts: [")
    with pytest.raises(AclFileError, match=r"bad\.yml: not YAML"):
        AclFileWatcher(bad, seen.append).load()
    assert not seen


def test_poll_reloads_changes_and_keeps_rules_through_bad_and_missing_files(tmp_path: Path) -> None:
    """A changed file is taken; a broken one, then a deleted one, leave the last good rules."""
    path = tmp_path / "plain_acl.yml"
    path.write_text(GOOD)
    seen: list[AclRules] = []
    watcher = AclFileWatcher(path, seen.append)
    watcher.load()
    assert not watcher.poll(), "unchanged"
    path.write_text(BETTER + "\n")  # another size: a change even within one mtime tick
    assert watcher.poll() and list(seen[-1].accounts) == ["secondKey"]
    path.write_text("accounts: [\n")
    assert not watcher.poll() and watcher.failed_reloads_total == 1
    path.unlink()
    assert not watcher.poll()
    assert list(seen[-1].accounts) == ["secondKey"] and len(seen) == 2
    path.write_text(GOOD)
    assert watcher.poll() and list(seen[-1].accounts) == ["firstKey"]
