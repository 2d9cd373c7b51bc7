"""SEND_REPLY_MESSAGE / SEND_REPLY_MESSAGE_V2: request-reply answers (RocketMQ 4.6+).

A requester (`DefaultMQProducer.request`) sends an ordinary message carrying CORRELATION_ID,
REPLY_TO_CLIENT (its clientId) and TTL. A responder builds the answer with
`MessageUtil.createReplyMessage` (topic `<cluster>_REPLY_TOPIC`, MSG_TYPE=reply) and sends it; its
client uses these codes for replies. Like RocketMQ's ReplyMessageProcessor, the broker checks the
send as any send, pushes the reply to the requester's producer connection (found by the clientId
among the producers' heartbeats) with PUSH_REPLY_MESSAGE_TO_CLIENT, answers SUCCESS once the
requester took it (else SYSTEM_ERROR, "push reply message fail, channel of <id> not found." when
the requester is gone), and stores the reply in its topic when `storeReplyMessageEnable`, whatever
the push did. The reply is stored with the property string as sent (no CLUSTER added).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from shoal.broker import limits
from shoal.broker.processors.send import PRODUCER_SYSFLAG_BITS
from shoal.broker.topic_manager import PERM_WRITE
from shoal.formats.properties import decode_properties, encode_properties
from shoal.formats.record import encode_host
from shoal.formats.topics import NOT_ALLOWED_SEND_TOPICS, validate_topic_name
from shoal.protocol import RemotingCommand, RequestCode, ResponseCode, make_request, make_response
from shoal.protocol.headers import (
    ReplyMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    send_message_request_header_of,
)
from shoal.remoting import RemotingError
from shoal.remoting.server import ServerConnection
from shoal.store import MessageToStore, PutResult

if TYPE_CHECKING:
    from collections.abc import Callable

    from shoal.broker.client_manager import ProducerManager
    from shoal.broker.config import BrokerConfig
    from shoal.broker.replication.role import BrokerRoleState
    from shoal.broker.topic_manager import TopicManager
    from shoal.store import MessageStore

log = logging.getLogger(__name__)

REPLY_TO_CLIENT = "REPLY_TO_CLIENT"  # MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT: the requester's clientId
CORRELATION_ID = "CORRELATION_ID"  # MessageConst.PROPERTY_CORRELATION_ID: pairs a reply with its request
PUSH_REPLY_TIME = "PUSH_REPLY_TIME"  # MessageConst.PROPERTY_PUSH_REPLY_TIME: set on the pushed copy only


class ReplyProcessor:
    """Given what a reply touches: the broker's config and role, topics, the store, the producer
    connections (to find the requester), `store_address` (ip:port, the push header's storeHost),
    `on_append` (let the Dispatcher index a stored reply) and `next_opaque` (the push's opaque)."""

    def __init__(
        self,
        *,
        config: BrokerConfig,
        role: BrokerRoleState,
        topics: TopicManager,
        store: MessageStore,
        producers: ProducerManager,
        store_address: Callable[[], str],
        on_append: Callable[[], None],
        next_opaque: Callable[[], int],
    ) -> None:
        self.config = config
        self.role = role
        self.topics = topics
        self.store = store
        self.producers = producers
        self.store_address = store_address
        self.on_append = on_append
        self.next_opaque = next_opaque

    def __call__(
        self, connection: ServerConnection, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        header = send_message_request_header_of(request.code, request.ext_fields)
        checked = self._check(connection, request, header)
        if isinstance(checked, RemotingCommand):
            return checked
        return self._reply(connection, request, header, checked)

    def _check(
        self, connection: ServerConnection, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> int | RemotingCommand:
        """RocketMQ's msgCheck (the send checks): the queue id to use, or the refusal."""
        if not self.config.broker_permission & PERM_WRITE:
            return self._refuse(
                request,
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_name}] sending message is forbidden",
            )
        problem = validate_topic_name(header.topic)
        if problem is not None:
            return self._refuse(request, ResponseCode.SYSTEM_ERROR, problem)
        if header.topic in NOT_ALLOWED_SEND_TOPICS:
            return self._refuse(
                request, ResponseCode.NO_PERMISSION, f"Sending message to topic[{header.topic}] is forbidden."
            )
        topic_config = self.topics.get(header.topic) or self.topics.create_from_default(
            header.topic, header.default_topic, header.default_topic_queue_nums, 0
        )
        if topic_config is None:
            return self._refuse(
                request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist, apply first please!"
            )
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(max(1, topic_config.write_queue_nums))
        if queue_id >= max(topic_config.write_queue_nums, topic_config.read_queue_nums):
            return self._refuse(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, topic:{header.topic} topicConfig.writeQueueNums: "
                f"{topic_config.write_queue_nums} producer: {connection.address}",
            )
        return queue_id

    def _refuse(self, request: RemotingCommand, code: ResponseCode, remark: str) -> RemotingCommand:
        return make_response(request, code, remark, ext_fields=self._region_fields())

    def _region_fields(self) -> dict[str, str]:
        """MSG_REGION and TRACE_ON: every reply response carries them, as every send response does."""
        return {"MSG_REGION": self.config.region_id, "TRACE_ON": "true" if self.config.trace_on else "false"}

    async def _reply(
        self, connection: ServerConnection, request: RemotingCommand, header: SendMessageRequestHeader, queue_id: int
    ) -> RemotingCommand:
        pushed, remark = await self._push(connection, header, request.body or b"")
        fields: dict[str, str] = {}
        if pushed:  # RocketMQ answers "0" ids when the reply was pushed but is not stored
            fields = SendMessageResponseHeader(msg_id="0", queue_id=queue_id, queue_offset=0).to_ext_fields()
        if self.config.store_reply_message_enable:
            result = await self._store(connection, request, header, queue_id)
            if result is not None and result.append is not None and result.status.stored:
                fields = SendMessageResponseHeader(
                    msg_id=",".join(result.message_ids()), queue_id=queue_id, queue_offset=result.append.queue_offset
                ).to_ext_fields()
        fields.update(self._region_fields())
        if not pushed:
            return make_response(request, ResponseCode.SYSTEM_ERROR, remark, ext_fields=fields)
        return make_response(request, ResponseCode.SUCCESS, None, ext_fields=fields)

    async def _push(
        self, connection: ServerConnection, header: SendMessageRequestHeader, body: bytes | memoryview
    ) -> tuple[bool, str]:
        """Hand the reply to the requester's connection: (taken, why not)."""
        properties = decode_properties(header.properties or "")
        client_id = properties.get(REPLY_TO_CLIENT)
        if client_id is None:
            log.warning("%s is null, can not reply message", REPLY_TO_CLIENT)
            return False, f"reply message properties[{REPLY_TO_CLIENT}] is null"
        requester = self._find_requester(client_id)
        if requester is None:
            remark = f"push reply message fail, channel of <{client_id}> not found."
            log.warning(remark)
            return False, remark
        now_ms = time.time_ns() // 1_000_000
        properties[PUSH_REPLY_TIME] = str(now_ms)
        push_header = ReplyMessageRequestHeader(
            producer_group=header.producer_group,
            topic=header.topic,
            default_topic=header.default_topic,
            default_topic_queue_nums=header.default_topic_queue_nums,
            queue_id=header.queue_id,
            sys_flag=header.sys_flag,
            born_timestamp_ms=header.born_timestamp_ms,
            flag=header.flag,
            properties=encode_properties(properties).decode("utf-8"),
            reconsume_times=header.reconsume_times,
            unit_mode=header.unit_mode,
            born_host=f"{connection.peer_host}:{connection.peer_port}",
            store_host=self.store_address(),
            store_timestamp_ms=now_ms,
        )
        push = make_request(
            RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT,
            opaque=self.next_opaque(),
            ext_fields=push_header.to_ext_fields(),
            body=bytes(body),
        )
        failed = f"push reply message to {client_id}fail."  # RocketMQ's words, missing space included
        try:
            answer = await requester.request(push, limits.REPLY_PUSH_TIMEOUT_S)
        except RemotingError as error:
            log.warning("push reply message to <%s> failed: %s", client_id, error)
            return False, failed
        if answer.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> returned %d: %s", client_id, answer.code, answer.remark)
            return False, failed
        return True, ""

    def _find_requester(self, client_id: str) -> ServerConnection | None:
        """The open connection a producer with this clientId sent its heartbeats on
        (ProducerManager.findChannel)."""
        for channels in self.producers.groups.values():
            channel = channels.get(client_id)
            if channel is not None and channel.connection.is_open:
                return channel.connection
        return None

    async def _store(
        self, connection: ServerConnection, request: RemotingCommand, header: SendMessageRequestHeader, queue_id: int
    ) -> PutResult | None:
        """Store the reply as sent (its topic, its property string); None when this broker cannot."""
        if not self.role.is_master:
            log.warning("reply for %s not stored: this broker is a slave", header.topic)
            return None
        try:
            born_host = encode_host(connection.peer_host, connection.peer_port)
        except ValueError:
            born_host = encode_host("127.0.0.1", 0)
        message = MessageToStore(
            topic=header.topic,
            queue_id=queue_id,
            body=request.body or b"",
            properties=(header.properties or "").encode("utf-8"),
            flag=header.flag,
            sysflag=header.sys_flag & PRODUCER_SYSFLAG_BITS,  # RocketMQ stores 0, unreadable when compressed
            born_timestamp_ms=header.born_timestamp_ms,
            born_host=born_host,
            reconsume_times=header.reconsume_times or 0,
        )
        result = self.store.append_message(message)
        if result.append is None:
            log.warning("reply for %s not stored: %s %s", header.topic, result.status.value, result.remark)
            return result
        self.on_append()
        return await self.store.await_durable(result)
