"""ReplayGuard in process, on an injected clock: an admin code may not reuse a signature seen with
another code within the window; the same code may; the bound is kept; the validator uses it for
admin accounts only, and the NameServer's validator has none."""

from __future__ import annotations

from pathlib import Path

from shoal.acl import ADMIN_CODES, AccessValidator, ReplayGuard, parse_plain_acl, start_acl
from shoal.acl import limits as acl_limits
from shoal.protocol import RemotingCommand, RequestCode, ResponseCode, make_request
from shoal.protocol.acl_signature import SIGNATURE, Credentials

CREATE = RequestCode.UPDATE_AND_CREATE_TOPIC
DELETE = RequestCode.DELETE_TOPIC_IN_BROKER
CLEAN = RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE
RUNTIME = RequestCode.GET_BROKER_RUNTIME_INFO
CONFIG = RequestCode.GET_ALL_TOPIC_CONFIG

RULES = parse_plain_acl("""
accounts:
  - {accessKey: adminAAA, secretKey: adminSecret, admin: true}
  - {accessKey: userAAA, secretKey: userSecret, defaultTopicPerm: PUB|SUB, defaultGroupPerm: SUB}
""")
ADMIN = Credentials("adminAAA", "adminSecret")
USER = Credentials("userAAA", "userSecret")


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def guard_on(clock: Clock, *, remembered_max_count: int = 100) -> ReplayGuard:
    return ReplayGuard(ADMIN_CODES, window_s=300.0, remembered_max_count=remembered_max_count, clock=clock)


def replayed(request: RemotingCommand, code: int) -> RemotingCommand:
    """The same fields and body (signature included) under another code, as a replay sends them."""
    return make_request(code, opaque=request.opaque + 1, ext_fields=dict(request.ext_fields), body=request.body)


def test_another_admin_code_with_a_seen_signature_is_refused_and_the_first_code_passes_again() -> None:
    """Goal: re-coding is refused, a retry is not. Method: CREATE's signature, then DELETE and CLEAN
    with it (refused, naming both codes), then CREATE again (passes)."""
    clock = Clock()
    guard = guard_on(clock)
    assert guard.check("adminAAA", "sig1", CREATE) is None
    clock.now_s += 12
    reason = guard.check("adminAAA", "sig1", DELETE)
    assert reason is not None
    assert reason.startswith("Signature of accessKey=adminAAA came with request code=17 12 s ago, refused for ")
    assert f"request code={DELETE}" in reason and "retry in 288 s" in reason
    assert guard.check("adminAAA", "sig1", CLEAN) is not None
    assert guard.check("adminAAA", "sig1", CREATE) is None
    assert guard.refused_total == 2


def test_a_field_less_read_binds_the_signature_that_clean_expired_consume_queue_would_reuse() -> None:
    """Goal: the constant field-less signature, seen with a read, cannot clean. Method: RUNTIME, then
    CONFIG (a read: passes, keeps RUNTIME as the bound code), then CLEAN (refused)."""
    clock = Clock()
    guard = guard_on(clock)
    assert guard.check("adminAAA", "fieldless", RUNTIME) is None
    assert guard.check("adminAAA", "fieldless", CONFIG) is None
    reason = guard.check("adminAAA", "fieldless", CLEAN)
    assert reason is not None and f"came with request code={RUNTIME}" in reason


def test_the_window_runs_from_the_last_use_and_a_refusal_does_not_extend_it() -> None:
    """Goal: the binding lasts window_s after the signature's last accepted use. Method: uses at 0 and
    250 s; refused at 500 s; refused again at 549 s; accepted at 551 s, binding the new code."""
    clock = Clock()
    guard = guard_on(clock)
    start_s = clock.now_s
    assert guard.check("adminAAA", "sig", RUNTIME) is None
    clock.now_s = start_s + 250
    assert guard.check("adminAAA", "sig", RUNTIME) is None
    clock.now_s = start_s + 500
    assert guard.check("adminAAA", "sig", CLEAN) is not None
    clock.now_s = start_s + 549
    assert guard.check("adminAAA", "sig", CLEAN) is not None
    clock.now_s = start_s + 551
    assert guard.check("adminAAA", "sig", CLEAN) is None
    assert guard.check("adminAAA", "sig", RUNTIME) is None, "a read is never refused"
    assert guard.check("adminAAA", "sig", DELETE) is not None, "now bound to CLEAN"


