"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (spec §1.9, §1.10, §8.8).

Checks the topic (auto-creating it from `defaultTopic` when allowed), routes retry messages that
ran out of attempts to the DLQ, adds the `CLUSTER` property, drops `WAIT` from the stored string
(still honouring it), appends through the store, and answers once the message is as durable as
the flush mode promises.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from shoal.broker import limits
from shoal.broker.schedule import TIMED_MARKERS, Timing, may_be_timed, timing_of
from shoal.broker.topic_manager import PERM_READ, PERM_WRITE
from shoal.broker.transactions.half_message import half_properties, is_half_message_send
from shoal.formats.batch import inflate_batch_body
from shoal.formats.errors import BatchBodyError
from shoal.formats.properties import (
    NAME_VALUE_SEPARATOR,
    TRANSACTION_PREPARED,
    decode_properties,
)
from shoal.formats.record import encode_host
from shoal.formats.sysflag import (
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK,
    MULTI_TAGS_FLAG,
    CompressionType,
    gets_consume_queue_entry,
)
from shoal.formats.topics import (
    DLQ_GROUP_TOPIC_PREFIX,
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_GROUP_TOPIC_PREFIX,
    dlq_topic,
    validate_topic_name,
)
from shoal.protocol import RemotingCommand, RequestCode, ResponseCode, make_response
from shoal.protocol.headers import SendMessageRequestHeader, SendMessageResponseHeader
from shoal.protocol.send_frames import (
    general_stored_properties,
    plain_send,
    send_header_of,
    send_ok_frame,
    single_send_ok_frame,
    stored_properties,
)
from shoal.remoting.server import ServerConnection
from shoal.store import AppendResult, MessageToStore, PutResult, PutStatus, StoreError

if TYPE_CHECKING:
    from collections.abc import Callable

    from shoal.broker.config import BrokerConfig
    from shoal.broker.group_manager import SubscriptionGroupManager
    from shoal.broker.metrics import BrokerMetrics
    from shoal.broker.replication.role import BrokerRoleState
    from shoal.broker.schedule import ScheduleMessageService
    from shoal.broker.topic_manager import TopicManager
    from shoal.broker.transactions.service import TransactionService
    from shoal.store import MessageStore
    from shoal.store.metadata import TopicConfig

log = logging.getLogger(__name__)

Answer = RemotingCommand | bytes
"""A send's answer: a command, or (a success) its whole encoded frame."""
_PENDING = b""
"""`SendProcessor.run`'s place holder for an answer that comes once the lane's sends are stored."""

SEND_BACK_MIN_VERSION = 121  # MQVersion V3_4_9: maxReconsumeTimes in the header is honoured from here
PRODUCER_SYSFLAG_BITS = COMPRESSED_FLAG | COMPRESSION_TYPE_MASK
ZLIB_COMPRESSION_BITS = (0, CompressionType.ZLIB << 8)
"""The compression-type bits of a zlib body: 0 before 4.9.4, ZLIB (3) since; other values are refused, never parsed."""
"""The only bits of a send's `sysFlag` that are stored as sent: how the client compressed the body.
The broker owns the rest: the v6 host bits (the CommitLog sets them from the hosts it writes; a
client's would make the record undecodable), MULTI_TAGS (the topic config), the transaction
bits (half and commit messages are the broker's), the 5.x batch bits and anything unassigned.
RocketMQ 4.9.7 stores the client's bits unchecked (and writes an unreadable record for a 0x10 or
0x20 from an IPv4 peer); Shoal drops the bits it does not honour and answers as for the message
without them."""

TRANSACTION_PREPARED_MARKER = TRANSACTION_PREPARED + NAME_VALUE_SEPARATOR
NOT_PLAIN_MARKERS = (*TIMED_MARKERS, TRANSACTION_PREPARED_MARKER)
"""A send whose property string holds one of these takes the general path (`send_frames.plain_send`)."""
_SPECIAL_TOPIC_PREFIXES = (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)

