"""bench/java/Load.java's twin on the C++ client: the load generator of `bench/vs_rocketmq.py --client cpp`.

    python bench/cpp_load.py role=load namesrv=H:P broker=H:P topic=T modes=sync,async count=N ...

The client is PyPI `rocketmq` 0.4.4, a ctypes wrapper of rocketmq-client-cpp 1.2.3 (librocketmq.so; its logs
go to $HOME/logs/rocketmq-cpp, so the harness points HOME at its log folder). Same arguments, roles and JSON
lines as Load.java (read its comment for the phases), so the harness treats all three alike. Java's producer
threads are Python threads here: ctypes releases the GIL while the .so sends, so `threads` sync or batch
calls are outstanding at once; async sends keep `inflight` outstanding through the .so's SendMessageAsync.
Where this client differs from Load.java, and why:
- 0.4.4 has no consumeFromWhere setter (always CONSUME_FROM_LAST_OFFSET). A new group still starts at offset
  0 on both brokers while the queue's first message is in memory (4.9.7's QUERY_CONSUMER_OFFSET answer), so
  the live consumer and the draining group see every message.
- It cannot list a push consumer's queues, so instead of waiting for the rebalance before the warm-up, the
  live consumer must have received every warm-up message (spread over all queues) before the timed sends.
- The listener is called once per message (the C API), through ctypes and the GIL.
- No batch mode and no fill role: 1.2.3 marks a batch with batch="1", which RocketMQ 4.9.7 reads as false
  (Boolean.parseBoolean) and stores the encoded batch as one message; vs_rocketmq.py leaves batches out
  for this client and fills the recovery CommitLog with bench/py_load.py.
- A send the client fails locally before anything leaves it ("No route info" after a lock timeout, see
  `send`) is sent again, up to SEND_ATTEMPTS; the count is `clientRetries` in each result. A send that
  still fails ends the run at once (Load.java would wait for the consumers first).
Topics are created with shoal.client's Admin (UPDATE_AND_CREATE_TOPIC; the C++ client has no admin API).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import queue
import random
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from load_lines import bodies, parse, result_fields

WAIT_S = 120.0
SEND_TIMEOUT_MS = 10_000
PROBE_TIMEOUT_MS = 1_000
PROBE_PAUSE_S = 0.02
CONSUME_BATCH_MAX = 32
SEND_ATTEMPTS = 10
RETRY_PAUSE_S = (0.001, 0.01)
LOCAL_FAILURES = ("No route info", "invokeAsync")
"""How the client reports a send it failed before writing it (see `send`): these are sent again."""
_names = itertools.count()
_emitting = threading.Lock()
_connected: set[int] = set()
"""Producers (by id) that have sent once: connected to the broker."""
RETRIES: dict[str, int] = {}
"""Sends repeated by the load generator after the client failed them locally (see `send`), by mode."""


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"event": event, **fields, "t_ms": int(time.time() * 1000)}) + "\n"
    with _emitting:  # one whole line at a time: senders and the .so's callback threads emit
        sys.stdout.write(line)
        sys.stdout.flush()


def send_failed(mode: str, error: Exception) -> None:
    """A send given up on: an event, and the reason on stderr (the harness keeps it in load-stderr.log)."""
    emit("sendFailed", mode=mode, message=str(error)[:300])
    print(f"{mode} send failed: {error}", file=sys.stderr, flush=True)


def instance_name(kind: str) -> str:
    """Each producer and consumer its own client instance: the .so shares one per name in a process."""
    return f"bench-{kind}-{os.getpid()}-{next(_names)}"


def message(topic: str, body: bytes, tags: str = "bench") -> Any:
    """A fresh message per send: the .so writes properties (UNIQ_KEY) into it, so threads cannot share one."""
    from rocketmq.client import Message
    from rocketmq.ffi import dll

    msg = Message(topic)
    msg.set_tags(tags)
    # set_body goes through a C string and would stop at the first zero byte of a random body.
    if dll.SetByteMessageBody(msg._handle, body, len(body)) != 0:
        raise RuntimeError("SetByteMessageBody failed")
    return msg


def producer(namesrv: str, group: str, timeout_ms: int = SEND_TIMEOUT_MS) -> Any:
    from rocketmq.client import Producer
    from rocketmq.exceptions import ffi_check
    from rocketmq.ffi import dll

    sender = Producer(group, timeout=timeout_ms, max_message_size=4 * 1024 * 1024)
    ffi_check(dll.SetProducerInstanceName(sender._handle, instance_name("producer").encode()))
    sender.set_namesrv_addr(namesrv)
    sender.start()
    return sender


class Counter:
    """A push consumer counting receipts; `e2e` gets receipt minus store time in ns."""

    def __init__(self, namesrv: str, group: str, topic: str, expected: int, e2e: list[int] | None) -> None:
        from rocketmq.client import PushConsumer

        self.expected = expected
        self.received = 0
        self.first_ms = 0
        self.last_ms = 0
        self.lock = threading.Lock()
        self.progress = threading.Condition(self.lock)
        self.e2e = e2e
        self.consumer = PushConsumer(group)
        self.consumer.set_instance_name(instance_name("consumer"))
        self.consumer.set_namesrv_addr(namesrv)
        self.consumer.set_message_batch_max_size(CONSUME_BATCH_MAX)
        self.consumer.subscribe(topic, self._on_message)
        self.consumer.start()

    def _on_message(self, msg: Any) -> None:
        now = int(time.time() * 1000)
        stored = msg.store_timestamp
        with self.lock:
            self.first_ms = self.first_ms or now
            self.last_ms = now
            if self.e2e is not None:
                self.e2e.append((now - stored) * 1_000_000)
            self.received += 1
            self.progress.notify_all()

    def wait_for(self, count: int) -> bool:
        with self.lock:
            return self.progress.wait_for(lambda: self.received >= count, WAIT_S)

    def finished(self) -> bool:
        return self.wait_for(self.expected)


def send(
    sender: Any,
    topic: str,
    mode: str,
    count: int,
    threads: int,
    inflight: int,
    batch_size: int,
    pool: list[bytes],
    latency: list[int] | None,
) -> int:
    """Sends `count` messages of `mode` from `threads` threads; returns failures. Latencies (ns) into `latency`."""
    from rocketmq.client import SendStatus

    lock = threading.Lock()
    failures = 0
    next_index = 0
    step = batch_size if mode == "batch" else 1
    window = threading.Semaphore(max(1, inflight))

    def take() -> tuple[int, int] | None:
        nonlocal next_index
        with lock:
            first = next_index
            if first >= count:
                return None
            next_index += step
            return first, min(step, count - first)

    def record(ok: bool, took_ns: int, n: int) -> None:
        nonlocal failures
        with lock:
            if not ok:
                failures += n
            if latency is not None and ok:
                latency.extend([took_ns] * n)

    def attempts(call: Callable[[], Any]) -> Any:
        """`call`, repeated while the client fails it locally (returns its result or raises its last error).

        1.2.3's CreateTransport takes its connection-table lock with a timed_lock that on this machine gives
        up at once whenever another sender thread holds it ("GetTransport of:... get timed_mutex timeout" in
        its log), and with one broker its own retries find no other queue: it raises "No route info" (async:
        "invokeAsync" fails before the request is written). Nothing left the client, so the load generator
        sends again after a short random pause; latencies include every attempt."""
        for attempt in range(1, SEND_ATTEMPTS + 1):
            try:
                return call()
            except Exception as error:
                if attempt == SEND_ATTEMPTS or not any(sign in str(error) for sign in LOCAL_FAILURES):
                    send_failed(mode, error)
                    raise
                with lock:
                    RETRIES[mode] = RETRIES.get(mode, 0) + 1
                time.sleep(random.uniform(*RETRY_PAUSE_S))
        raise AssertionError("unreachable")

    pending: dict[int, Any] = {}  # async messages by index, alive until their callback (the .so reads them late)

    resend: queue.SimpleQueue[tuple[int, int, int] | None] = queue.SimpleQueue()

    def send_async(first: int, started: int = 0, attempt: int = 1) -> None:
        """One async send holding a window slot until its callback; (`started`, `attempt`) when sent again."""
        if attempt == 1:
            window.acquire()
            started = time.perf_counter_ns()
        msg = message(topic, pool[first % len(pool)])
        with lock:
            pending[first] = msg

        def done(ok: bool) -> None:
            record(ok, time.perf_counter_ns() - started, 1)
            with lock:
                pending.pop(first, None)
            window.release()

        def failed(error: Exception) -> None:
            # A local failure (see `attempts`) comes back here too: sent again from the resend thread, since
            # calling into the .so from its own callback thread is not safe; the window slot stays taken.
            if attempt < SEND_ATTEMPTS and any(sign in str(error) for sign in LOCAL_FAILURES):
                with lock:
                    RETRIES[mode] = RETRIES.get(mode, 0) + 1
                resend.put((first, started, attempt + 1))
                return
            send_failed(mode, error)
            done(False)

        try:
            attempts(lambda: sender.send_async(msg, lambda r: done(r.status == SendStatus.OK), failed))
        except Exception:  # rejected before it left
            done(False)

    def resender() -> None:
        while (item := resend.get()) is not None:
            time.sleep(random.uniform(*RETRY_PAUSE_S))
            send_async(*item)

    def one(first: int, n: int) -> None:
        if mode == "async":
            send_async(first)
            return
        started = time.perf_counter_ns()
        try:
            if mode == "batch":
                result = attempts(
                    lambda: sender.send_batch([message(topic, pool[(first + i) % len(pool)]) for i in range(n)])
                )
            else:
                result = attempts(lambda: sender.send_sync(message(topic, pool[first % len(pool)])))
        except Exception:
            record(False, 0, n)
            return
        record(result.status == SendStatus.OK, time.perf_counter_ns() - started, n)

    def worker() -> None:
        while (taken := take()) is not None:
            one(*taken)

    # A fresh producer's first send goes alone: while one thread connects to a broker, 1.2.3's
    # CreateTransport fails every other thread's send at once (the table entry is still "waiting"), and with
    # one broker the retry finds no other queue ("No route info"). The connection then stays up.
    if id(sender) not in _connected and (taken := take()) is not None:
        one(*taken)
        _connected.add(id(sender))
    # Async sends are submitted from one thread: with several callers 1.2.3's connection table (see `attempts`)
    # also drops and reopens the live connection, failing hundreds of sends in flight on it.
    submitters = 1 if mode == "async" else threads
    workers = [threading.Thread(target=worker, name=f"send-{t}") for t in range(submitters)]
    resending = threading.Thread(target=resender, name="resend", daemon=True)
    resending.start()
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    if mode == "async":  # every callback in: the whole window free again
        deadline = time.monotonic() + WAIT_S
        for _ in range(max(1, inflight)):
            if not window.acquire(timeout=max(0.0, deadline - time.monotonic())):
                raise RuntimeError(f"async sends still outstanding after {WAIT_S} s")
    resend.put(None)
    resending.join()
    return failures


def create_topic(args: dict[str, str], topic: str, queues: int) -> None:
    from shoal.client import Admin

    async def create() -> None:
        admin = Admin(args["namesrv"])
        await admin.start()
        try:
            await admin.create_topic(topic, broker_addr=args["broker"], read_queue_nums=queues, write_queue_nums=queues)
        finally:
            await admin.shutdown()

    asyncio.run(create())


def load(args: dict[str, str]) -> None:
    queues = int(args.get("queues", 8))
    count = int(args.get("count", 10_000))
    batch_count = int(args.get("batchCount", count))
    warm = int(args.get("warm", 1_000))
    threads = int(args.get("threads", 8))
    inflight = int(args.get("inflight", 256))
    batch_size = int(args.get("batchSize", 32))
    pool = bodies(int(args.get("bodySize", 1024)))
    sender = producer(args["namesrv"], "bench_producer")
    # no sender.shutdown() at the end: see main()
    for mode in args["modes"].split(","):
        topic = f"{args['topic']}_{mode}"
        measured = batch_count if mode == "batch" else count
        create_topic(args, topic, queues)
        e2e: list[int] = []
        live = Counter(args["namesrv"], f"{topic}_live", topic, measured + warm, e2e)
        warm_failures = send(sender, topic, mode, warm, threads, inflight, batch_size, pool, None)
        if not live.wait_for(warm - warm_failures):
            raise RuntimeError(f"the live consumer got {live.received} of {warm} warm-up messages in {WAIT_S} s")
        with live.lock:
            del e2e[:]  # the warm-up's receipts waited for the rebalance: not end-to-end figures
        latency: list[int] = []
        emit("phase", mode=mode, phase="produce")
        started = time.perf_counter()
        failures = send(sender, topic, mode, measured, threads, inflight, batch_size, pool, latency)
        produce_s = time.perf_counter() - started
        emit("phase", mode=mode, phase="produced")
        if failures or warm_failures:  # the consumers would wait for the missing messages until WAIT_S
            raise RuntimeError(f"{mode}: {failures + warm_failures} sends failed ({RETRIES} sent again)")
        live_done = live.finished()
        live.consumer.shutdown()
        drain = Counter(args["namesrv"], f"{topic}_drain", topic, measured + warm, None)
        drained = drain.finished()
        drain.consumer.shutdown()
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
        emit("result", **fields, clientRetries=RETRIES.get(mode, 0))
    emit("done")


def probe(args: dict[str, str]) -> None:
    from rocketmq.client import SendStatus

    sender = producer(args["namesrv"], "bench_probe", PROBE_TIMEOUT_MS)
    emit("ready")
    body = bytes(1024)
    deadline = time.monotonic() + WAIT_S
    attempts = 0
    while time.monotonic() < deadline:  # no sender.shutdown() after: see main()
        attempts += 1
        try:
            if sender.send_sync(message(args["topic"], body, "probe")).status == SendStatus.OK:
                emit("accepted", attempts=attempts)
                return
        except Exception:  # no route yet, connection refused, still recovering: try again
            pass
        time.sleep(PROBE_PAUSE_S)
    emit("error", where="probe", message=f"no send accepted in {WAIT_S} s")


def main(argv: list[str]) -> int:
    args = parse(argv)
    roles: dict[str, Callable[[dict[str, str]], None]] = {"load": load, "probe": probe}
    role = roles.get(args.get("role", ""))
    if role is None:
        raise SystemExit("role must be load or probe (vs_rocketmq.py fills the CommitLog with bench/py_load.py)")
    try:
        role(args)
    except Exception as error:  # reported as an event: the harness stops on it
        emit("error", where="main", message=repr(error))
        sys.stdout.flush()
        os._exit(1)  # the .so's threads may not let the interpreter exit
    sys.stdout.flush()
    # The producer is never shut down: 1.2.3's shutdown once aborted the process after every result was
    # out ("terminate called after throwing an instance of 'boost::thread_interrupted'", exit -6, a CI
    # run of the cold-start probe against RocketMQ 4.9.7), and the wrapper's __del__ shutdowns may hang.
    # Exiting closes its connections; the brokers forget the client as they do any vanished one.
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
