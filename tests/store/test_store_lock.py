"""Tests of shoal.store.store_lock: the `lock` file across processes and the `abort` marker."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal.store.errors import StoreLockedError
from shoal.store.store_lock import AbortMarker, StoreLock

CHILD_TIMEOUT_S = 30.0
LOCKED_EXIT = 3

# A second broker process: take the StoreLock, report, optionally hold it until stdin closes.
STORE_LOCK_CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from shoal.store.errors import StoreLockedError
    from shoal.store.store_lock import StoreLock

    lock = StoreLock(Path(sys.argv[1]))
    try:
        lock.acquire()
    except StoreLockedError as exc:
        print(exc, flush=True)
        sys.exit(3)
    print("acquired", flush=True)
    if sys.argv[2:] == ["hold"]:
        sys.stdin.read()
    lock.release()
    """
)

# What a Java broker does (FileChannel.tryLock(0, 1, false) = fcntl F_SETLK on the first byte).
JAVA_STYLE_CHILD = textwrap.dedent(
    """
    import fcntl, os, sys

    fd = os.open(sys.argv[1], os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
    except OSError:
        sys.exit(3)
    sys.exit(0)
    """
)


def run_child(script: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, str(path)],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )


@pytest.fixture
def lock_path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "lock"


@pytest.fixture
def held(lock_path: Path) -> Iterator[StoreLock]:
    """The store lock held by this (test) process."""
    lock = StoreLock(lock_path)
    lock.acquire()
    yield lock
    lock.release()


def test_acquire_creates_the_lock_file_containing_lock(held: StoreLock, lock_path: Path) -> None:
    """The parent directory is created and the file holds the 4 ASCII bytes 'lock'."""
    assert lock_path.read_bytes() == b"lock"


def test_another_process_cannot_lock_a_locked_store(held: StoreLock, lock_path: Path) -> None:
    """A second broker process gets StoreLockedError naming the lock file."""
    result = run_child(STORE_LOCK_CHILD, lock_path)
    assert result.returncode == LOCKED_EXIT, result.stderr
    assert str(lock_path) in result.stdout
    assert "in use" in result.stdout


def test_a_java_style_record_lock_is_refused_too(held: StoreLock, lock_path: Path) -> None:
    """A Java broker's lock (fcntl on byte 0) fails while Shoal holds the store."""
    assert run_child(JAVA_STYLE_CHILD, lock_path).returncode == LOCKED_EXIT


def test_lock_held_by_another_process_refuses_this_one(lock_path: Path) -> None:
    """A child holds the lock: acquiring here raises StoreLockedError; after it exits we can lock."""
    child = subprocess.Popen(
        [sys.executable, "-c", STORE_LOCK_CHILD, str(lock_path), "hold"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "acquired"
        with pytest.raises(StoreLockedError, match="in use by another process"):
            StoreLock(lock_path).acquire()
    finally:
        child.communicate(input="", timeout=CHILD_TIMEOUT_S)
    assert child.returncode == 0
    lock = StoreLock(lock_path)
    lock.acquire()
    lock.release()


def test_released_lock_can_be_taken_by_another_process(lock_path: Path) -> None:
    """After release() a second process acquires the lock."""
    lock = StoreLock(lock_path)
    lock.acquire()
    lock.release()
    result = run_child(STORE_LOCK_CHILD, lock_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "acquired"


def test_second_lock_in_the_same_process_is_refused(held: StoreLock, lock_path: Path) -> None:
    """Two stores on one directory inside one process: the second acquire raises StoreLockedError."""
    with pytest.raises(StoreLockedError):
        StoreLock(lock_path).acquire()


def test_failed_second_acquire_keeps_the_first_lock(held: StoreLock, lock_path: Path) -> None:
    """A refused in-process acquire must leave the holder's lock intact for other processes."""
    with pytest.raises(StoreLockedError):
        StoreLock(lock_path).acquire()
    assert run_child(JAVA_STYLE_CHILD, lock_path).returncode == LOCKED_EXIT


def test_release_is_idempotent(lock_path: Path) -> None:
    """release() twice, or without acquire, does nothing."""
    StoreLock(lock_path).release()
    lock = StoreLock(lock_path)
    lock.acquire()
    lock.release()
    lock.release()


# --- the abort marker ---


def test_no_abort_file_means_the_last_exit_was_clean(tmp_path: Path) -> None:
    """lastExitOK = !exists(abort)."""
    assert AbortMarker(tmp_path / "abort").last_exit_ok


def test_created_abort_file_means_an_abnormal_exit(tmp_path: Path) -> None:
    """create() leaves an empty file; a later start sees last_exit_ok False."""
    marker = AbortMarker(tmp_path / "abort")
    marker.create()
    assert (tmp_path / "abort").read_bytes() == b""
    assert not AbortMarker(tmp_path / "abort").last_exit_ok


def test_removed_abort_file_means_a_clean_exit(tmp_path: Path) -> None:
    """remove() at orderly shutdown; removing twice and creating twice are harmless."""
    marker = AbortMarker(tmp_path / "abort")
    marker.create()
    marker.create()
    marker.remove()
    marker.remove()
    assert marker.last_exit_ok
    assert not (tmp_path / "abort").exists()


def test_the_refusal_names_the_pid_holding_the_lock(lock_path: Path) -> None:
    """Goal: a locked store says who holds it. Method: a child holds the lock; the error here names
    the child's pid (from F_GETLK), and the file still holds only RocketMQ's 'lock'."""
    child = subprocess.Popen(
        [sys.executable, "-c", STORE_LOCK_CHILD, str(lock_path), "hold"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "acquired"
        with pytest.raises(StoreLockedError, match=rf"\(pid {child.pid}\)"):
            StoreLock(lock_path).acquire()
        assert lock_path.read_bytes() == b"lock"
    finally:
        child.communicate(input="", timeout=CHILD_TIMEOUT_S)
