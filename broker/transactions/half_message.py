"""Half messages: how a transactional send is stored, renewed for a check, committed or discarded,
and the body of the CHECK_TRANSACTION_STATE request about one (spec §11.2, §11.3, §11.5, §8.11).

Pure functions over property strings and decoded records; `bridge.py` does the store I/O.

A transaction is named by its *key*: the half-queue offset of its first copy. The check-back
re-puts a half message as a new copy (RocketMQ does the same, to bump TRANSACTION_CHECK_TIMES
without rewriting the log); each copy carries `TRAN_PREPARED_QUEUE_OFFSET = key`, so an
END_TRANSACTION naming any copy resolves the same transaction, exactly once.

Delays: a half message never keeps `DELAY` (nor the 5.x timer properties). The CommitLog treats a
half message as a plain message, so a delay level would park it in SCHEDULE_TOPIC_XXXX and loop
between the schedule and the half queue (spec §11.6, docs/transactions.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.formats.message_id import offset_msg_id
from shoal.formats.properties import (
    CHECK_IMMUNITY_TIME_IN_SECONDS,
    DELAY_TIME_LEVEL,
    NAME_VALUE_SEPARATOR,
    PRODUCER_GROUP,
    PROPERTY_SEPARATOR,
    REAL_QUEUE_ID,
    REAL_TOPIC,
    START_DELIVER_TIME,
    TRANSACTION_CHECK_TIMES,
    TRANSACTION_PREPARED,
    TRANSACTION_PREPARED_QUEUE_OFFSET,
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    decode_properties,
    encode_properties,
)
from shoal.formats.record import RecordHeader, encode_record_into, record_length
from shoal.formats.sysflag import TRANSACTION_TYPE_MASK, TransactionType
from shoal.formats.topics import RETRY_GROUP_TOPIC_PREFIX, TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC
from shoal.store import MessageToStore

HALF_QUEUE_ID = 0
"""The one half queue (and op queue) RocketMQ 4.x uses."""
TRANS_SYS_GROUP = "CID_RMQ_SYS_TRANS"
"""The internal group whose consumer offsets hold the check-back progress (consumerOffset.json)."""

DELAY_PROPERTIES = (
    DELAY_TIME_LEVEL,
    START_DELIVER_TIME,
    "TIMER_DELIVER_MS",
    "TIMER_DELAY_SEC",
    "TIMER_DELAY_MS",
)
"""Properties that ask for delayed delivery (4.x level, 5.x timer); stripped from half messages."""
INTERNAL_PROPERTIES = frozenset({REAL_TOPIC, REAL_QUEUE_ID, TRANSACTION_PREPARED_QUEUE_OFFSET})
"""Bookkeeping of the half queue that a committed message does not carry (RocketMQ leaves them in
the stored string by accident, spec §11.3; a consumer has no use for them)."""


def is_half_message_send(properties: str | None, topic: str, reconsume_times: int) -> bool:
    """Whether a SEND_MESSAGE is a transactional prepare: `TRAN_MSG=true`, except for messages coming
    back to a retry topic (old clients re-send consumed messages, which still carry `TRAN_MSG`,
    spec §11.6 item 3: treating them as new half messages loops)."""
    if not properties or TRANSACTION_PREPARED + NAME_VALUE_SEPARATOR not in properties:
        return False
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or reconsume_times > 0:
        return False
    return decode_properties(properties).get(TRANSACTION_PREPARED, "").lower() == "true"


def half_properties(properties: str | None, real_topic: str, real_queue_id: int) -> str:
    """The property string of a half message: the producer's, without delay properties (and without
    the broker's own bookkeeping properties, which a client must not forge), plus REAL_TOPIC and
    REAL_QID. Segments are kept verbatim and in order (no re-encoding)."""
    dropped = {*DELAY_PROPERTIES, *INTERNAL_PROPERTIES, TRANSACTION_CHECK_TIMES}
    kept = []
    for segment in (properties or "").split(PROPERTY_SEPARATOR):
        name, separator, _ = segment.partition(NAME_VALUE_SEPARATOR)
        if segment and not (separator and name in dropped):
            kept.append(segment)
    kept.append(f"{REAL_TOPIC}{NAME_VALUE_SEPARATOR}{real_topic}")
    kept.append(f"{REAL_QUEUE_ID}{NAME_VALUE_SEPARATOR}{real_queue_id}")
    return PROPERTY_SEPARATOR.join(kept)


@dataclass(frozen=True, slots=True)
class HalfRecord:
    """One stored half-message copy: what every later step needs, copied out of the CommitLog."""

    header: RecordHeader
    body: bytes
    properties_bytes: bytes
    properties: dict[str, str]

    @classmethod
    def of(cls, header: RecordHeader, view: memoryview) -> HalfRecord:
        """From `MessageStore.message_at` / a pulled record (positions relative to `view`)."""
        start = header.properties_position
        raw = bytes(view[start : start + header.properties_length])
        body = bytes(view[header.body_position : header.body_position + header.body_length])
        return cls(header, body, raw, decode_properties(raw))

    @property
    def queue_offset(self) -> int:
        return self.header.queue_offset

    @property
    def commitlog_offset(self) -> int:
        return self.header.physical_offset

    @property
    def is_half(self) -> bool:
        return self.header.topic == TRANS_HALF_TOPIC

    @property
    def key(self) -> int:
        """The transaction's key: TRAN_PREPARED_QUEUE_OFFSET of a renewed copy, else its own offset."""
        return _int_property(self.properties.get(TRANSACTION_PREPARED_QUEUE_OFFSET), self.queue_offset)

    @property
    def producer_group(self) -> str:
        return self.properties.get(PRODUCER_GROUP, "")

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def check_times(self) -> int:
        """Checks already sent about this transaction (TRANSACTION_CHECK_TIMES, absent = 0)."""
        return max(0, _int_property(self.properties.get(TRANSACTION_CHECK_TIMES), 0))

    @property
    def offset_msg_id(self) -> str:
        return offset_msg_id(self.header.store_host, self.commitlog_offset)

    def real_destination(self) -> tuple[str, int] | None:
        """(REAL_TOPIC, REAL_QID), or None when the record lacks them (not written by a half send)."""
        topic = self.properties.get(REAL_TOPIC)
        queue_id = _int_property(self.properties.get(REAL_QUEUE_ID), -1)
        if not topic or queue_id < 0:
            return None
        return topic, queue_id

    def immunity_ms(self, timeout_ms: int) -> int:
        """How long after its birth the transaction is left alone: CHECK_IMMUNITY_TIME_IN_SECONDS
        when the producer set it, else transactionTimeOut."""
        seconds = _int_property(self.properties.get(CHECK_IMMUNITY_TIME_IN_SECONDS), -1)
        return seconds * 1000 if seconds > 0 else timeout_ms

    def has_immunity_property(self) -> bool:
        return _int_property(self.properties.get(CHECK_IMMUNITY_TIME_IN_SECONDS), -1) > 0


