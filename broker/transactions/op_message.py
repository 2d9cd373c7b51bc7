"""Op messages: the record that a transaction was resolved (spec §11.4).

Topic `RMQ_SYS_TRANS_OP_HALF_TOPIC`, queue 0, tags `d`, body = the ASCII decimal half-queue
offset of the resolved half message (RocketMQ 5.x may list several, comma separated; both are
read). Shoal writes the offset of the transaction's *latest* copy (the one a RocketMQ checker
would otherwise check again) and adds `TRAN_PREPARED_QUEUE_OFFSET` = the transaction key, so a
restart knows which transaction an op resolved without reading the half message; ops written
by RocketMQ lack it and resolve the copy they name.
"""

from __future__ import annotations

from typing import NamedTuple

from shoal.broker.transactions import limits
from shoal.broker.transactions.half_message import HALF_QUEUE_ID
from shoal.formats.properties import (
    TAGS,
    TRANSACTION_PREPARED_QUEUE_OFFSET,
    WAIT_STORE_MSG_OK,
    encode_properties,
)
from shoal.formats.record import host_flags
from shoal.formats.topics import TRANS_OP_HALF_TOPIC
from shoal.store import MessageToStore

REMOVE_TAG = "d"
"""TransactionalMessageUtil.REMOVETAG: the tag of every op message."""


class OpEntry(NamedTuple):
    """What one op message says: transaction `key` is resolved; `latest` is its last half copy."""

    key: int
    latest: int


def op_body(latest: int) -> bytes:
    """The op message body: the half-queue offset as ASCII decimal."""
    assert latest >= 0
    return str(latest).encode("ascii")


def op_message(latest: int, key: int, store_host: bytes, now_ms: int) -> MessageToStore:
    """The op message resolving transaction `key` whose latest half copy is at `latest`; born and
    stored by this broker, as RocketMQ writes them."""
    properties = encode_properties(
        {TAGS: REMOVE_TAG, WAIT_STORE_MSG_OK: "true", TRANSACTION_PREPARED_QUEUE_OFFSET: str(key)}
    )
    return MessageToStore(
        topic=TRANS_OP_HALF_TOPIC,
        queue_id=HALF_QUEUE_ID,
        body=op_body(latest),
        properties=properties,
        sysflag=host_flags(store_host, store_host),
        born_timestamp_ms=now_ms,
        born_host=store_host,
        wait_store_msg_ok=True,
    )


def parse_op(body: bytes, properties: dict[str, str]) -> list[OpEntry]:
    """The resolutions an op message records; [] for a body that is no list of offsets (a
    message some other writer put there is skipped, not fatal)."""
    if properties.get(TAGS) != REMOVE_TAG or not body or len(body) > limits.OP_BODY_MAX_BYTES:
        return []
    try:
        offsets = [int(part) for part in body.decode("ascii").split(",") if part]
    except (UnicodeDecodeError, ValueError):
        return []
    if any(offset < 0 for offset in offsets):
        return []
    key_text = properties.get(TRANSACTION_PREPARED_QUEUE_OFFSET)
    if len(offsets) == 1 and key_text is not None and key_text.isdigit():
        return [OpEntry(int(key_text), offsets[0])]
    return [OpEntry(offset, offset) for offset in offsets]
