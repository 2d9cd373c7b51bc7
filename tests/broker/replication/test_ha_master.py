"""The HA master's view of its slaves (`HAServer`), over real sockets on 127.0.0.1; RocketMQ's timing
(haSendHeartbeatInterval 5 s, haHousekeepingInterval 20 s)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from shoal.broker.replication.codec import TRANSFER_HEADER, MasterState, encode_ack
from shoal.broker.replication.ha_master import HAServer, MasterHooks
from shoal.broker.replication.limits import ANSWER_TIMEOUT_S
from shoal.broker.replication.settings import HASettings
from shoal.store import MessageStore, MessageToStore

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
        hooks = MasterHooks(
            lambda: True, lambda: MasterState(0, 0, 0, ()), lambda _offset: None, lambda *_: None, lambda: None
        )
        server = HAServer(store, _settings(), hooks)
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


def test_a_slave_that_does_not_ack_sent_data_is_dropped_within_the_answer_timeout(
    store: MessageStore, async_wait_until: Callable[..., Awaitable[None]]
) -> None:
    """Goal: a slave gone silent while data is on its way is dropped ANSWER_TIMEOUT_S later, not after
    haHousekeepingInterval (20 s), and the waiting sends hear of it (issue 25). Method: a raw socket
    reports offset 0, then reads nothing and acks nothing, as behind a blackhole."""
    store.put_message(MessageToStore("HaSilent", 0, b"x" * 100, b""))
    lost: list[int] = []

    async def scenario() -> None:
        hooks = MasterHooks(
            lambda: True,
            lambda: MasterState(0, 0, 0, ()),
            lambda _offset: None,
            lambda *_: None,
            lambda: lost.append(len(server.links)),
        )
        server = HAServer(store, _settings(), hooks)
        port = await server.start("127.0.0.1", 0)
        try:
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(encode_ack(0))
            await writer.drain()
            await async_wait_until(lambda: server.connected_count == 1, what="the report")
            reported_s = time.monotonic()
            await async_wait_until(lambda: not server.links, ANSWER_TIMEOUT_S + 5.0, what="the slave dropped")
            dropped_after_s = time.monotonic() - reported_s
            assert ANSWER_TIMEOUT_S - 0.5 < dropped_after_s < ANSWER_TIMEOUT_S + 2.0, dropped_after_s
            assert lost == [0] and server.dead_links_total == 1
            writer.close()
        finally:
            await server.stop()

    asyncio.run(scenario())


class _FakeSource:
    """A `ReplicaSource` that is not a store: one segment holding `data` from offset `start`."""

    def __init__(self, start: int, data: bytes, segment_size: int) -> None:
        self.start, self.data, self.segment_size = start, data, segment_size

    @property
    def min_offset(self) -> int:
        return self.start

    @property
    def max_offset(self) -> int:
        return self.start + len(self.data)

    def data_from(self, physical_offset: int) -> tuple[memoryview, int] | None:
        if not self.start <= physical_offset < self.max_offset:
            return None
        return memoryview(self.data)[physical_offset - self.start :], self.start


def test_the_master_serves_whatever_replica_source_it_is_given(
    async_wait_until: Callable[..., Awaitable[None]],
) -> None:
    """Goal: replication reads the store through one seam (`store_seam.ReplicaSource`), so it runs
    without a store. Method: an HAServer over a fake source; a raw slave that reports offset 0 (an
    empty slave: the master starts at its last segment) gets the source's bytes as transfer frames."""
    segment = 4096
    data = bytes(range(256)) * 3

    async def scenario() -> None:
        hooks = MasterHooks(
            lambda: True, lambda: MasterState(0, 0, 0, ()), lambda _offset: None, lambda *_: None, lambda: None
        )
        server = HAServer(_FakeSource(2 * segment, data, segment), _settings(), hooks)
        port = await server.start("127.0.0.1", 0)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(encode_ack(0))
            await writer.drain()
            received = b""
            first_offset = -1
            while len(received) < len(data):
                header = await asyncio.wait_for(reader.readexactly(TRANSFER_HEADER.size), 10)
                offset, size = TRANSFER_HEADER.unpack(header)
                body = await asyncio.wait_for(reader.readexactly(size), 10)
                if size:
                    first_offset = offset if first_offset < 0 else first_offset
                    assert offset == 2 * segment + len(received)
                    received += body
            assert first_offset == 2 * segment and received == data
            writer.close()
        finally:
            await server.stop()

    asyncio.run(scenario())
