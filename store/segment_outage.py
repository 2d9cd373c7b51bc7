"""Refusing writes while the next CommitLog segment cannot be created (a full disk, a quota).

An append that needs a new segment and cannot get one has written nothing, so puts may succeed
again once space returns. Until then every put is refused at once with SERVICE_NOT_AVAILABLE
(RocketMQ's answer for a disk it cannot write), the creation is retried at most every
SEGMENT_CREATE_RETRY_INTERVAL_MS rather than on every put, and the log gets one line when the
outage starts and one when it ends, however many puts it refuses in between.
"""

from __future__ import annotations

import logging

from shoal.store import limits
from shoal.store.clock import Clock
from shoal.store.errors import PutStatus
from shoal.store.message import PutResult

log = logging.getLogger(__name__)


class SegmentOutage:
    """The state of segment creation: failing (`error`) or not, and what it refused meanwhile."""

    def __init__(self, clock: Clock, segment_size_bytes: int) -> None:
        self.clock = clock
        self.segment_size_bytes = segment_size_bytes
        self.error: OSError | None = None
        """The last creation error while the outage lasts; None when segments can be created."""
        self.outages_total = 0
        self.refused_total = 0
        self._since_s = 0.0
        self._retry_at_s = 0.0

    def refusal(self) -> PutResult | None:
        """SERVICE_NOT_AVAILABLE while failing and the next retry is not due; None to try again."""
        if self.error is None or self.clock.monotonic_s() >= self._retry_at_s:
            return None
        self.refused_total += 1
        return self._answer()

    def failed(self, error: OSError) -> PutResult:
        """An append could not create its segment: start (or go on with) the outage."""
        now = self.clock.monotonic_s()
        if self.error is None:
            self.outages_total += 1
            self._since_s = now
            log.error(
                "cannot create the next CommitLog segment (%d bytes): %s; refusing writes "
                "(SERVICE_NOT_AVAILABLE) and retrying every %d ms until it can",
                self.segment_size_bytes,
                error,
                limits.SEGMENT_CREATE_RETRY_INTERVAL_MS,
            )
        self.error = error
        self._retry_at_s = now + limits.SEGMENT_CREATE_RETRY_INTERVAL_MS / 1000
        self.refused_total += 1
        return self._answer()

    def succeeded(self) -> None:
        """An append went through: end the outage, if one was on."""
        if self.error is None:
            return
        log.warning(
            "CommitLog segments can be created again after %.1f s; %d writes were refused meanwhile",
            self.clock.monotonic_s() - self._since_s,
            self.refused_total,
        )
        self.error = None
        self.refused_total = 0

    def _answer(self) -> PutResult:
        return PutResult(
            PutStatus.SERVICE_NOT_AVAILABLE,
            remark=f"message store is not writeable: cannot create the next CommitLog segment: {self.error}",
        )
