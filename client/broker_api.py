"""Typed broker requests: the one place where responses become results or `MQBrokerError`.

Each method sends one request to one broker address (`MQClientAPIImpl`, spec §8.8) and returns
what the caller needs; an unexpected response code raises `MQBrokerError(code, remark, address)`,
a transport problem `RemotingError`. Nothing here retries or chooses brokers.
"""

from __future__ import annotations

from collections.abc import Iterable

from shoal.client.errors import MQBrokerError
from shoal.client.transport import ClientRemoting
from shoal.protocol import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetConsumerListByGroupResponseBody,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UnlockBatchRequestBody,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from shoal.protocol.errors import ProtocolError


def check_response(response: RemotingCommand, address: str, *codes: int) -> RemotingCommand:
    """`response` if its code is one of `codes` (SUCCESS when none given), else MQBrokerError."""
    if response.code not in (codes or (ResponseCode.SUCCESS,)):
        raise MQBrokerError(response.code, response.remark, address)
    return response


def protocol_failure(error: ProtocolError, address: str) -> MQBrokerError:
    """A response whose header or body cannot be read, as a broker error (SYSTEM_ERROR)."""
    return MQBrokerError(ResponseCode.SYSTEM_ERROR, f"unreadable response: {error}", address)


class BrokerApi:
    """Broker requests over a `ClientRemoting`, each bounded by `timeout_s` unless told otherwise."""

    def __init__(self, remoting: ClientRemoting, timeout_s: float) -> None:
        self.remoting = remoting
        self.timeout_s = timeout_s

    async def call(
        self,
        address: str,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes | None = None,
        *,
        timeout_s: float | None = None,
        ok: Iterable[int] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """Send and check the response code."""
        response = await self.remoting.invoke(address, code, ext_fields, body, timeout_s=timeout_s or self.timeout_s)
        return check_response(response, address, *ok)

    # --- clients ---

    async def heartbeat(self, address: str, data: HeartbeatData) -> None:
        await self.call(address, RequestCode.HEART_BEAT, body=data.to_json())

    async def unregister_client(
        self, address: str, client_id: str, *, producer_group: str | None = None, consumer_group: str | None = None
    ) -> None:
        header = UnregisterClientRequestHeader(
            client_id=client_id, producer_group=producer_group, consumer_group=consumer_group
        )
        await self.call(address, RequestCode.UNREGISTER_CLIENT, header.to_ext_fields())

    async def consumer_ids(self, address: str, group: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP: the client ids of `group`, sorted."""
        header = GetConsumerListByGroupRequestHeader(consumer_group=group)
        response = await self.call(address, RequestCode.GET_CONSUMER_LIST_BY_GROUP, header.to_ext_fields())
        if not response.body:
            return []
        try:
            ids = GetConsumerListByGroupResponseBody.from_json(response.body).consumer_id_list
        except ProtocolError as error:
            raise protocol_failure(error, address) from None
        return sorted(ids)

    # --- offsets ---

    async def query_consumer_offset(self, address: str, group: str, mq: MessageQueue) -> int | None:
        """QUERY_CONSUMER_OFFSET: the group's committed offset; None when the broker has none (22)."""
        header = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=mq.topic, queue_id=mq.queue_id)
        response = await self.call(
            address,
            RequestCode.QUERY_CONSUMER_OFFSET,
            header.to_ext_fields(),
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        return self._header_offset(response, QueryConsumerOffsetResponseHeader, address)

    async def update_consumer_offset(
        self, address: str, group: str, mq: MessageQueue, offset: int, *, oneway: bool = False
    ) -> None:
        header = UpdateConsumerOffsetRequestHeader(
            consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, commit_offset=offset
        )
        if oneway:
            await self.remoting.invoke_oneway(address, RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields())
            return
        await self.call(address, RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields())

    async def max_offset(self, address: str, mq: MessageQueue) -> int:
        header = GetMaxOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
        response = await self.call(address, RequestCode.GET_MAX_OFFSET, header.to_ext_fields())
        return self._header_offset(response, GetMaxOffsetResponseHeader, address)

    async def min_offset(self, address: str, mq: MessageQueue) -> int:
        header = GetMinOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
        response = await self.call(address, RequestCode.GET_MIN_OFFSET, header.to_ext_fields())
        return self._header_offset(response, GetMinOffsetResponseHeader, address)

    async def search_offset(self, address: str, mq: MessageQueue, timestamp_ms: int) -> int:
        header = SearchOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id, timestamp_ms=timestamp_ms)
        response = await self.call(address, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header.to_ext_fields())
        return self._header_offset(response, SearchOffsetResponseHeader, address)

    async def earliest_msg_store_time_ms(self, address: str, mq: MessageQueue) -> int:
        header = GetEarliestMsgStoretimeRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
        response = await self.call(address, RequestCode.GET_EARLIEST_MSG_STORETIME, header.to_ext_fields())
        try:
            return GetEarliestMsgStoretimeResponseHeader.from_ext_fields(response.ext_fields).timestamp_ms
        except ProtocolError as error:
            raise protocol_failure(error, address) from None

    @staticmethod
    def _header_offset(
        response: RemotingCommand,
        header_type: type[
            QueryConsumerOffsetResponseHeader
            | GetMaxOffsetResponseHeader
            | GetMinOffsetResponseHeader
            | SearchOffsetResponseHeader
        ],
        address: str,
    ) -> int:
        try:
            return header_type.from_ext_fields(response.ext_fields).offset
        except ProtocolError as error:
            raise protocol_failure(error, address) from None

    # --- consuming ---

    async def send_back(self, address: str, header: ConsumerSendMsgBackRequestHeader) -> None:
        """CONSUMER_SEND_MSG_BACK: the broker re-stores the message in the retry topic (or DLQ)."""
        await self.call(address, RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields())

    async def lock_batch(self, address: str, body: LockBatchRequestBody) -> set[MessageQueue]:
        """LOCK_BATCH_MQ: the queues of `body` now locked by the requesting client."""
        response = await self.call(address, RequestCode.LOCK_BATCH_MQ, body=body.to_json())
        if not response.body:
            return set()
        try:
            return set(LockBatchResponseBody.from_json(response.body).lock_ok_mq_set)
        except ProtocolError as error:
            raise protocol_failure(error, address) from None

    async def unlock_batch(self, address: str, body: UnlockBatchRequestBody) -> None:
        await self.call(address, RequestCode.UNLOCK_BATCH_MQ, body=body.to_json())
