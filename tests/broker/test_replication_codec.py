"""The HA wire codec (spec §9.2) and the pure parts of replication: acks, frames, the Shoal state
frame, record alignment on the slave, epoch history and divergence points."""

from __future__ import annotations

import contextlib
import random
import struct
from pathlib import Path

import pytest

from shoal.broker.replication import (
    EpochEntry,
    EpochFile,
    EpochState,
    HAProtocolError,
    Hello,
    MasterState,
    OffsetMismatchError,
    RecordAligner,
    SlaveStreamDecoder,
    TransferDecoder,
    TransferFrame,
    divergence_offset,
)
from shoal.broker.replication.codec import (
    ACK,
    HELLO_MAGIC,
    TRANSFER_HEADER,
    decode_state,
    encode_ack,
    encode_hello,
    encode_state,
    encode_transfer_header,
)
from shoal.formats.record import BLANK_MAGIC_CODE, encode_record_into, record_length

SEGMENT_BYTES = 4096
PENDING_MAX_BYTES = 64 * 1024


def _record(physical: int, body: bytes, queue_offset: int = 0) -> bytes:
    """A real CommitLog record at `physical` (the store's own encoder)."""
    topic, properties = b"TopicA", b"TAGS\x01x"
    size = record_length(len(body), len(topic), len(properties), 8, 8)
    buffer = bytearray(size)
    host = bytes([127, 0, 0, 1, 0, 0, 0x2A, 0x9F])
    encode_record_into(buffer, 0, body, topic, properties, 0, 0, queue_offset, physical, 0, 1, host, 2, host, 0, 0, 0)
    return bytes(buffer)


def _log(start: int, count: int, segment: int = SEGMENT_BYTES, seed: int = 7) -> bytes:
    """`count` records from `start`, closing segments with a blank record as the CommitLog does."""
    rng = random.Random(seed)
    out = bytearray()
    at = start
    for index in range(count):
        record = _record(at, rng.randbytes(rng.randrange(0, 400)), index)
        room = segment - at % segment
        if len(record) + 8 > room:
            out += struct.pack(">ii", room, BLANK_MAGIC_CODE) + bytes(room - 8)
            at += room
            record = _record(at, record[-10:], index)
        out += record
        at += len(record)
    return bytes(out)


def _record_starts(log: bytes) -> set[int]:
    starts, at = set(), 0
    while at < len(log):
        starts.add(at)
        at += struct.unpack_from(">i", log, at)[0]
    return starts


# --- slave -> master ---


def test_ack_stream_uses_last_complete_long() -> None:
    """Goal: the master reads offsets as RocketMQ does. Method: feed longs split at odd places."""
    decoder = SlaveStreamDecoder()
    stream = encode_ack(5) + encode_ack(1000) + encode_ack(2**40)
    assert decoder.feed(stream[:3]) == (None, None)
    assert decoder.feed(stream[3:13]) == (None, 5)
    assert decoder.feed(stream[13:]) == (None, 2**40)
    assert decoder.feed(b"") == (None, None)


def test_hello_then_offsets() -> None:
    """Goal: a Shoal slave's hello is recognized and never taken for an offset. Method: split it."""
    decoder = SlaveStreamDecoder()
    data = encode_hello(3) + encode_ack(4096)
    assert decoder.feed(data[:9]) == (None, None)
    assert decoder.feed(data[9:16]) == (Hello(3), None)
    assert decoder.feed(data[16:]) == (None, 4096)
    assert struct.unpack(">q", encode_hello(0)[:8])[0] == HELLO_MAGIC < 0


def test_first_long_without_magic_is_an_offset() -> None:
    """Goal: a RocketMQ slave (no hello) works. Method: feed a plain ack first."""
    assert SlaveStreamDecoder().feed(ACK.pack(77)) == (None, 77)


# --- master -> slave ---


def test_transfer_frames_roundtrip_split_anywhere() -> None:
    """Goal: frames decode however TCP splits them. Method: encode data, heartbeat and state
    frames, feed them in every 1..40-byte chunking."""
    state = MasterState(2, 100, 200, (EpochEntry(0, 0), EpochEntry(2, 50)))
    stream = encode_transfer_header(4096, 3) + b"abc" + encode_transfer_header(4099, 0) + encode_state(state)
    for chunk in range(1, 41):
        decoder = TransferDecoder(1024, 8)
        frames: list[object] = []
        for at in range(0, len(stream), chunk):
            frames += decoder.feed(stream[at : at + chunk])
        assert frames == [TransferFrame(4096, b"abc"), TransferFrame(4099, b""), state]
        assert decoder.buffered_bytes == 0


