"""When a silent HA peer is dead (`Liveness`), driven with plain numbers for the clock."""

from __future__ import annotations

from shoal.broker.replication.limits import ANSWER_TIMEOUT_S, CADENCE_SAMPLE_MIN_S, LIVENESS_STALL_S
from shoal.broker.replication.liveness import Liveness

HEARTBEAT_S = 5.0  # haSendHeartbeatInterval, RocketMQ's default
HOUSEKEEPING_S = 20.0  # haHousekeepingInterval
CHECK_S = 0.1  # how often the HA loops ask for a verdict


def watch(liveness: Liveness, start_s: float, end_s: float) -> float | None:
    """Ask for a verdict every CHECK_S from `start_s` to `end_s`; when the first one came, or None."""
    now_s = start_s
    while now_s <= end_s:
        if liveness.verdict(now_s) is not None:
            return now_s
        now_s = round(now_s + CHECK_S, 6)
    return None


def test_a_peer_never_heard_from_is_presumed_to_speak_every_heartbeat_interval() -> None:
    """Goal: before a peer showed its cadence, haSendHeartbeatInterval (RocketMQ's period) is presumed,
    so a RocketMQ peer that first reports 5 s after connecting is kept. Method: silence from t=0."""
    liveness = Liveness(HEARTBEAT_S, HOUSEKEEPING_S, last_heard_s=0.0)
    dead_s = watch(liveness, CHECK_S, HOUSEKEEPING_S)
    assert dead_s is not None and HEARTBEAT_S + ANSWER_TIMEOUT_S < dead_s <= HEARTBEAT_S + ANSWER_TIMEOUT_S + CHECK_S
    assert "presumed" in (liveness.verdict(dead_s) or "")


def test_a_peer_that_speaks_every_second_is_dead_after_a_few_silent_seconds() -> None:
    """Goal: a Shoal peer (keepalives every ~1 s) is found dead ANSWER_TIMEOUT_S after a missed one, not
    after 20 s. Method: unasked bytes every second until t=10, then silence."""
    liveness = Liveness(HEARTBEAT_S, HOUSEKEEPING_S, last_heard_s=0.0)
    for second in range(1, 11):
        assert liveness.verdict(float(second) - 0.5) is None
        liveness.heard(float(second), unasked=True)
    assert liveness.cadence_s == 1.0
    dead_s = watch(liveness, 10.0 + CHECK_S, 30.0)
    assert dead_s is not None and dead_s - 10.0 <= 1.0 + ANSWER_TIMEOUT_S + CHECK_S


def test_a_slow_peer_teaches_a_longer_cadence_and_stays_connected() -> None:
    """Goal: a peer heartbeating every 8 s (a RocketMQ broker with a longer haSendHeartbeatInterval) is
    kept once it showed that cadence; gaps from bytes queued behind a stall teach nothing. Method: one
    8 s gap, a burst 0.01 s apart, then 10.5 s of silence."""
    liveness = Liveness(HEARTBEAT_S, HOUSEKEEPING_S, last_heard_s=0.0)
    liveness.heard(8.0, unasked=True)
    liveness.heard(8.0 + CADENCE_SAMPLE_MIN_S / 10, unasked=True)
    assert liveness.cadence_s == 8.0
    assert watch(liveness, 8.1, 8.0 + 8.0 + ANSWER_TIMEOUT_S - CHECK_S) is None


def test_data_sent_and_not_acked_is_dead_after_the_answer_timeout_even_before_the_cadence() -> None:
    """Goal: a master finds a slave gone ANSWER_TIMEOUT_S after data it sent went unanswered, whatever
    the slave's cadence; acks that leave data unacked keep the answer due from their arrival. Method:
    data at t=1, a partial ack at t=2, nothing after."""
    liveness = Liveness(HEARTBEAT_S, HOUSEKEEPING_S, last_heard_s=0.0)
    liveness.expect_answer(1.0)
    liveness.expect_answer(1.5)  # more data: the answer was already due since t=1
    assert liveness.answer_due_s == 1.0
    liveness.heard(2.0, unasked=False, still_owed=True)
    dead_s = watch(liveness, 2.0, 10.0)
    assert dead_s is not None and 2.0 + ANSWER_TIMEOUT_S < dead_s <= 2.0 + ANSWER_TIMEOUT_S + CHECK_S
    assert "no ack" in (liveness.verdict(dead_s) or "")


def test_an_ack_of_everything_sent_ends_the_debt() -> None:
    """Goal: once a report covers all data sent, only the cadence counts. Method: data at t=0, a full ack at
    t=0.01, a verdict asked until just before presumed cadence + ANSWER_TIMEOUT_S."""
    liveness = Liveness(HEARTBEAT_S, HOUSEKEEPING_S, last_heard_s=0.0)
    liveness.expect_answer(0.0)
    liveness.heard(0.01, unasked=False, still_owed=False)
    assert liveness.answer_due_s is None
    assert watch(liveness, 0.1, HEARTBEAT_S + ANSWER_TIMEOUT_S) is None


def test_the_housekeeping_interval_still_bounds_any_silence() -> None:
    """Goal: RocketMQ's rule stays the upper bound, even for a peer that taught a long cadence. Method: a
    19 s gap, then silence; dead just after 20 s."""
    liveness = Liveness(HEARTBEAT_S, HOUSEKEEPING_S, last_heard_s=0.0)
    liveness.heard(19.0, unasked=True)
    dead_s = watch(liveness, 19.1, 60.0)
    assert dead_s is not None and 19.0 + HOUSEKEEPING_S < dead_s <= 19.0 + HOUSEKEEPING_S + CHECK_S
    assert "haHousekeepingInterval" in (liveness.verdict(dead_s) or "")


def test_a_side_whose_own_loop_stalled_judges_nothing_until_it_could_read() -> None:
    """Goal: after our own event loop stalled, the peer's bytes may wait unread: no verdict for
    LIVENESS_STALL_S. Method: checks every CHECK_S until t=1, none until t=9 (past cadence + timeout)."""
    liveness = Liveness(HEARTBEAT_S, HOUSEKEEPING_S, last_heard_s=0.0)
    liveness.heard(1.0, unasked=True)
    assert watch(liveness, 0.1, 1.0) is None
    assert liveness.verdict(9.0) is None  # 8 s late: we were not running
    assert liveness.verdict(9.0 + LIVENESS_STALL_S / 2) is None
    liveness.heard(9.0 + LIVENESS_STALL_S / 2, unasked=False)  # the bytes that waited in the socket
    assert watch(liveness, 9.0 + LIVENESS_STALL_S, 9.0 + LIVENESS_STALL_S + 1.0) is None