RESPONSE_CODE_OF_STATUS = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
    PutStatus.CREATE_MAPPED_FILE_FAILED: ResponseCode.SYSTEM_ERROR,
    PutStatus.OS_PAGECACHE_BUSY: ResponseCode.SYSTEM_ERROR,
    PutStatus.UNKNOWN_ERROR: ResponseCode.SYSTEM_ERROR,
}


class SendProcessor:
    """Given only what a send touches: the broker's config and role, topics and groups, the store,
    the delay and transaction services, the metrics, and two hooks: `on_append` (let the Dispatcher
    index the new records), `wait_replicated` (SYNC_MASTER: a future answering once a slave has
    the put) and `pending_registration` (the NameServer registration round a topic change scheduled)."""

    def __init__(
        self,
        *,
        config: BrokerConfig,
        role: BrokerRoleState,
        topics: TopicManager,
        groups: SubscriptionGroupManager,
        store: MessageStore,
        schedule: ScheduleMessageService,
        transactions: TransactionService,
        metrics: BrokerMetrics,
        on_append: Callable[[], None],
        wait_replicated: Callable[[PutResult], asyncio.Future[PutStatus] | None],
        pending_registration: Callable[[], asyncio.Future[None] | None],
    ) -> None:
        self.config = config
        self.role = role
        self.topics = topics
        self.groups = groups
        self.store = store
        self.schedule = schedule
        self.transactions = transactions
        self.metrics = metrics
        self.on_append = on_append
        self.wait_replicated = wait_replicated
        self.pending_registration = pending_registration
        self._born_hosts: dict[tuple[str, int], bytes] = {}
        self._valid_topics: set[str] = set()
        """Topic names `validate_topic_name` passed (bounded): checked once, not on every send."""
        self._plain_topics: set[str] = set()
        """Of those, the ones the lane takes: allowed to send to, neither retry nor DLQ topics."""
        self._host_hex: tuple[object, str] = (None, "")
        """The store host of the last answer (by identity) and its hex, for the message ids."""

    def __call__(self, connection: ServerConnection, request: RemotingCommand) -> Answer | Awaitable[Answer]:
        if request.code == RequestCode.SEND_MESSAGE_V2 and self._lane_open():
            answer = self._lane(connection, request, self._born_host(connection))
            if answer is not None:
                return answer
        return self._general(connection, request)

    def run(
        self, connection: ServerConnection, requests: list[RemotingCommand]
    ) -> list[Answer | Awaitable[Answer] | Exception]:
        """Several sends read together (a pipelining producer), each answered as `__call__` would;
        what one raises is its answer (the server answers it as an error), the others go on.
        Consecutive sends the lane takes are stored together (`MessageStore.append_messages`), in
        the order read; a send that takes the general path is stored after those before it."""
        answers: list[Answer | Awaitable[Answer] | Exception] = []
        lane = requests[0].code == RequestCode.SEND_MESSAGE_V2 and self._lane_open()
        born_host = self._born_host(connection)
        pending: list[tuple[int, RemotingCommand, MessageToStore, bool]] = []
        for request in requests:
            try:
                if lane:
                    laned = self._lane_message(request, born_host)
                    if laned is not None:
                        pending.append((len(answers), request, *laned))
                        answers.append(_PENDING)
                        continue
                    self._store_pending(pending, answers)
                answers.append(self._general(connection, request))
            except Exception as error:
                answers.append(error)
        self._store_pending(pending, answers)
        return answers

    def _store_pending(
        self,
        pending: list[tuple[int, RemotingCommand, MessageToStore, bool]],
        answers: list[Answer | Awaitable[Answer] | Exception],
    ) -> None:
        """Store the sends the lane took so far, together, and put their answers in place."""
        if not pending:
            return
        try:
            results = self.store.append_messages([message for _, _, message, _ in pending])
        except Exception as error:  # a bug below: none of them is known to be stored, each is answered
            for index, *_ in pending:
                answers[index] = error
            pending.clear()
            return
        # A stored send that waits for nothing is answered here (what `_answer` and `response`
        # would make), the Dispatcher told once for the run; the others go through `_answer`.
        waits_durable = self.store.sync_flush or self.role.sync_master
        config = self.config
        region, trace_on = config.region_id, config.trace_on
        sends = self.metrics.sends
        stored = False
        for (index, request, message, wait), result in zip(pending, results, strict=True):
            try:
                append = result.append
                if result.status is not PutStatus.PUT_OK or append is None or (wait and waits_durable):
                    answers[index] = self._answer(request, message.topic, result, message.queue_id, wait)
                    continue
                sends(message.topic, result)
                stored = True
                host_hex, queue_id = self._hex(append), message.queue_id
                answers[index] = single_send_ok_frame(
                    request, host_hex, append.wrote_offset, queue_id, append.queue_offset, region, trace_on
                )
            except Exception as error:
                answers[index] = error
        if stored:
            self.on_append()
        pending.clear()

    def _lane_open(self) -> bool:
        """Whether plain sends may take the lane: this broker is a master that takes writes."""
        return self.role.is_master and bool(self.config.broker_permission & PERM_WRITE)

    def _lane(
        self, connection: ServerConnection, request: RemotingCommand, born_host: bytes
    ) -> Answer | Awaitable[Answer] | None:
        """A lone SEND_MESSAGE_V2 the lane takes (`_lane_message`), stored and answered; None for
        the general path."""
        laned = self._lane_message(request, born_host)
        if laned is None:
            return None
        message, wait = laned
        return self._store(request, message, message.queue_id, wait)

    def _lane_message(self, request: RemotingCommand, born_host: bytes) -> tuple[MessageToStore, bool] | None:
        """The message (and whether its producer waits for durability) of a SEND_MESSAGE_V2 of the
        plain kind (most of them), read with the fewest steps; None for any other (a new, retry or
        forbidden topic, a delay, a transaction, a batch, a field the general reader must judge),
        which then takes the general path. Whatever the lane takes, the general path would store
        and answer the same way."""
        fields = plain_send(request.ext_fields, self.config.broker_cluster_name, NOT_PLAIN_MARKERS)
        if fields is None:
            return None
        topic, queue_id, sys_flag, flag, born, reconsume, stored, wait = fields
        if topic not in self._plain_topics:
            return None
        topic_config = self.topics.get(topic)
        if (
            topic_config is None
            or not topic_config.perm & PERM_WRITE
            or queue_id >= max(topic_config.write_queue_nums, topic_config.read_queue_nums)
        ):
            return None
        if stored is None:
            stored, wait = general_stored_properties(request.ext_fields.get("i"), self.config.broker_cluster_name)
        sysflag = sys_flag & PRODUCER_SYSFLAG_BITS
        if topic_config.topic_filter_type == "MULTI_TAG":
            sysflag |= MULTI_TAGS_FLAG
        message = MessageToStore(
            topic, queue_id, request.body or b"", stored, flag, sysflag, born, born_host, reconsume, 0, wait
        )
        return message, wait

    def _general(self, connection: ServerConnection, request: RemotingCommand) -> Answer | Awaitable[Answer]:
        header = send_header_of(request.code, request.ext_fields)
        refusal = self._check(request, header)
        if refusal is not None:
            return refusal
        topic_config = self.topics.get(header.topic)
        if topic_config is not None:
            return self._send(connection, request, header, topic_config)
        response = self._send(connection, request, header, None)
        registration = self.pending_registration()
        if registration is None or self.topics.get(header.topic) is None:  # not created here
            return response
        return self._after_registration(registration, response)

    @staticmethod
    async def _after_registration(registration: asyncio.Future[None], response: Answer | Awaitable[Answer]) -> Answer:
        """Answer a send that auto-created its topic once the NameServers have the topic, as RocketMQ
        registers before answering (TopicConfigManager.createTopicInSendMessageMethod): a client
        that starts a consumer right after its first SEND_OK finds the route. A NameServer that
        does not answer delays the send by at most the registration timeout, never fails it."""
        try:
            await asyncio.wait_for(asyncio.shield(registration), limits.BROKER_REGISTER_TIMEOUT_S)
        except TimeoutError:
            log.warning("answering a send to a new topic before its registration round ended")
        return response if isinstance(response, RemotingCommand | bytes) else await response

    def _send(
        self,
        connection: ServerConnection,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        topic_config: TopicConfig | None,
    ) -> Answer | Awaitable[Answer]:
        """The send to `topic_config` (None: the topic is unknown and may be auto-created here)."""
        if topic_config is None:
            topic_config = self.topics.create_from_default(
                header.topic, header.default_topic, header.default_topic_queue_nums, 0
            )
            if topic_config is None and header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                topic_config = self.topics.create_if_absent(header.topic, 1, PERM_READ | PERM_WRITE)
            if topic_config is None:
                return make_response(
                    request,
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{header.topic}] not exist, apply first please! (auto-create is "
                    f"{'on' if self.config.auto_create_topic_enable else 'off'})",
                )
        if not topic_config.perm & PERM_WRITE:
            return make_response(
                request, ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] sending message is forbidden"
            )
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(max(1, topic_config.write_queue_nums))
        if queue_id >= max(topic_config.write_queue_nums, topic_config.read_queue_nums):
            return make_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, topic:{header.topic} topicConfig.writeQueueNums: "
                f"{topic_config.write_queue_nums} producer: {connection.address}",
            )
        topic = header.topic
        reconsume_times = header.reconsume_times or 0
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            routed = self._route_retry(request, header, reconsume_times)
            if isinstance(routed, RemotingCommand):
                return routed
            topic, queue_id = routed
        half = is_half_message_send(header.properties, topic, reconsume_times)
        if half:  # stored in the half queue, delay properties stripped (broker/transactions/half_message.py)
            refusal = self._half_refusal(request, header)
            if refusal is not None:
                return refusal
            header = dataclasses.replace(header, properties=half_properties(header.properties, topic, queue_id))
        timing = None if half else self._timing(request, header, topic)
        if isinstance(timing, RemotingCommand):
            return timing
        properties, wait = stored_properties(header.properties, self.config.broker_cluster_name)
        born_host = self._born_host(connection)
        sysflag = header.sys_flag & PRODUCER_SYSFLAG_BITS  # host bits: set by the CommitLog
        if topic_config.topic_filter_type == "MULTI_TAG":
            sysflag |= MULTI_TAGS_FLAG
        message = MessageToStore(
            topic=topic,
            queue_id=queue_id,
            body=request.body or b"",
            properties=properties,
            flag=header.flag,
            sysflag=sysflag,
            born_timestamp_ms=header.born_timestamp_ms,
            born_host=born_host,
            reconsume_times=reconsume_times,
            wait_store_msg_ok=wait,
        )
        if timing is not None:
            try:
                message = self.schedule.park(message, timing)  # SCHEDULE_TOPIC_XXXX or the timer topic
            except StoreError as error:
                return make_response(request, ResponseCode.MESSAGE_ILLEGAL, str(error))
        if half:
            result = self.transactions.put_half(message)
        elif header.batch or request.code == RequestCode.SEND_BATCH_MESSAGE:
            result = self._append_batch(message)
        else:
            return self._store(request, message, queue_id, wait)
        return self._answer(request, topic, result, queue_id, wait)

    def _store(
        self, request: RemotingCommand, message: MessageToStore, queue_id: int, wait: bool
    ) -> Answer | Awaitable[Answer]:
        return self._answer(request, message.topic, self.store.append_message(message), queue_id, wait)

    def _answer(
        self, request: RemotingCommand, topic: str, result: PutResult, queue_id: int, wait: bool
    ) -> Answer | Awaitable[Answer]:
        """Count the put and answer it: at once, or once durable (SYNC_FLUSH, SYNC_MASTER)."""
        self.metrics.sends(topic, result)
        if result.append is not None:
            if wait and (self.store.sync_flush or self.role.sync_master):
                # The flush and the slave's wait start before the dispatch is scheduled: the
                # answer waits for them, not for the dispatch.
                replica = self.wait_replicated(result)  # SYNC_MASTER: the slave timeout starts now
                durable = self.store.durable_soon(result)
                self.on_append()
                return self._respond_when_durable(request, result, queue_id, durable, replica)
            self.on_append()
        return self.response(request, result, queue_id)

    def _check(self, request: RemotingCommand, header: SendMessageRequestHeader) -> RemotingCommand | None:
        if not self.role.is_master:
            return make_response(
                request, ResponseCode.SERVICE_NOT_AVAILABLE, "the broker is a slave and does not accept messages"
            )
        if not self.config.broker_permission & PERM_WRITE:
            return make_response(
                request,
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_name}] sending message is forbidden",
            )
        topic = header.topic
        if topic not in self._valid_topics:
            problem = validate_topic_name(topic)
            if problem is not None:  # RocketMQ's msgCheck: TopicValidator.validateTopic answers SYSTEM_ERROR
                return make_response(request, ResponseCode.SYSTEM_ERROR, problem)
            if len(self._valid_topics) >= limits.VALID_TOPIC_NAMES_CACHED_MAX_COUNT:
                self._valid_topics.clear()
                self._plain_topics.clear()
            self._valid_topics.add(topic)
            if topic not in NOT_ALLOWED_SEND_TOPICS and not topic.startswith(_SPECIAL_TOPIC_PREFIXES):
                self._plain_topics.add(topic)
        if topic in NOT_ALLOWED_SEND_TOPICS:
            return make_response(
                request, ResponseCode.NO_PERMISSION, f"Sending message to topic[{header.topic}] is forbidden."
            )
        return None

    def _timing(
        self, request: RemotingCommand, header: SendMessageRequestHeader, topic: str
    ) -> Timing | RemotingCommand | None:
        """The later delivery a message asks for (DELAY, TIMER_*: spec §10.2), None for at once.

        Only NOT/COMMIT messages are delayed (half messages lose their DELAY, spec §11.6); a
        message routed to the DLQ is stored at once; a delayed batch is refused, as RocketMQ
        refuses it."""
        if not may_be_timed(header.properties) or topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            return None
        if not gets_consume_queue_entry(header.sys_flag):
            return None
        config = self.config
        try:
            timing = timing_of(
                decode_properties(header.properties or ""),
                self.store.clock.now_ms(),
                timer_enabled=config.timer_wheel_enable,
                timer_max_delay_ms=config.timer_max_delay_s * 1000,
            )
        except ValueError as error:
            return make_response(request, ResponseCode.MESSAGE_ILLEGAL, str(error))
        if timing is not None and (header.batch or request.code == RequestCode.SEND_BATCH_MESSAGE):
            return make_response(request, ResponseCode.MESSAGE_ILLEGAL, "a batch cannot be delayed (DELAY or timer)")
        return timing

    def _half_refusal(self, request: RemotingCommand, header: SendMessageRequestHeader) -> RemotingCommand | None:
        """A half message this broker cannot take: transactions switched off, a batch, too many
        transactions in flight."""
        if self.config.reject_transaction_message:
            return make_response(
                request, ResponseCode.NO_PERMISSION, f"the broker[{self.config.broker_name}] rejects transactions"
            )
        if header.batch or request.code == RequestCode.SEND_BATCH_MESSAGE:
            return make_response(request, ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be transactional")
        busy = self.transactions.refusal()
        return None if busy is None else make_response(request, ResponseCode.SYSTEM_BUSY, busy)

    def _route_retry(
        self, request: RemotingCommand, header: SendMessageRequestHeader, reconsume_times: int
    ) -> tuple[str, int] | RemotingCommand:
        """A message sent to %RETRY%group: keep it there, or to the DLQ once out of attempts."""
        group_name = header.topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        group = self.groups.find_or_create(group_name)
        if group is None:
            return make_response(
                request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group_name}"
            )
        max_times = group.retry_max_times
        if request.version >= SEND_BACK_MIN_VERSION and header.max_reconsume_times is not None:
            max_times = header.max_reconsume_times
        if reconsume_times < max_times:
            return header.topic, header.queue_id if header.queue_id >= 0 else 0
        dlq = dlq_topic(group_name)
        self.topics.create_if_absent(dlq, 1, PERM_READ | PERM_WRITE)
        log.info("message for %s reached %d attempts: stored in %s", header.topic, reconsume_times, dlq)
        return dlq, 0

    def _append_batch(self, message: MessageToStore) -> PutResult:
        try:
            if message.sysflag & COMPRESSED_FLAG:  # the C++ client's compressed batch: stored inflated
                if message.sysflag & COMPRESSION_TYPE_MASK not in ZLIB_COMPRESSION_BITS:
                    raise BatchBodyError("a compressed batch body must be zlib")
                size_max = self.store.settings.commitlog.message_body_size_max_bytes
                message = dataclasses.replace(
                    message,
                    body=inflate_batch_body(message.body, size_max),
                    sysflag=message.sysflag & ~(COMPRESSED_FLAG | COMPRESSION_TYPE_MASK),
                )
        except BatchBodyError as error:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, remark=str(error))
        return self.store.append_batch_body(message, message.body, message.properties)

    async def _respond_when_durable(
        self,
        request: RemotingCommand,
        result: PutResult,
        queue_id: int,
        durable: asyncio.Future[PutStatus] | None,
        replica: asyncio.Future[PutStatus] | None,
    ) -> Answer:
        if durable is not None:
            status = await durable
            if status is not PutStatus.PUT_OK:
                result.status = status
        if replica is not None:
            status = await replica  # flush, then slave; a failed slave wait wins, as in RocketMQ
            if status is not PutStatus.PUT_OK:
                result.status = status
        if result.status is not PutStatus.PUT_OK:
            self.metrics.put_timeouts[result.status.value] += 1  # stored, but not durable in time
        return self.response(request, result, queue_id)

    def response(self, request: RemotingCommand, result: PutResult, queue_id: int) -> Answer:
        """The answer to a send: a success as its encoded frame (`send_frames.send_ok_frame`)."""
        code = RESPONSE_CODE_OF_STATUS[result.status]
        append = result.append
        if append is None or not result.status.stored:
            remark = result.remark or result.status.value
            return make_response(request, code, remark)
        if code == ResponseCode.SUCCESS:
            config = self.config
            if result.record_sizes is not None:  # a batch: its messages' ids, joined
                msg_id = ",".join(result.message_ids())
                return send_ok_frame(request, msg_id, queue_id, append.queue_offset, config.region_id, config.trace_on)
            return single_send_ok_frame(
                request,
                self._hex(append),
                append.wrote_offset,
                queue_id,
                append.queue_offset,
                config.region_id,
                config.trace_on,
            )
        header = SendMessageResponseHeader(
            msg_id=",".join(result.message_ids()),
            queue_id=queue_id,
            queue_offset=append.queue_offset,
            msg_region=self.config.region_id,
            trace_on=self.config.trace_on,
        )
        return make_response(request, code, None, ext_fields=header.to_ext_fields())

    def _hex(self, append: AppendResult) -> str:
        """The upper-case hex of the put's store host, for its message id (the last one kept)."""
        if append.store_host is not self._host_hex[0]:
            self._host_hex = (append.store_host, bytes(append.store_host).hex().upper())
        return self._host_hex[1]

    def _born_host(self, connection: ServerConnection) -> bytes:
        key = (connection.peer_host, connection.peer_port)
        cached = self._born_hosts.get(key)
        if cached is None:
            try:
                cached = encode_host(connection.peer_host, connection.peer_port)
            except ValueError:
                cached = encode_host("127.0.0.1", 0)
            if len(self._born_hosts) > limits.BORN_HOSTS_CACHED_MAX_COUNT:
                self._born_hosts.clear()
            self._born_hosts[key] = cached
        return cached