@pytest.mark.parametrize(
    "bad",
    [
        TRANSFER_HEADER.pack(0, -1),
        TRANSFER_HEADER.pack(0, 1025),
        TRANSFER_HEADER.pack(-7, 0),
        TRANSFER_HEADER.pack(-1, 3) + b"abc",
    ],
    ids=["negative size", "oversized body", "negative offset", "short state"],
)
def test_bad_frames_are_protocol_errors(bad: bytes) -> None:
    """Goal: a broken master stream closes the link instead of buffering without bound."""
    with pytest.raises(HAProtocolError):
        TransferDecoder(1024, 8).feed(bad)


def test_state_frame_with_wrong_count_is_refused() -> None:
    """Goal: the history count must match the body. Method: append a stray byte."""
    body = encode_state(MasterState(1, 0, 0, (EpochEntry(0, 0),)))[TRANSFER_HEADER.size :]
    with pytest.raises(HAProtocolError):
        decode_state(body + b"x", 8)
    with pytest.raises(HAProtocolError):
        decode_state(body, 0)


def test_garbage_never_crashes_the_decoders() -> None:
    """Goal: random bytes raise only HAProtocolError. Method: 300 random streams through both decoders."""
    rng = random.Random(1)
    for _ in range(300):
        data = rng.randbytes(rng.randrange(1, 200))
        SlaveStreamDecoder().feed(data)
        with contextlib.suppress(HAProtocolError):
            TransferDecoder(4096, 8).feed(data)


# --- record alignment on the slave ---


def test_aligner_appends_whole_records_only() -> None:
    """Goal: the slave's CommitLog always ends on a record boundary. Method: cut a log with blank
    end-of-segment records into 37-byte frames; every ready piece ends on a record start, and
    everything comes out once, in order."""
    log = _log(0, 60)
    aligner = RecordAligner(0, SEGMENT_BYTES, PENDING_MAX_BYTES)
    out = bytearray()
    boundaries = set()
    for at in range(0, len(log), 37):
        start, ready = aligner.feed(at, log[at : at + 37])
        assert start == len(out)
        out += ready
        boundaries.add(len(out))
    assert bytes(out) == log and aligner.pending_bytes == 0
    assert boundaries <= _record_starts(log) | {len(log)}


def test_aligner_rejects_a_gap_and_a_foreign_stream() -> None:
    """Goal: bytes that do not continue our log are refused. Method: skip a byte; start at a
    position whose record says it was written elsewhere; send garbage."""
    log = _log(0, 5)
    with pytest.raises(OffsetMismatchError):
        RecordAligner(0, SEGMENT_BYTES, PENDING_MAX_BYTES).feed(1, log)
    moved = _log(SEGMENT_BYTES, 3)
    with pytest.raises(OffsetMismatchError):
        RecordAligner(0, SEGMENT_BYTES, PENDING_MAX_BYTES).feed(0, moved)
    with pytest.raises(HAProtocolError):
        RecordAligner(0, SEGMENT_BYTES, PENDING_MAX_BYTES).feed(0, b"\x00\x00\x00\x10garbage!")


def test_aligner_detects_a_different_segment_size() -> None:
    """Goal: master and slave with different mappedFileSizeCommitLog fail loudly at the first blank."""
    log = _log(0, 40, segment=SEGMENT_BYTES)
    aligner = RecordAligner(0, SEGMENT_BYTES * 2, PENDING_MAX_BYTES)
    with pytest.raises(HAProtocolError, match="mappedFileSizeCommitLog"):
        aligner.feed(0, log)


def test_aligner_bounds_its_pending_bytes() -> None:
    """Goal: a record header claiming more than a record may hold is refused before buffering."""
    header = struct.pack(">ii", 3000, -626843481) + bytes(40)
    with pytest.raises(HAProtocolError):
        RecordAligner(0, 1 << 30, 1024).feed(0, header)


# --- epochs ---


def test_divergence_offset_picks_the_first_later_epoch() -> None:
    """Goal: a follower cuts where the leader's next epoch began. Method: several histories."""
    history = [EpochEntry(0, 0), EpochEntry(2, 500), EpochEntry(5, 900)]
    assert divergence_offset(history, 0) == 500
    assert divergence_offset(history, 1) == 500
    assert divergence_offset(history, 2) == 900
    assert divergence_offset(history, 5) is None
    with pytest.raises(ValueError, match="unknown"):
        divergence_offset([EpochEntry(4, 100), EpochEntry(5, 900)], 2)


def test_epoch_file_roundtrip_and_validation(tmp_path: Path) -> None:
    """Goal: epoch.json survives restarts and a broken one is refused. Method: save, load, corrupt."""
    epochs = EpochFile(tmp_path)
    state = epochs.load()
    assert state == EpochState()
    state.begin(3, 1000)
    state.broker_role, state.broker_id, state.confirmed_offset = "SYNC_MASTER", 0, 900
    epochs.save(state)
    assert epochs.load() == state
    with pytest.raises(ValueError):
        EpochState.from_json({"epoch": 1, "history": [{"epoch": 2, "startOffset": 0}]})
    with pytest.raises(ValueError):
        EpochState.from_json({"epoch": -1})
