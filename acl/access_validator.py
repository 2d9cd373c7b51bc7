"""The ACL check of one request (RocketMQ's PlainPermissionManager.validate), and its refusal.

Order as 4.9.7: a globally white peer passes; then the AccessKey must be present and known; a peer
matching the account's white address passes; then the signature must verify; publishing to the
trace topic passes; then admin-only codes need `admin: true` and every resource the request touches
needs its permission. Shoal adds one step after the signature, on the broker: an admin account's
signature is bound to the request code it came with (`ReplayGuard`, replay.py), since the signature
does not cover the code. A refusal is NO_PERMISSION (16) whose remark is RocketMQ's AclException text,
naming what was missing (4.9.7 answers SYSTEM_ERROR (1) with the same text, because its hook's
exception falls into the generic error path; clients treat both as a broker error).

`checked_codes` limits checking to some codes (the NameServer checks only the codes that change
routing or its configuration; everything else stays open as in RocketMQ, whose NameServer checks
nothing). The rules are swapped whole on reload (`rules` is one attribute: no lock needed on one
event loop).
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Mapping

from shoal.acl import limits
from shoal.acl.address import normalize_host
from shoal.acl.permission import (
    ADMIN_CODES,
    PUB,
    has_permission,
    is_group_resource,
    perm_text,
    required_resources,
    resource_text,
)
from shoal.acl.plain_acl import Account, AclRules
from shoal.acl.replay import ReplayGuard
from shoal.protocol import ProtocolError, RemotingCommand, RequestCode, ResponseCode, make_response
from shoal.protocol.acl_signature import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, verify
from shoal.protocol.grpc_signature import parse_authorization, signature_v5

__all__ = ["ACL_EXCEPTION_PREFIX", "TRACE_TOPIC", "AccessValidator"]

log = logging.getLogger(__name__)

ACL_EXCEPTION_PREFIX = "org.apache.rocketmq.acl.common.AclException: "
"""Remarks start as 4.9.7's do, so tools that look for AclException still find it."""
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
"""TopicValidator.RMQ_SYS_TRACE_TOPIC: publishing trace records needs no permission (4.9.7)."""


_FIELD_LENGTH_MAX = limits.ACL_REQUEST_FIELD_LENGTH_MAX

_DECIDED_BY_FIELDS: dict[int, tuple[str, str]] = {
    RequestCode.SEND_MESSAGE_V2: ("b", "a"),
    RequestCode.SEND_BATCH_MESSAGE: ("b", "a"),
    RequestCode.PULL_MESSAGE: ("topic", "consumerGroup"),
}
"""The hot codes whose resources (permission.required_resources) depend on these two fields only."""


