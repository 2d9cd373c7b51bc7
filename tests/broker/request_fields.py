"""extFields of the send and pull requests the broker tests write by hand (raw sockets, RemotingClient)."""

from __future__ import annotations

import time

from shoal.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeaderV2

PULL_WITH_SUBSCRIPTION_FLAG = 4  # the subscription is in the request; no suspend, no commit


def send_fields(topic: str, queue_id: int = 0, *, producer_group: str = "PID_test", queues: int = 4) -> dict[str, str]:
    """SEND_MESSAGE_V2 to one queue; a missing topic is created from TBW102 with `queues` queues."""
    return SendMessageRequestHeaderV2(
        producer_group=producer_group,
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=queues,
        queue_id=queue_id,
        sys_flag=0,
        born_timestamp_ms=int(time.time() * 1000),
        flag=0,
    ).to_ext_fields()


def pull_fields(
    topic: str, queue_id: int = 0, offset: int = 0, count: int = 1, *, consumer_group: str = "CID_test"
) -> dict[str, str]:
    """PULL_MESSAGE of up to `count` messages from `offset`, subscription "*", answered at once."""
    return PullMessageRequestHeader(
        consumer_group=consumer_group,
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=count,
        sys_flag=PULL_WITH_SUBSCRIPTION_FLAG,
        commit_offset=0,
        suspend_timeout_ms=0,
        subscription="*",
        sub_version=0,
    ).to_ext_fields()
