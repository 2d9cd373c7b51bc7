"""Drive the official RocketMQ 5 Python client (rocketmq-python-client) against a gRPC endpoint.

Runs in the client's own venv (tests/interop/v5/conftest.py builds it); java/src/V5Scenario.java
does the same with the Java client, mode for mode. One JSON line per
event on stdout ({"event": ...}); the client's own log goes to stderr.

    scenario.py produce ENDPOINT TOPIC COUNT            normal sends (tag, keys, a property), a FIFO and a delayed one
    scenario.py simple ENDPOINT TOPIC GROUP COUNT TAG [SECONDS]   receive COUNT (for at most SECONDS),
                                                                   nack the first once (1 s), ack all
    scenario.py push ENDPOINT TOPIC GROUP COUNT          a push consumer failing each message's first delivery
    scenario.py hold ENDPOINT TOPIC GROUP COUNT          receive COUNT, hidden for 15 s, and exit without acking
    scenario.py transaction ENDPOINT TOPIC               commit one, roll back one, leave one to the checker (commits)
    scenario.py fifo ENDPOINT TOPIC GROUP                two message groups of 3, then a push consumer of a FIFO group
                                                         that fails fifo-g1-1 once
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)

RECEIVE_DEADLINE_S = 60
TLS = os.environ.get("SHOAL_V5_TLS") == "1"
"""Connect over TLS (the CA to trust: GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, which gRPC reads)."""
HOLD_INVISIBLE_S = 15
SETTINGS_RACE_WAIT_S = 1.0
"""How long a receive that raced the client's own settings waits before it is tried again."""


EMIT_LOCK = threading.Lock()
"""The push consumer's listener runs on several threads: one whole line each."""


def emit(event: str, **fields: object) -> None:
    line = json.dumps({"event": event, **fields}) + "\n"
    with EMIT_LOCK:
        sys.stdout.write(line)
        sys.stdout.flush()


def config(endpoint: str) -> ClientConfiguration:
    """SHOAL_V5_ACCESS_KEY / SHOAL_V5_SECRET_KEY, when set, sign every call (plain ACL)."""
    credentials = Credentials(os.environ.get("SHOAL_V5_ACCESS_KEY", ""), os.environ.get("SHOAL_V5_SECRET_KEY", ""))
    return ClientConfiguration(endpoint, credentials)


def describe(message: Message) -> dict[str, object]:
    return {
        "body": message.body.decode(),
        "tag": message.tag,
        "keys": sorted(message.keys or ()),
        "properties": dict(message.properties or {}),
        "attempt": message.delivery_attempt,
        "message_id": message.message_id,
        "group": message.message_group,
        "at": time.time(),
    }


def produce(endpoint: str, topic: str, count: int) -> None:
    producer = Producer(config(endpoint), (topic,), tls_enable=TLS)
    producer.startup()
    try:
        for index in range(count):
            message = Message()
            message.topic = topic
            message.body = f"normal-{index}".encode()
            message.tag = "TagA"
            message.keys = f"key-{index}"
            message.add_property("index", str(index))
            receipt = producer.send(message)
            emit("sent", body=f"normal-{index}", message_id=receipt.message_id)
        fifo = Message()
        fifo.topic = topic
        fifo.body = b"fifo-0"
        fifo.tag = "TagA"
        fifo.message_group = "group-1"
        emit("sent", body="fifo-0", message_id=producer.send(fifo).message_id)
        delayed = Message()
        delayed.topic = topic
        delayed.body = b"delayed-0"
        delayed.tag = "TagA"
        delayed.delivery_timestamp = int(time.time() * 1000) + 3000
        emit("sent", body="delayed-0", message_id=producer.send(delayed).message_id, at=time.time())
    finally:
        producer.shutdown()


def simple(endpoint: str, topic: str, group: str, count: int, tag: str, seconds: float) -> None:
    consumer = SimpleConsumer(config(endpoint), group, {topic: FilterExpression(tag)}, await_duration=5, tls_enable=TLS)
    consumer.startup()
    try:
        seen: dict[str, int] = {}
        nacked = retried = False
        deadline = time.time() + seconds
        while len(seen) < count and time.time() < deadline:
            try:
                messages = consumer.receive(16, 20)
            except Exception as error:
                # RocketMQ 5.3.3's proxy answers a receive that arrives before the client's settings
                # (sent on its Telemetry stream at startup, not awaited by this client) with an
                # internal error ("settings" is null); Shoal does not need them first. Once, then again.
                if '"settings" is null' not in str(error) or retried:
                    raise
                retried = True
                emit("retried", error=str(error))
                time.sleep(SETTINGS_RACE_WAIT_S)
                continue
            for message in messages:
                emit("received", **describe(message))
                body = message.body.decode()
                if not nacked:
                    nacked = True
                    consumer.change_invisible_duration(message, 1)
                    emit("nacked", body=body)
                    continue
                consumer.ack(message)
                seen[body] = message.delivery_attempt
                emit("acked", body=body)
    finally:
        consumer.shutdown()


