"""The HA wire protocol (spec §9.2) as pure codecs: bytes in, offsets and frames out, no sockets.

Slave -> master: a stream of 8-byte big-endian longs, each the slave's max CommitLog offset (its
ack, and where it wants data from). The master only uses the last complete long of what it read.

Master -> slave: a stream of transfer frames (`TRANSFER_HEADER`):

    offset  size  field
    0       8     physical offset of the first body byte in the master's CommitLog (long)
    8       4     body size (int; 0 for a heartbeat)
    12      n     body: raw CommitLog bytes, never crossing a segment

Shoal extension, used only when the slave opens with a hello (`haShoalExtensionEnable`, both
sides Shoal; a Java master would take the hello for an offset, so turn it off there):

    slave -> master, first 16 bytes (`HELLO`):   HELLO_MAGIC (long, negative), slave epoch (long)
    master -> slave, a state frame:               TRANSFER_HEADER with offset STATE_FRAME_OFFSET (-1)
                                                  and a body of `STATE_HEAD` + count x `EPOCH_ENTRY`

    STATE_HEAD: offset size field
                0      8    master epoch (long)
                8      8    confirmed offset: the highest offset a slave acknowledged (long)
                16     8    master max CommitLog offset (long)
                24     4    epoch history entries that follow (int)
    EPOCH_ENTRY: epoch (long), start offset (long): where that epoch's first byte was written

A negative offset is never a real one, so neither the hello nor a state frame can be mistaken for
data. After the hello the slave waits for the master's state (it may have to truncate first), and
only then sends its first offset.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from shoal.broker.replication.errors import HAProtocolError, OffsetMismatchError
from shoal.formats.record import (
    BLANK_MAGIC_CODE,
    FIXED_LENGTH_V4,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    PREFIX,
    TAIL,
)

ACK = struct.Struct(">q")
assert ACK.size == 8
TRANSFER_HEADER = struct.Struct(">qi")
assert TRANSFER_HEADER.size == 12
HELLO = struct.Struct(">qq")
assert HELLO.size == 16
STATE_HEAD = struct.Struct(">qqqi")
assert STATE_HEAD.size == 28
EPOCH_ENTRY = struct.Struct(">qq")
assert EPOCH_ENTRY.size == 16

HELLO_MAGIC = -0x53484F414C484131  # -"SHOALHA1": never a CommitLog offset
STATE_FRAME_OFFSET = -1


class EpochEntry(NamedTuple):
    """An epoch and the CommitLog offset where its leader wrote its first byte."""

    epoch: int
    start_offset: int


class MasterState(NamedTuple):
    """What a Shoal master tells its slaves besides data (the extension's state frame)."""

    epoch: int
    confirmed_offset: int
    max_offset: int
    history: tuple[EpochEntry, ...]


class TransferFrame(NamedTuple):
    """Data (or a heartbeat when `body` is empty) starting at `offset` of the master's CommitLog."""

    offset: int
    body: bytes


class Hello(NamedTuple):
    """A Shoal slave's first words: the epoch of the last master it followed (or led)."""

    epoch: int


# --- encoders ---
def encode_ack(offset: int) -> bytes:
    assert offset >= 0, offset
    return ACK.pack(offset)


def encode_hello(epoch: int) -> bytes:
    assert epoch >= 0, epoch
    return HELLO.pack(HELLO_MAGIC, epoch)


def encode_transfer_header(offset: int, body_size: int) -> bytes:
    assert offset >= 0 and body_size >= 0, (offset, body_size)
    return TRANSFER_HEADER.pack(offset, body_size)


def encode_state(state: MasterState) -> bytes:
    """A whole state frame (header and body)."""
    body = STATE_HEAD.pack(state.epoch, state.confirmed_offset, state.max_offset, len(state.history)) + b"".join(
        EPOCH_ENTRY.pack(*entry) for entry in state.history
    )
    return TRANSFER_HEADER.pack(STATE_FRAME_OFFSET, len(body)) + body


def decode_state(body: bytes | memoryview, history_max_count: int) -> MasterState:
    if len(body) < STATE_HEAD.size:
        raise HAProtocolError(f"state frame of {len(body)} bytes is shorter than its {STATE_HEAD.size}-byte head")
    epoch, confirmed, max_offset, count = STATE_HEAD.unpack_from(body, 0)
    if not 0 <= count <= history_max_count or len(body) != STATE_HEAD.size + count * EPOCH_ENTRY.size:
        raise HAProtocolError(f"state frame announces {count} epochs in {len(body)} bytes")
    if min(epoch, confirmed, max_offset) < 0:
        raise HAProtocolError(f"state frame with a negative field: epoch {epoch}, offsets {confirmed}/{max_offset}")
    history = tuple(
        EpochEntry(*EPOCH_ENTRY.unpack_from(body, STATE_HEAD.size + index * EPOCH_ENTRY.size)) for index in range(count)
    )
    return MasterState(epoch, confirmed, max_offset, history)


# --- decoders ---
class SlaveStreamDecoder:
    """The master's view of what a slave sends: an optional hello, then 8-byte offsets.

    Like RocketMQ's ReadSocketService, only the last complete long of what arrived counts; the
    few bytes of an incomplete one are kept (never more than 15) for the next read.
    """

    def __init__(self) -> None:
        self._carry = b""
        self._started = False

    def feed(self, data: bytes) -> tuple[Hello | None, int | None]:
        """(hello if this data completed one, last complete offset in it or None)."""
        buffer = self._carry + data if self._carry else data
        hello = None
        position = 0
        if not self._started:
            if len(buffer) < ACK.size:
                self._carry = buffer
                return None, None
            if ACK.unpack_from(buffer, 0)[0] == HELLO_MAGIC:
                if len(buffer) < HELLO.size:
                    self._carry = buffer
                    return None, None
                hello = Hello(HELLO.unpack_from(buffer, 0)[1])
                position = HELLO.size
            self._started = True
        usable = position + (len(buffer) - position) // ACK.size * ACK.size
        self._carry = bytes(buffer[usable:])
        if usable == position:
            return hello, None
        return hello, ACK.unpack_from(buffer, usable - ACK.size)[0]


class TransferDecoder:
    """The slave's view of what a master sends: transfer frames, heartbeats and state frames."""

    def __init__(self, body_max_bytes: int, history_max_count: int) -> None:
        self.body_max_bytes = body_max_bytes
        self.history_max_count = history_max_count
        self._buffer = bytearray()

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[TransferFrame | MasterState]:
        """Every complete frame in what arrived so far; raises HAProtocolError on bad input."""
        buffer = self._buffer
        buffer += data
        frames: list[TransferFrame | MasterState] = []
        position = 0
        header_size = TRANSFER_HEADER.size
        while len(buffer) - position >= header_size:
            offset, size = TRANSFER_HEADER.unpack_from(buffer, position)
            if size < 0 or size > self.body_max_bytes:
                raise HAProtocolError(f"frame body of {size} bytes (at most {self.body_max_bytes} allowed)")
            if offset < 0 and offset != STATE_FRAME_OFFSET:
                raise HAProtocolError(f"frame at negative offset {offset}")
            end = position + header_size + size
            if end > len(buffer):
                break
            body = bytes(buffer[position + header_size : end])
            if offset == STATE_FRAME_OFFSET:
                frames.append(decode_state(body, self.history_max_count))
            else:
                frames.append(TransferFrame(offset, body))
            position = end
        del buffer[:position]
        return frames


class RecordAligner:
    """Cuts replicated bytes at record boundaries, so a slave's CommitLog only ever ends on a whole
    record: its Dispatcher never meets half a message, its acks name record ends (what SYNC_MASTER
    waits for), and a promoted slave needs no repair. The incomplete tail waits here for the next
    frame. Every record start is checked (magic, size, PHYSICALOFFSET field = its position), so a
    stream that does not continue our log is caught at the first record.
    """

    def __init__(self, start_offset: int, segment_size_bytes: int, pending_max_bytes: int) -> None:
        self.start_offset = start_offset
        """CommitLog offset of the first pending byte (= where our CommitLog ends)."""
        self.segment_size_bytes = segment_size_bytes
        self.pending_max_bytes = pending_max_bytes
        self._pending = bytearray()

    @property
    def pending_bytes(self) -> int:
        return len(self._pending)

    @property
    def expected_offset(self) -> int:
        """Where the next frame must start."""
        return self.start_offset + len(self._pending)

    def feed(self, offset: int, body: bytes) -> tuple[int, bytes]:
        """Take a frame; returns (offset, bytes) of whole records now ready to append (maybe empty)."""
        if offset != self.expected_offset:
            raise OffsetMismatchError(f"frame starts at {offset}, our CommitLog continues at {self.expected_offset}")
        if self._pending:
            self._pending += body
            data: bytes | bytearray = self._pending
        else:
            data = body
        complete = self._complete_prefix(data)
        start = self.start_offset
        ready = bytes(data[:complete])
        rest = data[complete:]
        if len(rest) > self.pending_max_bytes:
            raise HAProtocolError(f"{len(rest)} bytes pending without a complete record at {start + complete}")
        self._pending = bytearray(rest)
        self.start_offset = start + complete
        return start, ready

    def _complete_prefix(self, data: bytes | bytearray) -> int:
        """Length of the whole records at the start of `data` (checked as they are walked)."""
        segment = self.segment_size_bytes
        base = self.start_offset
        position = 0
        limit = len(data)
        while limit - position >= TAIL.size:
            at = base + position
            total, magic = TAIL.unpack_from(data, position)
            room = segment - at % segment
            if magic == BLANK_MAGIC_CODE:
                if total != room:
                    raise HAProtocolError(
                        f"end-of-segment record at {at} claims {total} bytes but the segment ends in {room}: "
                        f"mappedFileSizeCommitLog must be the same on master and slave"
                    )
                size = room
            elif magic in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
                if total < FIXED_LENGTH_V4 or total > room:
                    raise HAProtocolError(f"record at {at} claims {total} bytes ({room} left in its segment)")
                size = total
                if limit - position >= PREFIX.size:
                    physical = PREFIX.unpack_from(data, position)[6]
                    if physical != at:
                        raise OffsetMismatchError(f"record at {at} says it was written at {physical}")
            else:
                raise HAProtocolError(f"no record starts at {at} (magic 0x{magic & 0xFFFFFFFF:08X})")
            if size > self.pending_max_bytes:
                raise HAProtocolError(f"record at {at} claims {size} bytes, more than any record may hold")
            if position + size > limit:
                break
            position += size
        return position