class AccessValidator:
    """Checks requests against the current `AclRules`; `refusal` is the hook a server calls."""

    def __init__(
        self,
        rules: AclRules,
        *,
        admin_codes: frozenset[int] = ADMIN_CODES,
        checked_codes: frozenset[int] | None = None,
        replay_guard: ReplayGuard | None = None,
    ) -> None:
        self._rules = rules
        self.admin_codes = admin_codes
        self.checked_codes = checked_codes
        """None: every code is checked; else only these."""
        self.replay_guard = replay_guard
        """Binds admin accounts' signatures to their request code (the broker's); None: not bound.
        Kept across reloads: a signature stays valid as long as its account's secret."""
        self._white_hosts: dict[str, bool] = {}
        """peer host text -> globally white under the current rules (cleared on reload)."""
        self._white_accounts: dict[tuple[str, str], bool] = {}
        """(accessKey, peer host) -> the account's whiteRemoteAddress matches it (cleared on reload)."""
        self._decisions: dict[tuple[str, int, str | None, str | None], str | None] = {}
        """(accessKey, code, resource fields) -> verdict of a send or pull (cleared on reload)."""
        self.refused_total = 0
        self._logged_in_window = 0
        self._suppressed_in_window = 0
        self._window_start_s = 0.0

    @property
    def rules(self) -> AclRules:
        return self._rules

    @rules.setter
    def rules(self, rules: AclRules) -> None:
        self._rules = rules
        self._white_hosts = {}
        self._white_accounts = {}
        self._decisions = {}

    def refusal(self, peer_host: str, command: RemotingCommand) -> RemotingCommand | None:
        """None when `command` from `peer_host` may proceed; else the NO_PERMISSION response."""
        if self.checked_codes is not None and command.code not in self.checked_codes:
            return None
        reason = self.check(peer_host, command)
        if reason is None:
            return None
        self.refused_total += 1
        self._log_refusal(peer_host, command, reason)
        return make_response(command, ResponseCode.NO_PERMISSION, ACL_EXCEPTION_PREFIX + reason)

    def check(self, peer_host: str, command: RemotingCommand) -> str | None:
        """None when allowed, else why not (RocketMQ's words where it has them)."""
        rules = self._rules
        if rules.global_white and self._globally_white(rules, peer_host):
            return None
        ext = command.ext_fields
        access_key = ext.get(ACCESS_KEY)
        if access_key is None:
            return "No accessKey is configured"
        longest = _FIELD_LENGTH_MAX
        if (
            len(access_key) > longest
            or len(ext.get(SIGNATURE, "")) > longest
            or len(ext.get(SECURITY_TOKEN, "")) > longest
        ):
            name = next(name for name in (ACCESS_KEY, SIGNATURE, SECURITY_TOKEN) if len(ext.get(name, "")) > longest)
            return f"{name} is {len(ext[name])} characters, more than {longest}"
        account = rules.accounts.get(access_key)
        if account is None:
            return f"No acl config for {access_key}"
        white = self._white_accounts.get((access_key, peer_host))
        if white is None:
            white = self._account_white(account, peer_host)
        if white:
            return None
        if not verify(ext, command.body, account.secret_key):
            return f"Check signature failed for accessKey={access_key}"
        code = command.code
        guard = self.replay_guard
        if guard is not None and account.admin:  # only an admin's signature can pass an admin code
            replayed = guard.check(access_key, ext[SIGNATURE], code)
            if replayed is not None:
                return replayed
        fields = _DECIDED_BY_FIELDS.get(code)
        if fields is None:
            return self._decide(account, command)
        # Sends and pulls name their resources in two header fields: their verdict is kept per
        # (account, code, fields) until the rules change; the signature above is checked every time.
        decision_key = (access_key, code, ext.get(fields[0]), ext.get(fields[1]))
        decisions = self._decisions
        if decision_key in decisions:
            return decisions[decision_key]
        if len(decisions) >= limits.ACL_DECISIONS_CACHED_MAX_COUNT:
            decisions.clear()
        verdict = decisions[decision_key] = self._decide(account, command)
        return verdict

    def authenticate_v5(self, peer_host: str, authorization: str, date_time: str) -> tuple[Account | None, str | None]:
        """A RocketMQ 5 gRPC caller's account from its `authorization` and `x-mq-date-time`
        metadata, in `check`'s order: (None, None) for a globally white peer, (account, None) when
        it is white for the account or its signature verifies, else (None, why not)."""
        rules = self._rules
        if rules.global_white and self._globally_white(rules, peer_host):
            return None, None
        parsed = parse_authorization(authorization)
        if parsed is None or not parsed.access_key:
            return None, "No accessKey is configured"
        account = rules.accounts.get(parsed.access_key)
        if account is None:
            return None, f"No acl config for {parsed.access_key}"
        white = self._white_accounts.get((parsed.access_key, peer_host))
        if white is None:
            white = self._account_white(account, peer_host)
        if white:
            return account, None
        expected = signature_v5(account.secret_key, date_time)
        if not hmac.compare_digest(expected, parsed.signature.upper()):
            return None, f"Check signature failed for accessKey={parsed.access_key}"
        return account, None

    def permitted(self, account: Account, needed: Mapping[str, int]) -> str | None:
        """None when `account` holds every permission in `needed` (resource -> PUB/SUB/ANY), else why not."""
        return self._permission(account, -1, needed)

    def _account_white(self, account: Account, peer_host: str) -> bool:
        """Whether `peer_host` matches the account's whiteRemoteAddress, kept per (accessKey, host)
        until the rules change: parsing the address cost more than the rest of the check."""
        white = account.white_address.matches(peer_host)
        if len(self._white_accounts) >= limits.ACL_HOST_CACHE_MAX_COUNT:
            self._white_accounts.clear()
        self._white_accounts[(account.access_key, peer_host)] = white
        return white

    def _decide(self, account: Account, command: RemotingCommand) -> str | None:
        """The permission part of the check, after the signature."""
        try:
            needed = required_resources(command)
        except ProtocolError as error:
            return f"cannot read the resources of request code={command.code}: {error}"
        if needed.get(TRACE_TOPIC) == PUB:
            return None
        return self._permission(account, command.code, needed)

    def _permission(self, account: Account, code: int, needed: Mapping[str, int]) -> str | None:
        if code in self.admin_codes and not account.admin:
            return f"Need admin permission for request code={code}, but accessKey={account.access_key} is not"
        if not needed or (account.admin and not account.resource_perms):
            return None
        owned_perms = account.resource_perms
        for resource, perm in needed.items():
            owned = owned_perms.get(resource)
            if owned is None:
                owned = account.default_group_perm if is_group_resource(resource) else account.default_topic_perm
            if not has_permission(perm, owned):
                return (
                    f"No default permission for {resource_text(resource)} "
                    f"(accessKey={account.access_key} needs {perm_text(perm)}, has {perm_text(owned)})"
                )
        return None

    def _globally_white(self, rules: AclRules, peer_host: str) -> bool:
        known = self._white_hosts.get(peer_host)
        if known is None:
            known = rules.globally_white(normalize_host(peer_host))
            if len(self._white_hosts) >= limits.ACL_HOST_CACHE_MAX_COUNT:
                self._white_hosts.clear()
            self._white_hosts[peer_host] = known
        return known

    def _log_refusal(self, peer_host: str, command: RemotingCommand, reason: str) -> None:
        """One line per refusal, at most ACL_REFUSALS_LOGGED_PER_WINDOW_COUNT per window (a flood of
        bad requests must not flood the log); the rest are summed up when the window turns."""
        now = time.monotonic()
        if now - self._window_start_s >= limits.ACL_REFUSAL_LOG_WINDOW_S:
            if self._suppressed_in_window:
                log.warning("ACL: %d more refusals not logged in the last window", self._suppressed_in_window)
            self._window_start_s = now
            self._logged_in_window = self._suppressed_in_window = 0
        if self._logged_in_window >= limits.ACL_REFUSALS_LOGGED_PER_WINDOW_COUNT:
            self._suppressed_in_window += 1
            return
        self._logged_in_window += 1
        log.warning("ACL refused request code %d from %s: %s", command.code, peer_host, reason[:300])
