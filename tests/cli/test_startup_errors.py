"""`shoal broker` / `shoal namesrv` that cannot start say why in one line (issue 12 item 7).

Each test starts the real command as a subprocess and checks: a non-zero exit, exactly one line
on stderr, no traceback, and that the line names the problem (the key, the port, the holder)."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal.broker.preflight import PreflightError, check_store_dir
from shoal.cli.startup_errors import startup_error_message
from shoal.remoting.settings import ConfigError
from shoal.store.errors import StoreLockedError
from tests.cli.conftest import write_segmented_store
from tests.conftest import Cluster
from tests.ports import free_broker_port, free_port

COMMAND_TIMEOUT_S = 60.0


def run_shoal(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shoal.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a failed start; fails the test on anything else."""
    assert result.returncode != 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def write_conf(path: Path, conf: dict[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in conf.items()))
    return path


def broker_conf(root: Path, **overrides: str) -> dict[str, str]:
    """A broker.conf that would start: loopback, free ports, a small store under `root`."""
    return {
        "brokerIP1": "127.0.0.1",
        "listenHost": "127.0.0.1",
        "metricsHost": "127.0.0.1",
        "listenPort": str(free_broker_port()),
        "metricsPort": "-1",
        "haListenPort": str(free_port()),
        "namesrvAddr": "127.0.0.1:9",  # nobody: registration retries in the background
        "storePathRootDir": str(root / "store"),
        "mappedFileSizeCommitLog": str(1024 * 1024),
        "maxMessageSize": str(64 * 1024),
        "maxIndexNum": "1000",
        "maxHashSlotNum": "100",
        **overrides,
    }


@pytest.fixture
def occupied_port() -> Iterator[int]:
    """A port some other program listens on (all interfaces, as a server would)."""
    with socket.create_server(("0.0.0.0", 0)) as sock:
        yield int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("conf", "named"),
    [
        ({"listenPort": "-5"}, "listenPort=-5"),
        ({"listenPort": "70000"}, "listenPort=70000"),
        ({"deleteWhen": "99"}, "deleteWhen=99"),
        ({"maxMessageSize": "0"}, "maxMessageSize=0"),
        ({"namesrvAddr": "not-an-addr;;;"}, "namesrvAddr=not-an-addr;;;"),
        ({"listenPort": "10911", "haListenPort": "10911"}, "haListenPort=10911 is not allowed: it equals listenPort"),
        ({"flushDiskType": "SYNC"}, "flushDiskType=SYNC"),
        (
            {"listenPort": "10911", "fastListenPort": "10911"},
            "fastListenPort=10911 is not allowed: it equals listenPort",
        ),
        ({"listenPort": "10911", "haListenPort": "10909"}, "fastListenPort=10909 (listenPort - 2) is not allowed"),
        ({"fastListenPort": "-2"}, "fastListenPort=-2"),
    ],
)
def test_broker_with_a_bad_conf_value_exits_with_one_line(tmp_path: Path, conf: dict[str, str], named: str) -> None:
    """Goal: a bad broker.conf value fails at start naming it. Method: `shoal broker -c` on it."""
    path = write_conf(tmp_path / "broker.conf", broker_conf(tmp_path, **conf))
    line = one_error_line(run_shoal("broker", "-c", str(path)))
    assert named in line
    assert not (tmp_path / "store").exists()  # refused before anything was created


def test_namesrv_with_a_bad_conf_value_or_option_exits_with_one_line(tmp_path: Path) -> None:
    """Goal: namesrv.conf and --port are checked as broker.conf is. Method: a bad file, a bad option."""
    path = write_conf(tmp_path / "namesrv.conf", {"listenPort": "70000"})
    assert "listenPort=70000" in one_error_line(run_shoal("namesrv", "-c", str(path)))
    assert "listenPort=-5" in one_error_line(run_shoal("namesrv", "--port", "-5"))
    assert "listenHost=not a host" in one_error_line(run_shoal("namesrv", "--host", "not a host", "--port", "0"))


def test_namesrv_on_a_port_in_use_names_the_port(occupied_port: int) -> None:
    """Goal: EADDRINUSE is one line with the port. Method: listen first, then start a NameServer there."""
    line = one_error_line(run_shoal("namesrv", "--port", str(occupied_port)))
    assert f"port {occupied_port} is already in use" in line
    assert f"sport = :{occupied_port}" in line


