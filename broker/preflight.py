"""What the broker needs from the machine, checked before it opens the store.

    check_store_dir(settings.store.root_dir)   # PreflightError: one line, the path and the errno

Two mistakes otherwise surface as tracebacks deep inside the store: a `storePathRootDir` whose
parent chain holds a regular file (ENOTDIR on the first mkdir), and a directory the process
cannot write (a read-only mount, permissions). Ports in use and a store locked by another broker
are found where they happen (bind, `StoreLock`), except the broker's second ports:
`check_port_free` tries them before the store opens, so a taken HA or metrics port does not
leave the store to an abnormal recovery. `shoal.cli.startup_errors` words all of these.
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

WRITE_PROBE_NAME = ".shoal-write-probe"
"""Created and removed at once in the store directory: the only sure test of writability (a
read-only bind mount or an ACL fools `os.access`; root passes any mode bits)."""


class PreflightError(Exception):
    """The machine cannot give the broker what its settings ask for; the message is one line."""


def _errno_words(error: OSError) -> str:
    name = errno.errorcode.get(error.errno or 0, str(error.errno))
    return f"errno {name}: {error.strerror or error}"


def check_store_dir(path: Path) -> None:
    """Raise `PreflightError` unless `path` is (or can be made) a directory this process writes.

    Creates the directory as the store would; leaves nothing else behind."""
    path = Path(os.path.abspath(path))
    for ancestor in (path, *path.parents):
        if ancestor.exists():
            if not ancestor.is_dir():
                where = "is" if ancestor == path else f"is inside {ancestor}, which is"
                raise PreflightError(f"store directory {path} {where} a regular file, not a directory")
            break
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise PreflightError(f"store directory {path} cannot be created ({_errno_words(error)})") from None
    probe = path / f"{WRITE_PROBE_NAME}-{os.getpid()}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
        os.unlink(probe)
    except OSError as error:
        state = "read-only" if error.errno == errno.EROFS else "not writable"
        raise PreflightError(f"store directory {path} is {state} ({_errno_words(error)})") from None


def check_port_free(host: str, port: int) -> None:
    """Raise the `OSError` (EADDRINUSE, ...) a server binding host:port now would get.

    Binds as asyncio's servers do (SO_REUSEADDR, so a port in TIME_WAIT counts as free) and closes
    at once: a later bind can still lose a race, which then fails the same way, only later."""
    with socket.create_server((host, port)):
        pass
