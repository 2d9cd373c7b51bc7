"""The pull processor: a master tells a lagging consumer to read from its slave (suggestWhichBrokerId,
spec §8.8 step 6)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from shoal.protocol import RequestCode, ResponseCode
from shoal.remoting import RemotingClient
from tests.broker.request_fields import pull_fields, send_fields
from tests.conftest import Cluster

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
    cluster_factory: Callable[[dict[str, str]], Cluster], conf: dict[str, str], expected: str
) -> None:
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


def test_a_pull_past_the_end_of_a_queue_moves_the_consumer_to_the_end(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """Goal: a consumer whose offset is past a queue's end (a restored store) is told to resume at
    the end, not at 0, as 4.9.7 answers (PULL_OFFSET_MOVED, nextBeginOffset = maxOffset). Method:
    send 3 messages to a queue starting at 0, pull from offset 50."""
    running = cluster_factory({})

    async def run() -> tuple[int, dict[str, str]]:
        client = RemotingClient()
        try:
            for _ in range(3):
                fields = send_fields("PastEnd", producer_group="PID_past", queues=1)
                sent = await client.invoke(running.broker_addr, RequestCode.SEND_MESSAGE_V2, fields, b"x")
                assert sent.code == ResponseCode.SUCCESS, sent.remark
            fields = pull_fields("PastEnd", offset=50, consumer_group="CID_past")
            deadline = time.monotonic() + 10
            while True:  # until dispatch made the three visible (a new queue's file may take a moment)
                pulled = await client.invoke(running.broker_addr, RequestCode.PULL_MESSAGE, fields)
                if pulled.ext_fields.get("maxOffset") == "3" or time.monotonic() > deadline:
                    return pulled.code, pulled.ext_fields
                await asyncio.sleep(0.02)
        finally:
            await client.close()

    code, fields = asyncio.run(run())
    assert code == ResponseCode.PULL_OFFSET_MOVED
    assert (fields["nextBeginOffset"], fields["minOffset"], fields["maxOffset"]) == ("3", "0", "3")
