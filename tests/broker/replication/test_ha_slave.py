"""The HA slave (`HAClient`) against a scripted master on 127.0.0.1, with RocketMQ's timing
(haSendHeartbeatInterval 5 s, haHousekeepingInterval 20 s) and no Shoal extension."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from shoal.broker.replication.codec import MasterState, encode_transfer_header
from shoal.broker.replication.ha_slave import HAClient, SlaveHooks
from shoal.broker.replication.limits import ANSWER_TIMEOUT_S
from shoal.broker.replication.settings import HASettings
from shoal.store import MessageStore

HEARTBEAT_GAP_S = 0.5  # the scripted master's heartbeat period (a Shoal master: at most 1 s)
HEARTBEATS_COUNT = 3
RECONNECT_S = 60.0  # no second connection during the test


def _settings() -> HASettings:
    return HASettings(
        listen_port=0,
        master_address="",
        heartbeat_interval_s=5.0,
        housekeeping_interval_s=20.0,
        reconnect_interval_s=RECONNECT_S,
        transfer_batch_bytes=32 * 1024,
        slave_fallbehind_max_bytes=1_000,
        slave_timeout_s=3.0,
        metadata_sync_interval_s=10.0,
        extension_enable=False,
    )


async def _no_reconcile(_state: MasterState) -> None:
    raise AssertionError("no Shoal extension here")


def test_a_master_gone_silent_is_dropped_a_few_seconds_after_its_heartbeat_cadence(
    store: MessageStore, async_wait_until: Callable[..., Awaitable[None]]
) -> None:
    """Goal: a slave learns how often its master speaks and drops a master silent ANSWER_TIMEOUT_S past
    that, not after haHousekeepingInterval (20 s); its status says so (issue 25). Method: a scripted
    master reads the first report, heartbeats every 0.5 s three times, then keeps the socket open and
    sends nothing, as behind a blackhole."""

    async def scenario() -> None:
        last_heartbeat_s: list[float] = []
        closed = asyncio.Event()

        async def master(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readexactly(8)  # the slave's first report: an empty CommitLog, offset 0
            for _ in range(HEARTBEATS_COUNT):
                await asyncio.sleep(HEARTBEAT_GAP_S)
                writer.write(encode_transfer_header(0, 0))
                last_heartbeat_s.append(time.monotonic())
            while await reader.read(4096):  # its keepalive reports, unanswered, until it hangs up
                pass
            closed.set()
            writer.close()

        server = await asyncio.start_server(master, "127.0.0.1", 0)
        address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        hooks = SlaveHooks(lambda: address, lambda: 0, _no_reconcile, lambda: None, lambda: None)
        client = HAClient(store, _settings(), hooks)
        client.start()
        try:
            await async_wait_until(lambda: client.connected, what="the slave following")
            await async_wait_until(lambda: len(last_heartbeat_s) == HEARTBEATS_COUNT, what="the heartbeats")
            await async_wait_until(lambda: not client.connected, ANSWER_TIMEOUT_S + 10.0, what="the master dropped")
            dropped_after_s = time.monotonic() - last_heartbeat_s[-1]
            assert dropped_after_s < HEARTBEAT_GAP_S + ANSWER_TIMEOUT_S + 1.0, dropped_after_s
            assert client.dead_links_total == 1 and "the master is gone" in client.last_error, client.last_error
            await asyncio.wait_for(closed.wait(), 5.0)
        finally:
            await client.stop()
            server.close()
            await server.wait_closed()

    asyncio.run(scenario())
