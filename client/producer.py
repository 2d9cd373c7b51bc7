"""`Producer`: SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE with Java's queue choice and retries.

Like `DefaultMQProducerImpl.sendDefaultImpl`: queues are taken round-robin from the topic's
publish queues; a failed synchronous send (connection error, no writable queue, or codes 17, 14,
1, 16, 204, 205) is retried up to `retries_when_send_failed` times on a queue of another broker,
all within one timeout budget. Sends to an explicit queue or through a selector are tried once.
Any number of sends may run concurrently: they share one connection per broker, matched by opaque.

Failover (beyond Java, which waits for its 30 s route poll): after a failed attempt, and after a
SLAVE_NOT_AVAILABLE answer, the topic's route is fetched again at once (at most every
`ROUTE_REFRESH_AFTER_FAILURE_MIN_INTERVAL_S`), so a promoted slave is found moments after it
registers. `send_latency_fault_enable` adds Java's MQFaultStrategy (`fault.py`);
`retry_another_broker_when_not_store_ok` Java's retry of stored-but-not-durable answers.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from shoal.client import limits
from shoal.client.client_instance import ClientInstance
from shoal.client.errors import (
    InvalidMessageError,
    MQBrokerError,
    NoRouteError,
    NoWritableQueueError,
    RemotingError,
    RemotingTimeoutError,
)
from shoal.client.fault import LatencyFaultTolerance
from shoal.client.lifecycle import InstanceLifecycle
from shoal.client.message import (
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_WAIT_STORE_MSG_OK,
    Message,
    check_batch,
    check_group,
    check_message,
    compress_body,
    encode_batch,
    encode_properties,
    encode_wire_properties,
    is_plain,
    wire_properties_text,
)
from shoal.client.route import TopicPublishInfo
from shoal.client.settings import ClientSettings, ProducerSettings
from shoal.client.transport import TransportError
from shoal.formats.java_hash import java_string_hash
from shoal.formats.message_id import create_uniq_id, create_uniq_ids, wall_clock_ms
from shoal.formats.sysflag import COMPRESSED_FLAG
from shoal.formats.topics import RETRY_GROUP_TOPIC_PREFIX
from shoal.protocol import (
    HeartbeatData,
    MessageQueue,
    ProducerData,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
)
from shoal.protocol.errors import ProtocolError

log = logging.getLogger(__name__)


class SendStatus(enum.Enum):
    """How a stored message fared (`SendStatus`); any other outcome raises."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


_STATUS_OF_CODE: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}

RETRYABLE_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)
"""Broker answers after which Java's producer tries another queue (sendDefaultImpl)."""


@dataclass(frozen=True, slots=True)
class SendResult:
    """`msg_id` is the UNIQ_KEY (comma-joined for a batch); `offset_msg_id` the broker's id(s)."""

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int


def send_result_of(response: RemotingCommand, mq: MessageQueue, msg_id: str, address: str) -> SendResult:
    """`processSendResponse`: codes 0/10/11/12 give a result, any other raises MQBrokerError."""
    status = _STATUS_OF_CODE.get(response.code)
    if status is None:
        raise MQBrokerError(response.code, response.remark, address)
    # The send hot path reads the three fields it needs directly when they are plain decimals
    # (the generic header parse cost about as much as the rest of this function); anything
    # else goes through the header declaration, which checks and names what is wrong.
    fields = response.ext_fields
    offset_msg_id = fields.get(_RESPONSE_MSG_ID)
    queue_id_text = fields.get(_RESPONSE_QUEUE_ID, "")
    queue_offset_text = fields.get(_RESPONSE_QUEUE_OFFSET, "")
    if (
        offset_msg_id is not None
        and 0 < len(queue_id_text) <= _INT_DIGITS_SAFE
        and 0 < len(queue_offset_text) <= _LONG_DIGITS_SAFE
        and queue_id_text.isdigit()
        and queue_offset_text.isdigit()
        and queue_id_text.isascii()
        and queue_offset_text.isascii()
    ):
        queue_id = int(queue_id_text)
        queue = mq if queue_id == mq.queue_id else MessageQueue(mq.topic, mq.broker_name, queue_id)
        return SendResult(status, msg_id, offset_msg_id, queue, int(queue_offset_text))
    try:
        header = SendMessageResponseHeader.from_ext_fields(fields)
    except ProtocolError as error:
        raise MQBrokerError(ResponseCode.SYSTEM_ERROR, f"unreadable send response: {error}", address) from None
    queue = MessageQueue(mq.topic, mq.broker_name, header.queue_id)
    return SendResult(status, msg_id, header.msg_id, queue, header.queue_offset)