def test_broker_on_a_port_in_use_names_the_port(tmp_path: Path, occupied_port: int) -> None:
    """Goal: the same for the broker's listenPort. Method: listen first, then start a broker there."""
    path = write_conf(tmp_path / "broker.conf", broker_conf(tmp_path, listenPort=str(occupied_port)))
    assert f"port {occupied_port} is already in use" in one_error_line(run_shoal("broker", "-c", str(path)))


def test_broker_whose_ha_port_is_in_use_names_that_port(tmp_path: Path, occupied_port: int) -> None:
    """Goal: a taken haListenPort is reported as clearly. Method: listen on it first."""
    path = write_conf(tmp_path / "broker.conf", broker_conf(tmp_path, haListenPort=str(occupied_port)))
    assert f"port {occupied_port} is already in use" in one_error_line(run_shoal("broker", "-c", str(path)))


def test_broker_whose_vip_port_is_in_use_names_that_port(tmp_path: Path, occupied_port: int) -> None:
    """Goal: a taken VIP channel port (listenPort - 2, or fastListenPort) fails before the store
    opens, in one line naming the port and the key. Method: hold listenPort - 2 of a free broker
    port, then an explicit fastListenPort."""
    conf = broker_conf(tmp_path)
    derived = int(conf["listenPort"]) - 2  # free_broker_port() keeps it free for us
    with socket.create_server(("0.0.0.0", derived)):
        line = one_error_line(run_shoal("broker", "-c", str(write_conf(tmp_path / "broker.conf", conf))))
    assert f"port {derived} is already in use: the VIP channel (fastListenPort" in line
    assert not (tmp_path / "store" / "abort").exists()
    path = write_conf(tmp_path / "broker.conf", {**conf, "fastListenPort": str(occupied_port)})
    assert f"port {occupied_port} is already in use: the VIP channel" in one_error_line(
        run_shoal("broker", "-c", str(path))
    )


def test_broker_whose_metrics_port_is_in_use_names_that_port(tmp_path: Path, occupied_port: int) -> None:
    """Goal: a taken metricsPort fails before the store opens, in one line. Method: listen on it first."""
    path = write_conf(tmp_path / "broker.conf", broker_conf(tmp_path, metricsPort=str(occupied_port)))
    assert f"port {occupied_port} is already in use" in one_error_line(run_shoal("broker", "-c", str(path)))
    assert not (tmp_path / "store" / "abort").exists()  # the store was never opened


@pytest.mark.slow
def test_second_broker_on_a_locked_store_names_the_holder(cluster: Cluster) -> None:
    """Goal: a store held by a running broker says so with that broker's pid. Method: a real cluster
    runs; a second broker on the same storePathRootDir (other ports) must refuse in one line."""
    root = cluster.root
    path = write_conf(root / "second.conf", broker_conf(root, storePathRootDir=str(cluster.store_dir)))
    line = one_error_line(run_shoal("broker", "-c", str(path)))
    holder = cluster.processes["broker"].pid
    assert "in use by another process" in line
    assert f"pid {holder}" in line
    assert cluster.alive("broker")


