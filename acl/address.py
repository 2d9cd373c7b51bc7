"""White-address patterns of plain_acl.yml (RocketMQ's RemoteAddressStrategyFactory), pure.

    *  *.*.*.*  *:*:*:*:*:*:*:*        any address
    192.168.0.1  or  2001:db8::1       one address
    192.168.0.{1,2,3}                  a list in the last part
    192.168.0.1,10.0.0.2               a comma-separated list of addresses
    192.168.*.*  192.168.0.1-200       ranges: per IPv4 part '*' (0..255) or 'a-b'
    2001:db8::1-ff:*                   IPv6 groups likewise ('*' = 0..ffff, 'a-b' in hex)
    (blank)                            no address (the account has no white address)

Differs from RocketMQ on purpose: every part of a range pattern is checked (RocketMQ checks only the
first wildcard part of IPv4 and ignores the parts after it, so `10.*.5.5` let 10.1.2.3 in). A
pattern that is none of the above is a `ValueError` naming it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

__all__ = ["AddressPattern", "normalize_host", "parse_address_pattern"]

_ANY = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})


@dataclass(frozen=True, slots=True)
class AddressPattern:
    """A parsed pattern: `matches(host)` for a peer's IP text (no port)."""

    text: str
    any_address: bool = False
    exact: frozenset[str] = frozenset()
    """Canonical IP texts (ipaddress's compressed form)."""
    ranges_v4: tuple[tuple[int, int], ...] = ()
    """Per part (4) the allowed inclusive range; empty: no IPv4 range."""
    ranges_v6: tuple[tuple[int, int], ...] = ()
    """Per group (8) the allowed inclusive range; empty: no IPv6 range."""

    def matches(self, host: str) -> bool:
        if self.any_address:
            return True
        if not (self.exact or self.ranges_v4 or self.ranges_v6):
            return False
        try:
            address = ipaddress.ip_address(normalize_host(host))
        except ValueError:
            return False
        if str(address) in self.exact:
            return True
        if address.version == 4 and self.ranges_v4:
            parts = address.packed
            return all(low <= part <= high for part, (low, high) in zip(parts, self.ranges_v4, strict=True))
        if address.version == 6 and self.ranges_v6:
            packed = address.packed
            groups = [int.from_bytes(packed[i : i + 2], "big") for i in range(0, 16, 2)]
            return all(low <= group <= high for group, (low, high) in zip(groups, self.ranges_v6, strict=True))
        return False


def normalize_host(host: str) -> str:
    """A peer's host as RocketMQ sees it: brackets and zone dropped, IPv4-mapped IPv6 as IPv4."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    bare = bare.split("%", 1)[0]
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        return bare
    if address.version == 6 and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def _canonical(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        raise ValueError(f"{text.strip()!r} is not an IP address") from None


def _range(part: str, high_max: int, base: int) -> tuple[int, int]:
    part = part.strip()
    if part == "*":
        return 0, high_max
    low_text, dash, high_text = part.partition("-")
    try:
        low = int(low_text, base)
        high = int(high_text, base) if dash else low
    except ValueError:
        raise ValueError(f"{part!r} is not a number, '*' or 'a-b'") from None
    if not 0 <= low <= high <= high_max:
        raise ValueError(f"{part!r} is outside 0..{high_max:x}" if base == 16 else f"{part!r} is outside 0..{high_max}")
    return low, high


def _expand_v6(text: str) -> list[str]:
    """The 8 groups of an IPv6 pattern with '::' expanded (groups may be '*' or 'a-b')."""
    if text.count("::") > 1:
        raise ValueError("more than one '::'")
    if "::" in text:
        head, _, tail = text.partition("::")
        left = head.split(":") if head else []
        right = tail.split(":") if tail else []
        missing = 8 - len(left) - len(right)
        if missing < 1:
            raise ValueError("'::' stands for no group")
        return [*left, *(["0"] * missing), *right]
    groups = text.split(":")
    if len(groups) != 8:
        raise ValueError("an IPv6 pattern has 8 groups")
    return groups


def parse_address_pattern(text: str | None) -> AddressPattern:
    """The pattern of one whiteRemoteAddress / globalWhiteRemoteAddresses entry."""
    if text is None or not text.strip():
        return AddressPattern(text or "")
    pattern = text.strip()
    try:
        if pattern in _ANY:
            return AddressPattern(pattern, any_address=True)
        if pattern.endswith("}"):
            prefix, brace, inner = pattern.partition("{")
            if not brace or not (prefix.endswith(".") or prefix.endswith(":")):
                raise ValueError("a list is written a.b.c.{1,2,3}")
            items = [item for item in inner[:-1].split(",") if item.strip()]
            if not items:
                raise ValueError("an empty list")
            return AddressPattern(pattern, exact=frozenset(_canonical(prefix + item.strip()) for item in items))
        if "," in pattern:
            return AddressPattern(pattern, exact=frozenset(_canonical(item) for item in pattern.split(",") if item))
        if "*" in pattern or "-" in pattern:
            if ":" in pattern:
                groups = _expand_v6(pattern)
                return AddressPattern(pattern, ranges_v6=tuple(_range(group or "0", 0xFFFF, 16) for group in groups))
            parts = pattern.split(".")
            if len(parts) != 4:
                raise ValueError("an IPv4 pattern has 4 parts")
            return AddressPattern(pattern, ranges_v4=tuple(_range(part, 255, 10) for part in parts))
        return AddressPattern(pattern, exact=frozenset({_canonical(pattern)}))
    except ValueError as error:
        raise ValueError(f"white address {pattern!r}: {error}") from None
