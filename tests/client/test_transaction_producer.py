"""TransactionProducer without a broker: the half message it sends, the END_TRANSACTION header,
listener calls (plain functions in a thread, coroutines on the loop), and the answer to a
CHECK_TRANSACTION_STATE request, with the remoting layer replaced by a recorder."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from shoal.client import LocalTransactionState, Message, MessageExt, TransactionProducer
from shoal.client.transaction_producer import call_listener, end_header, half_message
from shoal.protocol import RemotingCommand, RequestCode, make_request
from shoal.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader

GROUP = "PID_tx"


def test_half_message_marks_the_transaction_and_drops_delays() -> None:
    """Goal: TRAN_MSG, PGROUP and a UNIQ_KEY are set, delays dropped, the caller's message kept.
    Method: a message with a delay level and a 5.x timer property."""
    message = Message("Orders", b"x", tags="A", properties={"TIMER_DELAY_SEC": "30", "k": "v"}, delay_time_level=3)
    half = half_message(message, GROUP)
    assert half.properties["TRAN_MSG"] == "true" and half.properties["PGROUP"] == GROUP
    assert len(half.properties["UNIQ_KEY"]) == 32
    assert half.delay_time_level == 0 and "TIMER_DELAY_SEC" not in half.properties
    assert half.properties["k"] == "v" and half.tags == "A"
    assert message.delay_time_level == 3 and "TRAN_MSG" not in message.properties
    assert "DELAY" not in half.wire_properties()


def test_end_header_codes() -> None:
    """Goal: the END_TRANSACTION fields Java sends (8 commit, 12 rollback, 0 unknown). Method: decode."""
    codes = {state: state.commit_or_rollback for state in LocalTransactionState}
    assert codes == {
        LocalTransactionState.COMMIT_MESSAGE: 8,
        LocalTransactionState.ROLLBACK_MESSAGE: 12,
        LocalTransactionState.UNKNOW: 0,
    }
    fields = end_header(
        GROUP,
        LocalTransactionState.ROLLBACK_MESSAGE,
        queue_offset=5,
        commitlog_offset=4096,
        msg_id="ABC",
        transaction_id="ABC",
        from_check=True,
    )
    header = EndTransactionRequestHeader.from_ext_fields(fields)
    assert (header.producer_group, header.tran_state_table_offset, header.commit_log_offset) == (GROUP, 5, 4096)
    assert (header.commit_or_rollback, header.from_transaction_check, header.msg_id) == (12, True, "ABC")


def test_plain_listener_methods_run_in_a_worker_thread() -> None:
    """Goal: a blocking local transaction never blocks the event loop; coroutines run on it.
    Method: compare thread ids."""
    loop_thread = threading.get_ident()

    def plain() -> int:
        return threading.get_ident()

    async def coroutine() -> int:
        return threading.get_ident()

    async def scenario() -> None:
        assert await call_listener(plain) != loop_thread
        assert await call_listener(coroutine) == loop_thread

    asyncio.run(scenario())


class Recorder:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.checked: list[MessageExt] = []

    def execute_local_transaction(self, message: Message, arg: Any) -> Any:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, message: MessageExt) -> Any:
        self.checked.append(message)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def check_request(build_record: Callable[..., bytes]) -> RemotingCommand:
    body = build_record(
        topic="Orders",
        queue_id=2,
        queue_offset=7,
        physical_offset=8192,
        properties=f"TRAN_MSG\x01true\x02PGROUP\x01{GROUP}\x02UNIQ_KEY\x01U1\x02REAL_TOPIC\x01Orders",
    )
    header = CheckTransactionStateRequestHeader(
        tran_state_table_offset=7, commit_log_offset=8192, msg_id="U1", transaction_id="U1", offset_msg_id="X"
    )
    return make_request(
        RequestCode.CHECK_TRANSACTION_STATE, opaque=1, ext_fields=header.to_ext_fields(), body=body, oneway=True
    )


def answers_to(build_record: Callable[..., bytes], listener: Recorder) -> list[tuple[str, int, dict[str, str]]]:
    """Feed one check request to a producer; return the END_TRANSACTION requests it sent."""
    sent: list[tuple[str, int, dict[str, str]]] = []

    async def scenario() -> None:
        producer = TransactionProducer(GROUP, "127.0.0.1:9876", listener)

        async def record(address: str, code: int, ext_fields: dict[str, str], body: bytes | None = None) -> None:
            sent.append((address, code, ext_fields))

        producer._instance.remoting.invoke_oneway = record  # type: ignore[method-assign, assignment]
        handler = producer._instance.on_check_transaction_state
        assert handler is not None
        await handler("10.0.0.1:10911", check_request(build_record))

    asyncio.run(scenario())
    return sent


def test_a_check_is_answered_with_end_transaction_from_check(build_record: Callable[..., bytes]) -> None:
    """Goal: the check's record reaches the listener with the real topic; the answer goes to the
    asking broker with fromTransactionCheck=true and the offsets of the checked copy. Method:
    a recorder in place of the remoting client."""
    listener = Recorder(LocalTransactionState.COMMIT_MESSAGE)
    ((address, code, fields),) = answers_to(build_record, listener)
    (checked,) = listener.checked
    assert (checked.topic, checked.queue_id, checked.msg_id) == ("Orders", 2, "U1")
    assert (address, code) == ("10.0.0.1:10911", RequestCode.END_TRANSACTION)
    header = EndTransactionRequestHeader.from_ext_fields(fields)
    assert (header.tran_state_table_offset, header.commit_log_offset, header.commit_or_rollback) == (7, 8192, 8)
    assert header.from_transaction_check and header.producer_group == GROUP and header.msg_id == "U1"


def test_a_failing_check_listener_sends_nothing(build_record: Callable[..., bytes]) -> None:
    """Goal: an exception in check_local_transaction leaves the question open (the broker asks
    again); None answers UNKNOW. Method: both listeners."""
    assert answers_to(build_record, Recorder(RuntimeError("database down"))) == []
    ((_, _, fields),) = answers_to(build_record, Recorder(None))
    assert EndTransactionRequestHeader.from_ext_fields(fields).commit_or_rollback == 0
