"""`apache.rocketmq.v2.MessagingService`, served over the remoting brokers (RocketMQ 5's proxy).

Each RPC reads its request, asks the brokers (`brokers.py`) and answers a v2 `Status`; a
`ProxyError` becomes that status, an unexpected exception INTERNAL_ERROR with one log line, so a
bad request never takes the service down. Conversions live in `convert.py`, the per-client
Telemetry streams in `sessions.py`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TypeVar

import grpc

from shoal.acl import AccessValidator
from shoal.acl.permission import ANY, PUB, SUB
from shoal.client.errors import MessageDecodeError
from shoal.client.message import decode_messages
from shoal.client.route import is_readable, is_writeable, master_address, publish_queues
from shoal.formats.java_hash import java_string_hash
from shoal.formats.message_id import decode_offset_msg_id
from shoal.formats.sysflag import TransactionType
from shoal.formats.topic_attributes import TopicMessageType, type_conflict
from shoal.formats.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from shoal.protocol import RemotingCommand, RequestCode, ResponseCode
from shoal.protocol.errors import ProtocolError
from shoal.protocol.grpc_signature import AUTHORIZATION, DATE_TIME
from shoal.protocol.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    CheckTransactionStateRequestHeader,
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    PopMessageRequestHeader,
)
from shoal.protocol.route_bodies import TopicRouteData
from shoal.protocol.v2 import definition_pb2 as v2
from shoal.protocol.v2 import service_pb2 as rpc
from shoal.protocol.v2.service_pb2_grpc import MessagingServiceServicer
from shoal.proxy.brokers import Brokers
from shoal.proxy.convert import (
    Receipt,
    TransactionHandle,
    decode_receipt,
    decode_transaction,
    delivered,
    encode_receipt,
    encode_transaction,
    message_type_of,
    send_request,
)
from shoal.proxy.errors import ProxyError
from shoal.proxy.limits import (
    DEFAULT_INVISIBLE_MS,
    LONG_POLLING_DEFAULT_MS,
    LONG_POLLING_MAX_MS,
    MESSAGE_BODY_MAX_BYTES,
    PUSH_RETRY_DELAYS_S,
    RECEIVE_BATCH_DEFAULT,
    RECEIVE_BATCH_MAX,
    RECEIVE_DEADLINE_MARGIN_MS,
)
from shoal.proxy.sessions import Sessions
from shoal.proxy.status import code_of_response, status

log = logging.getLogger(__name__)

_Response = TypeVar("_Response")
RESOLUTIONS = {v2.COMMIT: int(TransactionType.COMMIT_TYPE), v2.ROLLBACK: int(TransactionType.ROLLBACK_TYPE)}
"""commitOrRollback of END_TRANSACTION, by v2 resolution."""
PRODUCER_GROUP = "SHOAL_PROXY_PRODUCER"
"""The producer group of sends that come through the proxy (v5 producers have none)."""
MAX_DELIVERY_ATTEMPTS = 17
"""RocketMQ's retryMaxTimes (16) + 1: what push consumers are told in their retry policy."""
ALL_QUEUES = -1
PERMISSIONS = {(True, True): v2.READ_WRITE, (True, False): v2.READ, (False, True): v2.WRITE, (False, False): v2.NONE}
"""A v2 queue's permission, by (readable, writable)."""
CLIENT_ID_HEADER = "x-mq-client-id"
NAMESPACE_HEADER = "x-mq-namespace"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def metadata_value(context: grpc.aio.ServicerContext[object, object], name: str) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == name:
            return value if isinstance(value, str) else value.decode()
    return ""


def peer_host(peer: str) -> str:
    """The host of a gRPC peer ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000")."""
    address = peer.partition(":")[2]
    host = address.rpartition(":")[0]
    return host.strip("[]") or address


TOPIC_TYPE_OF: dict[int, TopicMessageType] = {
    v2.NORMAL: TopicMessageType.NORMAL,
    v2.FIFO: TopicMessageType.FIFO,
    v2.DELAY: TopicMessageType.DELAY,
    v2.TRANSACTION: TopicMessageType.TRANSACTION,
}
"""A v2 message's type as a topic's message.type names it."""
ACCEPTED_TYPES: dict[TopicMessageType, tuple[int, ...]] = {
    **{kind: (v2_kind,) for v2_kind, kind in TOPIC_TYPE_OF.items()},
    TopicMessageType.MIXED: tuple(TOPIC_TYPE_OF),
    TopicMessageType.UNSPECIFIED: (v2.MESSAGE_TYPE_UNSPECIFIED,),
}
"""What QueryRoute tells clients a topic's queues accept (RocketMQ 5's RouteActivity)."""