def test_codes_outside_the_guarded_set_are_never_refused_and_keys_are_separate() -> None:
    """Goal: only admin codes are refused, per (accessKey, signature). Method: CREATE's signature
    under a read passes; another account's equal signature text under DELETE passes."""
    clock = Clock()
    guard = guard_on(clock)
    assert guard.check("adminAAA", "sig", CREATE) is None
    assert guard.check("adminAAA", "sig", RequestCode.GET_TOPIC_STATS_INFO) is None
    assert guard.check("adminBBB", "sig", DELETE) is None


def test_memory_is_bounded_and_the_least_recently_used_go_first() -> None:
    """Goal: at most remembered_max_count entries. Method: 3 slots, 4 signatures (the first used again
    before the fourth): the second is forgotten, the first is still bound."""
    clock = Clock()
    guard = guard_on(clock, remembered_max_count=3)
    for name in ("one", "two", "three"):
        assert guard.check("adminAAA", name, RUNTIME) is None
        clock.now_s += 1
    assert guard.check("adminAAA", "one", RUNTIME) is None
    assert guard.check("adminAAA", "four", RUNTIME) is None
    assert len(guard) == 3
    assert guard.check("adminAAA", "two", CLEAN) is None, "forgotten"
    assert guard.check("adminAAA", "one", CLEAN) is not None


def test_entries_past_the_window_are_dropped_when_a_new_one_comes() -> None:
    """Goal: expired entries do not hold memory. Method: 50 signatures, then one 301 s later: 1 left."""
    clock = Clock()
    guard = guard_on(clock)
    for index in range(50):
        assert guard.check("adminAAA", f"sig{index}", RUNTIME) is None
    clock.now_s += 301
    assert guard.check("adminAAA", "late", RUNTIME) is None
    assert len(guard) == 1


def test_the_validator_binds_admin_signatures_only() -> None:
    """Goal: the check refuses a re-coded admin signature with NO_PERMISSION and leaves users alone.
    Method: a signed CREATE then its fields as DELETE (refused); a user's read is not remembered."""
    guard = ReplayGuard(ADMIN_CODES)
    validator = AccessValidator(RULES, replay_guard=guard)
    fields = {"topic": "T", "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"}
    create = make_request(CREATE, opaque=1, ext_fields=fields)
    ADMIN.sign(create.ext_fields, None)
    assert validator.refusal("10.0.0.1", create) is None
    refused = validator.refusal("10.0.0.1", replayed(create, DELETE))
    assert refused is not None and refused.code == ResponseCode.NO_PERMISSION
    assert (refused.remark or "").startswith("org.apache.rocketmq.acl.common.AclException: Signature of accessKey=")
    read = make_request(RequestCode.GET_MAX_OFFSET, opaque=3, ext_fields={"topic": "T", "queueId": "0"})
    USER.sign(read.ext_fields, None)
    assert validator.refusal("10.0.0.1", read) is None
    assert len(guard) == 1 and read.ext_fields[SIGNATURE]


def test_the_broker_validator_has_a_guard_and_the_namesrv_validator_none(tmp_path: Path) -> None:
    """Goal: start_acl wires the guard on the broker only (WIPE/ADD_WRITE_PERM share their field on
    the NameServer). Method: start both from one file, look at replay_guard and its limits."""
    path = tmp_path / "plain_acl.yml"
    path.write_text("accounts:\n  - {accessKey: adminAAA, secretKey: adminSecret, admin: true}\n")
    broker, _ = start_acl(str(path), namesrv=False)
    namesrv, _ = start_acl(str(path), namesrv=True)
    assert broker.replay_guard is not None and namesrv.replay_guard is None
    assert broker.replay_guard.window_s == acl_limits.ACL_REPLAY_WINDOW_S
    assert broker.replay_guard.guarded_codes == ADMIN_CODES
