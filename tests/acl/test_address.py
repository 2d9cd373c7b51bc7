"""White-address patterns: RocketMQ's forms, each part checked, bad patterns named."""

from __future__ import annotations

import pytest

from shoal.acl.address import normalize_host, parse_address_pattern


@pytest.mark.parametrize(
    ("pattern", "inside", "outside"),
    [
        ("*", ["1.2.3.4", "::1"], []),
        ("*.*.*.*", ["10.0.0.1"], []),
        ("192.168.0.1", ["192.168.0.1"], ["192.168.0.2"]),
        ("192.168.0.{1,2,3}", ["192.168.0.2"], ["192.168.0.4"]),
        ("192.168.0.1,10.0.0.2", ["10.0.0.2"], ["10.0.0.3"]),
        ("192.168.*.*", ["192.168.7.9"], ["192.169.0.1"]),
        ("192.168.0.1-200", ["192.168.0.200"], ["192.168.0.201", "192.168.1.5"]),
        ("10.*.5.5", ["10.1.5.5"], ["10.1.2.3"]),
        ("2001:db8::1", ["2001:DB8:0:0:0:0:0:1"], ["2001:db8::2"]),
        ("2001:db8::1-ff:*", ["2001:db8::10:7"], ["2001:db8::100:7"]),
        ("", [], ["127.0.0.1"]),
    ],
)
def test_patterns_match_what_rocketmq_documents(pattern: str, inside: list[str], outside: list[str]) -> None:
    """Each documented form admits its addresses and nothing else."""
    parsed = parse_address_pattern(pattern)
    assert all(parsed.matches(host) for host in inside)
    assert not any(parsed.matches(host) for host in outside)


@pytest.mark.parametrize("pattern", ["300.1.1.1", "1.2.3", "1.2.3.9-4", "a.b.c.d", "1.2.3.{x}", "1::2::3:*"])
def test_bad_patterns_are_refused_naming_them(pattern: str) -> None:
    """A pattern that is none of the forms is a ValueError quoting it."""
    with pytest.raises(ValueError, match="white address"):
        parse_address_pattern(pattern)


def test_peer_hosts_are_normalized_as_rocketmq_sees_them() -> None:
    """IPv4-mapped IPv6 peers count as IPv4 (gotcha 28); brackets and zones go."""
    assert normalize_host("::ffff:10.1.2.3") == "10.1.2.3"
    assert normalize_host("[::1]") == "::1"
    assert parse_address_pattern("10.1.2.*").matches("::ffff:10.1.2.3")
