"""A small background service: one thread, `start()`, `stop()`, `wakeup()`, bounded waits.

Every loop iteration waits at most its interval, so `stop()` returns within one interval and
nothing polls faster than it was asked to.
"""

from __future__ import annotations

import abc
import logging
import threading

from shoal.store.thread_name import name_this_thread

log = logging.getLogger(__name__)

STOP_JOIN_TIMEOUT_S = 30.0


class ServiceThread(abc.ABC):
    name = "shoal-service"

    def __init__(self) -> None:
        self._wakeup = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self.failure: BaseException | None = None
        """The exception that ended the loop, if any (an I/O error on flush is fatal)."""

    def start(self) -> None:
        assert self._thread is None, f"{self.name} already started"
        self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._wakeup.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(STOP_JOIN_TIMEOUT_S)
            if self._thread.is_alive():
                log.error("%s did not stop within %.0f s", self.name, STOP_JOIN_TIMEOUT_S)
        self._thread = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    def wakeup(self) -> None:
        self._wakeup.set()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def pause(self, seconds: float) -> bool:
        """Sleep `seconds` unless stop() comes first; False when stopped (a wakeup does not end it)."""
        return not self._stopped.wait(seconds)

    def wait_for_running(self, interval_s: float) -> None:
        """Sleep up to `interval_s`, returning early on wakeup() or stop()."""
        if self._wakeup.wait(interval_s):
            self._wakeup.clear()

    def _main(self) -> None:
        name_this_thread(self.name)
        try:
            while not self._stopped.is_set():
                self.run_once()
            self.on_stop()
        except BaseException as exc:
            self.failure = exc
            log.exception("%s stopped by an error", self.name)
            self.on_failure(exc)

    @abc.abstractmethod
    def run_once(self) -> None:
        """One iteration of the service's loop (bounded: it must return within its interval)."""

    def on_stop(self) -> None:  # noqa: B027 - optional hook, empty by default
        """Last work after stop() (e.g. a final flush)."""

    def on_failure(self, exc: BaseException) -> None:  # noqa: B027 - optional hook, empty by default
        """Called once when the loop died; services that others wait on release them here."""