_RESPONSE_KEY = {spec.attribute: spec.java_name for spec in SendMessageResponseHeader.field_specs()}
_RESPONSE_MSG_ID = _RESPONSE_KEY["msg_id"]
_RESPONSE_QUEUE_ID = _RESPONSE_KEY["queue_id"]
_RESPONSE_QUEUE_OFFSET = _RESPONSE_KEY["queue_offset"]
_INT_DIGITS_SAFE = 9  # at most 999,999,999: always a Java int
_LONG_DIGITS_SAFE = 18  # always a Java long


# --- queue selection ---

MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]
"""Picks the queue of a send from the topic's publish queues (ordered sends)."""


def java_hash_code(value: object) -> int:
    """`arg.hashCode()` as Java computes it for strings, ints and booleans (so Python and Java
    producers put the same key on the same queue); other values use Python's hash."""
    if isinstance(value, str):
        return java_string_hash(value)
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return value
        folded = (value ^ (value >> 32)) & 0xFFFFFFFF  # Long.hashCode
        return folded - 2**32 if folded >= 2**31 else folded
    return hash(value)


def select_by_hash(queues: Sequence[MessageQueue], _message: Message, arg: Any) -> MessageQueue:
    """`SelectMessageQueueByHash`: `abs(arg.hashCode() % n)` with Java's remainder."""
    return queues[abs(java_hash_code(arg)) % len(queues)]


def select_by_random(queues: Sequence[MessageQueue], _message: Message, _arg: Any) -> MessageQueue:
    """`SelectMessageQueueByRandom`."""
    return queues[random.randrange(len(queues))]


class QueueRotation:
    """Round-robin over a topic's queues, skipping the broker that just failed (`TopicPublishInfo`)."""

    def __init__(self) -> None:
        self._counters: dict[str, int] = {}

    def _next(self, topic: str) -> int:
        value = self._counters.get(topic)
        value = random.randrange(1 << 16) if value is None else value + 1
        self._counters[topic] = value
        return value

    def select(
        self,
        info: TopicPublishInfo,
        last_broker: str | None,
        faults: LatencyFaultTolerance | None = None,
        now_s: float = 0.0,
    ) -> MessageQueue:
        """The next queue; with `faults` enabled, the next of a broker not kept out
        (`MQFaultStrategy.selectOneMessageQueue`), else the next of another broker than `last_broker`."""
        queues = info.queues
        if not queues:
            raise NoWritableQueueError(f"topic {info.topic} has no writable queue on a broker with a master")
        if faults is not None and faults.enabled:
            for _ in range(len(queues)):
                queue = queues[self._next(info.topic) % len(queues)]
                if faults.is_available(queue.broker_name, now_s):
                    return queue
            least_bad = faults.least_bad()
            candidates = [queue for queue in queues if queue.broker_name == least_bad]
            if candidates:
                return candidates[self._next(info.topic) % len(candidates)]
            return queues[self._next(info.topic) % len(queues)]
        if last_broker is not None:
            for _ in range(len(queues)):
                queue = queues[self._next(info.topic) % len(queues)]
                if queue.broker_name != last_broker:
                    return queue
        return queues[self._next(info.topic) % len(queues)]


# --- requests ---


@dataclass(slots=True)
class OutgoingMessage:
    """A message (or batch) ready for the wire: what the send header and body need.

    Not frozen only because a frozen dataclass's `__init__` (one `object.__setattr__` per field)
    cost a microsecond per send; nothing changes it after `prepare_message`."""

    topic: str
    body: bytes
    properties: str
    sys_flag: int
    flag: int
    msg_id: str
    code: int
    reconsume_times: int | None = None
    max_reconsume_times: int | None = None


