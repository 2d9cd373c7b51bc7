"""What callers hand the store to write (MessageToStore, BatchEntry), what a write gives back
(AppendResult, PutResult) and what reads give back (GetResult)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from shoal.formats.message_id import offset_msg_id, offset_msg_id_of_hex
from shoal.formats.properties import decode_properties
from shoal.formats.record import record_length
from shoal.store import limits
from shoal.store.errors import MessageIllegalError, PropertiesTooLargeError, PutStatus

DEFAULT_BORN_HOST = bytes([127, 0, 0, 1]) + (0).to_bytes(4, "big")


def validate_message(
    topic: bytes, body_len: int, properties_len: int, size_max_bytes: int, hosts_bytes: int = 16
) -> None:
    """Refuse what the record format or the configured limits cannot hold (spec §1.9 step 1).
    maxMessageSize bounds the whole record, as RocketMQ's `doAppend` checks `calMsgLength`:
    `hosts_bytes` is the born and store host fields together (8 bytes each for IPv4, 20 for IPv6)."""
    if not topic or len(topic) > limits.TOPIC_LENGTH_MAX_BYTES:
        raise MessageIllegalError(f"topic is {len(topic)} bytes; it must be 1..{limits.TOPIC_LENGTH_MAX_BYTES} bytes")
    if properties_len > limits.PROPERTIES_LENGTH_MAX_BYTES:
        raise PropertiesTooLargeError(
            f"properties are {properties_len} bytes, more than {limits.PROPERTIES_LENGTH_MAX_BYTES}"
        )
    size = record_length(body_len, len(topic), properties_len, hosts_bytes - 8, 8)
    if size > size_max_bytes:
        raise MessageIllegalError(
            f"message record is {size} bytes (body {body_len}, properties {properties_len}), "
            f"more than maxMessageSize={size_max_bytes}"
        )


class AppendResult(NamedTuple):
    """Where a put landed (RocketMQ's AppendMessageResult)."""

    status: PutStatus
    wrote_offset: int
    wrote_bytes: int
    store_timestamp: int
    queue_offset: int
    message_count: int
    store_host: bytes

    @property
    def next_offset(self) -> int:
        return self.wrote_offset + self.wrote_bytes

    def message_ids(self, sizes: list[int] | None = None) -> list[str]:
        """Offset message ids; for a batch pass each record's size."""
        if sizes is None:
            return [offset_msg_id(self.store_host, self.wrote_offset)]
        host_hex = bytes(self.store_host).hex().upper()
        ids, at = [], self.wrote_offset
        for size in sizes:
            ids.append(offset_msg_id_of_hex(host_hex, at))
            at += size
        return ids


class BatchEntry(NamedTuple):
    """One message of a batch (SEND_BATCH_MESSAGE): its flag, body and whole property string."""

    flag: int
    body: bytes | memoryview
    properties: bytes


@dataclass(slots=True)
class MessageToStore:
    """One message as the broker received it; `properties` is the encoded property string."""

    topic: str
    queue_id: int
    body: bytes | memoryview
    properties: bytes = b""
    flag: int = 0
    sysflag: int = 0
    born_timestamp_ms: int = 0
    """When the producer made the message (ms since the epoch), as its client stamped it."""
    born_host: bytes = DEFAULT_BORN_HOST
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    wait_store_msg_ok: bool = True
    """False when the producer set WAIT=false: a SYNC_FLUSH put then returns without waiting."""


@dataclass(slots=True)
class PutResult:
    status: PutStatus
    append: AppendResult | None = None
    remark: str = ""
    record_sizes: list[int] | None = None
    """Each record's size, for batches (message ids)."""

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    def message_ids(self) -> list[str]:
        if self.append is None:
            return []
        return self.append.message_ids(self.record_sizes)


class GetMessageStatus(enum.Enum):
    """RocketMQ's GetMessageStatus; the broker maps each to a pull response code."""

    # Members are singletons compared by identity: the identity hash is consistent with that and is
    # computed in C (Enum's own hashes the name in Python; these are dict keys on every request).
    __hash__ = object.__hash__

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetResult:
    """Records found by a read, as zero-copy views of the mapped CommitLog."""

    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[memoryview] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    commitlog_offsets: list[int] = field(default_factory=list)
    suggest_pulling_from_slave: bool = False
    parts: list[memoryview] = field(default_factory=list)
    """With `get_messages(..., coalesce=True)`: the records' bytes in order, records adjacent in
    the CommitLog (a batch's) as one view; `messages` and the offsets lists stay empty then."""
    count: int = 0
    """Records found (in `messages`, or in `parts`)."""

    @property
    def total_bytes(self) -> int:
        return sum(len(view) for view in self.parts or self.messages)

    @property
    def body_parts(self) -> list[memoryview]:
        """The records' bytes as a pull answers them, whichever way they were read."""
        return self.parts or self.messages

    def release(self) -> None:
        """Drop the views once sent, so retention can unmap deleted segments."""
        for view in self.messages:
            view.release()
        for view in self.parts:
            view.release()
        self.messages.clear()
        self.parts.clear()


class DispatchRequest(NamedTuple):
    """What a dispatched message tells its listeners (long polling, delay, metrics)."""

    topic: str
    queue_id: int
    commitlog_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    queue_offset: int
    raw_properties: bytes

    @property
    def properties(self) -> dict[str, str]:
        return decode_properties(self.raw_properties)


Arrivals = Mapping[tuple[str, int], Sequence[DispatchRequest]]
"""What one dispatch pass made readable, by (topic, queue id), each queue's messages in order."""

DispatchListener = Callable[[Arrivals], None]
"""Told once per dispatch pass (not per message: a pass may carry hundreds of a batch's messages)."""

TagsCodeHook = Callable[[str, dict[str, str], int, int], int | None]
"""(topic, properties, store_timestamp, default tagsCode) -> tagsCode override or None."""


class TagsCodeRule(NamedTuple):
    """Which topics' tagsCode `hook` computes (None: every topic's)."""

    hook: TagsCodeHook
    topics: frozenset[str] | None


class IndexAnswer(NamedTuple):
    """What the index answers a key query: candidate CommitLog offsets and its last update."""

    offsets: list[int]
    last_update_timestamp_ms: int
    last_update_physical_offset: int
