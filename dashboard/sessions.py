"""Logged-in sessions, kept in the dashboard's memory: a random id in an HttpOnly, SameSite=Strict
cookie names one, and each carries its CSRF token, which every form posts back.

In memory on purpose: the dashboard is one process beside the cluster, a restart asking everyone to
log in again is acceptable, and no signing key has to be managed or rotated."""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from shoal.dashboard.accounts import User
from shoal.dashboard.limits import SESSION_IDLE_S, SESSIONS_MAX, TOKEN_BYTES


@dataclass(slots=True)
class Session:
    session_id: str
    user: User
    csrf_token: str
    last_seen_s: float
    flash: list[str] = field(default_factory=list)
    """Messages shown once on the next page (what an action did)."""


class SessionStore:
    """Sessions by id; idle ones expire, the oldest goes first beyond SESSIONS_MAX."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._clock = clock

    def open(self, user: User) -> Session:
        now = self._clock()
        session = Session(secrets.token_urlsafe(TOKEN_BYTES), user, secrets.token_urlsafe(TOKEN_BYTES), now)
        self._sessions[session.session_id] = session
        while len(self._sessions) > SESSIONS_MAX:
            self._sessions.popitem(last=False)
        return session

    def find(self, session_id: str | None) -> Session | None:
        """The live session of that id (its idle clock restarted), or None."""
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        now = self._clock()
        if now - session.last_seen_s > SESSION_IDLE_S:
            del self._sessions[session_id]
            return None
        session.last_seen_s = now
        self._sessions.move_to_end(session_id)
        return session

    def close(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._sessions)


def csrf_matches(session: Session, posted: str | None) -> bool:
    return posted is not None and hmac.compare_digest(session.csrf_token.encode(), posted.encode())