def prepare_message(message: Message, settings: ProducerSettings) -> OutgoingMessage:
    """Check, give a UNIQ_KEY, compress a large body, encode properties (the message is unchanged)."""
    check_message(message, settings.body_size_max_bytes)
    body = message.body
    sys_flag = 0
    if len(body) >= settings.compress_body_over_bytes:
        body = compress_body(body)
        sys_flag |= COMPRESSED_FLAG
    reconsume_times = max_reconsume_times = None
    if is_plain(message):
        # Tags, WAIT and a fresh UNIQ_KEY: the string up to the key is remembered per tag.
        uniq_key = create_uniq_id()
        properties_text = wire_properties_text(message, uniq_key)
    else:
        uniq_key = message.uniq_key or create_uniq_id()
        properties = message.wire_properties(uniq_key)
        if message.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            reconsume_times = _int_property(properties.pop(PROPERTY_RECONSUME_TIME, None))
            max_reconsume_times = _int_property(properties.pop(PROPERTY_MAX_RECONSUME_TIMES, None))
        properties_text = encode_wire_properties(properties)
    return OutgoingMessage(
        topic=message.topic,
        body=body,
        properties=properties_text,
        sys_flag=sys_flag,
        flag=message.flag,
        msg_id=uniq_key,
        code=RequestCode.SEND_MESSAGE_V2,
        reconsume_times=reconsume_times,
        max_reconsume_times=max_reconsume_times,
    )


