"""broker_image/entrypoint.sh: broker.conf rendering by ordinal, and the store marker checks."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ENTRYPOINT = Path(__file__).resolve().parents[2] / "broker_image" / "entrypoint.sh"
pytestmark = pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX sh")


def _run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "SHOAL_UID": str(os.getuid()),
        "SHOAL_RENDERED_DIR": str(tmp_path / "rendered"),
        "SHOAL_CONFIG_DIR": str(tmp_path / "config"),
        "SHOAL_STORE_DIR": str(tmp_path / "store"),
    }
    return subprocess.run(
        ["sh", str(ENTRYPOINT), *args], env={**base, **env}, capture_output=True, text=True, check=False
    )


def test_broker_conf_takes_the_role_of_the_hostname_ordinal(tmp_path: Path) -> None:
    """Pod orders-g0-1 gets the shared keys, broker-1.conf and brokerIP1 from POD_IP."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "broker.conf").write_text("brokerName=orders-g0\n")
    (config / "broker-0.conf").write_text("brokerId=0\nbrokerRole=SYNC_MASTER\n")
    (config / "broker-1.conf").write_text("brokerId=1\nbrokerRole=SLAVE\n")
    result = _run(tmp_path, "render-broker-conf", POD_NAME="orders-g0-1", POD_IP="10.0.0.7")
    assert result.returncode == 0, result.stderr
    text = Path(result.stdout.strip()).read_text()
    assert text == "brokerName=orders-g0\n# ordinal 1\nbrokerId=1\nbrokerRole=SLAVE\nbrokerIP1=10.0.0.7\n"
    missing = _run(tmp_path, "render-broker-conf", POD_NAME="orders-g0-5")
    assert missing.returncode != 0 and "broker-5.conf" in missing.stderr


def test_store_marker_is_written_then_checked(tmp_path: Path) -> None:
    """An empty store gets a marker; the same cluster passes again; another cluster is refused."""
    store = tmp_path / "store"
    store.mkdir()
    env = {"POD_NAME": "orders-g0-0", "SHOAL_CLUSTER_UID": "uid-a", "SHOAL_GROUP": "orders-g0"}
    first = _run(tmp_path, "prepare-store", **env)
    assert first.returncode == 0, first.stderr
    assert (store / ".shoal-store").read_text() == "cluster-uid=uid-a\ngroup=orders-g0\nordinal=0\nformat=1\n"
    assert _run(tmp_path, "prepare-store", **env).returncode == 0
    other = _run(tmp_path, "prepare-store", **{**env, "SHOAL_CLUSTER_UID": "uid-b"})
    assert other.returncode != 0 and "another cluster" in other.stderr


def test_store_with_data_but_no_marker_is_refused(tmp_path: Path) -> None:
    """A directory holding files without a marker is never adopted."""
    store = tmp_path / "store"
    (store / "commitlog").mkdir(parents=True)
    result = _run(tmp_path, "prepare-store", POD_NAME="orders-g0-0", SHOAL_CLUSTER_UID="u", SHOAL_GROUP="orders-g0")
    assert result.returncode != 0 and "refusing to adopt" in result.stderr


def test_cleanup_removes_only_a_store_marked_for_the_cluster(tmp_path: Path) -> None:
    """cleanup-store (reclaimPolicy Delete) removes this cluster's directory, refuses another
    cluster's or an unmarked one, and succeeds when the directory is already gone."""
    store = tmp_path / "store"
    (store / "commitlog").mkdir(parents=True)
    unmarked = _run(tmp_path, "cleanup-store", SHOAL_CLUSTER_UID="uid-a")
    assert unmarked.returncode != 0 and "has no" in unmarked.stderr and store.exists()
    (store / ".shoal-store").write_text("cluster-uid=uid-b\ngroup=orders-g0\nordinal=0\nformat=1\n")
    foreign = _run(tmp_path, "cleanup-store", SHOAL_CLUSTER_UID="uid-a")
    assert foreign.returncode != 0 and "belongs to cluster uid-b" in foreign.stderr and store.exists()
    removed = _run(tmp_path, "cleanup-store", SHOAL_CLUSTER_UID="uid-b")
    assert removed.returncode == 0, removed.stderr
    assert not store.exists()
    again = _run(tmp_path, "cleanup-store", SHOAL_CLUSTER_UID="uid-b")
    assert again.returncode == 0 and "already gone" in again.stdout
