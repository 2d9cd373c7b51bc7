"""RemotingClient plumbing against a tiny in-test TCP server: opaque matching, out-of-order and
pipelined responses, timeouts, closed connections, nameserver failover and server->client requests.
The server only frames bytes; it is not a broker."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import pytest

from shoal.client.client_instance import ClientInstance
from shoal.client.route import NameServerClient
from shoal.client.settings import ClientSettings
from shoal.client.transport import ClientRemoting
from shoal.protocol import (
    FrameDecoder,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    TopicRouteData,
    encode_frame,
    make_request,
    make_response,
)
from shoal.remoting import RemotingClient, RemotingConnectError, RemotingError, RemotingTimeoutError, split_address
from shoal.remoting import limits as remoting_limits
from tests.conftest import async_wait_until

Handler = Callable[["FakeServer", RemotingCommand], Awaitable[None]]


class FakeServer:
    """Accepts connections, decodes frames, hands each to `handler`; `send` writes to the last peer."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.received: list[RemotingCommand] = []
        self.writer: asyncio.StreamWriter | None = None
        self.server: asyncio.Server | None = None
        self.address = ""

    async def __aenter__(self) -> FakeServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.address = f"127.0.0.1:{port}"
        return self

    async def __aexit__(self, *_exc: object) -> None:
        assert self.server is not None
        if self.writer is not None:
            self.writer.close()
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        decoder = FrameDecoder()
        while data := await reader.read(65536):
            for command in decoder.feed(data):
                self.received.append(command)
                await self.handler(self, command)

    def send(self, command: RemotingCommand) -> None:
        assert self.writer is not None
        self.writer.writelines(encode_frame(command))


async def echo(server: FakeServer, request: RemotingCommand) -> None:
    """Answer at once, echoing extField `n` as the remark."""
    if not request.is_response:
        server.send(make_response(request, ResponseCode.SUCCESS, request.ext_fields.get("n")))


def test_responses_out_of_order_reach_their_requests() -> None:
    """Goal: matching by opaque, not arrival order. Method: hold two requests, answer in reverse."""
    held: list[RemotingCommand] = []

    async def reverse(server: FakeServer, request: RemotingCommand) -> None:
        held.append(request)
        if len(held) == 2:
            for item in reversed(held):
                server.send(make_response(item, ResponseCode.SUCCESS, item.ext_fields["n"]))

    async def run() -> None:
        async with FakeServer(reverse) as server:
            client = RemotingClient()
            first, second = await asyncio.gather(
                client.invoke(server.address, 99, {"n": "first"}), client.invoke(server.address, 99, {"n": "second"})
            )
            assert (first.remark, second.remark) == ("first", "second")
            await client.close()

    asyncio.run(run())


def test_many_pipelined_requests_share_one_connection() -> None:
    """Goal: concurrent sends pipeline on one connection. Method: 300 concurrent invokes, one peer."""
    peers: set[int] = set()

    async def count_peer(server: FakeServer, request: RemotingCommand) -> None:
        assert server.writer is not None
        peers.add(id(server.writer))
        await echo(server, request)

    async def run() -> None:
        async with FakeServer(count_peer) as server:
            client = RemotingClient()
            results = await asyncio.gather(*(client.invoke(server.address, 10, {"n": str(i)}) for i in range(300)))
            assert [result.remark for result in results] == [str(i) for i in range(300)]
            assert len(peers) == 1
            assert len({command.opaque for command in server.received}) == 300
            await client.close()

    asyncio.run(run())


def test_timeout_raises_and_a_late_response_is_ignored() -> None:
    """Goal: bounded waits; a late answer is dropped quietly. Method: answer after the timeout."""
    held: list[RemotingCommand] = []

    async def hold_first(server: FakeServer, request: RemotingCommand) -> None:
        if not held:
            held.append(request)
            return
        server.send(make_response(held[0], ResponseCode.SUCCESS, "late"))
        await echo(server, request)

    async def run() -> None:
        async with FakeServer(hold_first) as server:
            client = RemotingClient()
            with pytest.raises(RemotingTimeoutError, match="within"):
                await client.invoke(server.address, 11, timeout_s=0.05)
            response = await client.invoke(server.address, 11, {"n": "second"}, timeout_s=5.0)
            assert response.remark == "second"
            connection = await client.connection(server.address)
            assert connection.pending == {}
            await client.close()

    asyncio.run(run())


