"""The remoting server against a real Broker process (idle connections, frames that never complete, the
connection cap, with short timeouts from broker.conf), and its batched gate (`gate_all`) in process."""

from __future__ import annotations

import asyncio
import struct
import time
from types import SimpleNamespace
from typing import cast

import pytest

from shoal.client.message import decode_messages
from shoal.protocol import (
    FrameDecoder,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    encode_frame_bytes,
    make_request,
    make_response,
)
from shoal.remoting import RemotingClient
from shoal.remoting.server import RemotingServer, ServerConnection, Verdict
from tests.broker.request_fields import pull_fields, send_fields

pytestmark = pytest.mark.slow

IDLE_S = 3
PARTIAL_FRAME_S = 1
MAX_CONNECTIONS = 60
SHORT_TIMEOUTS = {
    "serverChannelMaxIdleTimeSeconds": str(IDLE_S),
    "serverChannelPartialFrameTimeoutSeconds": str(PARTIAL_FRAME_S),
    "maxConnections": str(MAX_CONNECTIONS),
}
SCAN_SLACK_S = 2.0  # one scan interval plus a loaded machine


Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def seconds_until_closed(reader: asyncio.StreamReader, timeout_s: float, since_s: float | None = None) -> float:
    """Read until the server closes the connection; seconds from `since_s` (default: now) until
    then. Fails when the connection is still open `timeout_s` after `since_s`."""
    started = time.monotonic() if since_s is None else since_s
    while await asyncio.wait_for(reader.read(65536), max(0.1, started + timeout_s - time.monotonic())):
        pass
    return time.monotonic() - started


async def open_streams(port: int, count: int) -> list[Streams]:
    return [await asyncio.open_connection("127.0.0.1", port) for _ in range(count)]


async def slowloris(writer: asyncio.StreamWriter, stop: asyncio.Event) -> None:
    """A frame announcing 1,000 bytes, then one byte every 0.2 s: always active, never complete."""
    writer.write(struct.pack(">i", 1_000))
    while not stop.is_set():
        try:
            writer.write(b"x")
            await writer.drain()
        except ConnectionError:
            return
        await asyncio.sleep(0.2)


async def check_idle_and_partial_connections_close(port: int) -> None:
    """Idle connections close after IDLE_S, trickling partial frames after PARTIAL_FRAME_S, while
    a connection that sends a request every half second stays open throughout."""
    opened_s = time.monotonic()
    idle = await open_streams(port, 20)
    trickling = await open_streams(port, 20)
    stop = asyncio.Event()
    tricklers = [asyncio.create_task(slowloris(writer, stop)) for _reader, writer in trickling]
    busy_reader, busy_writer = await asyncio.open_connection("127.0.0.1", port)

    async def keep_busy() -> int:
        answered = 0
        deadline = time.monotonic() + IDLE_S + SCAN_SLACK_S + 1
        while time.monotonic() < deadline:
            request = make_request(RequestCode.GET_MAX_OFFSET, opaque=answered + 1, ext_fields={"topic": "T"})
            busy_writer.write(encode_frame_bytes(request))
            assert await asyncio.wait_for(busy_reader.read(65536), 5.0), "the busy connection was closed"
            answered += 1
            await asyncio.sleep(0.5)
        return answered

    busy = asyncio.create_task(keep_busy())
    limit_s = PARTIAL_FRAME_S + SCAN_SLACK_S
    partial_s = await asyncio.gather(*(seconds_until_closed(r, limit_s, opened_s) for r, _w in trickling))
    idle_s = await asyncio.gather(*(seconds_until_closed(r, IDLE_S + SCAN_SLACK_S, opened_s) for r, _w in idle))
    assert await busy > IDLE_S
    stop.set()
    await asyncio.gather(*tricklers)
    assert min(partial_s) >= PARTIAL_FRAME_S * 0.9, partial_s
    assert min(idle_s) >= IDLE_S * 0.9, idle_s
    for _reader, writer in [*idle, *trickling, (busy_reader, busy_writer)]:
        writer.close()


def test_idle_and_partial_frame_connections_are_closed(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """Goal: idle connections and frames that never complete do not hold the broker's sockets.
    Method: a broker with serverChannelMaxIdleTimeSeconds=3 and a 1 s partial-frame limit; 20 idle
    and 20 trickling connections must be closed in time, a busy one must stay open."""
    running = cluster_factory(SHORT_TIMEOUTS)
    asyncio.run(check_idle_and_partial_connections_close(running.broker_port))
    log = running.log("broker")
    assert "connections idle over 3 s" in log and "incomplete over 1 s" in log


async def check_connection_cap(port: int, address: str) -> None:
    """MAX_CONNECTIONS are served; the ones beyond are closed at once; once some close, new
    connections are accepted again."""
    client = RemotingClient()  # holds one connection itself
    assert (await client.invoke(address, RequestCode.GET_MAX_OFFSET, {"topic": "T"})).code != ResponseCode.SYSTEM_BUSY
    held = await open_streams(port, MAX_CONNECTIONS - 1)
    refused = await open_streams(port, 20)
    closed_s = await asyncio.gather(*(seconds_until_closed(reader, 5.0) for reader, _writer in refused))
    assert max(closed_s) < 2.0, closed_s
    for _reader, refused_writer in refused:
        refused_writer.close()
    for _reader, writer in held[:10]:
        writer.close()
        await writer.wait_closed()
    await asyncio.sleep(0.5)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode_frame_bytes(make_request(RequestCode.GET_MAX_OFFSET, opaque=1, ext_fields={"topic": "T"})))
    assert await asyncio.wait_for(reader.read(65536), 5.0), "a connection below the cap must be served"
    writer.close()
    for _reader, held_writer in held[10:]:
        held_writer.close()
    await client.close()


