"""`TransactionProducer`: transactional messages (Java's TransactionMQProducer, spec §11).

    class Orders:
        def execute_local_transaction(self, message, arg):   # after the half message is stored
            save_order(arg)                                   # the local transaction
            return LocalTransactionState.COMMIT_MESSAGE
        def check_local_transaction(self, message):          # the broker asks, later
            return LocalTransactionState.COMMIT_MESSAGE if order_saved(message) else ...

    async with TransactionProducer("pg", "127.0.0.1:9876", Orders()) as producer:
        result = await producer.send_message_in_transaction(Message("Orders", b"..."), arg=order)

`send_message_in_transaction` sends a half message (TRAN_MSG=true, PGROUP, sysflag PREPARED),
which consumers cannot see; runs the local transaction; and tells the broker the outcome with
END_TRANSACTION (oneway). UNKNOW (or an exception in the listener, or an END that never arrives)
leaves the decision to the broker's check-back: after `transactionTimeOut` it sends
CHECK_TRANSACTION_STATE to *any* live producer of the group, whose `check_local_transaction`
answers. So every instance of a group must be able to answer for every other one.

Listener methods may be plain functions (they run in a worker thread, never on the event loop)
or coroutine functions. A delay level on a transactional message is ignored, as Java's client
ignores it (a delayed half message would loop in RocketMQ brokers, spec §11.6).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from shoal.client import limits
from shoal.client.errors import MessageDecodeError, NoRouteError, RemotingError
from shoal.client.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    Message,
    MessageExt,
    decode_messages,
)
from shoal.client.producer import Producer, SendResult, SendStatus, prepare_message
from shoal.client.settings import ClientSettings, ProducerSettings
from shoal.formats.message_id import create_uniq_id, decode_offset_msg_id
from shoal.protocol import MessageQueue, RemotingCommand, RequestCode
from shoal.protocol.errors import ProtocolError
from shoal.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader

log = logging.getLogger(__name__)

TRANSACTION_PREPARED_TYPE = 0x4
"""MessageSysFlag.TRANSACTION_PREPARED_TYPE: the sysflag bits of a half message."""
DELAY_PROPERTIES = (
    PROPERTY_DELAY_TIME_LEVEL,
    "__STARTDELIVERTIME",
    "TIMER_DELIVER_MS",
    "TIMER_DELAY_SEC",
    "TIMER_DELAY_MS",
)
"""Delivery-delay properties dropped from a transactional message (4.x level, 5.x timers)."""


class LocalTransactionState(enum.Enum):
    """What the local transaction decided (Java's LocalTransactionState, spelling included)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"

    @property
    def commit_or_rollback(self) -> int:
        """The END_TRANSACTION `commitOrRollback` value: 8 commit, 12 rollback, 0 unknown."""
        return _END_CODES[self]


_END_CODES = {
    LocalTransactionState.COMMIT_MESSAGE: 8,
    LocalTransactionState.ROLLBACK_MESSAGE: 12,
    LocalTransactionState.UNKNOW: 0,
}


class TransactionListener(Protocol):
    """The application's side of a transaction; either method may also be `async def`."""

    def execute_local_transaction(
        self, message: Message, arg: Any
    ) -> LocalTransactionState | Awaitable[LocalTransactionState]:
        """Run the local transaction for a half message just stored (its UNIQ_KEY property is
        the transaction id)."""
        ...

    def check_local_transaction(self, message: MessageExt) -> LocalTransactionState | Awaitable[LocalTransactionState]:
        """The broker asks how a transaction ended (possibly one another instance started)."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class TransactionSendResult(SendResult):
    """A SendResult of the half message, with what the local transaction decided."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW
    transaction_id: str = ""


async def call_listener(function: Callable[..., Any], *args: Any) -> Any:
    """Call a listener method: a coroutine function on the loop, a plain one in a worker thread."""
    if inspect.iscoroutinefunction(function):
        return await function(*args)
    result = await asyncio.to_thread(function, *args)
    if inspect.isawaitable(result):
        result = await result
    return result


def _state_of(value: object, what: str) -> LocalTransactionState:
    """A listener's answer; None and anything else than a LocalTransactionState count as UNKNOW."""
    if isinstance(value, LocalTransactionState):
        return value
    if value is not None:
        log.error("%s returned %r, not a LocalTransactionState: treated as UNKNOW", what, value)
    return LocalTransactionState.UNKNOW


def half_message(message: Message, group: str) -> Message:
    """The message as sent in a transaction: TRAN_MSG, PGROUP and a UNIQ_KEY set, no delay.
    The caller's message is left unchanged."""
    properties = {key: value for key, value in message.properties.items() if key not in DELAY_PROPERTIES}
    properties[PROPERTY_TRANSACTION_PREPARED] = "true"
    properties[PROPERTY_PRODUCER_GROUP] = group
    properties.setdefault(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, create_uniq_id())
    return dataclasses.replace(message, properties=properties, delay_time_level=0)


def end_header(
    group: str,
    state: LocalTransactionState,
    *,
    queue_offset: int,
    commitlog_offset: int,
    msg_id: str,
    transaction_id: str | None,
    from_check: bool,
) -> dict[str, str]:
    """The EndTransactionRequestHeader extFields of one END_TRANSACTION."""
    header = EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=queue_offset,
        commit_log_offset=commitlog_offset,
        commit_or_rollback=state.commit_or_rollback,
        from_transaction_check=from_check,
        msg_id=msg_id,
        transaction_id=transaction_id,
    )
    return header.to_ext_fields()


