"""END_TRANSACTION (37): a producer commits or rolls back a half message (spec §11.3, §8.8).

Normally oneway: a refusal then only reaches the log. Asked with a response expected (tools,
tests), every refusal answers SYSTEM_ERROR with a remark saying what was wrong, and changes
nothing: an unknown CommitLog offset, a record that is not a half message, another producer
group, a tranStateTableOffset that is not the record's queue offset, or a transaction that was
already committed, rolled back or discarded (through this copy or any other, see
`transaction_table.py`). commitOrRollback 0 (UNKNOW) does nothing: the check-back will ask.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from shoal.broker.processors.send import RESPONSE_CODE_OF_STATUS
from shoal.broker.transactions.half_message import HalfRecord
from shoal.broker.transactions.service import TransactionService
from shoal.broker.transactions.transaction_table import TransactionTable
from shoal.formats.sysflag import TransactionType
from shoal.protocol import RemotingCommand, ResponseCode, make_response
from shoal.protocol.headers import EndTransactionRequestHeader
from shoal.remoting.server import ServerConnection
from shoal.store import PutResult

log = logging.getLogger(__name__)

COMMIT = int(TransactionType.COMMIT_TYPE)
ROLLBACK = int(TransactionType.ROLLBACK_TYPE)
UNKNOW = int(TransactionType.NOT_TYPE)


def end_refusal(record: HalfRecord | None, header: EndTransactionRequestHeader, table: TransactionTable) -> str | None:
    """Why this END_TRANSACTION must change nothing (None: it may proceed)."""
    offset = header.commit_log_offset
    if record is None:
        return f"no message at CommitLog offset {offset}"
    if not record.is_half:
        return f"the message at CommitLog offset {offset} is not a half message (topic {record.header.topic})"
    if record.producer_group != header.producer_group:
        return (
            f"the half message at CommitLog offset {offset} belongs to producer group "
            f"{record.producer_group!r}, not {header.producer_group!r}"
        )
    if record.queue_offset != header.tran_state_table_offset:
        return (
            f"tranStateTableOffset {header.tran_state_table_offset} is not the queue offset "
            f"{record.queue_offset} of the half message at CommitLog offset {offset}"
        )
    if record.real_destination() is None:
        return f"the half message at CommitLog offset {offset} has no REAL_TOPIC/REAL_QID"
    if not table.is_pending(record.key):
        return (
            f"the transaction of the half message at CommitLog offset {offset} (msgId {header.msg_id}) "
            "was already committed, rolled back or discarded"
        )
    return None


class EndTransactionProcessor:
    def __init__(self, service: TransactionService) -> None:
        self.service = service
        self.commits = 0
        self.rollbacks = 0
        self.refusals = 0

    def __call__(
        self, connection: ServerConnection, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand] | None:
        service = self.service
        if not service.is_master():
            return make_response(request, ResponseCode.SLAVE_NOT_AVAILABLE, "the broker is a slave: no transactions")
        service.sync_role()
        header = EndTransactionRequestHeader.from_ext_fields(request.ext_fields)
        action = header.commit_or_rollback
        if action == UNKNOW:
            log.debug(
                "END_TRANSACTION UNKNOW for %s from %s: the check-back will ask", header.msg_id, connection.address
            )
            return make_response(request, ResponseCode.SUCCESS, "UNKNOW: nothing done, the broker will check back")
        if action not in (COMMIT, ROLLBACK):
            return self._refuse(request, header, connection, f"commitOrRollback {action} is not 0, 8 or 12")
        record = service.half_record(header.commit_log_offset)
        refusal = end_refusal(record, header, service.table)
        if refusal is not None or record is None:
            return self._refuse(request, header, connection, refusal or "no half message at that offset")
        if action == ROLLBACK:
            if not service.rollback(record):
                return make_response(request, ResponseCode.SYSTEM_ERROR, "the rollback could not be recorded")
            self.rollbacks += 1
            return make_response(request, ResponseCode.SUCCESS)
        result = service.commit(record)
        if result.append is None:
            remark = f"commit failed: {result.remark or result.status.value}"
            log.error("transaction %s: %s", header.msg_id, remark)
            return make_response(request, RESPONSE_CODE_OF_STATUS[result.status], remark)
        self.commits += 1
        if request.is_oneway:
            return None
        return self._respond_when_durable(request, result)

    async def _respond_when_durable(self, request: RemotingCommand, result: PutResult) -> RemotingCommand:
        durable = await self.service.store.await_durable(result)
        return make_response(request, RESPONSE_CODE_OF_STATUS[durable.status], None)

    def _refuse(
        self, request: RemotingCommand, header: EndTransactionRequestHeader, connection: ServerConnection, remark: str
    ) -> RemotingCommand:
        self.refusals += 1
        log.warning(
            "END_TRANSACTION %s (fromTransactionCheck=%s) from %s refused: %s",
            header.msg_id,
            header.from_transaction_check,
            connection.address,
            remark,
        )
        return make_response(request, ResponseCode.SYSTEM_ERROR, remark)
