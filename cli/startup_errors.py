"""One line for each way a server fails to start because of its settings or the machine.

    message = startup_error_message(error)   # None: not a known startup failure, keep the traceback
    with one_line_startup_errors():           # the same, raised as a click error
        await controller.start()

The commands that start servers (`shoal namesrv`, `shoal broker`, `shoal local`) turn what this
returns into a click error (exit 1, one line on stderr). Only failures users cause are worded:
a bad conf value (`ConfigError`), a store directory the machine cannot give (`PreflightError`), a
store locked by another broker (`StoreLockedError`, with the holder's pid), a certificate file
that is missing, unreadable or does not match its key (`TlsConfigError`), a port in use or an
address that is not this machine's. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import contextlib
import errno
import re
import socket
from collections.abc import Iterator

import click

from shoal.broker.preflight import PreflightError
from shoal.remoting.settings import ConfigError
from shoal.remoting.tls import TlsConfigError
from shoal.store.errors import StoreCorruptionError, StoreLockedError

_BIND_ADDRESS = re.compile(r"address \('([^']*)', (\d+)")
"""Where CPython, asyncio and uvloop name the address a bind failed on, in the OSError message:
"... (while attempting to bind on address ('0.0.0.0', 10911))" or "... bind on address ('::', 9876, 0, 0): ..."."""

_FILE_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR})


def _bind_address(error: OSError) -> tuple[str, int] | None:
    found = _BIND_ADDRESS.search(str(error))
    return (found.group(1), int(found.group(2))) if found else None


def _bind_message(error: OSError) -> str | None:
    address = _bind_address(error)
    if error.errno == errno.EADDRINUSE:
        if address is None:
            return f"a listen port is already in use ({error.strerror or error})"
        port = address[1]
        return f"port {port} is already in use (another shoal broker? `ss -ltnp 'sport = :{port}'`)"
    if address is None:
        return None
    host, port = address
    if error.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {host}:{port}: {host} is not an address of this machine (listenHost)"
    if error.errno in (errno.EACCES, errno.EPERM):
        return f"cannot listen on port {port}: ports below 1024 need root or CAP_NET_BIND_SERVICE"
    return None


def startup_error_message(error: BaseException) -> str | None:
    """The one line to show for a failed start, or None when `error` is not a known startup failure."""
    if isinstance(error, ConfigError | PreflightError | StoreLockedError | StoreCorruptionError | TlsConfigError):
        return str(error)
    if isinstance(error, socket.gaierror):
        return f"cannot resolve the listen host: {error.strerror or error} (listenHost)"
    if not isinstance(error, OSError):
        return None
    message = _bind_message(error)
    if message is not None:
        return message
    if error.errno in _FILE_ERRNOS and error.filename is not None:
        name = errno.errorcode.get(error.errno or 0, str(error.errno))
        return f"{error.filename}: {error.strerror} (errno {name})"
    return None


@contextlib.contextmanager
def one_line_startup_errors() -> Iterator[None]:
    """Inside: a known startup failure becomes a `click.ClickException` (exit 1, one line on stderr
    without a traceback); anything else propagates untouched."""
    try:
        yield
    except Exception as error:
        message = startup_error_message(error)
        if message is None:
            raise
        raise click.ClickException(message) from None
