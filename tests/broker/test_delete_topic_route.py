"""deleteTopic against a NameServer + Broker as real processes: once the broker has answered
DELETE_TOPIC_IN_BROKER and the NameServer DELETE_TOPIC_IN_NAMESRV, no route query answers the topic
again, while the broker's registrations (each topic change starts one) run all the time."""

from __future__ import annotations

import asyncio

import pytest

from shoal.protocol import RemotingCommand, RequestCode, ResponseCode
from shoal.protocol.headers import CreateTopicRequestHeader, CustomHeader, DeleteTopicRequestHeader
from shoal.protocol.route_bodies import TopicList
from shoal.remoting import RemotingClient
from tests.conftest import Cluster

pytestmark = pytest.mark.slow

DELETERS = 4
DELETIONS_PER_DELETER = 60
QUERIES_AFTER_DELETE = 25
"""Route queries right after each deletion: they span the few milliseconds in which a registration
sent before the deletion reached the NameServer after it."""
CHURN_TOPICS = 4
"""Topics updated again and again meanwhile: each update is a new topic data version and a
registration round, so rounds carrying a doomed topic are often in flight when it is deleted."""
REQUEST_TIMEOUT_S = 20.0


async def call(client: RemotingClient, address: str, code: int, header: CustomHeader) -> RemotingCommand:
    return await client.invoke(address, code, header.to_ext_fields(), timeout_s=REQUEST_TIMEOUT_S)


def create_header(topic: str) -> CreateTopicRequestHeader:
    return CreateTopicRequestHeader(
        topic=topic,
        default_topic="TBW102",
        read_queue_nums=1,
        write_queue_nums=1,
        perm=6,
        topic_filter_type="SINGLE_TAG",
    )


def test_no_route_query_answers_a_topic_after_both_deletions_while_registrations_run(cluster: Cluster) -> None:
    """Goal: after DELETE_TOPIC_IN_BROKER and DELETE_TOPIC_IN_NAMESRV are answered, a registration
    the broker built before the deletion cannot bring the route back. Method: 4 x 60 topics created
    and deleted (broker, then NameServer, as mqadmin deleteTopic) while 4 other topics are updated
    without pause; 25 route queries after each deletion, and the topic list and routes at the end."""
    broker, namesrv = cluster.broker_addr, cluster.namesrv_addr
    answered_after_delete: list[tuple[str, int]] = []

    async def churn(client: RemotingClient, stop: asyncio.Event) -> None:
        updates = 0
        while not stop.is_set():
            response = await call(
                client, broker, RequestCode.UPDATE_AND_CREATE_TOPIC, create_header(f"Churn{updates % CHURN_TOPICS}")
            )
            assert response.code == ResponseCode.SUCCESS, response.remark
            updates += 1

    async def deleter(client: RemotingClient, worker: int) -> None:
        for index in range(DELETIONS_PER_DELETER):
            topic = f"Doomed_{worker}_{index}"
            response = await call(client, broker, RequestCode.UPDATE_AND_CREATE_TOPIC, create_header(topic))
            assert response.code == ResponseCode.SUCCESS, response.remark
            for address, code in (
                (broker, RequestCode.DELETE_TOPIC_IN_BROKER),
                (namesrv, RequestCode.DELETE_TOPIC_IN_NAMESRV),
            ):
                response = await call(client, address, code, DeleteTopicRequestHeader(topic=topic))
                assert response.code == ResponseCode.SUCCESS, response.remark
            for query in range(QUERIES_AFTER_DELETE):
                route = await call(
                    client, namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, DeleteTopicRequestHeader(topic=topic)
                )
                if route.code != ResponseCode.TOPIC_NOT_EXIST:
                    answered_after_delete.append((topic, query))

    async def scenario() -> list[str]:
        client = RemotingClient()
        stop = asyncio.Event()
        try:
            churning = asyncio.create_task(churn(client, stop))
            await asyncio.gather(*(deleter(client, worker) for worker in range(DELETERS)))
            stop.set()
            await churning
            listed = await client.invoke(
                namesrv, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {}, timeout_s=REQUEST_TIMEOUT_S
            )
            return [
                topic
                for topic in TopicList.from_json(bytes(listed.body or b"{}")).topic_list
                if topic.startswith("Doomed_")
            ]
        finally:
            await client.close()

    still_listed = asyncio.run(scenario())
    assert not answered_after_delete, (
        f"{len(answered_after_delete)} route answers after deletion: {answered_after_delete[:10]}"
    )
    assert not still_listed, still_listed
