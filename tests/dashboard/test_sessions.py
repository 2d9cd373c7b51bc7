"""shoal.dashboard.sessions: in-memory sessions with a CSRF token each."""

from __future__ import annotations

from shoal.dashboard.accounts import User
from shoal.dashboard.limits import SESSION_IDLE_S
from shoal.dashboard.sessions import SessionStore, csrf_matches

USER = User("opsAdmin", "secret", admin=True)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_is_found_by_its_id_until_it_idles_out() -> None:
    clock = Clock()
    store = SessionStore(clock)
    session = store.open(USER)
    assert store.find(session.session_id) is session
    clock.now += SESSION_IDLE_S - 1
    assert store.find(session.session_id) is session  # a request restarts the idle clock
    clock.now += SESSION_IDLE_S - 1
    assert store.find(session.session_id) is session
    clock.now += SESSION_IDLE_S + 1
    assert store.find(session.session_id) is None and len(store) == 0


def test_ids_and_tokens_are_unguessable_and_distinct() -> None:
    store = SessionStore()
    first, second = store.open(USER), store.open(USER)
    assert first.session_id != second.session_id and first.csrf_token != second.csrf_token
    assert len(first.session_id) >= 40 and len(first.csrf_token) >= 40
    assert store.find("not-a-session") is None and store.find(None) is None


def test_csrf_needs_the_sessions_own_token() -> None:
    store = SessionStore()
    session, other = store.open(USER), store.open(USER)
    assert csrf_matches(session, session.csrf_token)
    assert not csrf_matches(session, other.csrf_token)
    assert not csrf_matches(session, None) and not csrf_matches(session, "")


def test_closing_forgets_the_session() -> None:
    store = SessionStore()
    session = store.open(USER)
    store.close(session.session_id)
    assert store.find(session.session_id) is None
