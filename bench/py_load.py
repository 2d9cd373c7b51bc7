"""bench/java/Load.java's twin on shoal.client: the load generator of `bench/vs_rocketmq.py --client python`.

    python bench/py_load.py role=load namesrv=H:P broker=H:P topic=T modes=sync,async,batch count=N ...

Same arguments, roles and JSON lines as Load.java (read its comment for the phases), so the harness treats
both alike. Java's producer threads become asyncio tasks on one event loop: `threads` tasks each awaiting one
send at a time (sync, batch), or one task keeping `inflight` sends outstanding (async). The push consumers'
listeners run on the same loop.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from load_lines import bodies, parse, result_fields

from shoal.client import (
    Admin,
    ConsumeStatus,
    Message,
    MessageExt,
    MQClientError,
    Producer,
    PushConsumer,
    SendStatus,
)
from shoal.client.settings import ProducerSettings
from shoal.protocol import ConsumeFromWhere

WAIT_S = 120.0
SEND_TIMEOUT_S = 10.0
PROBE_TIMEOUT_S = 1.0
PROBE_PAUSE_S = 0.02


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields, "t_ms": int(time.time() * 1000)}), flush=True)


class Counter:
    """A push consumer counting receipts from the first offset; `e2e` gets receipt minus store time in ns."""

    def __init__(self, namesrv: str, group: str, topic: str, expected: int, e2e: list[int] | None) -> None:
        self.expected = expected
        self.received = 0
        self.first_ms = 0
        self.last_ms = 0
        self.done = asyncio.Event()
        self.e2e = e2e
        self.consumer = PushConsumer(
            group,
            namesrv,
            listener=self._on_messages,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            consume_batch_max=32,
            pull_batch=32,
        )
        self.consumer.subscribe(topic, "*")

    async def _on_messages(self, messages: list[MessageExt]) -> ConsumeStatus:
        now = int(time.time() * 1000)
        self.first_ms = self.first_ms or now
        if self.e2e is not None:
            self.e2e.extend((now - message.store_timestamp_ms) * 1_000_000 for message in messages)
        self.last_ms = now
        self.received += len(messages)
        if self.received >= self.expected:
            self.done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    async def await_queues(self, queues: int) -> None:
        deadline = time.monotonic() + WAIT_S
        while len(self.consumer.assigned_queues()) < queues:
            if time.monotonic() > deadline:
                raise RuntimeError(f"consumer got no queues in {WAIT_S} s")
            await asyncio.sleep(0.02)

    async def finished(self) -> bool:
        try:
            await asyncio.wait_for(self.done.wait(), WAIT_S)
        except TimeoutError:
            return False
        return True


async def send(
    producer: Producer,
    topic: str,
    mode: str,
    count: int,
    threads: int,
    inflight: int,
    batch_size: int,
    pool: list[bytes],
    latency: list[int] | None,
) -> int:
    """Sends `count` messages of `mode`; returns failures. Per-message latencies (ns) into `latency` if given."""
    failures = 0
    next_index = 0
    step = batch_size if mode == "batch" else 1

    def take() -> tuple[int, int] | None:
        nonlocal next_index
        first = next_index
        if first >= count:
            return None
        next_index += step
        return first, min(step, count - first)

    async def timed(call: Callable[[], Awaitable[Any]], n: int) -> None:
        nonlocal failures
        started = time.perf_counter_ns()
        try:
            result = await call()
        except MQClientError:
            failures += n
            return
        took = time.perf_counter_ns() - started
        if result.status != SendStatus.SEND_OK:
            failures += n
        if latency is not None:
            latency.extend([took] * n)

    def call_for(first: int, n: int) -> Callable[[], Awaitable[Any]]:
        if mode == "batch":
            batch = [Message(topic, pool[(first + i) % len(pool)], tags="bench") for i in range(n)]
            return lambda: producer.send_batch(batch, timeout_s=SEND_TIMEOUT_S)
        message = Message(topic, pool[first % len(pool)], tags="bench")
        return lambda: producer.send(message, timeout_s=SEND_TIMEOUT_S)

    async def worker() -> None:
        while (taken := take()) is not None:
            await timed(call_for(*taken), taken[1])

    if mode == "async":
        window = asyncio.Semaphore(max(1, inflight))
        tasks: set[asyncio.Task[None]] = set()

        async def one(first: int, n: int) -> None:
            try:
                await timed(call_for(first, n), n)
            finally:
                window.release()

        while (taken := take()) is not None:
            await window.acquire()
            task = asyncio.create_task(one(*taken))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.wait_for(asyncio.gather(*tasks), WAIT_S)
    else:
        await asyncio.gather(*(worker() for _ in range(threads)))
    return failures


async def create_topic(args: dict[str, str], topic: str, queues: int) -> None:
    admin = Admin(args["namesrv"])
    await admin.start()
    try:
        await admin.create_topic(topic, broker_addr=args["broker"], read_queue_nums=queues, write_queue_nums=queues)
    finally:
        await admin.shutdown()


def producer(args: dict[str, str], group: str, retries: int = 2) -> Producer:
    settings = ProducerSettings(retries_when_send_failed=retries)
    return Producer(group, args["namesrv"], settings=settings)


async def load(args: dict[str, str]) -> None:
    queues = int(args.get("queues", 8))
    count = int(args.get("count", 10_000))
    batch_count = int(args.get("batchCount", count))
    warm = int(args.get("warm", 1_000))
    threads = int(args.get("threads", 8))
    inflight = int(args.get("inflight", 256))
    batch_size = int(args.get("batchSize", 32))
    pool = bodies(int(args.get("bodySize", 1024)))
    sender = producer(args, "bench_producer")
    await sender.start()
    try:
        for mode in args["modes"].split(","):
            topic = f"{args['topic']}_{mode}"
            measured = batch_count if mode == "batch" else count
            await create_topic(args, topic, queues)
            e2e: list[int] = []
            live = Counter(args["namesrv"], f"{topic}_live", topic, measured + warm, e2e)
            await live.consumer.start()
            await live.await_queues(queues)
            warm_failures = await send(sender, topic, mode, warm, threads, inflight, batch_size, pool, None)
            latency: list[int] = []
            emit("phase", mode=mode, phase="produce")
            started = time.perf_counter()
            failures = await send(sender, topic, mode, measured, threads, inflight, batch_size, pool, latency)
            produce_s = time.perf_counter() - started
            emit("phase", mode=mode, phase="produced")
            live_done = await live.finished()
            await live.consumer.shutdown()
            drain = Counter(args["namesrv"], f"{topic}_drain", topic, measured + warm, None)
            await drain.consumer.start()
            drained = await drain.finished()
            await drain.consumer.shutdown()
            fields = result_fields(
                mode=mode,
                sent=measured,
                failures=failures,
                warm_failures=warm_failures,
                produce_s=produce_s,
                latency_ns=latency,
                e2e_ns=e2e,
                live=live,
                live_done=live_done,
                drain=drain,
                drained=drained,
            )
            emit("result", **fields)
    finally:
        await sender.shutdown()
    emit("done")


async def probe(args: dict[str, str]) -> None:
    sender = producer(args, "bench_probe", retries=0)
    await sender.start()
    emit("ready")
    message = Message(args["topic"], bytes(1024), tags="probe")
    deadline = time.monotonic() + WAIT_S
    attempts = 0
    try:
        while time.monotonic() < deadline:
            attempts += 1
            try:
                if (await sender.send(message, timeout_s=PROBE_TIMEOUT_S)).status == SendStatus.SEND_OK:
                    emit("accepted", attempts=attempts)
                    return
            except MQClientError:
                pass  # no route yet, connection refused, still recovering: try again
            await asyncio.sleep(PROBE_PAUSE_S)
        emit("error", where="probe", message=f"no send accepted in {WAIT_S} s")
    finally:
        await sender.shutdown()


async def fill(args: dict[str, str]) -> None:
    await create_topic(args, args["topic"], int(args.get("queues", 8)))
    sender = producer(args, "bench_fill")
    await sender.start()
    started = time.perf_counter()
    try:
        failures = await send(
            sender,
            args["topic"],
            "batch",
            int(args.get("count", 1_000_000)),
            int(args.get("threads", 4)),
            0,
            int(args.get("batchSize", 64)),
            bodies(int(args.get("bodySize", 1024))),
            None,
        )
    finally:
        await sender.shutdown()
    emit("filled", failures=failures, seconds=time.perf_counter() - started)


def main(argv: list[str]) -> int:
    args = parse(argv)
    roles = {"load": load, "probe": probe, "fill": fill}
    role = roles.get(args.get("role", ""))
    if role is None:
        raise SystemExit("role must be load, probe or fill")
    try:
        asyncio.run(role(args))
    except Exception as error:  # reported as an event: the harness stops on it
        emit("error", where="main", message=repr(error))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
