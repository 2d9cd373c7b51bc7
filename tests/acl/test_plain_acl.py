"""plain_acl.yml parsing: RocketMQ's shape into frozen rules; every mistake named precisely."""

from __future__ import annotations

import pytest

from shoal.acl.permission import DENY, PUB, SUB
from shoal.acl.plain_acl import AclFileError, parse_plain_acl

ROCKETMQ_SAMPLE = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB
  - accessKey: rocketmq2
    secretKey: "12345678"
    whiteRemoteAddress: 192.168.1.*
    admin: true
dataVersion:
  - counter: 1
    timestamp: 1
"""


def test_rocketmqs_own_sample_file_parses() -> None:
    """distribution/conf/plain_acl.yml of 4.9.7: numbers as keys, groups under %RETRY%, defaults DENY."""
    rules = parse_plain_acl(ROCKETMQ_SAMPLE)
    assert rules.globally_white("192.168.0.7") and not rules.globally_white("192.168.1.7")
    user = rules.accounts["RocketMQ"]
    assert user.secret_key == "12345678" and not user.admin
    assert user.default_topic_perm == DENY and user.default_group_perm == SUB
    assert user.resource_perms == {
        "topicA": DENY,
        "topicB": PUB | SUB,
        "topicC": SUB,
        "%RETRY%groupA": DENY,
        "%RETRY%groupB": PUB | SUB,
        "%RETRY%groupC": SUB,
    }
    admin = rules.accounts["rocketmq2"]
    assert admin.admin and admin.default_topic_perm == DENY and admin.white_address.matches("192.168.1.3")
    assert "12345678" not in repr(user)


def test_an_empty_file_has_no_accounts() -> None:
    """RocketMQ creates an empty file when none exists: nothing but white addresses would pass."""
    rules = parse_plain_acl("")
    assert not rules.accounts and not rules.global_white


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("accounts: [\n  - {", "not YAML at line"),
        ("- just\n- a list\n", "expected a mapping"),
        ("accounts: yes\n", "accounts: expected a list"),
        ("accounts:\n  - 5\n", r"accounts\[0\]: expected a mapping"),
        ("accounts:\n  - accessKey: abcdefg\n", r"accounts\[0\]: needs accessKey and secretKey"),
        (
            "accounts:\n  - {accessKey: short, secretKey: 12345678}\n",
            r"accounts\[0\]\.accessKey: 'short' must be longer",
        ),
        ("accounts:\n  - {accessKey: [1], secretKey: 12345678}\n", r"accessKey: expected text, found list"),
        (
            "accounts:\n  - {accessKey: abcdefg, secretKey: 12345678, admin: maybe}\n",
            r"\.admin: expected true or false",
        ),
        (
            "accounts:\n  - {accessKey: abcdefg, secretKey: 12345678, defaultTopicPerm: PUBB}\n",
            r"\.defaultTopicPerm: 'PUBB' is not one of",
        ),
        (
            "accounts:\n  - {accessKey: abcdefg, secretKey: 12345678, topicPerms: [topicA]}\n",
            r"\.topicPerms\[0\]: 'topicA' is not 'name=PERM'",
        ),
        (
            "accounts:\n  - {accessKey: abcdefg, secretKey: 12345678, groupPerms: [g=PUB=SUB]}\n",
            r"\.groupPerms\[0\]",
        ),
        (
            "accounts:\n  - {accessKey: abcdefg, secretKey: 12345678, whiteRemoteAddress: 1.2.3.x}\n",
            r"\.whiteRemoteAddress: white address",
        ),
        ("globalWhiteRemoteAddresses: [999.1.1.1]\n", r"globalWhiteRemoteAddresses\[0\]"),
        (
            "accounts:\n  - {accessKey: abcdefg, secretKey: 12345678}\n  - {accessKey: abcdefg, secretKey: 87654321}\n",
            r"accounts\[1\]\.accessKey: 'abcdefg' is already accounts\[0\]",
        ),
    ],
)
def test_mistakes_are_named_with_their_place(text: str, message: str) -> None:
    """Not YAML, wrong types, unknown words, duplicates: AclFileError naming where and why."""
    with pytest.raises(AclFileError, match=message):
        parse_plain_acl(text)


def test_undecodable_bytes_are_refused() -> None:
    """A binary file is an AclFileError, not a crash."""
    for data in (b"\xff\xfe\x00garbage", b"\x80\x81\x82: [", b"key: \x00\x01"):
        with pytest.raises(AclFileError, match=r"not YAML|expected a mapping"):
            parse_plain_acl(data)
