"""Topic administration on a real broker over real sockets: DELETE_TOPIC_IN_BROKER then
UPDATE_AND_CREATE_TOPIC gives a topic that starts again at queue offset 0 (RocketMQ's
cleanUnusedTopic drops the queues' offsets with their ConsumeQueues), before and after a restart,
and leaves a store `shoal store verify` finds clean."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shoal.protocol import RemotingCommand, RequestCode, ResponseCode
from shoal.protocol.headers import (
    CreateTopicRequestHeader,
    CustomHeader,
    DeleteTopicRequestHeader,
    GetMaxOffsetRequestHeader,
    SendMessageRequestHeaderV2,
)
from shoal.remoting import RemotingClient
from tests.conftest import Cluster

pytestmark = pytest.mark.slow

TIMEOUT_S = 20.0
TOPIC = "AdminDeleteRecreate"


async def call(
    client: RemotingClient, cluster: Cluster, code: int, header: CustomHeader, body: bytes | None = None
) -> RemotingCommand:
    return await client.invoke(cluster.broker_addr, code, header.to_ext_fields(), body, timeout_s=TIMEOUT_S)


async def create_topic(client: RemotingClient, cluster: Cluster) -> None:
    header = CreateTopicRequestHeader(
        topic=TOPIC,
        default_topic="TBW102",
        read_queue_nums=1,
        write_queue_nums=1,
        perm=6,
        topic_filter_type="SINGLE_TAG",
    )
    response = await call(client, cluster, RequestCode.UPDATE_AND_CREATE_TOPIC, header)
    assert response.code == ResponseCode.SUCCESS, response.remark


async def send(client: RemotingClient, cluster: Cluster, body: bytes) -> int:
    """SEND_MESSAGE_V2 to queue 0; the queue offset the broker gave it."""
    header = SendMessageRequestHeaderV2(
        producer_group="PID_admin",
        topic=TOPIC,
        default_topic="TBW102",
        default_topic_queue_nums=1,
        queue_id=0,
        sys_flag=0,
        born_timestamp_ms=int(time.time() * 1000),
        flag=0,
    )
    response = await call(client, cluster, RequestCode.SEND_MESSAGE_V2, header, body)
    assert response.code == ResponseCode.SUCCESS, response.remark
    return int(response.ext_fields["queueOffset"])


async def max_offset(client: RemotingClient, cluster: Cluster) -> int:
    response = await call(
        client, cluster, RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic=TOPIC, queue_id=0)
    )
    assert response.code == ResponseCode.SUCCESS, response.remark
    return int(response.ext_fields["offset"])


def verify(store_dir: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "shoal.cli.main", "store", "verify", str(store_dir)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def test_a_deleted_and_recreated_topic_starts_again_at_queue_offset_zero(cluster: Cluster) -> None:
    async def before_restart() -> None:
        client = RemotingClient()
        try:
            await create_topic(client, cluster)
            assert [await send(client, cluster, b"old-%d" % index) for index in range(5)] == [0, 1, 2, 3, 4]
            response = await call(
                client, cluster, RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic=TOPIC)
            )
            assert response.code == ResponseCode.SUCCESS, response.remark
            assert not (cluster.store_dir / "consumequeue" / TOPIC).exists()
            await create_topic(client, cluster)
            assert [await send(client, cluster, b"new-%d" % index) for index in range(3)] == [0, 1, 2]
            assert await max_offset(client, cluster) == 3
        finally:
            await client.close()

    async def after_restart() -> None:
        client = RemotingClient()
        try:
            assert await max_offset(client, cluster) == 3
            assert await send(client, cluster, b"after-restart") == 3
        finally:
            await client.close()

    asyncio.run(before_restart())
    cluster.stop("broker")
    verified = verify(cluster.store_dir)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    cluster.start_broker()
    asyncio.run(after_restart())
