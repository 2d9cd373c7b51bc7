"""PULL_MESSAGE: request fields, response codes -> statuses, nextBeginOffset, tag filtering (spec §8.8, §12)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from shoal.client.errors import MessageDecodeError, MQBrokerError
from shoal.client.pull import PullStatus, build_pull_sys_flag, pull_request_fields, pull_result_of
from shoal.client.subscription import Subscription
from shoal.protocol import MessageQueue, PullMessageRequestHeader, PullSysFlag, ResponseCode, make_request
from shoal.protocol.command import RemotingCommand

MQ = MessageQueue("TopicTest", "broker-a", 2)
HEADER = {"suggestWhichBrokerId": "0", "nextBeginOffset": "17", "minOffset": "3", "maxOffset": "40"}


def response(code: int, *, body: bytes | None = None, ext_fields: dict[str, str] | None = None) -> RemotingCommand:
    command = make_request(code, opaque=1, ext_fields=HEADER if ext_fields is None else ext_fields, body=body)
    command.flag = 1
    return command


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ResponseCode.PULL_NOT_FOUND, PullStatus.NO_NEW_MSG),
        (ResponseCode.PULL_RETRY_IMMEDIATELY, PullStatus.NO_MATCHED_MSG),
        (ResponseCode.PULL_OFFSET_MOVED, PullStatus.OFFSET_ILLEGAL),
    ],
)
def test_empty_outcomes_carry_the_next_begin_offset(code: int, status: PullStatus) -> None:
    """Goal: 19/20/21 map to statuses and keep nextBeginOffset/min/max. Method: one response each."""
    result = pull_result_of(response(code), MQ, None, "b:1")
    assert result.status is status
    assert (result.next_begin_offset, result.min_offset, result.max_offset) == (17, 3, 40)
    assert result.messages == []


def test_found_decodes_filters_by_exact_tag_and_stamps_offsets(build_record: Callable[..., bytes]) -> None:
    """Goal: FOUND body decoded, re-filtered by tag, MIN/MAX_OFFSET added. Method: 3 records, 2 match."""
    body = (
        build_record(queue_offset=14, properties="TAGS\x01TagA")
        + build_record(queue_offset=15, properties="TAGS\x01TagC")
        + build_record(queue_offset=16, properties="TAGS\x01TagB")
    )
    subscription = Subscription.build("TopicTest", "TagA || TagB", 1)
    result = pull_result_of(response(ResponseCode.SUCCESS, body=body), MQ, subscription, "b:1")
    assert result.status is PullStatus.FOUND
    assert [message.queue_offset for message in result.messages] == [14, 16]
    assert result.next_begin_offset == 17  # past the filtered message too
    assert result.messages[0].properties["MIN_OFFSET"] == "3"
    assert result.messages[0].properties["MAX_OFFSET"] == "40"
    assert result.messages[0].broker_name == "broker-a"


def test_found_with_everything_filtered_is_still_found(build_record: Callable[..., bytes]) -> None:
    """Goal: the consumer moves on to nextBeginOffset even when no message matched. Method: filter all."""
    body = build_record(properties="TAGS\x01Other")
    result = pull_result_of(response(0, body=body), MQ, Subscription.build("T", "TagA", 1), "b:1")
    assert (result.status, result.messages, result.next_begin_offset) == (PullStatus.FOUND, [], 17)


def test_other_codes_raise_with_the_code(build_record: Callable[..., bytes]) -> None:
    """Goal: e.g. SUBSCRIPTION_NOT_LATEST raises MQBrokerError(25). Method: a 25 response."""
    with pytest.raises(MQBrokerError) as caught:
        pull_result_of(response(ResponseCode.SUBSCRIPTION_NOT_LATEST), MQ, None, "b:1")
    assert caught.value.code == 25


def test_missing_header_fields_raise() -> None:
    """Goal: a response without nextBeginOffset is unusable, not offset 0 (which would rewind)."""
    with pytest.raises(MQBrokerError, match="unreadable"):
        pull_result_of(response(ResponseCode.PULL_NOT_FOUND, ext_fields={}), MQ, None, "b:1")


def test_undecodable_bodies_raise_instead_of_skipping(build_record: Callable[..., bytes]) -> None:
    """Goal: never advance past records we could not read. Method: truncated body."""
    with pytest.raises(MessageDecodeError):
        pull_result_of(response(0, body=build_record()[:-1]), MQ, None, "b:1")


def test_sys_flag_bits() -> None:
    """Goal: PullSysFlag.buildSysFlag. Method: each combination used."""
    assert build_pull_sys_flag(commit_offset=True, suspend=True, subscription=True) == 7
    assert build_pull_sys_flag(commit_offset=False, suspend=True, subscription=True) == 6
    assert build_pull_sys_flag(commit_offset=False, suspend=False, subscription=True) == PullSysFlag.SUBSCRIPTION


def test_push_pull_request_fields() -> None:
    """Goal: a long-polling pull with a piggy-backed commit. Method: read the header back."""
    subscription = Subscription.build("TopicTest", "TagA||TagB", 123)
    fields = pull_request_fields("cg", MQ, subscription, 20, 32, commit_offset=18, suspend_timeout_ms=15000)
    header = PullMessageRequestHeader.from_ext_fields(fields)
    assert (header.consumer_group, header.topic, header.queue_id) == ("cg", "TopicTest", 2)
    assert (header.queue_offset, header.max_msg_nums, header.commit_offset) == (20, 32, 18)
    assert header.sys_flag == PullSysFlag.COMMIT_OFFSET | PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION
    assert header.suspend_timeout_ms == 15000
    assert (header.subscription, header.sub_version, header.expression_type) == ("TagA || TagB", 123, "TAG")


def test_plain_pull_request_has_no_suspend_and_no_commit() -> None:
    """Goal: PullConsumer's non-blocking pull (sysFlag 4). Method: no commit, no suspend."""
    fields = pull_request_fields(
        "cg", MQ, Subscription.build("T", "*", 0), 0, 8, commit_offset=0, suspend_timeout_ms=None
    )
    header = PullMessageRequestHeader.from_ext_fields(fields)
    assert header.sys_flag == PullSysFlag.SUBSCRIPTION
    assert (header.commit_offset, header.suspend_timeout_ms, header.subscription) == (0, 0, "*")
