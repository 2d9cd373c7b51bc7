"""The pull processor: a master tells a lagging consumer to read from its slave (suggestWhichBrokerId,
spec §8.8 step 6)."""

from __future__ import annotations

import asyncio
import time

import pytest

from shoal.protocol import RequestCode, ResponseCode
from shoal.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeaderV2
from shoal.remoting import RemotingClient

pytestmark = pytest.mark.slow


def _send_fields(topic: str) -> dict[str, str]:
    return SendMessageRequestHeaderV2(
        producer_group="PID_lag",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=1,
        queue_id=0,
        sys_flag=0,
        born_timestamp_ms=int(time.time() * 1000),
        flag=0,
    ).to_ext_fields()


def _pull_fields(topic: str) -> dict[str, str]:
    return PullMessageRequestHeader(
        consumer_group="CID_lag",
        topic=topic,
        queue_id=0,
        queue_offset=0,
        max_msg_nums=1,
        sys_flag=4,
        commit_offset=0,
        suspend_timeout_ms=0,
        subscription="*",
        sub_version=0,
    ).to_ext_fields()


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({"slaveReadEnable": "true", "accessMessageInMemoryMaxRatio": "0"}, "1"),  # everything counts as on disk
        ({"slaveReadEnable": "true"}, "0"),  # recent data is in memory: stay on the master
        ({"slaveReadEnable": "false", "accessMessageInMemoryMaxRatio": "0"}, "0"),  # slave reads off
    ],
)
def test_master_suggests_the_slave_when_the_consumer_reads_old_data(
    cluster_factory, conf: dict[str, str], expected: str
) -> None:  # type: ignore[no-untyped-def]
    """Goal: suggestWhichBrokerId points a consumer reading data no longer in memory at the slave
    (whichBrokerWhenConsumeSlowly = 1). Method: send 5 messages, pull the oldest, read the header."""
    running = cluster_factory(conf)

    async def run() -> str:
        client = RemotingClient()
        for _ in range(5):
            sent = await client.invoke(running.broker_addr, RequestCode.SEND_MESSAGE_V2, _send_fields("LagTopic"), b"x")
            assert sent.code == ResponseCode.SUCCESS, sent.remark
        deadline = time.monotonic() + 10
        while True:
            pulled = await client.invoke(running.broker_addr, RequestCode.PULL_MESSAGE, _pull_fields("LagTopic"))
            if pulled.code == ResponseCode.SUCCESS or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.02)
        await client.close()
        assert pulled.code == ResponseCode.SUCCESS, pulled.remark
        return pulled.ext_fields["suggestWhichBrokerId"]

    assert asyncio.run(run()) == expected
