"""PULL_MESSAGE requests and responses (spec §8.8, §12), shared by the push and pull consumers.

Response codes map to statuses as in `MQClientAPIImpl.processPullResponse`: 0 FOUND, 19
NO_NEW_MSG, 20 NO_MATCHED_MSG, 21 OFFSET_ILLEGAL; any other code is an `MQBrokerError`. Whatever
the status, the consumer continues from `next_begin_offset` (for OFFSET_ILLEGAL that is where
the broker says the queue's valid range is). FOUND bodies are decoded and filtered again by exact
tag (`msgListFilterAgain`), and each message gets MIN_OFFSET / MAX_OFFSET properties like Java's.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from shoal.client.errors import MQBrokerError
from shoal.client.message import PROPERTY_MAX_OFFSET, PROPERTY_MIN_OFFSET, MessageExt, decode_messages
from shoal.client.subscription import EXPRESSION_TYPE_TAG, Subscription
from shoal.protocol import (
    MessageQueue,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    PullSysFlag,
    RemotingCommand,
    ResponseCode,
)
from shoal.protocol.errors import ProtocolError


class PullStatus(enum.Enum):
    """`PullStatus`."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_STATUS_OF_CODE: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(frozen=True, slots=True)
class PullResult:
    """One pull: where to continue, the queue's offset range, and the matching messages."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = 0


def build_pull_sys_flag(*, commit_offset: bool, suspend: bool, subscription: bool) -> int:
    """`PullSysFlag.buildSysFlag` (class filter mode is never used)."""
    flag = 0
    if commit_offset:
        flag |= PullSysFlag.COMMIT_OFFSET.value
    if suspend:
        flag |= PullSysFlag.SUSPEND.value
    if subscription:
        flag |= PullSysFlag.SUBSCRIPTION.value
    return flag


def pull_request_fields(
    group: str,
    mq: MessageQueue,
    subscription: Subscription,
    offset: int,
    max_nums: int,
    *,
    commit_offset: int,
    suspend_timeout_ms: int | None,
) -> dict[str, str]:
    """extFields of a PULL_MESSAGE that carries its subscription (FLAG_SUBSCRIPTION).

    Sending the expression (as the C++ client and Java's postSubscriptionWhenPull do) lets the
    broker filter without waiting for our heartbeat to register the subscription, which avoids
    SUBSCRIPTION_NOT_EXIST / NOT_LATEST races after a subscription change. `commit_offset` > 0
    piggy-backs the consumed offset (FLAG_COMMIT_OFFSET); `suspend_timeout_ms` None means no
    long polling.
    """
    sys_flag = build_pull_sys_flag(
        commit_offset=commit_offset > 0, suspend=suspend_timeout_ms is not None, subscription=True
    )
    header = PullMessageRequestHeader(
        consumer_group=group,
        topic=mq.topic,
        queue_id=mq.queue_id,
        queue_offset=offset,
        max_msg_nums=max_nums,
        sys_flag=sys_flag,
        commit_offset=max(commit_offset, 0),
        suspend_timeout_ms=suspend_timeout_ms or 0,
        subscription=subscription.expression,
        sub_version=subscription.sub_version,
        expression_type=EXPRESSION_TYPE_TAG,
    )
    return header.to_ext_fields()


def pull_result_of(
    response: RemotingCommand, mq: MessageQueue, subscription: Subscription | None, address: str
) -> PullResult:
    """The result of a PULL_MESSAGE response; MQBrokerError for other codes or a bad header.

    A body that is not a run of records raises MessageDecodeError (never skipped silently).
    """
    status = _STATUS_OF_CODE.get(response.code)
    if status is None:
        raise MQBrokerError(response.code, response.remark, address)
    try:
        header = PullMessageResponseHeader.from_ext_fields(response.ext_fields)
    except ProtocolError as error:
        raise MQBrokerError(ResponseCode.SYSTEM_ERROR, f"unreadable pull response: {error}", address) from None
    messages: list[MessageExt] = []
    if status is PullStatus.FOUND and response.body:
        offsets = {PROPERTY_MIN_OFFSET: str(header.min_offset), PROPERTY_MAX_OFFSET: str(header.max_offset)}
        decoded = decode_messages(response.body, broker_name=mq.broker_name, extra_properties=offsets)
        messages = subscription.filter(decoded) if subscription is not None else decoded
    return PullResult(
        status=status,
        next_begin_offset=header.next_begin_offset,
        min_offset=header.min_offset,
        max_offset=header.max_offset,
        messages=messages,
        suggest_which_broker_id=header.suggest_which_broker_id,
    )