def _int_property(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise InvalidMessageError(f"property value {text!r} is not an integer") from None


def prepare_batch(messages: Sequence[Message], settings: ProducerSettings) -> OutgoingMessage:
    """One SEND_BATCH_MESSAGE: blocks with their own UNIQ_KEYs, never compressed (spec §1.10)."""
    check_batch(messages)
    for message in messages:
        check_message(message, settings.body_size_max_bytes)
    uniq_keys = [
        message.uniq_key or fresh for message, fresh in zip(messages, create_uniq_ids(len(messages)), strict=True)
    ]
    body = encode_batch(messages, uniq_keys)
    if len(body) > settings.body_size_max_bytes:
        raise InvalidMessageError(f"the batch is {len(body)} bytes, more than {settings.body_size_max_bytes}")
    wait = "true" if messages[0].wait_store_msg_ok else "false"
    return OutgoingMessage(
        topic=messages[0].topic,
        body=body,
        properties=encode_properties({PROPERTY_WAIT_STORE_MSG_OK: wait}),
        sys_flag=0,
        flag=0,
        msg_id=",".join(uniq_keys),
        code=RequestCode.SEND_BATCH_MESSAGE,
    )


_V2_KEY = {spec.attribute: spec.java_name for spec in SendMessageRequestHeaderV2.field_specs()}
"""Attribute -> single-letter extFields key, read from the header's one declaration."""


def send_header(group: str, outgoing: OutgoingMessage, queue_id: int, settings: ProducerSettings) -> dict[str, str]:
    """The SendMessageRequestHeaderV2 extFields of one send.

    Built directly (the send hot path): the generic `to_ext_fields` walk cost ~10 us per send.
    The values are the client's own, already range-checked ints and strings; the keys come from
    the header declaration, and `tests/client/test_producer.py` checks both ways agree."""
    key = _V2_KEY
    fields = {
        key["producer_group"]: group,
        key["topic"]: outgoing.topic,
        key["default_topic"]: settings.default_topic,
        key["default_topic_queue_nums"]: str(settings.default_topic_queue_nums),
        key["queue_id"]: str(queue_id),
        key["sys_flag"]: str(outgoing.sys_flag),
        key["born_timestamp_ms"]: str(wall_clock_ms()),
        key["flag"]: str(outgoing.flag),
        key["reconsume_times"]: str(outgoing.reconsume_times if outgoing.reconsume_times is not None else 0),
        key["unit_mode"]: "false",
        key["batch"]: "true" if outgoing.code == RequestCode.SEND_BATCH_MESSAGE else "false",
    }
    if outgoing.properties:
        fields[key["properties"]] = outgoing.properties
    if outgoing.max_reconsume_times is not None:
        fields[key["max_reconsume_times"]] = str(outgoing.max_reconsume_times)
    return fields


class Producer(InstanceLifecycle):
    """Sends messages to the brokers of a cluster found through its nameservers.

    `async with Producer("pg", "127.0.0.1:9876") as producer: await producer.send(msg)`.
    `shutdown()` unregisters from the brokers and closes every connection.
    """

    def __init__(
        self,
        group: str,
        namesrv_addrs: str | Sequence[str],
        *,
        settings: ProducerSettings | None = None,
        client_settings: ClientSettings | None = None,
    ) -> None:
        check_group(group)
        super().__init__(f"producer {group}")
        self.group = group
        self.settings = settings or ProducerSettings()
        self._instance = ClientInstance(
            namesrv_addrs,
            client_settings or ClientSettings(),
            default_topic=self.settings.default_topic,
            default_topic_queue_nums=self.settings.default_topic_queue_nums,
        )
        self._instance.heartbeat_data = self._heartbeat_data
        self._instance.topics_in_use = lambda: list(self._instance.routes.routes)
        self._rotation = QueueRotation()
        self._faults = LatencyFaultTolerance(self.settings.send_latency_fault_enable)

    @property
    def client_id(self) -> str:
        return self._instance.client_id

    async def _unregister(self) -> None:
        await self._instance.unregister(producer_group=self.group)

    def _heartbeat_data(self) -> HeartbeatData:
        return HeartbeatData(client_id=self._instance.client_id, producer_data_set=(ProducerData(self.group),))

    async def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        """The queues `topic` is sent to (TBW102's, capped, while the topic has no route)."""
        self._check_running()
        return list((await self._instance.routes.publish_info(topic)).queues)

    async def send(
        self,
        message: Message,
        *,
        timeout_s: float = 3.0,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> SendResult:
        """Send and wait for the broker; raises MQBrokerError / RemotingError / NoRouteError."""
        self._check_running()
        outgoing = prepare_message(message, self.settings)
        if queue is None and selector is None:  # the usual send: one coroutine fewer
            result = await self._send_with_retries(outgoing, min(timeout_s, limits.REQUEST_TIMEOUT_MAX_S), False)
        else:
            result = await self._dispatch(outgoing, message, timeout_s, queue, selector, arg, oneway=False)
        assert result is not None
        return result

    async def send_oneway(
        self,
        message: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        """Send without waiting for (or getting) an answer; one attempt."""
        self._check_running()
        outgoing = prepare_message(message, self.settings)
        await self._dispatch(outgoing, message, self._instance.settings.request_timeout_s, queue, selector, arg, True)

    async def send_batch(
        self, messages: Sequence[Message], *, timeout_s: float = 3.0, queue: MessageQueue | None = None
    ) -> SendResult:
        """Send messages of one topic as one SEND_BATCH_MESSAGE; they get consecutive offsets."""
        self._check_running()
        outgoing = prepare_batch(messages, self.settings)
        result = await self._dispatch(outgoing, messages[0], timeout_s, queue, None, None, oneway=False)
        assert result is not None
        return result

    async def _dispatch(
        self,
        outgoing: OutgoingMessage,
        message: Message,
        timeout_s: float,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: Any,
        oneway: bool,
    ) -> SendResult | None:
        timeout_s = min(timeout_s, limits.REQUEST_TIMEOUT_MAX_S)
        if queue is not None:
            if queue.topic != outgoing.topic:
                raise InvalidMessageError(f"queue {queue} is not a queue of topic {outgoing.topic}")
            return await self._send_to(queue, outgoing, timeout_s, oneway)
        if selector is not None:
            info = await self._instance.routes.publish_info(outgoing.topic)
            chosen = selector(list(info.queues), message, arg)
            if chosen not in info.queues:
                raise InvalidMessageError(f"the selector chose {chosen}, which is not a publish queue")
            return await self._send_to(chosen, outgoing, timeout_s, oneway)
        return await self._send_with_retries(outgoing, timeout_s, oneway)

    async def _send_with_retries(self, outgoing: OutgoingMessage, timeout_s: float, oneway: bool) -> SendResult | None:
        loop = asyncio.get_running_loop().time
        deadline = loop() + timeout_s
        routes = self._instance.routes
        info = routes.cached_publish_info(outgoing.topic) or await routes.publish_info(outgoing.topic)
        attempts = 1 if oneway else 1 + self.settings.retries_when_send_failed
        last_broker: str | None = None
        last_error: Exception | None = None
        result: SendResult | None = None
        for attempt in range(attempts):
            started_s = loop()
            remaining_s = deadline - started_s
            if remaining_s <= 0:
                break
            queue = self._rotation.select(info, last_broker, self._faults, started_s)
            try:
                # The usual send (an open connection to a known master) awaits its response here:
                # a coroutine fewer per send than `_send_to`, which takes every other case.
                sent = None if oneway else self._send_soon(queue, outgoing, remaining_s)
                if sent is None:
                    result = await self._send_to(queue, outgoing, remaining_s, oneway)
                else:
                    pending, address = sent
                    try:
                        response = await pending
                    except TransportError as error:
                        self._instance.remoting.failed(error)
                    result = send_result_of(response, queue, outgoing.msg_id, address)
            except MQBrokerError as error:
                if error.code not in RETRYABLE_CODES:
                    raise
                last_error = error
            except (RemotingError, NoRouteError) as error:
                last_error = error
            else:
                now_s = loop()
                self._faults.update(queue.broker_name, int((now_s - started_s) * 1000), isolation=False, now_s=now_s)
                if result is None or result.status is SendStatus.SEND_OK:
                    return result
                self._instance.refresh_route_soon(outgoing.topic)  # SLAVE_NOT_AVAILABLE: a master in failover?
                if not self.settings.retry_another_broker_when_not_store_ok:
                    return result
                last_broker = queue.broker_name
                continue
            self._faults.update(queue.broker_name, 0, isolation=True, now_s=loop())
            last_broker = queue.broker_name
            log.warning("send to %s failed (attempt %d of %d): %s", queue, attempt + 1, attempts, last_error)
            info = await self._refreshed_publish_info(info, deadline - loop())
        if result is not None:
            return result  # stored, if not as durably as asked, and no retry did better
        if last_error is None:
            raise RemotingTimeoutError(f"sending to {outgoing.topic} timed out after {timeout_s:.1f} s")
        raise last_error

    async def _refreshed_publish_info(self, info: TopicPublishInfo, remaining_s: float) -> TopicPublishInfo:
        """After a failure: the topic's route fetched again (unless another send just did), else
        the latest cached one; the old one when neither has a writable queue."""
        if remaining_s <= 0:
            return info
        routes = self._instance.routes
        try:
            return await asyncio.wait_for(
                routes.publish_info(info.topic, refresh=routes.refresh_due(info.topic)), remaining_s
            )
        except (TimeoutError, RemotingError, MQBrokerError, NoRouteError) as error:
            log.info("refreshing the route of %s after a failed send failed: %s", info.topic, error)
            return info

    def _send_soon(
        self, queue: MessageQueue, outgoing: OutgoingMessage, timeout_s: float
    ) -> tuple[asyncio.Future[RemotingCommand], str] | None:
        """Send to the queue's master over its open connection: the future of the response and the
        master's address; None (nothing sent) when there is no known master or no open connection."""
        address = self._instance.routes.master_address(queue.broker_name)
        if address is None:
            return None
        ext_fields = send_header(self.group, outgoing, queue.queue_id, self.settings)
        pending = self._instance.remoting.invoke_soon(
            address, outgoing.code, ext_fields, outgoing.body, timeout_s=timeout_s
        )
        return None if pending is None else (pending, address)

    async def _send_to(
        self, queue: MessageQueue, outgoing: OutgoingMessage, timeout_s: float, oneway: bool
    ) -> SendResult | None:
        routes = self._instance.routes
        address = routes.master_address(queue.broker_name)
        if address is None:
            if routes.refresh_due(queue.topic):
                await routes.publish_info(queue.topic, refresh=True)
                address = routes.master_address(queue.broker_name)
            if address is None:
                raise NoWritableQueueError(f"broker {queue.broker_name} has no master address")
        ext_fields = send_header(self.group, outgoing, queue.queue_id, self.settings)
        remoting = self._instance.remoting
        if oneway:
            await remoting.invoke_oneway(address, outgoing.code, ext_fields, outgoing.body)
            return None
        pending = remoting.invoke_soon(address, outgoing.code, ext_fields, outgoing.body, timeout_s=timeout_s)
        if pending is None:  # no open connection yet
            response = await remoting.invoke(address, outgoing.code, ext_fields, outgoing.body, timeout_s=timeout_s)
        else:  # two coroutines fewer than invoke's
            try:
                response = await pending
            except TransportError as error:
                remoting.failed(error)
        return send_result_of(response, queue, outgoing.msg_id, address)
