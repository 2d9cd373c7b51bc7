"""UNIQ_KEY generation (MessageClientIDSetter) and offset message ids (spec §1.8)."""

from __future__ import annotations

import datetime
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.formats.errors import MessageIdError
from shoal.formats.message_id import (
    UniqueIdGenerator,
    create_uniq_id,
    create_uniq_ids,
    decode_offset_msg_id,
    format_host,
    offset_msg_id,
    offset_msg_id_of_hex,
    uniq_id_ip,
    uniq_id_nearly_time_ms,
)


def local_ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    return int(datetime.datetime(year, month, day, hour, minute).timestamp() * 1000)


def test_uniq_key_layout_is_ip_pid_loader_time_counter() -> None:
    """Goal: the 16-byte IPv4 layout of spec §1.8. Method: fixed ip/pid/hash/clock, read the hex."""
    now = local_ms(2024, 3, 2, 1, 0)
    generator = UniqueIdGenerator("10.0.0.5", pid=0x1234, loader_hash=0xCAFEBABE, clock_ms=lambda: now)
    first, second = generator.create(), generator.create()
    span_ms = now - local_ms(2024, 3, 1)
    assert first == f"0A0000051234CAFEBABE{span_ms:08X}0000"
    assert second == first[:-4] + "0001"
    assert re.fullmatch(r"[0-9A-F]{32}", first)


def test_pid_and_counter_keep_their_low_16_bits() -> None:
    """Goal: Java's (short) casts. Method: a pid above 65535 and a counter past 65535."""
    generator = UniqueIdGenerator("127.0.0.1", pid=0x12345, loader_hash=1, clock_ms=lambda: local_ms(2024, 1, 1))
    ids = [generator.create() for _ in range(0x10001)]
    assert ids[0][8:12] == "2345"
    assert ids[-1][-4:] == "0000"  # the counter wrapped


def test_ipv6_client_gives_56_hex_characters_and_mapped_ipv4_is_ipv4() -> None:
    """Goal: 16-byte addresses for IPv6, IPv4 for ::ffff:a.b.c.d. Method: two generators."""
    clock = lambda: local_ms(2024, 1, 1)  # noqa: E731
    assert len(UniqueIdGenerator("2001:db8::1", pid=1, loader_hash=1, clock_ms=clock).create()) == 56
    assert UniqueIdGenerator("::ffff:10.0.0.1", pid=1, loader_hash=1, clock_ms=clock).create().startswith("0A000001")


def test_month_start_moves_when_the_month_changes() -> None:
    """Goal: the time field counts from the current month's start. Method: a clock crossing a month."""
    times = [local_ms(2024, 1, 31, 23, 59), local_ms(2024, 2, 1, 0, 1)]
    generator = UniqueIdGenerator("10.0.0.1", pid=1, loader_hash=1, clock_ms=lambda: times[0])
    generator.create()
    times[0] = times[1]
    assert int(generator.create()[20:28], 16) == 60_000


def test_span_past_2_31_ms_wraps_like_a_java_int() -> None:
    """Goal: late in a 31-day month the int overflows; bytes must match Java. Method: day 30."""
    now = local_ms(2024, 1, 30)
    generator = UniqueIdGenerator("10.0.0.1", pid=1, loader_hash=1, clock_ms=lambda: now)
    span_ms = now - local_ms(2024, 1, 1)
    assert span_ms > 2**31
    assert int(generator.create()[20:28], 16) == span_ms & 0xFFFFFFFF


def test_uniq_key_ip_and_nearly_time_are_recovered() -> None:
    """Goal: getIPStrFromID / getNearlyTimeFromID. Method: make an id, read both back."""
    made_at = local_ms(2024, 5, 10, 12, 0)
    uniq = UniqueIdGenerator("192.168.3.4", pid=9, loader_hash=9, clock_ms=lambda: made_at).create()
    assert uniq_id_ip(uniq) == "192.168.3.4"
    assert uniq_id_nearly_time_ms(uniq, now_ms=made_at + 5000) == made_at
    # read early next month, the id still belongs to the month it was made in
    assert uniq_id_nearly_time_ms(uniq, now_ms=local_ms(2024, 6, 2)) == made_at


def test_process_wide_ids_are_unique() -> None:
    """Goal: the default generator never repeats. Method: 5000 ids in a set."""
    assert len({create_uniq_id() for _ in range(5000)}) == 5000


def test_ids_made_many_at_once_are_the_ids_made_one_by_one() -> None:
    """Goal: a batch's ids (one clock reading) are what `create` gives, counter wrap included.
    Method: two generators on one fixed clock, one making ids one by one, one in runs."""
    now = local_ms(2024, 1, 30)  # a span past 2**31 ms: the wrapped int, as `create` writes it
    one, many = (UniqueIdGenerator("10.1.2.3", pid=7, loader_hash=0xBEEF, clock_ms=lambda: now) for _ in range(2))
    sizes = (0, 1, 64, 0xFFFF, 4)
    expected = [one.create() for _ in range(sum(sizes))]
    made = [key for size in sizes for key in many.create_many(size)]
    assert made == expected


def test_process_wide_batches_of_ids_never_repeat() -> None:
    """Goal: ids made in batches and one by one from the process generator stay unique."""
    keys = [key for _ in range(50) for key in create_uniq_ids(64)] + [create_uniq_id() for _ in range(100)]
    assert len(set(keys)) == len(keys)


def test_offset_msg_id_round_trips_ipv4_and_ipv6() -> None:
    """Goal: store host + port + CommitLog offset, uppercase hex. Method: encode, decode."""
    ipv4 = offset_msg_id(bytes([192, 168, 1, 10]) + (10911).to_bytes(4, "big"), 0)
    assert ipv4 == "C0A8010A00002A9F0000000000000000"  # spec appendix A.1
    assert decode_offset_msg_id(ipv4) == ("192.168.1.10:10911", 0)
    raw_v6 = bytes(15) + b"\x01" + (10911).to_bytes(4, "big")
    ipv6 = offset_msg_id(raw_v6, 2**40)
    assert len(ipv6) == 56
    assert decode_offset_msg_id(ipv6) == ("[::1]:10911", 2**40)


@pytest.mark.parametrize("bad", ["", "XYZ", "00" * 15, "00" * 17])
def test_malformed_message_ids_are_refused(bad: str) -> None:
    """Goal: only 32 or 56 hex characters are ids. Method: decode bad strings."""
    with pytest.raises(MessageIdError):
        decode_offset_msg_id(bad)


def test_hosts_are_formatted_with_brackets_for_ipv6() -> None:
    """Goal: "ip:port" / "[v6]:port". Method: format both kinds."""
    assert format_host(bytes([1, 2, 3, 4]), 5) == "1.2.3.4:5"
    assert format_host(bytes(16), 7) == "[::]:7"


@settings(max_examples=500, deadline=None)
@given(st.binary(min_size=8, max_size=8) | st.binary(min_size=20, max_size=20), st.integers(-(2**63), 2**63 - 1))
def test_the_offset_id_from_the_hosts_hex_is_the_offset_id(host: bytes, offset: int) -> None:
    assert offset_msg_id_of_hex(host.hex().upper(), offset) == offset_msg_id(host, offset)