def test_each_request_expires_at_its_own_deadline() -> None:
    """Goal: one deadline sweep per connection keeps every request's own timeout. Method: a long
    request pending, then two short ones (one earlier than the sweep due), answer the long one last."""
    held: list[RemotingCommand] = []

    async def hold(server: FakeServer, request: RemotingCommand) -> None:
        held.append(request)
        if request.ext_fields.get("n") == "answer-long":
            server.send(make_response(held[0], ResponseCode.SUCCESS, "long"))

    async def run() -> None:
        async with FakeServer(hold) as server:
            client = RemotingClient()
            loop = asyncio.get_running_loop()
            long_request = asyncio.ensure_future(client.invoke(server.address, 11, timeout_s=5.0))
            await async_wait_until(lambda: len(held) == 1, 5.0)
            for timeout_s in (0.3, 0.05):
                started_s = loop.time()
                with pytest.raises(RemotingTimeoutError, match="within"):
                    await client.invoke(server.address, 11, timeout_s=timeout_s)
                assert timeout_s <= loop.time() - started_s < timeout_s + 1.0
            assert not long_request.done()
            await client.invoke_oneway(server.address, 11, {"n": "answer-long"})
            assert (await long_request).remark == "long"
            connection = await client.connection(server.address)
            assert connection.pending == {}
            await client.close()

    asyncio.run(run())


class CountingTransport:
    """Wraps a transport and counts `writelines` calls (the writes the connection asks for)."""

    def __init__(self, inner: asyncio.Transport) -> None:
        self.inner = inner
        self.writes = 0

    def writelines(self, parts: list[bytes]) -> None:
        self.writes += 1
        self.inner.writelines(parts)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


@pytest.mark.parametrize(("coalesce_s", "writes"), [(60.0, 2), (0.0, 200)])
def test_frames_of_one_loop_turn_share_writes_within_the_coalescing_bound(
    monkeypatch: pytest.MonkeyPatch, coalesce_s: float, writes: int
) -> None:
    """Goal: pipelined requests share writes (the first frame of a turn at once, the rest with
    the next write past the bound or at the turn's end), order kept. Method: 200 invokes started
    together through a transport that counts writes, with a bound nothing reaches, then with none."""
    monkeypatch.setattr(remoting_limits, "WRITE_COALESCE_MAX_S", coalesce_s)

    async def run() -> None:
        async with FakeServer(echo) as server:
            client = RemotingClient()
            await client.invoke(server.address, 10, {"n": "warm"})
            connection = await client.connection(server.address)
            assert connection.transport is not None
            counting = CountingTransport(connection.transport)
            connection.transport = counting  # type: ignore[assignment]
            results = await asyncio.gather(*(client.invoke(server.address, 10, {"n": str(i)}) for i in range(200)))
            assert [result.remark for result in results] == [str(i) for i in range(200)]
            assert [command.ext_fields["n"] for command in server.received[1:]] == [str(i) for i in range(200)]
            assert counting.writes == writes
            connection.transport = counting.inner
            await client.close()

    asyncio.run(run())


def test_closed_connection_fails_pending_requests_and_reconnects() -> None:
    """Goal: a dropped connection fails waiters at once; the next call reconnects. Method: close on read."""
    closes = [True]

    async def close_first(server: FakeServer, request: RemotingCommand) -> None:
        assert server.writer is not None
        if closes.pop() if closes else False:
            server.writer.close()
            return
        await echo(server, request)

    async def run() -> None:
        async with FakeServer(close_first) as server:
            client = RemotingClient()
            with pytest.raises(RemotingError, match="closed"):
                await client.invoke(server.address, 12, timeout_s=5.0)
            response = await client.invoke(server.address, 12, {"n": "again"}, timeout_s=5.0)
            assert response.remark == "again"
            await client.close()

    asyncio.run(run())


def closed_port_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"127.0.0.1:{port}"


def test_connect_failure_is_a_connect_error() -> None:
    """Goal: refused connections raise RemotingConnectError. Method: connect to a closed port."""

    async def run() -> None:
        client = RemotingClient()
        with pytest.raises(RemotingConnectError):
            await client.invoke(closed_port_address(), 10)
        await client.close()

    asyncio.run(run())


def test_nameserver_failover_uses_the_next_address() -> None:
    """Goal: a dead nameserver is skipped. Method: [dead, live], start at the dead one."""
    route = TopicRouteData()

    async def answer_route(server: FakeServer, request: RemotingCommand) -> None:
        assert request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC
        assert request.ext_fields == {"topic": "T"}
        server.send(make_response(request, ResponseCode.SUCCESS, body=route.to_json()))

    async def run() -> None:
        async with FakeServer(answer_route) as server:
            remoting = ClientRemoting()
            namesrv = NameServerClient([closed_port_address(), server.address], remoting, 1.0)
            namesrv._current = 0
            assert await namesrv.get_route("T") == route
            assert namesrv.addresses[namesrv._current] == server.address
            await remoting.close()

    asyncio.run(run())


def test_nameserver_topic_not_exist_is_no_route() -> None:
    """Goal: code 17 means "no route", not an error. Method: answer 17."""

    async def not_found(server: FakeServer, request: RemotingCommand) -> None:
        server.send(make_response(request, ResponseCode.TOPIC_NOT_EXIST, "No topic route info"))

    async def run() -> None:
        async with FakeServer(not_found) as server:
            remoting = ClientRemoting()
            assert await NameServerClient([server.address], remoting, 1.0).get_route("T") is None
            await remoting.close()

    asyncio.run(run())


