"""Message trace records (formats/trace.py) against vectors laid out as RocketMQ 4.9.7's
TraceDataEncoder.encoderFromContextBean writes them: fields joined by char 1, each record ended by
char 2, in the field order of each trace type."""

from __future__ import annotations

import pytest

from shoal.formats import TraceDataError, TraceType, decode_trace_data

C, F = "\x01", "\x02"
MSG_ID = "7F00000100002A9F0000000000000000"
OFFSET_ID = "7F00000100002A9F00000000000003E8"


def record(*fields: object) -> str:
    """One encoded record: what the encoder appends for a context."""
    return C.join(str(field) for field in fields) + F


PUB = record(
    "Pub", 1700000000123, "DefaultRegion", "pg", "TopicA", MSG_ID, "TagA", "k1 k2", "127.0.0.1:10911",
    42, 7, 0, OFFSET_ID, "true",
)  # fmt: skip
SUB_BEFORE = record("SubBefore", 1700000000200, "DefaultRegion", "cg", "req-1", MSG_ID, 0, "k1 k2")
SUB_AFTER = record("SubAfter", "req-1", MSG_ID, 3, "true", "k1 k2", 0, 1700000000203, "cg")
END_TRANSACTION = record(
    "EndTransaction", 1700000000300, "DefaultRegion", "tg", "TopicT", MSG_ID, "null", "null", "127.0.0.1:10911",
    1, "tx-1", "COMMIT_MESSAGE", "false",
)  # fmt: skip


def test_a_trace_message_of_pub_and_consume_records_decodes_every_field() -> None:
    """Goal: one trace message body with the records of one send and one consume decodes to them,
    in order, every field typed. Method: a body as AsyncTraceDispatcher joins records."""
    pub, before, after = decode_trace_data((PUB + SUB_BEFORE + SUB_AFTER).encode())
    assert pub.trace_type is TraceType.PUB
    assert (pub.timestamp_ms, pub.region_id, pub.group, pub.topic) == (1700000000123, "DefaultRegion", "pg", "TopicA")
    assert (pub.msg_id, pub.tags, pub.keys, pub.store_host) == (MSG_ID, "TagA", "k1 k2", "127.0.0.1:10911")
    assert (pub.body_length_bytes, pub.cost_time_ms, pub.msg_type) == (42, 7, "Normal_Msg")
    assert (pub.offset_msg_id, pub.success, pub.client_host) == (OFFSET_ID, True, None)
    assert before.trace_type is TraceType.SUB_BEFORE
    assert (before.timestamp_ms, before.group, before.request_id) == (1700000000200, "cg", "req-1")
    assert (before.msg_id, before.retry_times, before.keys) == (MSG_ID, 0, "k1 k2")
    assert after.trace_type is TraceType.SUB_AFTER
    assert (after.request_id, after.msg_id, after.cost_time_ms, after.success) == ("req-1", MSG_ID, 3, True)
    assert (after.keys, after.context_code, after.timestamp_ms, after.group) == ("k1 k2", 0, 1700000000203, "cg")


def test_end_transaction_record_keeps_java_nulls_as_text() -> None:
    """Goal: an EndTransaction record decodes; fields Java wrote from null stay "null". Method: one record."""
    (end,) = decode_trace_data(END_TRANSACTION)
    assert end.trace_type is TraceType.END_TRANSACTION
    assert (end.group, end.topic, end.msg_id, end.tags, end.keys) == ("tg", "TopicT", MSG_ID, "null", "null")
    assert (end.msg_type, end.transaction_id, end.transaction_state) == ("Trans_Msg_Half", "tx-1", "COMMIT_MESSAGE")
    assert end.from_transaction_check is False


def test_older_and_cloud_layouts_decode_as_java_reads_them() -> None:
    """Goal: the decoder's compatibility branches: Pub of 13 fields (no offsetMsgId), of 15 (an
    older client's clientHost), SubAfter of 7 (CLOUD: no timestamp, group). Method: one of each."""
    short_pub, long_pub, cloud = decode_trace_data(
        record("Pub", 1, "r", "g", "t", MSG_ID, "", "", "h:1", 1, 2, 3, "false")
        + record("Pub", 1, "r", "g", "t", MSG_ID, "", "", "h:1", 1, 2, 3, OFFSET_ID, "TRUE", "10.0.0.9")
        + record("SubAfter", "req", MSG_ID, 5, "false", "k", 1)
    )
    assert (short_pub.offset_msg_id, short_pub.success, short_pub.msg_type) == (None, False, "Delay_Msg")
    assert (long_pub.offset_msg_id, long_pub.success, long_pub.client_host) == (OFFSET_ID, True, "10.0.0.9")
    assert (cloud.context_code, cloud.timestamp_ms, cloud.group) == (1, None, None)


def test_unknown_record_types_and_empty_records_are_skipped_and_trailing_empty_keys_kept() -> None:
    """Goal: what Java skips is skipped; an empty trailing field (keys "") is kept rather than
    failing as Java's split would. Method: a body mixing them."""
    records = decode_trace_data(record("Future", 1, 2) + F + record("SubBefore", 1, "r", "g", "req", MSG_ID, 2, ""))
    assert [(r.trace_type, r.retry_times, r.keys) for r in records] == [(TraceType.SUB_BEFORE, 2, "")]
    assert decode_trace_data(b"") == []


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (record("Pub", 1, "r", "g", "t", MSG_ID, "", "", "h"), "Pub trace record has 9 fields, at least 12"),
        (record("SubAfter", "req", MSG_ID, 1, "true"), "SubAfter trace record has 5 fields, at least 6"),
        (record("SubBefore", "soon", "r", "g", "req", MSG_ID, 0, "k"), "field timestamp is not a number: 'soon'"),
        (record("Pub", 1, "r", "g", "t", MSG_ID, "", "", "h", 1, 2, 9, "true"), "msgType 9 is not a MessageType"),
    ],
)
def test_records_java_could_not_have_written_are_refused(body: str, words: str) -> None:
    """Goal: a known record with too few fields or a bad number fails with TraceDataError naming
    it. Method: one broken record each."""
    with pytest.raises(TraceDataError, match=words):
        decode_trace_data(body)