def _int_property(text: str | None, default: int) -> int:
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        return default


def _copy(
    record: HalfRecord, topic: str, queue_id: int, properties: bytes, sysflag: int, prepared: int
) -> MessageToStore:
    header = record.header
    return MessageToStore(
        topic=topic,
        queue_id=queue_id,
        body=record.body,
        properties=properties,
        flag=header.flag,
        sysflag=sysflag,
        born_timestamp_ms=header.born_timestamp,
        born_host=header.born_host,
        reconsume_times=header.reconsume_times,
        prepared_transaction_offset=prepared,
        wait_store_msg_ok=True,
    )


def committed_message(record: HalfRecord) -> MessageToStore:
    """The message a commit stores in the real topic and queue: the half message's body, flag, born
    time and host, with COMMIT transaction bits and PREPARED_TX_OFFSET = the half's CommitLog
    offset. It keeps TRAN_MSG and PGROUP (Java consumers fill `transactionId` from them)."""
    destination = record.real_destination()
    assert destination is not None, "validated by the caller"
    properties = {name: value for name, value in record.properties.items() if name not in INTERNAL_PROPERTIES}
    sysflag = (record.header.sysflag & ~TRANSACTION_TYPE_MASK) | TransactionType.COMMIT_TYPE
    topic, queue_id = destination
    return _copy(record, topic, queue_id, encode_properties(properties), sysflag, record.commitlog_offset)


def renewed_half_message(record: HalfRecord, key: int, check_times: int) -> MessageToStore:
    """The next copy of a half message (the check-back re-put): same message, counted checks, and
    the transaction key so any copy resolves the same transaction."""
    properties = dict(record.properties)
    properties[TRANSACTION_CHECK_TIMES] = str(check_times)
    properties[TRANSACTION_PREPARED_QUEUE_OFFSET] = str(key)
    return _copy(record, TRANS_HALF_TOPIC, HALF_QUEUE_ID, encode_properties(properties), record.header.sysflag, 0)


def discarded_message(record: HalfRecord) -> MessageToStore:
    """The copy kept in TRANS_CHECK_MAX_TIME_TOPIC when checks ran out (the transaction is rolled
    back; operators can still find and re-send it)."""
    return _copy(record, TRANS_CHECK_MAX_TIME_TOPIC, 0, record.properties_bytes, record.header.sysflag, 0)


def check_request_body(record: HalfRecord) -> bytes:
    """The CHECK_TRANSACTION_STATE body: the record re-encoded (`MessageDecoder.encode`) with the
    REAL topic and queue, the copy's own queue and CommitLog offsets (the producer answers with
    the CommitLog offset it reads here)."""
    destination = record.real_destination()
    assert destination is not None, "validated by the caller"
    topic, queue_id = destination
    header = record.header
    topic_bytes = topic.encode("utf-8")
    length = record_length(
        len(record.body), len(topic_bytes), len(record.properties_bytes), len(header.born_host), len(header.store_host)
    )
    buffer = bytearray(length)
    written = encode_record_into(
        buffer,
        0,
        record.body,
        topic_bytes,
        record.properties_bytes,
        queue_id,
        header.flag,
        header.queue_offset,
        header.physical_offset,
        header.sysflag,
        header.born_timestamp,
        header.born_host,
        header.store_timestamp,
        header.store_host,
        header.reconsume_times,
        header.prepared_transaction_offset,
        header.body_crc,
    )
    assert written == length
    return bytes(buffer)
