"""Request-reply (RocketMQ 4.6+) with RocketMQ 4.9.7's Java client against Shoal: the broker pushes
each reply to its requester (PUSH_REPLY_MESSAGE_TO_CLIENT) and stores it in the reply topic."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from shoal.protocol import RequestCode, ResponseCode
from shoal.protocol.headers import GetMaxOffsetRequestHeader, GetProducerConnectionListRequestHeader
from shoal.remoting import RemotingClient

WAIT_S = 60.0
REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"
REQUEST_TIMEOUT_MS = 5000
"""A request's timeout where the test wants it to expire: the client's first request also looks up
the route and heartbeats within it (DefaultMQProducerImpl.prepareSendRequest), which took a loaded
CI machine 3 s; a send still unanswered at the timeout is "send request message ... fail", not 10006."""


def reply_topic_max_offset(broker_addr: str) -> int:
    """How many replies the broker stored (its reply topic has one queue)."""

    async def ask() -> int:
        client = RemotingClient()
        try:
            header = GetMaxOffsetRequestHeader(topic=REPLY_TOPIC, queue_id=0).to_ext_fields()
            response = await client.invoke(broker_addr, RequestCode.GET_MAX_OFFSET, header)
            assert response.code == ResponseCode.SUCCESS, response.remark
            return int(response.ext_fields["offset"])
        finally:
            await client.close()

    return asyncio.run(ask())


def producer_group_connected(broker_addr: str, group: str) -> bool:
    """Whether the broker still holds a connection of producer group `group` (GET_PRODUCER_CONNECTION_LIST)."""

    async def ask() -> bool:
        client = RemotingClient()
        try:
            header = GetProducerConnectionListRequestHeader(producer_group=group).to_ext_fields()
            response = await client.invoke(broker_addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, header)
            return response.code == ResponseCode.SUCCESS
        finally:
            await client.close()

    return asyncio.run(ask())


def start_responder(java: Any, shoal: Any, topic: str, group: str, **extra: object) -> Any:
    responder = java.spawn(
        "RequestReply",
        {"namesrv": shoal.namesrv_addr, "topic": topic, "role": "responder", "group": group, **extra},
    )
    responder.wait_for(lambda r: r.of("allocated"), WAIT_S, "the responder's queues")
    return responder


def test_sync_and_async_requests_get_the_responders_reply(java: Any, shoal: Any, unique: Any) -> None:
    """Goal: `request(msg, timeout)` and `request(msg, callback, timeout)` return the reply a push
    consumer sent with MessageUtil.createReplyMessage, its CORRELATION_ID the request's, and each
    reply is also stored (storeReplyMessageEnable). Method: a responder process; sync then async
    requesters; the reply topic's max offset before and after."""
    topic = unique("Request")
    responder = start_responder(java, shoal, topic, unique("responder"))
    stored_before = reply_topic_max_offset(shoal.broker_addr)
    for mode in ("sync", "async"):
        result = java.run(
            "RequestReply",
            {"namesrv": shoal.namesrv_addr, "topic": topic, "role": "requester", "mode": mode, "count": 3},
        )
        assert result.returncode == 0, result.stderr[-3000:]
        assert not result.of("requestFailed"), result.of("requestFailed")
        replies = result.of("reply")
        for reply in replies:
            assert reply["correlationId"] and reply["correlationId"] == reply["requestCorrelationId"]
            assert reply["topic"] == REPLY_TOPIC and reply["msgType"] == "reply"
        # Delivery is at least once, as in RocketMQ: a request the client re-sent after a timeout on a busy
        # machine is answered twice, and the 4.9.7 client can run an async callback for both replies when
        # they arrive together. Every request must be answered by its own reply; extra copies are allowed.
        assert sorted({r["body"] for r in replies}) == [f"reply:request-{i}" for i in range(3)], (
            f"requester: {result.events}\nresponder: {responder.events}"
        )
        assert len(replies) == 3 or mode == "async", f"requester: {result.events}\nresponder: {responder.events}"
    replied = responder.of("replied")
    assert len(replied) >= 6 and {r["status"] for r in replied} == {"SEND_OK"}, responder.events
    assert reply_topic_max_offset(shoal.broker_addr) == stored_before + len(replied)
    assert responder.stop() == 0


def test_request_without_responder_times_out_with_request_timeout_exception(java: Any, shoal: Any, unique: Any) -> None:
    """Goal: nobody answers: the requester gets RocketMQ's RequestTimeoutException (code 10006)
    after its timeout, with the words of the path that noticed. Method: a sync and an async request
    to a topic nobody consumes."""
    topic = unique("Unanswered")
    for mode in ("sync", "async"):
        result = java.run(
            "RequestReply",
            {
                "namesrv": shoal.namesrv_addr,
                "topic": topic,
                "role": "requester",
                "mode": mode,
                "timeoutMs": REQUEST_TIMEOUT_MS,
            },
        )
        assert result.returncode == 0, result.stderr[-3000:]
        (failure,) = result.of("requestFailed")
        assert failure["type"] == "org.apache.rocketmq.client.exception.RequestTimeoutException"
        assert failure["errorCode"] == 10006
        expected = {  # DefaultMQProducerImpl.waitResponse; RequestFutureHolder's scan of expired requests
            "sync": f"send request message to <{topic}> OK, but wait reply message timeout, {REQUEST_TIMEOUT_MS} ms.",
            "async": "request timeout, no reply message.",
        }
        assert expected[mode] in failure["message"], mode
        assert not result.of("reply")


def test_reply_to_a_requester_that_is_gone_is_refused_but_stored(
    java: Any, shoal: Any, unique: Any, wait_until: Callable[..., None]
) -> None:
    """Goal: a reply whose requester has exited is answered as RocketMQ answers it: SYSTEM_ERROR (1)
    "push reply message fail, channel of <clientId> not found.", and still stored. Method: the
    responder holds its reply; the requester (route and heartbeat fetched first, so its timeout
    covers the send alone) times out and exits; once the broker lists no connection of its producer
    group, the test releases the reply. No delay races the requester's exit."""
    topic = unique("Late")
    responder = start_responder(java, shoal, topic, unique("late_responder"), holdReplies="true")
    stored_before = reply_topic_max_offset(shoal.broker_addr)
    requester_group = unique("gone_requester")
    result = java.run(
        "RequestReply",
        {
            "namesrv": shoal.namesrv_addr,
            "topic": topic,
            "role": "requester",
            "group": requester_group,
            "timeoutMs": REQUEST_TIMEOUT_MS,
            "warmUp": "true",
        },
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert [f["errorCode"] for f in result.of("requestFailed")] == [10006], result.events
    client_id = result.of("started")[0]["clientId"]
    responder.wait_for(lambda r: r.of("held"), WAIT_S, "the request, held by the responder")
    wait_until(
        lambda: not producer_group_connected(shoal.broker_addr, requester_group),
        WAIT_S,
        0.05,
        what="the broker dropping the exited requester's connection",
    )
    responder.send_line("release")
    responder.wait_for(lambda r: r.of("replyFailed"), WAIT_S, "the late reply")
    (failure,) = responder.of("replyFailed")
    assert failure["causeType"] == "org.apache.rocketmq.client.exception.MQBrokerException"  # in MQClientException
    assert failure["responseCode"] == 1
    assert failure["errorMessage"] == f"push reply message fail, channel of <{client_id}> not found."
    assert responder.of("request")[0]["replyTo"] == client_id
    assert reply_topic_max_offset(shoal.broker_addr) == stored_before + 1
    assert responder.stop() == 0