def test_connections_beyond_max_connections_are_closed_with_one_log_line(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """Goal: the connection cap holds and says so once. Method: maxConnections=60; open 60, then
    20 more (closed at once); close 10 and connect again; the log has one line for the cap being
    hit and one for it lifting."""
    running = cluster_factory(SHORT_TIMEOUTS)
    asyncio.run(check_connection_cap(running.broker_port, running.broker_addr))
    log = running.log("broker")
    assert log.count("maxConnections=60 reached") == 1, log[-3000:]
    assert log.count("below maxConnections=60 again, accepting connections (20 refused meanwhile)") == 1


# --- answers to several requests in one read ---

PIPELINED_TOPIC = "PipelinedTopic"
SMALL_BODIES = [f"small-{index}".encode() * 3 for index in range(40)]
LARGE_BODIES = [bytes([index]) * 6_000 for index in range(4)]  # one pull of these is over GATHER_WRITE_MIN_BYTES


async def check_pipelined_answers(address: str, port: int) -> None:
    client = RemotingClient()
    for queue_id, bodies in ((0, SMALL_BODIES), (1, LARGE_BODIES)):
        for body in bodies:
            sent = await client.invoke(
                address,
                RequestCode.SEND_MESSAGE_V2,
                send_fields(PIPELINED_TOPIC, queue_id, producer_group="PID_pipelined"),
                body,
            )
            assert sent.code == ResponseCode.SUCCESS, sent.remark
    await client.close()
    # 40 one-message pulls (small answers whose bodies are views of the CommitLog, released as soon as
    # each is answered), a large pull in the middle and max-offset queries, written at once.
    fields = [(RequestCode.PULL_MESSAGE, pull_fields(PIPELINED_TOPIC, 0, index, 1)) for index in range(40)]
    fields.insert(20, (RequestCode.PULL_MESSAGE, pull_fields(PIPELINED_TOPIC, 1, 0, 32)))
    fields += [(RequestCode.GET_MAX_OFFSET, {"topic": PIPELINED_TOPIC, "queueId": "0"})] * 3
    requests = [make_request(code, opaque=opaque, ext_fields=ext) for opaque, (code, ext) in enumerate(fields)]
    frames = b"".join(map(encode_frame_bytes, requests))
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frames)
    decoder = FrameDecoder()
    answers: dict[int, RemotingCommand] = {}
    while len(answers) < len(requests):
        data = await asyncio.wait_for(reader.read(1 << 20), 10.0)
        assert data, f"closed after {len(answers)} of {len(requests)} answers"
        answers.update((answer.opaque, answer) for answer in decoder.feed(data))
    writer.close()
    for opaque, request in enumerate(requests):
        answer = answers[opaque]
        assert answer.code == ResponseCode.SUCCESS, (opaque, answer.code, answer.remark)
        if request.code == RequestCode.GET_MAX_OFFSET:
            assert answer.ext_fields["offset"] == "40"
            continue
        queue_id = int(request.ext_fields["queueId"])
        offset = int(request.ext_fields["queueOffset"])
        expected = SMALL_BODIES[offset : offset + 1] if queue_id == 0 else LARGE_BODIES
        assert answer.body is not None
        assert [message.body for message in decode_messages(answer.body)] == expected, opaque


