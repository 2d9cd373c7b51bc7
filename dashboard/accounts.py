"""Who may use the dashboard: the accounts of a plain_acl.yml, as the brokers know them (pure).

A login is an access key and its secret key; admin actions (create or delete a topic, reset
offsets, resend a dead letter, change a broker's settings) need an account with `admin: true`.
The same keys then sign the dashboard's requests to the cluster, so brokers with aclEnable check
every action against that account's own permissions as well."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from shoal.acl.permission import perm_text
from shoal.acl.plain_acl import Account, AclRules

SECRET_SHOWN_CHARS = 2  # a masked secret keeps its first and last two characters


@dataclass(frozen=True, slots=True)
class User:
    access_key: str
    secret_key: str
    admin: bool


OPEN_USER = User(access_key="", secret_key="", admin=True)
"""Who everyone is when the dashboard runs without accounts (loopback only)."""


def authenticate(rules: AclRules, access_key: str, secret_key: str) -> User | None:
    """The user behind these keys, or None; compared in constant time."""
    account = rules.accounts.get(access_key)
    if account is None:
        hmac.compare_digest(secret_key.encode(), secret_key.encode())  # the same work either way
        return None
    if not hmac.compare_digest(account.secret_key.encode(), secret_key.encode()):
        return None
    return User(access_key=account.access_key, secret_key=account.secret_key, admin=account.admin)


def masked(secret: str) -> str:
    """`ab******yz`: enough to tell two secrets apart, never enough to use one."""
    if len(secret) <= SECRET_SHOWN_CHARS * 2:
        return "*" * len(secret)
    keep = SECRET_SHOWN_CHARS
    return secret[:keep] + "*" * (len(secret) - 2 * keep) + secret[-keep:]


@dataclass(frozen=True, slots=True)
class AccountRow:
    access_key: str
    secret_masked: str
    admin: bool
    white_address: str
    default_topic_perm: str
    default_group_perm: str
    resources: tuple[tuple[str, str], ...]


def account_rows(rules: AclRules) -> list[AccountRow]:
    """The ACL page's table: every account, its secret masked."""

    def row(account: Account) -> AccountRow:
        return AccountRow(
            access_key=account.access_key,
            secret_masked=masked(account.secret_key),
            admin=account.admin,
            white_address=account.white_address.text,
            default_topic_perm=perm_text(account.default_topic_perm),
            default_group_perm=perm_text(account.default_group_perm),
            resources=tuple(sorted((name, perm_text(perm)) for name, perm in account.resource_perms.items())),
        )

    return [row(rules.accounts[key]) for key in sorted(rules.accounts)]