def test_server_requests_reach_the_client_instance() -> None:
    """Goal: broker->client requests: NOTIFY triggers the callback (no answer); unknown codes get 3.

    Method: the server pushes a oneway NOTIFY_CONSUMER_IDS_CHANGED and a request code 307 over the
    connection the client opened, and reads the client's answer.
    """
    notified: list[str] = []
    answers: list[RemotingCommand] = []

    async def push_requests(server: FakeServer, request: RemotingCommand) -> None:
        if request.is_response:
            answers.append(request)
            return
        server.send(make_response(request, ResponseCode.SUCCESS))
        server.send(make_request(40, opaque=500, ext_fields={"consumerGroup": "cg"}, oneway=True))
        server.send(make_request(307, opaque=501, ext_fields={"consumerGroup": "cg"}))

    async def run() -> None:
        async with FakeServer(push_requests) as server:
            instance = ClientInstance(server.address, ClientSettings())
            instance.on_consumer_ids_changed = notified.append
            await instance.remoting.invoke(server.address, 34)
            await async_wait_until(lambda: bool(notified and answers), 5.0, what="NOTIFY and the answer to 307")
            assert notified == ["cg"]
            assert len(answers) == 1
            assert answers[0].opaque == 501
            assert answers[0].code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            await instance.shutdown()

    asyncio.run(run())


@pytest.mark.parametrize(
    ("address", "expected"),
    [("127.0.0.1:10911", ("127.0.0.1", 10911)), ("[::1]:9876", ("::1", 9876)), ("::1:9876", ("::1", 9876))],
)
def test_addresses_split_with_or_without_ipv6_brackets(address: str, expected: tuple[str, int]) -> None:
    """Goal: "host:port", "[v6]:port" and Java's bracketless v6 form. Method: split each."""
    assert split_address(address) == expected


def test_address_without_port_is_refused() -> None:
    """Goal: a clear error for a bad address. Method: split "localhost"."""
    with pytest.raises(ValueError, match="host:port"):
        split_address("localhost")


def test_client_remoting_raises_the_clients_errors() -> None:
    """Goal: shoal.client sees only its own tree. Method: ClientRemoting against a closed port and a
    silent server; the errors are shoal.client's (MQClientError), with the remoting message kept."""
    from shoal.client import errors

    async def silent(server: FakeServer, request: RemotingCommand) -> None:
        return

    async def run() -> None:
        remoting = ClientRemoting()
        with pytest.raises(errors.RemotingConnectError, match="cannot connect") as refused:
            await remoting.invoke(closed_port_address(), 10)
        assert isinstance(refused.value, errors.MQClientError)
        async with FakeServer(silent) as server:
            with pytest.raises(errors.RemotingTimeoutError, match="within"):
                await remoting.invoke(server.address, 11, timeout_s=0.05)
        await remoting.close()

    asyncio.run(run())


def test_invoke_soon_answers_through_a_future_and_forgets_each_request() -> None:
    """Goal: the coroutine-free request (a pipelined send's) is matched, timed out and failed as
    `invoke`'s are, and leaves nothing pending. Method: None before a connection is open; then an
    answered request, a held one past its deadline (nobody awaiting it meanwhile) and one cut by
    the server closing; the connection's tables are empty after each."""
    held: list[RemotingCommand] = []

    async def answer_unless_held(server: FakeServer, request: RemotingCommand) -> None:
        if request.ext_fields.get("n") == "hold":
            held.append(request)
            return
        await echo(server, request)

    async def run() -> None:
        async with FakeServer(answer_unless_held) as server:
            client = RemotingClient()
            assert client.invoke_soon(server.address, 11) is None
            connection = await client.connection(server.address)
            answered = client.invoke_soon(server.address, 11, {"n": "first"}, timeout_s=5.0)
            assert answered is not None
            assert (await answered).remark == "first"
            assert connection.pending == {} and connection._deadlines == {}
            expiring = client.invoke_soon(server.address, 11, {"n": "hold"}, timeout_s=0.05)
            assert expiring is not None
            await async_wait_until(expiring.done, 5.0)
            assert connection.pending == {} and connection._deadlines == {}
            with pytest.raises(RemotingTimeoutError, match="within"):
                expiring.result()
            cut = client.invoke_soon(server.address, 11, {"n": "hold"}, timeout_s=5.0)
            assert cut is not None
            await async_wait_until(lambda: len(held) == 2, 5.0)
            assert server.writer is not None
            server.writer.close()
            with pytest.raises(RemotingError, match="closed"):
                await cut
            assert connection.pending == {} and connection._deadlines == {}
            await client.close()

    asyncio.run(run())
