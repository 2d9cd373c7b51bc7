"""Message ids: the client's UNIQ_KEY and the broker's offset message id (spec §1.8).

UNIQ_KEY (`MessageClientIDSetter`), uppercase hex of:

    offset  size   field
    0       4/16   client IP (IPv4 / IPv6)
    4       2      pid (low 16 bits)
    6       4      class-loader hash (Java); a random per-process int here
    10      4      ms since the start of the current month, local time (wraps past 2^31)
    14      2      counter (low 16 bits)

-> 32 hex characters (IPv4) or 56 (IPv6). The first three fields are a per-process prefix.

Offset message id (`MessageDecoder.createMessageId`), uppercase hex of the store host's address
(4/16 bytes), its port (int) and the record's CommitLog offset (long): 32 or 56 characters. The
store names what it appended with it, the client decodes it for VIEW_MESSAGE_BY_ID.
"""

from __future__ import annotations

import datetime
import ipaddress
import itertools
import os
import random
import socket
import struct
import time
from collections.abc import Callable

from shoal.formats.errors import MessageIdError

_PREFIX_TAIL = struct.Struct(">HI")  # pid, class-loader hash
_SUFFIX = struct.Struct(">IH")  # ms since month start, counter
_OFFSET = struct.Struct(">q")
_PORT = struct.Struct(">i")
_CLOCK_BACK_TOLERANCE_MS = 1_000_000  # Java zeroes a negative span smaller than this (clock moved back)
_IPV4_ID_LENGTH_BYTES = 16
_IPV6_ID_LENGTH_BYTES = 28


def wall_clock_ms() -> int:
    """Epoch milliseconds, the clock RocketMQ ids use."""
    return time.time_ns() // 1_000_000


def local_ip() -> str:
    """The address this host uses for outbound IPv4 traffic, or 127.0.0.1 (no packet is sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: only picks a route
            address: str = probe.getsockname()[0]
            return address
    except OSError:
        pass
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def _month_start_ms(now_ms: int) -> tuple[int, int]:
    """(start of the month containing now_ms, start of the next month), local time, epoch ms."""
    now = datetime.datetime.fromtimestamp(now_ms / 1000)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (
        start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    )
    return int(start.timestamp() * 1000), int(following.timestamp() * 1000)


class UniqueIdGenerator:
    """Generates UNIQ_KEY ids as `MessageClientIDSetter.createUniqID` does."""

    def __init__(
        self,
        ip: str | None = None,
        *,
        pid: int | None = None,
        loader_hash: int | None = None,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        address = ipaddress.ip_address(ip or local_ip())
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        pid_value = os.getpid() if pid is None else pid
        loader = random.getrandbits(32) if loader_hash is None else loader_hash
        self._prefix = (address.packed + _PREFIX_TAIL.pack(pid_value & 0xFFFF, loader & 0xFFFFFFFF)).hex().upper()
        self._clock_ms = clock_ms
        self._counter = itertools.count()
        self._start_ms, self._next_start_ms = _month_start_ms(clock_ms())

    def create(self) -> str:
        """A new id: the process prefix, the ms since the month start, a counter."""
        suffix = _SUFFIX.pack(self._span_ms(), next(self._counter) & 0xFFFF)
        return self._prefix + suffix.hex().upper()

    def create_many(self, count: int) -> list[str]:
        """`count` new ids on one clock reading (a batch's): each is what `create` would give."""
        head = self._prefix + f"{self._span_ms():08X}"
        counter = self._counter
        return [f"{head}{next(counter) & 0xFFFF:04X}" for _ in range(count)]

    def _span_ms(self) -> int:
        now_ms = self._clock_ms()
        if now_ms >= self._next_start_ms:
            self._start_ms, self._next_start_ms = _month_start_ms(now_ms)
        span_ms = now_ms - self._start_ms
        if -_CLOCK_BACK_TOLERANCE_MS < span_ms < 0:
            span_ms = 0
        return span_ms & 0xFFFFFFFF


_default_generator: UniqueIdGenerator | None = None


def _process_generator() -> UniqueIdGenerator:
    global _default_generator
    if _default_generator is None:
        _default_generator = UniqueIdGenerator()
    return _default_generator


def create_uniq_id() -> str:
    """A new UNIQ_KEY from the process-wide generator."""
    return _process_generator().create()


def create_uniq_ids(count: int) -> list[str]:
    """`count` new UNIQ_KEYs from the process-wide generator (a batch's)."""
    return _process_generator().create_many(count)


def _id_bytes(msg_id: str) -> bytes:
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise MessageIdError(f"message id {msg_id[:64]!r} is not hex") from None
    if len(raw) not in (_IPV4_ID_LENGTH_BYTES, _IPV6_ID_LENGTH_BYTES):
        raise MessageIdError(f"message id {msg_id[:64]!r} is not 32 (IPv4) or 56 (IPv6) hex characters")
    return raw


def uniq_id_ip(uniq_id: str) -> str:
    """The client address inside a UNIQ_KEY (`MessageClientIDSetter.getIPStrFromID`)."""
    raw = _id_bytes(uniq_id)
    return str(ipaddress.ip_address(raw[: 16 if len(raw) == _IPV6_ID_LENGTH_BYTES else 4]))


def uniq_id_nearly_time_ms(uniq_id: str, now_ms: int | None = None) -> int:
    """About when a UNIQ_KEY was made (`getNearlyTimeFromID`): this month, or the last one."""
    raw = _id_bytes(uniq_id)
    ip_length = 16 if len(raw) == _IPV6_ID_LENGTH_BYTES else 4
    span_ms: int = struct.unpack_from(">I", raw, ip_length + 6)[0]
    now = wall_clock_ms() if now_ms is None else now_ms
    start_ms, _ = _month_start_ms(now)
    if start_ms + span_ms >= now:
        start_ms, _ = _month_start_ms(start_ms - 1)
    return start_ms + span_ms


def format_host(address: bytes | memoryview, port: int) -> str:
    """ "ip:port" for a 4-byte address, "[ip]:port" for a 16-byte one."""
    if len(address) == 4:
        return f"{address[0]}.{address[1]}.{address[2]}.{address[3]}:{port}"
    return f"[{ipaddress.IPv6Address(bytes(address))}]:{port}"


def offset_msg_id(host: bytes | memoryview, commitlog_offset: int) -> str:
    """The offset message id of a record: `host` is the raw STOREHOST (address + int port)."""
    return (bytes(host) + _OFFSET.pack(commitlog_offset)).hex().upper()


def offset_msg_id_of_hex(host_hex: str, commitlog_offset: int) -> str:
    """`offset_msg_id` from the host's upper-case hex, made once (a store's host does not change)."""
    return host_hex + format(commitlog_offset & _OFFSET_MASK, "016X")


_OFFSET_MASK = 0xFFFF_FFFF_FFFF_FFFF  # the offset's 8 bytes as Java writes a long (two's complement)


def decode_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """(store host "ip:port", CommitLog offset) of an offset message id."""
    raw = _id_bytes(msg_id)
    address_length = len(raw) - 12
    port: int = _PORT.unpack_from(raw, address_length)[0]
    offset: int = _OFFSET.unpack_from(raw, address_length + 4)[0]
    return format_host(raw[:address_length], port), offset
