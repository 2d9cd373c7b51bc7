"""shoal.dashboard.accounts: logins against plain_acl.yml accounts, secrets masked."""

from __future__ import annotations

from shoal.acl.plain_acl import parse_plain_acl
from shoal.dashboard.accounts import account_rows, authenticate, masked

RULES = parse_plain_acl(
    """\
accounts:
  - accessKey: opsAdmin
    secretKey: opsSecret123
    admin: true
  - accessKey: opsViewer
    secretKey: viewerSecret9
    whiteRemoteAddress: 10.0.*.*
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
    topicPerms: ["Orders=PUB|SUB"]
"""
)


def test_the_right_keys_log_in_with_the_accounts_admin_flag() -> None:
    admin = authenticate(RULES, "opsAdmin", "opsSecret123")
    viewer = authenticate(RULES, "opsViewer", "viewerSecret9")
    assert admin is not None and admin.admin and admin.secret_key == "opsSecret123"
    assert viewer is not None and not viewer.admin


def test_wrong_keys_do_not() -> None:
    assert authenticate(RULES, "opsAdmin", "opsSecret12") is None
    assert authenticate(RULES, "opsAdmin", "") is None
    assert authenticate(RULES, "nobody", "opsSecret123") is None


def test_secrets_are_masked_on_the_acl_page() -> None:
    assert masked("opsSecret123") == "op********23"
    assert masked("abcd") == "****"
    rows = account_rows(RULES)
    assert [row.access_key for row in rows] == ["opsAdmin", "opsViewer"]
    assert all("Secret" not in row.secret_masked for row in rows)
    viewer = rows[1]
    assert (viewer.white_address, viewer.default_topic_perm, viewer.resources) == (
        "10.0.*.*",
        "SUB",
        (("Orders", "PUB|SUB"),),
    )
