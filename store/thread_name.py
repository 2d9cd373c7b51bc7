"""The kernel's name of the calling thread (`/proc/<pid>/task/<tid>/comm`, what `top -H`, `ps -L`
and `py-spy` show): each store thread gives its own, so an operator (or a benchmark reading CPU
per thread) can tell the group commit from the allocation thread without attaching a debugger.

CPython names only its `threading.Thread` objects before 3.14; the kernel keeps "python" for
every thread. Best effort: off Linux, or where libc cannot be loaded, nothing happens.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable

PR_SET_NAME = 15
"""prctl(2) option naming the calling thread."""
NAME_BYTES_MAX = 15
"""The kernel's TASK_COMM_LEN (16) less the terminating NUL: longer names are cut."""


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.restype = ctypes.c_int
    function: Callable[..., int] = prctl
    return function


_PRCTL = _prctl()


def name_this_thread(name: str) -> None:
    """Give the calling thread `name` in the kernel (cut to NAME_BYTES_MAX bytes)."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_NAME, ctypes.c_char_p(name.encode()[:NAME_BYTES_MAX]), 0, 0, 0)
