"""RocketMQ 4.9.7 plain ACL for the Broker and the NameServer (spec §14; docs/security.md §2).

    plain_acl  plain_acl.yml -> frozen AclRules (pure)
    address    white-address patterns (pure)
    permission resources per request code, admin codes, permission bits (pure)
    access_validator  the check of one request -> None or a NO_PERMISSION response
    replay     binds an admin account's signature to its request code (the broker's)
    watcher    loads the file and reloads it when it changes (I/O)

`start_acl` loads the file; the validator's `refusal` becomes the server's `gate`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from shoal.acl.access_validator import AccessValidator
from shoal.acl.permission import ADMIN_CODES
from shoal.acl.plain_acl import EMPTY_RULES, Account, AclFileError, AclRules, parse_plain_acl
from shoal.acl.replay import ReplayGuard
from shoal.acl.watcher import AclFileWatcher, load_acl_file
from shoal.protocol import RequestCode
from shoal.remoting.settings import ConfigError

__all__ = [
    "ADMIN_CODES",
    "NAMESRV_CHECKED_CODES",
    "AccessValidator",
    "Account",
    "AclFileError",
    "AclFileWatcher",
    "AclRules",
    "ReplayGuard",
    "acl_file_path",
    "load_acl_file",
    "parse_plain_acl",
    "start_acl",
]

log = logging.getLogger(__name__)

NAMESRV_CHECKED_CODES: frozenset[int] = frozenset(
    {
        RequestCode.REGISTER_BROKER,
        RequestCode.UNREGISTER_BROKER,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        RequestCode.PUT_KV_CONFIG,
        RequestCode.DELETE_KV_CONFIG,
        RequestCode.UPDATE_NAMESRV_CONFIG,
    }
)
"""What a NameServer with aclEnable checks: the codes that change routes or its configuration, each
admin-only. Route queries stay open, as on any RocketMQ NameServer (4.9.7's checks nothing)."""


def acl_file_path(configured: str, rocketmq_home: str | None) -> Path:
    """`plainAclFile` when set, else ${ROCKETMQ_HOME}/conf/plain_acl.yml as RocketMQ; AclFileError
    when neither is known."""
    if configured:
        return Path(configured)
    if rocketmq_home:
        return Path(rocketmq_home) / "conf" / "plain_acl.yml"
    raise AclFileError("aclEnable=true needs plainAclFile=<path> (or ROCKETMQ_HOME with conf/plain_acl.yml)")


def start_acl(plain_acl_file: str, *, namesrv: bool) -> tuple[AccessValidator, AclFileWatcher]:
    """Load plain_acl.yml (`plainAclFile`, else RocketMQ's place) and return the validator and its
    watcher (not started: call `watcher.start()` on the running loop). A file that cannot be used is
    a ConfigError (one line at startup): a server with aclEnable never runs without rules."""
    try:
        path = acl_file_path(plain_acl_file, os.environ.get("ROCKETMQ_HOME"))
        return _start(path, namesrv=namesrv)
    except AclFileError as error:
        raise ConfigError(f"aclEnable=true: {error}") from None


def _start(path: Path, *, namesrv: bool) -> tuple[AccessValidator, AclFileWatcher]:
    # The broker binds admin signatures to their request code. The NameServer does not: it verifies
    # only its checked codes, and two of them, WIPE_ and ADD_WRITE_PERM_OF_BROKER, carry the same
    # field (brokerName), so an operator's drain and its undo would look like a replay.
    validator = AccessValidator(
        EMPTY_RULES,
        admin_codes=NAMESRV_CHECKED_CODES if namesrv else ADMIN_CODES,
        checked_codes=NAMESRV_CHECKED_CODES if namesrv else None,
        replay_guard=None if namesrv else ReplayGuard(ADMIN_CODES),
    )

    def take(rules: AclRules) -> None:
        validator.rules = rules

    watcher = AclFileWatcher(path, take)
    watcher.load()
    return validator, watcher
