"""When a silent HA peer is dead (issue 25): a link that drops packets without a reset.

RocketMQ closes an HA link only after haHousekeepingInterval (20 s) without a byte, so a
blackholed link held SYNC_MASTER sends for 20 s while both sides called it connected. Within the
same wire protocol, each side here knows what the other owes it:

* its next heartbeat (from a master) or report (from a slave), one *cadence* after the last bytes
  we read. The cadence is the longest gap seen on this connection before bytes the peer sent
  unasked (a heartbeat frame; a report that answered no data of ours). Until one is seen it is
  presumed to be haSendHeartbeatInterval, RocketMQ's period; Shoal peers speak after at most
  `KEEPALIVE_INTERVAL_MAX_S` of silence, so against them the cadence is learnt as about 1 s.
  Learning it, rather than assuming it, keeps RocketMQ peers and older Shoal versions (5 s)
  connected when idle.
* (on a master) an ack of the data it sent: every slave, RocketMQ's too, reports as soon as it
  has appended a frame, so that answer is due the moment the data left.

The peer is dead once what it owes is `ANSWER_TIMEOUT_S` overdue, and in any case after
haHousekeepingInterval of silence (RocketMQ's rule, kept as the upper bound). A side whose own
event loop stalled (a check `LIVENESS_STALL_S` late) judges nothing for that long again: the
peer's bytes may be waiting unread in the socket. Pure: the caller passes the time in, so tests
drive it with numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.broker.replication import limits


@dataclass
class Liveness:
    """What one HA connection knows about its peer's silence."""

    presumed_cadence_s: float
    """haSendHeartbeatInterval: how often the peer speaks, until it showed us."""
    housekeeping_s: float
    """haHousekeepingInterval: silence that closes the link whatever the peer owes."""
    last_heard_s: float
    """When bytes last arrived (the connection's start before any)."""
    learnt_cadence_s: float = 0.0
    """The longest gap before unasked bytes on this connection; 0: none seen yet."""
    answer_due_s: float | None = None
    """Since when the peer owes an ack of data we sent; None: it owes none."""
    last_check_s: float = 0.0
    judge_from_s: float = 0.0
    """No verdict before this (our own loop stalled: what the peer sent may not be read yet)."""

    def __post_init__(self) -> None:
        assert 0 < self.presumed_cadence_s < self.housekeeping_s, (self.presumed_cadence_s, self.housekeeping_s)
        self.last_check_s = self.last_heard_s

    @property
    def cadence_s(self) -> float:
        return self.learnt_cadence_s or self.presumed_cadence_s

    def heard(self, now_s: float, *, unasked: bool, still_owed: bool = False) -> None:
        """Bytes arrived. `unasked`: the peer sent them by itself (a heartbeat, a periodic report),
        so the gap since the bytes before shows its cadence. `still_owed`: data we sent is not
        acknowledged yet (the answer is due from now on)."""
        gap_s = now_s - self.last_heard_s
        if unasked and gap_s >= limits.CADENCE_SAMPLE_MIN_S:
            self.learnt_cadence_s = max(self.learnt_cadence_s, gap_s)
        self.last_heard_s = now_s
        self.answer_due_s = now_s if still_owed else None

    def expect_answer(self, now_s: float) -> None:
        """We sent data: the peer owes an ack from now on (unless it already owed one)."""
        if self.answer_due_s is None:
            self.answer_due_s = now_s

    def verdict(self, now_s: float) -> str | None:
        """Why the peer is dead, or None while it may be alive. Called every fraction of a second."""
        if now_s - self.last_check_s > limits.LIVENESS_STALL_S:
            self.judge_from_s = now_s + limits.LIVENESS_STALL_S
        self.last_check_s = now_s
        if now_s < self.judge_from_s:
            return None
        silent_s = now_s - self.last_heard_s
        if silent_s > self.housekeeping_s:
            return f"nothing heard for {silent_s:.1f} s (haHousekeepingInterval)"
        due_s = self.answer_due_s
        if due_s is not None and now_s - due_s > limits.ANSWER_TIMEOUT_S:
            return f"no ack of the data sent {now_s - due_s:.1f} s ago"
        cadence_s = self.cadence_s
        if silent_s - cadence_s > limits.ANSWER_TIMEOUT_S:
            how = "as it showed" if self.learnt_cadence_s else "presumed: haSendHeartbeatInterval"
            return f"silent for {silent_s:.1f} s, though it speaks every {cadence_s:.1f} s ({how})"
        return None
