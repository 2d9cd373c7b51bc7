"""store.thread_name: the kernel's name of a store thread, as `top -H` and `ps -L` show it."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from shoal.store.thread_name import NAME_BYTES_MAX, name_this_thread

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread names are read from Linux /proc")


def _kernel_name(native_id: int) -> str:
    return Path(f"/proc/self/task/{native_id}/comm").read_text().strip()


def test_a_thread_names_itself_in_the_kernel_cut_to_its_limit() -> None:
    """Goal: the name the kernel reports is the one given, cut to 15 bytes."""
    seen: list[str] = []

    def run() -> None:
        name_this_thread("shoal-a-very-long-thread-name")
        seen.append(_kernel_name(threading.get_native_id()))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == ["shoal-a-very-long-thread-name"[:NAME_BYTES_MAX]]


def test_a_running_store_names_its_threads(tmp_path: Path) -> None:
    """Goal: a store's service and allocation threads carry their names in the kernel, so CPU per
    thread (bench/broker_cpu.py, top -H) names what spent it. Method: open a real store, start it,
    read every thread's kernel name from /proc."""
    from shoal.store import MessageStore, StoreSettings

    store = MessageStore(StoreSettings(root_dir=tmp_path / "store"))
    store.open()
    store.start()
    try:
        names = {path.read_text().strip() for path in Path("/proc/self/task").glob("*/comm")}
        assert any(name.startswith("shoal-flush") or name.startswith("shoal-group") for name in names), names
        assert "shoal-allocate" in names, names
    finally:
        store.shutdown()
