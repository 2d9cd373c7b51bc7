"""Message trace records: the body of a message in RMQ_SYS_TRACE_TOPIC (or a custom trace topic).

A client with `enableMsgTrace=true` (AsyncTraceDispatcher) joins the records of many sends and
consumes into one message body; RocketMQ 4.9.7's TraceDataEncoder writes each record as fields
separated by CONTENT_SEPARATOR (char 1) and ends it with FIELD_SEPARATOR (char 2):

    Pub             type, timestamp, regionId, group, topic, msgId, tags, keys, storeHost,
                    bodyLength, costTime, msgType (ordinal), offsetMsgId, success
    SubBefore       type, timestamp, regionId, group, requestId, msgId, retryTimes, keys
    SubAfter        type, requestId, msgId, costTime, success, keys, contextCode, timestamp, group
    EndTransaction  type, timestamp, regionId, group, topic, msgId, tags, keys, storeHost,
                    msgType (ordinal), transactionId, transactionState, fromTransactionCheck

Decoding follows TraceDataEncoder.decoderFromTraceDataString: a Pub record of 13 fields lacks
offsetMsgId, one of 15 or more carries the clientHost of older clients; a SubAfter record of 7
fields lacks timestamp and group (the CLOUD access channel). Java writes a null field as "null";
the decoder keeps that text. Records of an unknown type are skipped, as Java skips them. One
difference: a record's trailing empty fields are kept (Java's String.split drops them, so its
decoder fails on a SubBefore whose keys are empty); empty records between separators are skipped.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from shoal.formats.errors import TraceDataError

CONTENT_SEPARATOR = "\x01"  # TraceConstants.CONTENT_SPLITOR
FIELD_SEPARATOR = "\x02"  # TraceConstants.FIELD_SPLITOR: ends each record
MESSAGE_TYPES = ("Normal_Msg", "Trans_Msg_Half", "Trans_msg_Commit", "Delay_Msg")
"""`MessageType` by ordinal, as the Pub and EndTransaction records carry it."""


class TraceType(enum.Enum):
    PUB = "Pub"
    SUB_BEFORE = "SubBefore"
    SUB_AFTER = "SubAfter"
    END_TRANSACTION = "EndTransaction"


_MIN_FIELDS = {TraceType.PUB: 12, TraceType.SUB_BEFORE: 8, TraceType.SUB_AFTER: 6, TraceType.END_TRANSACTION: 13}
"""Fields Java's decoder reads unconditionally (fewer: an ArrayIndexOutOfBoundsException there)."""


@dataclass(frozen=True)
class TraceRecord:
    """One trace record; fields its type does not carry are None."""

    trace_type: TraceType
    msg_id: str
    keys: str
    timestamp_ms: int | None = None
    region_id: str | None = None
    group: str | None = None
    topic: str | None = None
    tags: str | None = None
    store_host: str | None = None
    body_length_bytes: int | None = None
    cost_time_ms: int | None = None
    msg_type: str | None = None
    offset_msg_id: str | None = None
    success: bool | None = None
    client_host: str | None = None
    request_id: str | None = None
    retry_times: int | None = None
    context_code: int | None = None
    transaction_id: str | None = None
    transaction_state: str | None = None
    from_transaction_check: bool | None = None


def _integer(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise TraceDataError(f"trace record field {what} is not a number: {text[:40]!r}") from None


def _message_type(text: str) -> str:
    ordinal = _integer(text, "msgType")
    if not 0 <= ordinal < len(MESSAGE_TYPES):
        raise TraceDataError(f"trace record msgType {ordinal} is not a MessageType ordinal")
    return MESSAGE_TYPES[ordinal]


def _boolean(text: str) -> bool:
    """`Boolean.parseBoolean`: true only for "true", any case."""
    return text.lower() == "true"


def _pub(line: list[str]) -> TraceRecord:
    offset_msg_id = success = client_host = None
    if len(line) == 13:
        success = _boolean(line[12])
    elif len(line) >= 14:
        offset_msg_id, success = line[12], _boolean(line[13])
        client_host = line[14] if len(line) >= 15 else None
    return TraceRecord(
        TraceType.PUB,
        msg_id=line[5],
        keys=line[7],
        timestamp_ms=_integer(line[1], "timestamp"),
        region_id=line[2],
        group=line[3],
        topic=line[4],
        tags=line[6],
        store_host=line[8],
        body_length_bytes=_integer(line[9], "bodyLength"),
        cost_time_ms=_integer(line[10], "costTime"),
        msg_type=_message_type(line[11]),
        offset_msg_id=offset_msg_id,
        success=success,
        client_host=client_host,
    )


def _sub_before(line: list[str]) -> TraceRecord:
    return TraceRecord(
        TraceType.SUB_BEFORE,
        msg_id=line[5],
        keys=line[7],
        timestamp_ms=_integer(line[1], "timestamp"),
        region_id=line[2],
        group=line[3],
        request_id=line[4],
        retry_times=_integer(line[6], "retryTimes"),
    )


def _sub_after(line: list[str]) -> TraceRecord:
    return TraceRecord(
        TraceType.SUB_AFTER,
        msg_id=line[2],
        keys=line[5],
        request_id=line[1],
        cost_time_ms=_integer(line[3], "costTime"),
        success=_boolean(line[4]),
        context_code=_integer(line[6], "contextCode") if len(line) >= 7 else None,
        timestamp_ms=_integer(line[7], "timestamp") if len(line) >= 9 else None,
        group=line[8] if len(line) >= 9 else None,
    )


def _end_transaction(line: list[str]) -> TraceRecord:
    return TraceRecord(
        TraceType.END_TRANSACTION,
        msg_id=line[5],
        keys=line[7],
        timestamp_ms=_integer(line[1], "timestamp"),
        region_id=line[2],
        group=line[3],
        topic=line[4],
        tags=line[6],
        store_host=line[8],
        msg_type=_message_type(line[9]),
        transaction_id=line[10],
        transaction_state=line[11],
        from_transaction_check=_boolean(line[12]),
    )


_DECODERS = {
    TraceType.PUB: _pub,
    TraceType.SUB_BEFORE: _sub_before,
    TraceType.SUB_AFTER: _sub_after,
    TraceType.END_TRANSACTION: _end_transaction,
}


def decode_trace_data(data: bytes | memoryview | str) -> list[TraceRecord]:
    """The records of one trace message body, in order; TraceDataError for a record of a known
    type with too few fields or a field that is not what its type needs."""
    text = data if isinstance(data, str) else bytes(data).decode("utf-8", errors="replace")
    records = []
    for context in text.split(FIELD_SEPARATOR):
        if not context:
            continue
        line = context.split(CONTENT_SEPARATOR)
        try:
            trace_type = TraceType(line[0])
        except ValueError:
            continue
        if len(line) < _MIN_FIELDS[trace_type]:
            raise TraceDataError(
                f"{trace_type.value} trace record has {len(line)} fields, at least {_MIN_FIELDS[trace_type]} expected"
            )
        records.append(_DECODERS[trace_type](line))
    return records
