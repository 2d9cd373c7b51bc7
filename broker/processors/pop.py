"""POP_MESSAGE (200050), ACK_MESSAGE (200051), CHANGE_MESSAGE_INVISIBLETIME (200053): RocketMQ 5's
POP consumption over remoting, served from `shoal.broker.pop`.

The request headers are RocketMQ 5.x's. A POP_MESSAGE answer carries the leased records as its body
(like a pull), `popTime` (the leases' identity) and `msgOffsetInfo` (`queueId offset attempt` per
record, `;`-separated); each record's RECONSUMETIMES is its delivery attempt - 1. An ack or change
names its lease by `extraInfo`, whose field 1 (space-separated) is the pop time, as RocketMQ's
ExtraInfoUtil reads it; a lease that ended (expired and leased again, or changed) answers
NO_MESSAGE, so a consumer learns its receipt handle is stale.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from shoal.broker.config import BrokerConfig
from shoal.broker.filter import FilterError
from shoal.broker.pop import PopRefused, PopRequest, PopService, message_filter_of
from shoal.broker.pop.limits import POP_MAX_INVISIBLE_MS, POP_MIN_INVISIBLE_MS
from shoal.broker.replication.role import BrokerRoleState
from shoal.broker.topic_manager import PERM_READ
from shoal.protocol import RemotingCommand, ResponseCode, make_response
from shoal.protocol.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from shoal.remoting.server import ServerConnection

log = logging.getLogger(__name__)

EXTRA_INFO_POP_TIME_FIELD = 1


def pop_time_of(extra_info: str) -> int | None:
    """The pop time an `extraInfo` names (None: not one Shoal or RocketMQ 5 would have written)."""
    fields = extra_info.split(" ")
    try:
        return int(fields[EXTRA_INFO_POP_TIME_FIELD])
    except (IndexError, ValueError):
        return None


class PopProcessors:
    def __init__(self, *, config: BrokerConfig, role: BrokerRoleState, pop: PopService) -> None:
        self.config = config
        self.role = role
        self.pop_service = pop

    def _refusal(self, request: RemotingCommand) -> RemotingCommand | None:
        if not self.role.is_master:  # leases are a master's: a slave's would be forgotten on failover
            return make_response(request, ResponseCode.NO_PERMISSION, "POP is served by the master only")
        if not self.config.broker_permission & PERM_READ:
            return make_response(
                request,
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_name}] peeking message is forbidden",
            )
        return None

    def pop(
        self, connection: ServerConnection, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        header = PopMessageRequestHeader.from_ext_fields(request.ext_fields)
        if not POP_MIN_INVISIBLE_MS <= header.invisible_time_ms <= POP_MAX_INVISIBLE_MS:
            return make_response(
                request,
                ResponseCode.INVALID_PARAMETER,
                f"invisibleTime {header.invisible_time_ms} ms is outside "
                f"[{POP_MIN_INVISIBLE_MS}, {POP_MAX_INVISIBLE_MS}]",
            )
        if header.max_msg_nums <= 0:
            return make_response(request, ResponseCode.INVALID_PARAMETER, f"maxMsgNums {header.max_msg_nums} <= 0")
        try:
            message_filter = message_filter_of(header.exp_type, header.exp)
        except FilterError as failure:
            return make_response(
                request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"parse the expression failed: {failure}"
            )
        pop_request = PopRequest(
            group=header.consumer_group,
            topic=header.topic,
            queue_id=header.queue_id,
            max_messages=header.max_msg_nums,
            invisible_ms=header.invisible_time_ms,
            poll_ms=header.poll_time_ms,
            message_filter=message_filter,
            fifo=header.order,
            init_mode=header.init_mode,
        )
        return self._pop(request, pop_request)

    async def _pop(self, request: RemotingCommand, pop_request: PopRequest) -> RemotingCommand:
        try:
            batch = await self.pop_service.pop(pop_request)
        except PopRefused as refused:
            return make_response(request, refused.code, refused.remark)
        response_header = PopMessageResponseHeader(
            pop_time_ms=batch.pop_ms,
            invisible_time_ms=pop_request.invisible_ms,
            rest_num=batch.rest,
            msg_offset_info=";".join(f"{queue} {offset} {attempt}" for queue, offset, attempt in batch.positions)
            or None,
        )
        if not batch.records:
            return make_response(
                request, ResponseCode.POLLING_TIMEOUT, "no new message", ext_fields=response_header.to_ext_fields()
            )
        return make_response(
            request, ResponseCode.SUCCESS, ext_fields=response_header.to_ext_fields(), body=b"".join(batch.records)
        )

    def ack(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        header = AckMessageRequestHeader.from_ext_fields(request.ext_fields)
        pop_ms = pop_time_of(header.extra_info)
        if pop_ms is None:
            return make_response(
                request, ResponseCode.INVALID_PARAMETER, f"extraInfo {header.extra_info!r} is not valid"
            )
        if not self.pop_service.ack(header.consumer_group, header.topic, header.queue_id, header.offset, pop_ms):
            return make_response(
                request, ResponseCode.NO_MESSAGE, f"no lease of offset {header.offset} was taken at {pop_ms}: it ended"
            )
        return make_response(request, ResponseCode.SUCCESS)

    def change_invisible_time(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        header = ChangeInvisibleTimeRequestHeader.from_ext_fields(request.ext_fields)
        pop_ms = pop_time_of(header.extra_info)
        if pop_ms is None:
            return make_response(
                request, ResponseCode.INVALID_PARAMETER, f"extraInfo {header.extra_info!r} is not valid"
            )
        if not 0 <= header.invisible_time_ms <= POP_MAX_INVISIBLE_MS:
            return make_response(
                request, ResponseCode.INVALID_PARAMETER, f"invisibleTime {header.invisible_time_ms} ms is out of range"
            )
        new_pop_ms = self.pop_service.change(
            header.consumer_group, header.topic, header.queue_id, header.offset, pop_ms, header.invisible_time_ms
        )
        if new_pop_ms is None:
            return make_response(
                request, ResponseCode.NO_MESSAGE, f"no lease of offset {header.offset} was taken at {pop_ms}: it ended"
            )
        response_header = ChangeInvisibleTimeResponseHeader(
            pop_time_ms=new_pop_ms, invisible_time_ms=header.invisible_time_ms
        )
        return make_response(request, ResponseCode.SUCCESS, ext_fields=response_header.to_ext_fields())