def test_answers_to_requests_read_together_arrive_whole_and_in_full(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: the small answers to requests that arrived in one read, written together after the
    last, are complete and intact, even a pull's, whose CommitLog views the broker releases right
    after answering; a large answer among them (written by sendmsg) is intact too. Method: 44
    requests in one write on a raw socket; every answer is matched by opaque and its messages
    compared with what was sent."""
    asyncio.run(check_pipelined_answers(cluster.broker_addr, cluster.broker_port))


BROKEN_CODE = RequestCode.GET_MAX_OFFSET
REFUSED_CODE = RequestCode.PULL_MESSAGE


def _gate(peer_host: str, command: RemotingCommand) -> RemotingCommand | None:
    if command.code == BROKEN_CODE:
        raise ValueError("a gate that fails on this request")
    if command.code == REFUSED_CODE:
        return make_response(command, ResponseCode.NO_PERMISSION, f"refused for {peer_host}")
    return None


def test_each_request_gets_its_own_verdict_and_a_failing_gate_falls_back_to_process() -> None:
    """Goal: passed, refused, unknown code and response each get the verdict `process` would act
    on, and a gate that raises on one request leaves the others' verdicts and lets `process` answer
    it (with the error, as before the batched check). Method: a server with processors and the gate
    above, called directly."""
    server = RemotingServer("test")
    answered = make_request(RequestCode.HEART_BEAT, opaque=99)
    for code in (RequestCode.HEART_BEAT, BROKEN_CODE, REFUSED_CODE):
        server.register(code, lambda connection, request: answered)
    server.gate = _gate
    commands = [
        make_request(RequestCode.HEART_BEAT, opaque=1),
        make_request(REFUSED_CODE, opaque=2),
        make_request(BROKEN_CODE, opaque=3),
        make_request(9999, opaque=4),
        make_response(make_request(RequestCode.HEART_BEAT, opaque=5), ResponseCode.SUCCESS),
        make_request(RequestCode.HEART_BEAT, opaque=6),
    ]
    verdicts = server.gate_all("10.0.0.1", commands)
    assert verdicts[0] is Verdict.PASSED and verdicts[5] is Verdict.PASSED
    refused = verdicts[1]
    assert isinstance(refused, RemotingCommand) and refused.code == ResponseCode.NO_PERMISSION
    assert refused.opaque == 2 and refused.remark == "refused for 10.0.0.1"
    assert verdicts[2] is None and verdicts[3] is None and verdicts[4] is None
    assert server.requests_total == 1, "the refusal counts as a request answered"

    connection = cast(ServerConnection, SimpleNamespace(peer_host="10.0.0.1"))  # all the gate reads
    unknown = server.process(connection, commands[3])
    assert isinstance(unknown, RemotingCommand) and unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    try:
        server.process(connection, commands[2])
    except ValueError as error:  # handle_request answers it with SYSTEM_ERROR, as before
        assert "fails on this request" in str(error)
    else:
        raise AssertionError("process did not run the gate again")
    assert server.process(connection, commands[0], gated=True) is answered


RUN_CODE = RequestCode.SEND_MESSAGE_V2
FAILING_OPAQUE = 5


def test_a_run_of_requests_read_together_goes_to_the_run_processor_and_each_is_answered() -> None:
    """Goal: consecutive requests of a code with a run processor, read together, reach it as one
    run (in order); one that raises is answered SYSTEM_ERROR while the rest of its run is answered;
    other codes, gate refusals and a lone request take the usual path. Method: a real server on a
    loopback port, with a gate, a run processor that records its runs, and one write of frames."""
    runs: list[list[int]] = []

    def single(connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        return make_response(request, ResponseCode.SUCCESS, "single")

    def run(connection: ServerConnection, requests: list[RemotingCommand]) -> list[RemotingCommand | Exception]:
        runs.append([request.opaque for request in requests])
        return [
            ValueError("broken request")
            if request.opaque == FAILING_OPAQUE
            else make_response(request, ResponseCode.SUCCESS, "run")
            for request in requests
        ]

    def gate(peer_host: str, command: RemotingCommand) -> RemotingCommand | None:
        if command.ext_fields.get("refuse"):
            return make_response(command, ResponseCode.NO_PERMISSION, "refused")
        return None

    async def scenario() -> dict[int, RemotingCommand]:
        server = RemotingServer("test")
        server.register_run(RUN_CODE, single, run)
        server.register(RequestCode.HEART_BEAT, single)
        server.gate = gate
        port = await server.start("127.0.0.1", 0)
        plan = [
            (RUN_CODE, {}),  # 1-3: a run
            (RUN_CODE, {}),
            (RUN_CODE, {}),
            (RequestCode.HEART_BEAT, {}),  # 4: another code
            (RUN_CODE, {}),  # 5-6: a run whose first request fails
            (RUN_CODE, {}),
            (RUN_CODE, {"refuse": "1"}),  # 7: refused by the gate, ends the run
            (RUN_CODE, {}),  # 8: alone, the usual path
            (RequestCode.HEART_BEAT, {}),  # 9
        ]
        frames = b"".join(
            encode_frame_bytes(make_request(code, opaque=opaque, ext_fields=ext))
            for opaque, (code, ext) in enumerate(plan, start=1)
        )
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(frames)
        decoder = FrameDecoder()
        answers: dict[int, RemotingCommand] = {}
        while len(answers) < len(plan):
            data = await asyncio.wait_for(reader.read(65536), 10)
            assert data
            answers.update((command.opaque, command) for command in decoder.feed(data))
        writer.close()
        await server.stop()
        return answers

    answers = asyncio.run(scenario())
    assert runs == [[1, 2, 3], [5, 6]]
    assert {opaque: (answer.code, answer.remark) for opaque, answer in answers.items()} == {
        1: (ResponseCode.SUCCESS, "run"),
        2: (ResponseCode.SUCCESS, "run"),
        3: (ResponseCode.SUCCESS, "run"),
        4: (ResponseCode.SUCCESS, "single"),
        5: (ResponseCode.SYSTEM_ERROR, "internal error: ValueError: broken request"),
        6: (ResponseCode.SUCCESS, "run"),
        7: (ResponseCode.NO_PERMISSION, "refused"),
        8: (ResponseCode.SUCCESS, "single"),
        9: (ResponseCode.SUCCESS, "single"),
    }