def consuming(topic: str, group: str) -> dict[str, int]:
    """What a consumer's call needs: SUB on the topic and on its group (`%RETRY%<group>` in plain ACL)."""
    return {topic: SUB, RETRY_GROUP_TOPIC_PREFIX + group: SUB}


def expression_of(filter_expression: v2.FilterExpression) -> tuple[str, str]:
    """The broker's (expType, exp) of a v2 filter."""
    if filter_expression.type == v2.SQL:
        return "SQL92", filter_expression.expression
    return "TAG", filter_expression.expression or "*"


class MessagingService(MessagingServiceServicer):
    """The servicer; `endpoints` is what QueryRoute tells clients to connect to (this proxy)."""

    def __init__(
        self,
        brokers: Brokers,
        endpoints: v2.Endpoints,
        sessions: Sessions,
        acl: AccessValidator | None = None,
        *,
        check_message_type: bool = True,
    ) -> None:
        self.brokers = brokers
        self.endpoints = endpoints
        self.sessions = sessions
        self.acl = acl
        self.check_message_type = check_message_type
        """RocketMQ 5 proxy's enableTopicMessageTypeCheck: a send must match its topic's message.type."""
        self._next_queue = itertools.count()

    async def _answer(
        self, what: str, build: Callable[[], Awaitable[_Response]], failed: Callable[[v2.Status], _Response]
    ) -> _Response:
        try:
            return await build()
        except ProxyError as error:
            return failed(status(error.code, error.message))
        except Exception as error:
            log.exception("%s failed", what)
            return failed(status(v2.INTERNAL_ERROR, f"{what} failed: {error}"))

    # --- access ---
    def _authorize(self, context: grpc.aio.ServicerContext[object, object], needed: dict[str, int]) -> None:
        """ProxyError UNAUTHORIZED (who is calling is not proven) or FORBIDDEN (the account lacks
        a permission in `needed`) when plain ACL is on; RocketMQ 5's order: authenticate, then authorize."""
        acl = self.acl
        if acl is None:
            return
        host = peer_host(context.peer())
        account, reason = acl.authenticate_v5(
            host, metadata_value(context, AUTHORIZATION), metadata_value(context, DATE_TIME)
        )
        if reason is not None:
            log.warning("v5 call from %s refused: %s", host, reason)
            raise ProxyError(v2.UNAUTHORIZED, reason)
        if account is None or not needed:
            return  # globally white, or only who calls matters
        refused = acl.permitted(account, needed)
        if refused is not None:
            log.warning("v5 call from %s refused: %s", host, refused)
            raise ProxyError(v2.FORBIDDEN, refused)

    # --- routes ---
    async def QueryRoute(  # noqa: N802 (the RPC's name)
        self, request: rpc.QueryRouteRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> rpc.QueryRouteResponse:
        async def build() -> rpc.QueryRouteResponse:
            self._authorize(context, {request.topic.name: ANY})
            route = await self.brokers.route(request.topic.name, refresh=True)
            kind = await self.brokers.topic_message_type(request.topic.name, refresh=True)
            queues = self._message_queues(request.topic, route, ACCEPTED_TYPES[kind])
            return rpc.QueryRouteResponse(status=status(), message_queues=queues)

        return await self._answer("QueryRoute", build, lambda failure: rpc.QueryRouteResponse(status=failure))

    def _message_queues(
        self, topic: v2.Resource, route: TopicRouteData, accepted: Sequence[int]
    ) -> list[v2.MessageQueue]:
        """Every queue of every broker group with a master, each reached through this proxy."""
        masters = {broker.broker_name for broker in route.broker_datas if master_address(broker) is not None}
        queues = []
        for data in sorted(route.queue_datas, key=lambda item: item.broker_name):
            if data.broker_name not in masters:
                continue
            for queue_id in range(max(data.read_queue_nums, data.write_queue_nums)):
                readable = is_readable(data.perm) and queue_id < data.read_queue_nums
                writable = is_writeable(data.perm) and queue_id < data.write_queue_nums
                permission = (
                    v2.READ_WRITE
                    if readable and writable
                    else v2.READ
                    if readable
                    else v2.WRITE
                    if writable
                    else v2.NONE
                )
                queues.append(self._queue(topic, data.broker_name, queue_id, permission, accepted))
        return queues

    def _queue(
        self, topic: v2.Resource, broker_name: str, queue_id: int, permission: int, accepted: Sequence[int] = ()
    ) -> v2.MessageQueue:
        queue = v2.MessageQueue(id=queue_id, permission=permission)  # type: ignore[arg-type]
        queue.topic.CopyFrom(topic)
        queue.broker.name = broker_name
        queue.broker.endpoints.CopyFrom(self.endpoints)
        queue.accept_message_types.extend(accepted)  # type: ignore[arg-type]
        return queue

    async def QueryAssignment(  # noqa: N802
        self, request: rpc.QueryAssignmentRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> rpc.QueryAssignmentResponse:
        """POP needs no rebalancing: every consumer of the group is assigned every broker group,
        as RocketMQ 5 does for POP (queue id -1: the broker pops from all its queues)."""

        async def build() -> rpc.QueryAssignmentResponse:
            self._authorize(context, consuming(request.topic.name, request.group.name))
            route = await self.brokers.route(request.topic.name)
            response = rpc.QueryAssignmentResponse(status=status())
            for data in sorted(route.queue_datas, key=lambda item: item.broker_name):
                if is_readable(data.perm) and data.read_queue_nums > 0:
                    assignment = response.assignments.add()
                    assignment.message_queue.CopyFrom(
                        self._queue(request.topic, data.broker_name, ALL_QUEUES, v2.READ_WRITE)
                    )
            return response

        return await self._answer("QueryAssignment", build, lambda failure: rpc.QueryAssignmentResponse(status=failure))

    # --- clients ---
    async def Heartbeat(  # noqa: N802
        self, request: rpc.HeartbeatRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> rpc.HeartbeatResponse:
        try:
            self._authorize(context, {RETRY_GROUP_TOPIC_PREFIX + request.group.name: SUB} if request.group.name else {})
        except ProxyError as error:
            return rpc.HeartbeatResponse(status=status(error.code, error.message))
        self.sessions.seen(metadata_value(context, CLIENT_ID_HEADER))
        return rpc.HeartbeatResponse(status=status())

    async def NotifyClientTermination(  # noqa: N802
        self, request: rpc.NotifyClientTerminationRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> rpc.NotifyClientTerminationResponse:
        try:
            self._authorize(context, {})
        except ProxyError as error:
            return rpc.NotifyClientTerminationResponse(status=status(error.code, error.message))
        self.sessions.forget(metadata_value(context, CLIENT_ID_HEADER))
        return rpc.NotifyClientTerminationResponse(status=status())

    async def Telemetry(  # noqa: N802
        self, request_iterator: AsyncIterator[rpc.TelemetryCommand], context: grpc.aio.ServicerContext[object, object]
    ) -> AsyncIterator[rpc.TelemetryCommand]:
        """Answer each `settings` the client reports with the server's view of them; commands for
        the client (orphaned transactions) go out on the same stream."""
        try:
            self._authorize(context, {})
        except ProxyError as error:
            yield rpc.TelemetryCommand(status=status(error.code, error.message))
            return
        client_id = metadata_value(context, CLIENT_ID_HEADER)
        outbox = self.sessions.open(client_id)

        async def read() -> None:
            async for command in request_iterator:
                if command.HasField("settings"):
                    outbox.settings = command.settings
                    fifo = await self._subscription_is_fifo(command.settings)
                    outbox.put(
                        rpc.TelemetryCommand(
                            status=status(), settings=settings_reply(command.settings, fifo, self.check_message_type)
                        )
                    )
            outbox.close()

        reader = asyncio.ensure_future(read())
        try:
            async for reply in outbox:
                yield reply
        finally:
            reader.cancel()
            self.sessions.close(client_id, outbox)

    async def _subscription_is_fifo(self, settings: v2.Settings) -> bool:
        """Whether a consumer's group is a FIFO group (False for producers, or when no broker answers)."""
        if not settings.HasField("subscription") or not settings.subscription.subscriptions:
            return False
        subscription = settings.subscription
        try:
            return await self.brokers.group_is_fifo(subscription.subscriptions[0].topic.name, subscription.group.name)
        except ProxyError as failure:
            log.warning("FIFO setting of group %s unknown (%s): treated as not FIFO", subscription.group.name, failure)
            return False

    # --- produce ---
    async def SendMessage(  # noqa: N802
        self, request: rpc.SendMessageRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> rpc.SendMessageResponse:
        async def build() -> rpc.SendMessageResponse:
            if len(request.messages) != 1:
                raise ProxyError(v2.BAD_REQUEST, f"one message per SendMessage, not {len(request.messages)}")
            self._authorize(context, {request.messages[0].topic.name: PUB})
            entry = await self._send(request.messages[0])
            failed = entry.status.code != v2.OK
            return rpc.SendMessageResponse(status=entry.status if failed else status(), entries=[entry])

        return await self._answer("SendMessage", build, lambda failure: rpc.SendMessageResponse(status=failure))

    async def _send(self, message: v2.Message) -> rpc.SendResultEntry:
        topic = message.topic.name
        route = await self.brokers.route(topic)
        if self.check_message_type and not topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
            conflict = type_conflict(
                await self.brokers.topic_message_type(topic),
                TOPIC_TYPE_OF.get(message_type_of(message), TopicMessageType.UNSPECIFIED),
            )
            if conflict is not None:
                raise ProxyError(v2.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, conflict)
        queues = publish_queues(topic, route)
        if not queues:
            raise ProxyError(v2.FORBIDDEN, f"topic {topic} has no writable queue")
        if message_type_of(message) == v2.FIFO:  # one message group, one queue: its order is kept
            queue = queues[java_string_hash(message.system_properties.message_group) % len(queues)]
        else:
            queue = queues[next(self._next_queue) % len(queues)]
        ext_fields, body = send_request(message, queue.queue_id, PRODUCER_GROUP, _now_ms())
        address = await self.brokers.master_of(topic, queue.broker_name)
        response = await self.brokers.invoke(address, RequestCode.SEND_MESSAGE_V2, ext_fields, body)
        if response.code != ResponseCode.SUCCESS:
            return rpc.SendResultEntry(status=status(code_of_response(response.code), response.remark or "send failed"))
        queue_offset = int(response.ext_fields.get("queueOffset", "0"))
        transaction_id = ""
        if message_type_of(message) == v2.TRANSACTION:  # what END_TRANSACTION will need, in the id
            _, commitlog_offset = decode_offset_msg_id(response.ext_fields.get("msgId", ""))
            transaction_id = encode_transaction(TransactionHandle(queue.broker_name, queue_offset, commitlog_offset))
        return rpc.SendResultEntry(
            status=status(),
            message_id=message.system_properties.message_id or response.ext_fields.get("msgId", ""),
            transaction_id=transaction_id,
            offset=queue_offset,
        )

    # --- transactions ---
    async def EndTransaction(  # noqa: N802
        self, request: rpc.EndTransactionRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> rpc.EndTransactionResponse:
        """Commit or roll back a half message (END_TRANSACTION); UNSPECIFIED leaves it to the checks."""

        async def build() -> rpc.EndTransactionResponse:
            self._authorize(context, {request.topic.name: PUB})
            handle = decode_transaction(request.transaction_id)
            if request.resolution not in RESOLUTIONS:
                return rpc.EndTransactionResponse(status=status())
            header = EndTransactionRequestHeader(
                producer_group=PRODUCER_GROUP,
                tran_state_table_offset=handle.queue_offset,
                commit_log_offset=handle.commitlog_offset,
                commit_or_rollback=RESOLUTIONS[request.resolution],
                from_transaction_check=request.source == v2.SOURCE_SERVER_CHECK,
                msg_id=request.message_id,
                transaction_id=request.transaction_id,
            )
            address = await self.brokers.master_of(request.topic.name, handle.broker_name)
            response = await self.brokers.invoke(address, RequestCode.END_TRANSACTION, header.to_ext_fields())
            if response.code != ResponseCode.SUCCESS:
                raise ProxyError(code_of_response(response.code), response.remark or "end transaction failed")
            return rpc.EndTransactionResponse(status=status())

        return await self._answer("EndTransaction", build, lambda failure: rpc.EndTransactionResponse(status=failure))

    async def check_transaction(self, address: str, request: RemotingCommand) -> None:
        """A broker's CHECK_TRANSACTION_STATE: ask a producer of the topic over its Telemetry stream
        (RecoverOrphanedTransactionCommand); its checker answers with EndTransaction."""
        try:
            header = CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
            (half,) = decode_messages(request.body or b"")
        except (ProtocolError, MessageDecodeError, ValueError) as failure:
            log.warning("malformed CHECK_TRANSACTION_STATE from %s: %s", address, failure)
            return
        broker_name = self.brokers.broker_name_of(address)
        if broker_name is None:
            log.warning("CHECK_TRANSACTION_STATE from %s, a broker no route names", address)
            return
        message = delivered(half, None, 0, "")
        outbox = self.sessions.producer_of(message.topic.name)
        if outbox is None:
            log.info(
                "no v5 producer of %s is connected to check a transaction: the broker will ask again",
                message.topic.name,
            )
            return
        handle = TransactionHandle(broker_name, header.tran_state_table_offset, header.commit_log_offset)
        command = rpc.TelemetryCommand()
        command.recover_orphaned_transaction_command.message.CopyFrom(message)
        command.recover_orphaned_transaction_command.transaction_id = encode_transaction(handle)
        outbox.put(command)

    # --- consume ---
    async def ReceiveMessage(  # noqa: N802
        self, request: rpc.ReceiveMessageRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> AsyncIterator[rpc.ReceiveMessageResponse]:
        try:
            found = await self._pop(request, context)
        except ProxyError as error:
            yield rpc.ReceiveMessageResponse(status=status(error.code, error.message))
            return
        except Exception as error:
            log.exception("ReceiveMessage failed")
            yield rpc.ReceiveMessageResponse(status=status(v2.INTERNAL_ERROR, f"ReceiveMessage failed: {error}"))
            return
        if not found:
            yield rpc.ReceiveMessageResponse(status=status(v2.MESSAGE_NOT_FOUND, "no new message"))
            return
        yield rpc.ReceiveMessageResponse(status=status())
        delivered_at = rpc.ReceiveMessageResponse()  # clients measure delivery latency from it
        delivered_at.delivery_timestamp.FromMilliseconds(_now_ms())
        yield delivered_at
        for message in found:
            yield rpc.ReceiveMessageResponse(message=message)

    async def _pop(
        self, request: rpc.ReceiveMessageRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> list[v2.Message]:
        queue = request.message_queue
        topic = queue.topic.name
        if not request.group.name:
            raise ProxyError(v2.ILLEGAL_CONSUMER_GROUP, "a consumer group is needed")
        self._authorize(context, consuming(topic, request.group.name))
        invisible_ms = (
            request.invisible_duration.ToMilliseconds()
            if request.HasField("invisible_duration")
            else DEFAULT_INVISIBLE_MS
        )
        poll_ms = (
            request.long_polling_timeout.ToMilliseconds()
            if request.HasField("long_polling_timeout")
            else LONG_POLLING_DEFAULT_MS
        )
        remaining = context.time_remaining()
        if remaining is not None:
            poll_ms = min(poll_ms, int(remaining * 1000) - RECEIVE_DEADLINE_MARGIN_MS)
        poll_ms = max(min(poll_ms, LONG_POLLING_MAX_MS), 0)
        batch = min(request.batch_size or RECEIVE_BATCH_DEFAULT, RECEIVE_BATCH_MAX)
        exp_type, exp = expression_of(request.filter_expression)
        fifo = await self.brokers.group_is_fifo(topic, request.group.name)
        header = PopMessageRequestHeader(
            consumer_group=request.group.name,
            topic=topic,
            queue_id=ALL_QUEUES,  # as RocketMQ 5's proxy: whatever any queue of that broker has
            max_msg_nums=batch,
            invisible_time_ms=invisible_ms,
            poll_time_ms=poll_ms,
            born_time_ms=_now_ms(),
            exp_type=exp_type,
            exp=exp,
            order=fifo,  # a FIFO group: a queue's next messages only once the leased ones are acked
        )
        address = await self.brokers.master_of(topic, queue.broker.name)
        response = await self.brokers.invoke(
            address, RequestCode.POP_MESSAGE, header.to_ext_fields(), timeout_s=poll_ms / 1000 + 5
        )
        if response.code == ResponseCode.POLLING_TIMEOUT:
            return []
        if response.code != ResponseCode.SUCCESS:
            raise ProxyError(code_of_response(response.code), response.remark or "pop failed")
        try:
            messages = decode_messages(response.body or b"", broker_name=queue.broker.name)
        except MessageDecodeError as failure:
            raise ProxyError(v2.INTERNAL_SERVER_ERROR, f"broker {address} sent unreadable records: {failure}") from None
        pop_ms = int(response.ext_fields.get("popTime", "0"))
        namespace = metadata_value(context, NAMESPACE_HEADER)
        return [
            delivered(
                ext,
                Receipt(
                    queue.broker.name, topic, ext.queue_id, ext.queue_offset, pop_ms, invisible_ms, ext.commitlog_offset
                ),
                ext.reconsume_times + 1,
                namespace,
            )
            for ext in messages
        ]

    async def AckMessage(  # noqa: N802
        self, request: rpc.AckMessageRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> rpc.AckMessageResponse:
        async def build() -> rpc.AckMessageResponse:
            self._authorize(context, consuming(request.topic.name, request.group.name))
            response = rpc.AckMessageResponse()
            codes = set()
            for entry in request.entries:
                result = response.entries.add(message_id=entry.message_id, receipt_handle=entry.receipt_handle)
                try:
                    await self._ack(request.group.name, decode_receipt(entry.receipt_handle))
                    result.status.CopyFrom(status())
                except ProxyError as error:
                    result.status.CopyFrom(status(error.code, error.message))
                codes.add(result.status.code)
            if codes == {v2.OK} or not codes:
                response.status.CopyFrom(status())
            elif len(codes) == 1:
                response.status.CopyFrom(response.entries[0].status)
            else:
                response.status.CopyFrom(status(v2.MULTIPLE_RESULTS, "some acks failed: see the entries"))
            return response

        return await self._answer("AckMessage", build, lambda failure: rpc.AckMessageResponse(status=failure))

    async def _ack(self, group: str, receipt: Receipt) -> None:
        header = AckMessageRequestHeader(
            consumer_group=group,
            topic=receipt.topic,
            queue_id=receipt.queue_id,
            extra_info=receipt.extra_info(),
            offset=receipt.queue_offset,
        )
        address = await self.brokers.master_of(receipt.topic, receipt.broker_name)
        response = await self.brokers.invoke(address, RequestCode.ACK_MESSAGE, header.to_ext_fields())
        if response.code != ResponseCode.SUCCESS:
            raise ProxyError(code_of_response(response.code), response.remark or "ack failed")

    async def ChangeInvisibleDuration(  # noqa: N802
        self, request: rpc.ChangeInvisibleDurationRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> rpc.ChangeInvisibleDurationResponse:
        async def build() -> rpc.ChangeInvisibleDurationResponse:
            self._authorize(context, consuming(request.topic.name, request.group.name))
            receipt = decode_receipt(request.receipt_handle)
            invisible_ms = request.invisible_duration.ToMilliseconds()
            header = ChangeInvisibleTimeRequestHeader(
                consumer_group=request.group.name,
                topic=receipt.topic,
                queue_id=receipt.queue_id,
                extra_info=receipt.extra_info(),
                offset=receipt.queue_offset,
                invisible_time_ms=invisible_ms,
            )
            address = await self.brokers.master_of(receipt.topic, receipt.broker_name)
            response = await self.brokers.invoke(
                address, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext_fields()
            )
            if response.code != ResponseCode.SUCCESS:
                raise ProxyError(code_of_response(response.code), response.remark or "change failed")
            renewed = Receipt(
                receipt.broker_name,
                receipt.topic,
                receipt.queue_id,
                receipt.queue_offset,
                int(response.ext_fields["popTime"]),
                invisible_ms,
                receipt.commitlog_offset,
            )
            return rpc.ChangeInvisibleDurationResponse(status=status(), receipt_handle=encode_receipt(renewed))

        return await self._answer(
            "ChangeInvisibleDuration", build, lambda failure: rpc.ChangeInvisibleDurationResponse(status=failure)
        )

    async def ForwardMessageToDeadLetterQueue(  # noqa: N802
        self, request: rpc.ForwardMessageToDeadLetterQueueRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> rpc.ForwardMessageToDeadLetterQueueResponse:
        """Store the message in %DLQ%<group> (CONSUMER_SEND_MSG_BACK with delay level -1), then ack it."""

        async def build() -> rpc.ForwardMessageToDeadLetterQueueResponse:
            self._authorize(context, consuming(request.topic.name, request.group.name))
            receipt = decode_receipt(request.receipt_handle)
            header = ConsumerSendMsgBackRequestHeader(
                offset=receipt.commitlog_offset,
                group=request.group.name,
                delay_level=-1,
                origin_msg_id=request.message_id,
                origin_topic=receipt.topic,
                max_reconsume_times=request.max_delivery_attempts,
            )
            address = await self.brokers.master_of(receipt.topic, receipt.broker_name)
            response = await self.brokers.invoke(address, RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields())
            if response.code != ResponseCode.SUCCESS:
                raise ProxyError(code_of_response(response.code), response.remark or "forward failed")
            await self._ack(request.group.name, receipt)
            return rpc.ForwardMessageToDeadLetterQueueResponse(status=status())

        return await self._answer(
            "ForwardMessageToDeadLetterQueue",
            build,
            lambda failure: rpc.ForwardMessageToDeadLetterQueueResponse(status=failure),
        )

    # --- offset-based consumption: not served ---
    # The v5 clients consume by POP; none of the official ones calls these (docs/compatibility.md).
    # Answered here, rather than by the generated base class, so a caller gets a v2 status and the
    # log no traceback.
    async def PullMessage(  # noqa: N802
        self, request: rpc.PullMessageRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> AsyncIterator[rpc.PullMessageResponse]:
        yield rpc.PullMessageResponse(status=not_served("PullMessage"))

    async def UpdateOffset(  # noqa: N802
        self, request: rpc.UpdateOffsetRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> rpc.UpdateOffsetResponse:
        return rpc.UpdateOffsetResponse(status=not_served("UpdateOffset"))

    async def GetOffset(  # noqa: N802
        self, request: rpc.GetOffsetRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> rpc.GetOffsetResponse:
        return rpc.GetOffsetResponse(status=not_served("GetOffset"))

    async def QueryOffset(  # noqa: N802
        self, request: rpc.QueryOffsetRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> rpc.QueryOffsetResponse:
        return rpc.QueryOffsetResponse(status=not_served("QueryOffset"))


def not_served(method: str) -> v2.Status:
    return status(v2.NOT_IMPLEMENTED, f"{method} is not served by Shoal's proxy: consume with POP (ReceiveMessage)")


def settings_reply(settings: v2.Settings, fifo: bool = False, validate_message_type: bool = True) -> v2.Settings:
    """The client's settings as the server sees them: a producer's body limit (a reply without one
    makes the Python client refuse every send), a consumer's FIFO mode, polling and retry policy."""
    reply = v2.Settings()
    reply.CopyFrom(settings)
    if settings.HasField("publishing") or settings.client_type == v2.PRODUCER:
        reply.publishing.max_body_size = MESSAGE_BODY_MAX_BYTES
        reply.publishing.validate_message_type = validate_message_type
    elif settings.HasField("subscription") or settings.client_type in (v2.PUSH_CONSUMER, v2.SIMPLE_CONSUMER):
        subscription = reply.subscription
        subscription.fifo = fifo
        subscription.receive_batch_size = RECEIVE_BATCH_DEFAULT
        subscription.long_polling_timeout.FromMilliseconds(LONG_POLLING_DEFAULT_MS)
        policy = reply.backoff_policy
        policy.max_attempts = MAX_DELIVERY_ATTEMPTS
        policy.customized_backoff.Clear()
        for delay_s in PUSH_RETRY_DELAYS_S:
            policy.customized_backoff.next.add().FromSeconds(delay_s)
    return reply
