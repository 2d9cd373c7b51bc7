"""The optional compiled helpers (C modules `setup.py` builds when it can) and the switch that
turns them off.

Each compiled function has a Python twin, the reference, which the same tests run against. A
module imports its compiled twin through `compiled_module`, which answers None when the module was
not built (no compiler at install time) or when SHOAL_PURE_PYTHON is set to anything but "" or "0"
(to run the suite, or a broker, on the Python path alone).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

PURE_PYTHON_ENV = "SHOAL_PURE_PYTHON"


def pure_python() -> bool:
    """Whether SHOAL_PURE_PYTHON asks for the Python path."""
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


def compiled_module(name: str) -> ModuleType | None:
    """The compiled module `name` (e.g. "shoal.formats._record_speedups"), or None."""
    if pure_python():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