def test_store_dir_under_a_regular_file_is_named(tmp_path: Path) -> None:
    """Goal: storePathRootDir below a file fails in one line naming both. Method: a file as parent."""
    (tmp_path / "afile").write_text("not a directory")
    store = tmp_path / "afile" / "store"
    path = write_conf(tmp_path / "broker.conf", broker_conf(tmp_path, storePathRootDir=str(store)))
    line = one_error_line(run_shoal("broker", "-c", str(path)))
    assert f"store directory {store}" in line
    assert f"{tmp_path / 'afile'}, which is a regular file" in line


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A read-only tmpfs mount (root passes any mode bits, so chmod cannot make one)."""
    mount_point = tmp_path / "ro"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip(reason="mounting a read-only tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(mount_point)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(reason=f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


def test_read_only_store_dir_is_named(tmp_path: Path, read_only_dir: Path) -> None:
    """Goal: a read-only store directory fails in one line with EROFS. Method: the store on a ro mount,
    as the directory itself and as a directory still to be created inside it."""
    for store in (read_only_dir, read_only_dir / "store"):
        path = write_conf(tmp_path / "broker.conf", broker_conf(tmp_path, storePathRootDir=str(store)))
        line = one_error_line(run_shoal("broker", "-c", str(path)))
        assert f"store directory {store}" in line
        assert "EROFS" in line


# --- the pieces, without processes ---


def test_check_store_dir_creates_a_missing_directory_and_leaves_nothing_else(tmp_path: Path) -> None:
    """Goal: the preflight is harmless on a good path. Method: check a new nested path, list it."""
    store = tmp_path / "a" / "b" / "store"
    check_store_dir(store)
    assert store.is_dir()
    assert list(store.iterdir()) == []
    (store / "file").write_text("")
    with pytest.raises(PreflightError, match=r"store directory .*/file is a regular file"):
        check_store_dir(store / "file")
    with pytest.raises(PreflightError, match=r"/deeper/store is inside .*/file, which is a regular file"):
        check_store_dir(store / "file" / "deeper" / "store")


def test_startup_error_message_words_each_known_failure_and_nothing_else() -> None:
    """Goal: the function `shoal local` reuses knows exactly the startup failures. Method: one
    error of each kind, from the real bind calls where there is one, and errors that stay tracebacks."""
    assert startup_error_message(ConfigError("listenPort=-5 is not allowed")) == "listenPort=-5 is not allowed"
    assert startup_error_message(StoreLockedError("x: in use (pid 7)")) == "x: in use (pid 7)"
    with socket.create_server(("127.0.0.1", 0)) as sock:
        port = int(sock.getsockname()[1])
        with pytest.raises(OSError) as caught:
            socket.create_server(("127.0.0.1", port))
    assert startup_error_message(caught.value) == (
        f"port {port} is already in use (another shoal broker? `ss -ltnp 'sport = :{port}'`)"
    )
    refused = OSError(errno.EADDRNOTAVAIL, "error while attempting to bind on address ('10.9.9.9', 10911): x")
    assert "10.9.9.9 is not an address of this machine" in (startup_error_message(refused) or "")
    read_only = OSError(errno.EROFS, "Read-only file system", "/store/commitlog/0")
    assert startup_error_message(read_only) == "/store/commitlog/0: Read-only file system (errno EROFS)"
    assert startup_error_message(ValueError("a bug")) is None
    assert startup_error_message(OSError(errno.EIO, "I/O error")) is None
    assert startup_error_message(AssertionError()) is None


def test_local_with_its_ports_or_store_taken_says_so_in_one_line(tmp_path: Path) -> None:
    """Goal: `shoal local` (what `make run` starts) fails as clearly as `shoal broker`. Method:
    start it with the NameServer port held by a socket, then with its store locked by a running
    `shoal local`; the last stderr line names the port, then the lock holder's pid."""
    namesrv_port, broker_port = free_port(), free_broker_port()
    local = ["local", "--data-dir", str(tmp_path / "data"), "--grpc-port", "0", "--demo", "--exit-after-demo"]
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", namesrv_port))
        holder.listen()
        result = run_shoal(*local, "--namesrv-port", str(namesrv_port), "--broker-port", str(broker_port))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"port {namesrv_port} is already in use" in result.stderr.strip().splitlines()[-1]
    ports = ["--namesrv-port", str(free_port()), "--broker-port", str(free_broker_port())]
    running = subprocess.Popen(
        [sys.executable, "-m", "shoal.cli.main", *local[:5], *ports],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert running.stderr is not None
        for line in running.stderr:  # until the cluster is up (its store locked)
            if "local cluster up" in line:
                break
        second = run_shoal(*local, "--namesrv-port", str(free_port()), "--broker-port", str(free_broker_port()))
    finally:
        running.terminate()
        running.communicate(timeout=COMMAND_TIMEOUT_S)
    assert second.returncode == 1 and "Traceback" not in second.stderr, second.stderr
    assert f"pid {running.pid}" in second.stderr.strip().splitlines()[-1], second.stderr


def test_broker_on_a_store_with_a_short_middle_segment_says_what_to_do_in_one_line(tmp_path: Path) -> None:
    """Goal: a CommitLog segment of the wrong size before the newest is one line naming it and the
    way out, not a traceback. Method: a store of three 1 MiB segments, the middle one cut in half."""
    conf = broker_conf(tmp_path)
    middle = write_segmented_store(tmp_path / "store")[1]
    os.truncate(middle, 512 * 1024)
    line = one_error_line(run_shoal("broker", "-c", str(write_conf(tmp_path / "broker.conf", conf))))
    assert f"{middle}: file is {512 * 1024} bytes but segments here are {1024 * 1024} bytes" in line
    assert "move it and every later segment out" in line and "shoal store verify" in line