def push(endpoint: str, topic: str, group: str, count: int) -> None:
    done = threading.Event()
    failed_once: set[str] = set()
    succeeded: set[str] = set()
    lock = threading.Lock()

    class Listener(MessageListener):  # type: ignore[misc]  # the v5 client ships no type hints
        def consume(self, message: Message) -> ConsumeResult:
            body = message.body.decode()
            emit("consumed", **describe(message))
            with lock:
                if body not in failed_once:
                    failed_once.add(body)
                    return ConsumeResult.FAILURE
                succeeded.add(body)
                if len(succeeded) >= count:
                    done.set()
            return ConsumeResult.SUCCESS

    consumer = PushConsumer(config(endpoint), group, Listener(), {topic: FilterExpression("*")}, tls_enable=TLS)
    consumer.startup()
    try:
        done.wait(RECEIVE_DEADLINE_S)
        time.sleep(1)  # the last acks leave the client
    finally:
        consumer.shutdown()
    emit("push-done", succeeded=sorted(succeeded))


def hold(endpoint: str, topic: str, group: str, count: int) -> None:
    consumer = SimpleConsumer(config(endpoint), group, {topic: FilterExpression("*")}, await_duration=5, tls_enable=TLS)
    consumer.startup()
    held = 0
    deadline = time.time() + RECEIVE_DEADLINE_S
    while held < count and time.time() < deadline:
        asked_at = time.time()  # the leases start after this
        for message in consumer.receive(count - held, HOLD_INVISIBLE_S):  # at most what is still wanted
            held += 1
            emit("held", asked_at=asked_at, invisible_s=HOLD_INVISIBLE_S, **describe(message))
    emit("exiting", held=held)
    sys.stdout.flush()
    os._exit(0)  # a crash: no ack, no shutdown


def transaction(endpoint: str, topic: str) -> None:
    checked = threading.Event()

    class Checker(TransactionChecker):  # type: ignore[misc]  # the v5 client ships no type hints
        def check(self, message: Message) -> TransactionResolution:
            emit("checked", body=message.body.decode(), topic=message.topic, message_id=message.message_id)
            checked.set()
            return TransactionResolution.COMMIT

    producer = Producer(config(endpoint), (topic,), checker=Checker(), tls_enable=TLS)
    producer.startup()
    try:
        for body, end in (("tx-commit", "commit"), ("tx-rollback", "rollback"), ("tx-orphan", None)):
            message = Message()
            message.topic = topic
            message.body = body.encode()
            message.tag = "TagA"
            transaction = producer.begin_transaction()
            receipt = producer.send(message, transaction)
            emit("sent", body=body, message_id=receipt.message_id)
            if end == "commit":
                transaction.commit()
            elif end == "rollback":
                transaction.rollback()
            emit("ended", body=body, how=end)
        checked.wait(RECEIVE_DEADLINE_S)
        time.sleep(1)  # the checker's EndTransaction leaves the client
    finally:
        producer.shutdown()


FIFO_BODIES = ("fifo-g1-0", "fifo-g2-0", "fifo-g1-1", "fifo-g2-1", "fifo-g1-2", "fifo-g2-2")


def fifo(endpoint: str, topic: str, group: str) -> None:
    producer = Producer(config(endpoint), (topic,), tls_enable=TLS)
    producer.startup()
    try:
        for body in FIFO_BODIES:
            message = Message()
            message.topic = topic
            message.body = body.encode()
            message.message_group = body.split("-")[1]
            emit("sent", body=body, message_id=producer.send(message).message_id)
    finally:
        producer.shutdown()
    done = threading.Event()
    succeeded: list[str] = []
    failed_once = False
    lock = threading.Lock()

    class Listener(MessageListener):  # type: ignore[misc]  # the v5 client ships no type hints
        def consume(self, message: Message) -> ConsumeResult:
            nonlocal failed_once
            body = message.body.decode()
            emit("consumed", **describe(message))
            with lock:
                if body == "fifo-g1-1" and not failed_once:
                    failed_once = True
                    return ConsumeResult.FAILURE
                succeeded.append(body)
                if len(succeeded) >= len(FIFO_BODIES):
                    done.set()
            return ConsumeResult.SUCCESS

    consumer = PushConsumer(config(endpoint), group, Listener(), {topic: FilterExpression("*")}, tls_enable=TLS)
    consumer.startup()
    try:
        done.wait(RECEIVE_DEADLINE_S)
        time.sleep(1)
    finally:
        consumer.shutdown()
    emit("fifo-done", succeeded=succeeded)


def main() -> None:
    mode, endpoint, *rest = sys.argv[1:]
    try:
        if mode == "produce":
            produce(endpoint, rest[0], int(rest[1]))
        elif mode == "simple":
            seconds = float(rest[4]) if len(rest) > 4 else RECEIVE_DEADLINE_S
            simple(endpoint, rest[0], rest[1], int(rest[2]), rest[3], seconds)
        elif mode == "push":
            push(endpoint, rest[0], rest[1], int(rest[2]))
        elif mode == "hold":
            hold(endpoint, rest[0], rest[1], int(rest[2]))
        elif mode == "transaction":
            transaction(endpoint, rest[0])
        elif mode == "fifo":
            fifo(endpoint, rest[0], rest[1])
        else:
            raise SystemExit(f"unknown mode {mode}")
    except Exception as error:
        emit("error", error=repr(error))
        raise


if __name__ == "__main__":
    main()
