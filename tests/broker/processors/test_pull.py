"""The pull processor: a master tells a lagging consumer to read from its slave (suggestWhichBrokerId,
spec §8.8 step 6)."""

from __future__ import annotations

import asyncio
import time

import pytest

from shoal.protocol import RequestCode, ResponseCode
from shoal.remoting import RemotingClient
from tests.broker.request_fields import pull_fields, send_fields

pytestmark = pytest.mark.slow


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
            sent = await client.invoke(
                running.broker_addr,
                RequestCode.SEND_MESSAGE_V2,
                send_fields("LagTopic", producer_group="PID_lag", queues=1),
                b"x",
            )
            assert sent.code == ResponseCode.SUCCESS, sent.remark
        deadline = time.monotonic() + 10
        while True:
            pulled = await client.invoke(
                running.broker_addr, RequestCode.PULL_MESSAGE, pull_fields("LagTopic", consumer_group="CID_lag")
            )
            if pulled.code == ResponseCode.SUCCESS or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.02)
        await client.close()
        assert pulled.code == ResponseCode.SUCCESS, pulled.remark
        return pulled.ext_fields["suggestWhichBrokerId"]

    assert asyncio.run(run()) == expected
