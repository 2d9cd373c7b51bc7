"""Binds each admin account's signature to the request code it came with (docs/security.md §2, §8).

RocketMQ 4.x signs a request's extFields values and its body, never its code, and clients cannot be
changed: a captured signed request verifies under any other code. An admin's UPDATE_AND_CREATE_TOPIC
resent as DELETE_TOPIC_IN_BROKER deletes the topic (DELETE reads `topic` and ignores the rest); every
field-less request of an account carries the same signature, HMAC(secretKey, accessKey), so one
GET_BROKER_RUNTIME_INFO resent as CLEAN_EXPIRED_CONSUMEQUEUE is accepted.

`ReplayGuard` remembers, per (accessKey, Signature) of an admin account's verified request, the first
request code it came with and when it was last used. A guarded code (the broker's admin-only codes)
carrying a signature remembered under another code within `window_s` of its last use is refused: a
client never needs one content under two codes within minutes except in the few cases listed in
docs/security.md (a field-less read then the field-less CLEAN_EXPIRED_CONSUMEQUEUE; GET_TOPIC_STATS_INFO
then DELETE_TOPIC_IN_BROKER of the same topic), and those are byte for byte the attack. The same code
again passes: a retry, or the operator creating the same topic on every reconcile, is not refused.

What this does not do: it cannot tell a replay that comes more than `window_s` after the signature's
last use, or of a signature this broker never saw (taken from a request to another broker or a
NameServer). Only TLS, which keeps signatures off the wire, closes those (§8).

Bounded: at most `remembered_max_count` entries; the least recently used go first. Not thread-safe:
the broker's event loop is its one caller.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from shoal.acl import limits

__all__ = ["ReplayGuard"]


class ReplayGuard:
    """(accessKey, Signature) -> (first request code, last use); `check` records and judges one request."""

    def __init__(
        self,
        guarded_codes: frozenset[int],
        *,
        window_s: float = limits.ACL_REPLAY_WINDOW_S,
        remembered_max_count: int = limits.ACL_REPLAY_SIGNATURES_MAX_COUNT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        assert window_s > 0, window_s
        assert remembered_max_count > 0, remembered_max_count
        self.guarded_codes = guarded_codes
        self.window_s = window_s
        self.remembered_max_count = remembered_max_count
        self._clock = clock
        self._seen: OrderedDict[tuple[str, str], tuple[int, float]] = OrderedDict()
        """Oldest last use first (a use moves its entry to the end; the clock never goes back)."""
        self.refused_total = 0

    def __len__(self) -> int:
        return len(self._seen)

    def check(self, access_key: str, signature: str, code: int) -> str | None:
        """Record that `signature` of `access_key` came with `code`; None when the request may go on,
        else why it is refused (the signature was used with another code, and `code` is guarded)."""
        now_s = self._clock()
        key = (access_key, signature)
        seen = self._seen
        earlier = seen.get(key)
        bound_code = code
        if earlier is not None:
            first_code, last_s = earlier
            if now_s - last_s < self.window_s:
                if first_code != code and code in self.guarded_codes:
                    self.refused_total += 1
                    return _reason(access_key, first_code, code, now_s - last_s, self.window_s)
                bound_code = first_code
            seen.move_to_end(key)
        else:
            self._make_room(now_s)
        seen[key] = (bound_code, now_s)
        return None

    def _make_room(self, now_s: float) -> None:
        """Drop entries past the window from the front, then the oldest while the map is full."""
        seen = self._seen
        expired_before_s = now_s - self.window_s
        while seen:
            _code, last_s = next(iter(seen.values()))
            if last_s > expired_before_s and len(seen) < self.remembered_max_count:
                return
            seen.popitem(last=False)


def _reason(access_key: str, first_code: int, code: int, age_s: float, window_s: float) -> str:
    return (
        f"Signature of accessKey={access_key} came with request code={first_code} {age_s:.0f} s ago, "
        f"refused for request code={code}: a signature does not cover the code, so another admin code "
        f"may not reuse it within {window_s:.0f} s (a replay? else retry in {max(window_s - age_s, 0.0):.0f} s)"
    )
