"""Tests of shoal.store.commitlog: the append path owns the bits its layout depends on and never
makes visible a record its own decoder cannot read."""

from __future__ import annotations

import pytest

from shoal.formats.record import RecordKind, check_record, encode_host, encode_record_into, encoded_record_problem
from shoal.formats.sysflag import BORNHOST_V6_FLAG, COMPRESSED_FLAG, STOREHOSTADDRESS_V6_FLAG
from shoal.store import BatchEntry, MessageStore, MessageToStore, PutStatus
from shoal.store import commitlog as commitlog_module

IPV4_BORN_HOST = encode_host("10.0.0.7", 50123)
IPV6_BORN_HOST = encode_host("2001:db8::7", 50123)
V6_BITS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG


def _message(body: bytes, sysflag: int = 0, born_host: bytes = IPV4_BORN_HOST) -> MessageToStore:
    return MessageToStore("HostTopic", 0, body, b"TAGS\x01a", 0, sysflag, 1_700_000_000_000, born_host)


def _records(store: MessageStore) -> list[tuple[int, int]]:
    """(offset, sysflag) of every record from the CommitLog's start, checked as recovery checks them."""
    found = []
    offset = store.min_offset
    while offset < store.max_offset:
        check = store._commitlog.check_at(offset, check_crc=True)
        assert check.kind is RecordKind.MESSAGE, f"record at {offset}: {check.reason}"
        assert check.header is not None
        found.append((offset, check.header.sysflag))
        offset += check.size
    return found


@pytest.mark.parametrize("client_bits", [BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, V6_BITS])
def test_v6_bits_follow_the_hosts_written_not_the_caller(store: MessageStore, client_bits: int) -> None:
    """Goal: a put whose sysflag claims IPv6 hosts for IPv4 ones is stored decodable, and so is
    every later record. Method: append the poison put and two more, walk the CommitLog with the
    recovery check."""
    assert store.append_message(_message(b"poison", client_bits | COMPRESSED_FLAG)).ok
    batch = [BatchEntry(0, b"b1", b""), BatchEntry(0, b"b2", b"")]
    assert store.append_batch(_message(b"", client_bits), batch).ok
    assert store.append_message(_message(b"after")).ok
    records = _records(store)
    assert len(records) == 4
    assert all(sysflag & V6_BITS == 0 for _offset, sysflag in records)
    assert records[0][1] & COMPRESSED_FLAG, "bits other than the host bits are kept"


def test_an_ipv6_born_host_sets_the_born_host_bit_itself(store: MessageStore) -> None:
    """Goal: a caller that forgets the v6 bit for an IPv6 born host still gets a readable record.
    Method: append with sysflag 0 and a 20-byte born host; the record says BORNHOST_V6."""
    assert store.append_message(_message(b"six", 0, IPV6_BORN_HOST)).ok
    assert store.append_message(_message(b"four")).ok
    (_first, sysflag), (_second, later) = _records(store)
    assert sysflag & V6_BITS == BORNHOST_V6_FLAG and later & V6_BITS == 0


def _wrong_sysflag_encoder(*args: object) -> int:
    """encode_record_into, but the SYSFLAG written claims an IPv6 born host (argument 9)."""
    patched = list(args)
    patched[9] = int(patched[9]) | BORNHOST_V6_FLAG  # type: ignore[call-overload]
    return encode_record_into(*patched)  # type: ignore[arg-type]


def test_an_append_that_would_not_decode_is_refused_and_leaves_nothing_visible(
    store: MessageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: defence in depth: an encoder bug fails the put, visibly and without poisoning the log.
    Method: patch the encoder to write a wrong SYSFLAG; single and batch puts answer UNKNOWN_ERROR,
    the CommitLog end and queue offsets stay, and the next good put lands where the bad one was."""
    assert store.append_message(_message(b"before")).ok
    end = store.max_offset
    monkeypatch.setattr(commitlog_module, "encode_record_into", _wrong_sysflag_encoder)
    refused = store.append_message(_message(b"bad"))
    assert refused.status is PutStatus.UNKNOWN_ERROR and "would not decode" in refused.remark
    batch = store.append_batch(_message(b""), [BatchEntry(0, b"x", b""), BatchEntry(0, b"y", b"")])
    assert batch.status is PutStatus.UNKNOWN_ERROR and "batch record 0" in batch.remark
    assert store.wrote_offset == end
    assert not store._commitlog.is_os_page_cache_busy(0.0), "the put lock's busy clock is reset"
    segment = store._commitlog.queue.last_file(end)
    position = end - segment.file_from_offset
    cleared = check_record(segment.target, position, segment.file_size, check_crc=False)
    assert cleared.kind is RecordKind.INVALID, "the refused bytes never read as a record"
    monkeypatch.undo()
    after = store.append_message(_message(b"after"))
    assert after.ok and after.append is not None
    assert after.append.wrote_offset == end and after.append.queue_offset == 1
    assert len(_records(store)) == 2


def test_encoded_record_problem_names_each_framing_field() -> None:
    """Goal: the post-encode check catches each field the decoder frames by. Method: encode one
    record, then spoil TOTALSIZE, MAGIC, PHYSICALOFFSET, SYSFLAG and each length in turn."""
    buffer = bytearray(256)
    body, topic, properties = b"body", b"Topic", b"k\x01v"
    length = encode_record_into(
        buffer, 0, body, topic, properties, 0, 0, 0, 4096, 0, 1, IPV4_BORN_HOST, 2, IPV4_BORN_HOST, 0, 0, 0
    )
    assert encoded_record_problem(buffer, 0, length, 4096) is None
    assert "PHYSICALOFFSET" in (encoded_record_problem(buffer, 0, length, 4097) or "")
    topic_length_at = 88 + len(body)
    spoilers = {
        0: "TOTALSIZE",
        4: "MAGICCODE",
        39: "",  # SYSFLAG claims an IPv6 born host: every later field moves
        87: "BODYLENGTH",
        topic_length_at: "TOPICLENGTH",
        topic_length_at + 1 + len(topic) + 1: "add up",  # PROPERTIESLENGTH
    }
    for at, expected in spoilers.items():
        spoiled = bytearray(buffer)
        spoiled[at] ^= 0x10 if at == 39 else 0x40
        problem = encoded_record_problem(spoiled, 0, length, 4096)
        assert problem is not None and expected in problem, (at, problem)
