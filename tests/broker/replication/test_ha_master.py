"""The HA master's view of its slaves (`HAServer`), over real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from shoal.broker.replication.codec import MasterState, encode_ack
from shoal.broker.replication.ha_master import HAServer, MasterHooks
from shoal.broker.replication.settings import HASettings
from shoal.store import MessageStore

FALLBEHIND_BYTES = 1_000


def _settings() -> HASettings:
    return HASettings(
        listen_port=0,
        master_address="",
        heartbeat_interval_s=5.0,
        housekeeping_interval_s=20.0,
        reconnect_interval_s=5.0,
        transfer_batch_bytes=32 * 1024,
        slave_fallbehind_max_bytes=FALLBEHIND_BYTES,
        slave_timeout_s=3.0,
        metadata_sync_interval_s=10.0,
        extension_enable=False,
    )


def test_a_connected_slave_counts_before_its_first_report_as_rocketmq_does(
    store: MessageStore, async_wait_until: Callable[..., Awaitable[None]]
) -> None:
    """Goal: a slave that connected but has not reported yet is OK when the term's best ack is within
    haSlaveFallbehindMax (RocketMQ's isSlaveOK: connectionCount > 0 and push2SlaveMaxOffset; its HAClient
    first reports 5 s after connecting); once it reports, its own ack decides. Method: a raw socket."""

    async def scenario() -> None:
        hooks = MasterHooks(lambda: True, lambda: MasterState(0, 0, 0, ()), lambda _offset: None, lambda *_: None)
        server = HAServer(store.commitlog, _settings(), hooks)
        port = await server.start("127.0.0.1", 0)
        try:
            assert not server.slave_ok(10, 0)  # nobody connected: SLAVE_NOT_AVAILABLE
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            await async_wait_until(lambda: bool(server.links), what="the connection")
            assert server.connected_count == 0  # connected, silent
            assert server.slave_ok(5_000, 4_500)  # best ack of the term is 500 behind: wait for it
            assert not server.slave_ok(5_000, 0)  # 5000 behind: not OK, as on RocketMQ
            writer.write(encode_ack(0))  # an empty store reports 0 (our CommitLog is empty: 0 is its end)
            await writer.drain()
            await async_wait_until(lambda: server.connected_count == 1, what="the report")
            assert server.slave_ok(FALLBEHIND_BYTES - 1, FALLBEHIND_BYTES)  # its own ack (0) decides now
            assert not server.slave_ok(FALLBEHIND_BYTES, FALLBEHIND_BYTES)
            writer.close()
            await async_wait_until(lambda: not server.links, what="the disconnection")
            assert not server.slave_ok(10, 10)
        finally:
            await server.stop()

    asyncio.run(scenario())