class TransactionProducer(Producer):
    """A Producer that also sends transactional messages and answers the broker's checks."""

    def __init__(
        self,
        group: str,
        namesrv_addrs: str | Sequence[str],
        listener: TransactionListener,
        *,
        settings: ProducerSettings | None = None,
        client_settings: ClientSettings | None = None,
    ) -> None:
        super().__init__(group, namesrv_addrs, settings=settings, client_settings=client_settings)
        self.listener = listener
        self._instance.on_check_transaction_state = self._on_check
        self._checks_in_flight = 0
        self._registered_at: set[str] = set()
        self.checks_answered = 0

    async def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's queues; also registers this producer with their brokers at once (a producer
        only takes part in check-backs once a broker has its heartbeat)."""
        queues = await super().fetch_publish_queues(topic)
        await self._register_with_brokers()
        return queues

    async def send_message_in_transaction(
        self, message: Message, arg: Any = None, *, timeout_s: float = 3.0
    ) -> TransactionSendResult:
        """Half message, local transaction, END_TRANSACTION (module docstring). Raises what `send`
        raises when the half message is not stored; the local transaction then never runs."""
        self._check_running()
        half = half_message(message, self.group)
        outgoing = prepare_message(half, self.settings)
        outgoing = dataclasses.replace(outgoing, sys_flag=outgoing.sys_flag | TRANSACTION_PREPARED_TYPE)
        sent = await self._dispatch(outgoing, half, timeout_s, None, None, None, oneway=False)
        assert sent is not None
        await self._register_with_brokers()
        if sent.status is SendStatus.SEND_OK:
            state = await self._execute_local(half, arg)
        else:  # stored, but not as durable as asked: Java rolls back
            state = LocalTransactionState.ROLLBACK_MESSAGE
        await self._end_after_send(sent, state)
        fields = {field.name: getattr(sent, field.name) for field in dataclasses.fields(sent)}
        return TransactionSendResult(**fields, local_transaction_state=state, transaction_id=sent.msg_id)

    async def _execute_local(self, half: Message, arg: Any) -> LocalTransactionState:
        try:
            answer = await call_listener(self.listener.execute_local_transaction, half, arg)
        except Exception:
            log.exception("execute_local_transaction failed for %s: left to the check-back", half.uniq_key)
            return LocalTransactionState.UNKNOW
        return _state_of(answer, "execute_local_transaction")

    async def _end_after_send(self, sent: SendResult, state: LocalTransactionState) -> None:
        """END_TRANSACTION (oneway) to the broker that stored the half message; a failure is only
        logged: the broker's check-back will ask."""
        address = self._instance.routes.master_address(sent.message_queue.broker_name)
        if address is None:
            log.warning(
                "no address for broker %s: transaction %s left to the check-back", sent.message_queue, sent.msg_id
            )
            return
        _, commitlog_offset = decode_offset_msg_id(sent.offset_msg_id)
        ext_fields = end_header(
            self.group,
            state,
            queue_offset=sent.queue_offset,
            commitlog_offset=commitlog_offset,
            msg_id=sent.msg_id,
            transaction_id=sent.msg_id,
            from_check=False,
        )
        try:
            await self._instance.remoting.invoke_oneway(address, RequestCode.END_TRANSACTION, ext_fields)
        except RemotingError as error:
            log.warning(
                "END_TRANSACTION for %s to %s failed (the broker will check back): %s", sent.msg_id, address, error
            )

    async def _register_with_brokers(self) -> None:
        """Heartbeat now to brokers we have not reached yet (not after the 30 s interval)."""
        addresses = self._instance.routes.broker_addresses(masters_only=True)
        if addresses <= self._registered_at:
            return
        self._registered_at |= addresses
        try:
            await self._instance.send_heartbeats()
        except (RemotingError, NoRouteError) as error:
            log.info("heartbeat after a new route failed: %s", error)

    async def _on_check(self, address: str, request: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE from the broker at `address`: ask the listener, answer with
        END_TRANSACTION (oneway, fromTransactionCheck=true)."""
        if self._checks_in_flight >= limits.TRANSACTION_CHECKS_IN_FLIGHT_MAX_COUNT:
            log.warning("%d transaction checks in progress: one from %s dropped", self._checks_in_flight, address)
            return
        self._checks_in_flight += 1
        try:
            await self._answer_check(address, request)
        finally:
            self._checks_in_flight -= 1

    async def _answer_check(self, address: str, request: RemotingCommand) -> None:
        try:
            header = CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
            messages = decode_messages(request.body or b"")
        except (ProtocolError, MessageDecodeError) as error:
            log.warning("malformed CHECK_TRANSACTION_STATE from %s: %s", address, error)
            return
        if len(messages) != 1:
            log.warning("CHECK_TRANSACTION_STATE from %s carries %d messages, not 1", address, len(messages))
            return
        message = messages[0]
        uniq_key = message.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or message.msg_id
        try:
            answer = await call_listener(self.listener.check_local_transaction, message)
        except Exception:
            log.exception("check_local_transaction failed for %s: the broker will ask again", uniq_key)
            return
        state = _state_of(answer, "check_local_transaction")
        ext_fields = end_header(
            message.properties.get(PROPERTY_PRODUCER_GROUP) or self.group,
            state,
            queue_offset=header.tran_state_table_offset,
            commitlog_offset=message.commitlog_offset,
            msg_id=uniq_key,
            transaction_id=header.transaction_id or uniq_key,
            from_check=True,
        )
        try:
            await self._instance.remoting.invoke_oneway(address, RequestCode.END_TRANSACTION, ext_fields)
        except RemotingError as error:
            log.warning("answering the check of %s to %s failed: %s", uniq_key, address, error)
            return
        self.checks_answered += 1
