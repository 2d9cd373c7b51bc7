"""Drive the real C++ RocketMQ client (PyPI `rocketmq` 0.4.4) against a running NameServer + Broker.

    python cpp_client_scenarios.py SCENARIO NAMESRV_ADDR 'JSON_ARGS'

Prints one line `RESULT <json>` on stdout and exits 0. test_cpp_client.py runs each scenario in
its own process with a timeout and HOME set to a temporary directory: the bundled `.so` may
crash or hang (PullConsumer.pull loops forever on a broker timeout) and writes its logs to
$HOME/logs/rocketmq-cpp/. This file is not a test module; it only imports `rocketmq` inside the
scenarios, so conftest.py can load it for `route_of` on any platform.

Scenarios (JSON args):
  produce  {topic, group, mode: sync|oneway|batch|orderly, messages: [MessageSpec], await_route?: bool}
           (await_route: first wait until every NameServer has the topic; off, a new topic is auto-created)
           -> {"results": [{"status", "msg_id", "offset"}]}  (one per send; none for oneway)
  push     {topic, expression, groups, orderly, broadcasting, expect, fail_first_keys, fail_keys, timeout_s, quiet_s,
            live?: {group, idle_s, messages: [MessageSpec]}}
           -> {"consumers": [{"group", "deliveries": [Received]}],  (per consumer, callback order)
               "live": [{"msg_id", "keys", "sent_at"}]}
  pull     {topic, group, expression} -> {"messages": [Received]}

MessageSpec: {body, tags?, keys?, properties?: {name: value}, arg?: int (orderly queue selector)}.
Received: {id, topic, tags, keys, body, queue_id, queue_offset, reconsume_times, store_size, properties}
          (+ received_at, monotonic seconds, for push deliveries).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import threading
import time
import traceback
from typing import Any

RESULT_PREFIX = "RESULT "
ROUTE_WAIT_S = 45.0
"""Longer than a broker's registration period (30 s): a NameServer that restarted has every route again
within one period, so waiting this long tells a missing registration from a late one."""
ROUTE_POLL_INTERVAL_S = 0.05
POLL_INTERVAL_S = 0.02
SOCKET_TIMEOUT_S = 3.0
GET_ROUTEINFO_BY_TOPIC = 105
FRAME_MAX_BYTES = 16 * 1024 * 1024
PROPERTY_NAMES = ("color", "seq", "UNIQ_KEY", "RETRY_TOPIC", "ORIGIN_MESSAGE_ID")
"""Properties copied into each Received record (user properties the tests set, plus retry ones)."""


# --- raw NameServer route query (no client library: the readiness probe must not depend on one) ---
def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed mid-frame")
        chunks += chunk
    return bytes(chunks)


def nameservers(namesrv_addr: str) -> list[str]:
    """The addresses of a ';'-separated namesrvAddr, as the clients split it."""
    return [address.strip() for address in namesrv_addr.split(";") if address.strip()]


def route_of(namesrv_addr: str, topic: str) -> dict[str, Any] | None:
    """GET_ROUTEINFO_BY_TOPIC over a raw socket to the first NameServer of a ';'-separated list (as the
    clients' namesrvAddr): the TopicRouteData, or None when the topic is unknown."""
    host, _, port = nameservers(namesrv_addr)[0].rpartition(":")
    header = json.dumps(
        {
            "code": GET_ROUTEINFO_BY_TOPIC,
            "extFields": {"topic": topic},
            "flag": 0,
            "language": "PYTHON",
            "opaque": 1,
            "serializeTypeCurrentRPC": "JSON",
            "version": 399,
        }
    ).encode()
    with socket.create_connection((host, int(port)), timeout=SOCKET_TIMEOUT_S) as sock:
        sock.sendall(struct.pack(">II", 4 + len(header), len(header)) + header)
        total_length = struct.unpack(">I", _read_exactly(sock, 4))[0]
        assert 4 <= total_length <= FRAME_MAX_BYTES, total_length
        frame = _read_exactly(sock, total_length)
    header_length = struct.unpack(">I", frame[:4])[0] & 0xFFFFFF
    response = json.loads(frame[4 : 4 + header_length])
    if response["code"] != 0:
        return None
    route: dict[str, Any] = json.loads(frame[4 + header_length :])
    return route


def wait_for_route(namesrv_addr: str, topic: str, timeout_s: float = ROUTE_WAIT_S) -> dict[str, Any]:
    """Poll every NameServer of the list until each has a route for `topic` (a broker registers new
    topics async; the C++ client asks one NameServer, chosen by it, and fails a send outright on
    "No route info"). A NameServer that refuses connections counts as not there yet."""
    deadline = time.monotonic() + timeout_s
    pending = nameservers(namesrv_addr)
    route: dict[str, Any] | None = None
    while pending:
        try:
            found = route_of(pending[0], topic)
        except OSError as error:
            found, last_problem = None, f"{pending[0]}: {error}"
        else:
            last_problem = f"{pending[0]}: TOPIC_NOT_EXIST"
        if found is not None:
            route = found
            pending.pop(0)
            continue
        if time.monotonic() > deadline:
            raise TimeoutError(f"no route for topic {topic} within {timeout_s} s ({last_problem})")
        time.sleep(ROUTE_POLL_INTERVAL_S)
    assert route is not None
    return route


# --- messages ---
def _text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def build_message(topic: str, spec: dict[str, Any]) -> Any:
    from rocketmq.client import Message

    message = Message(topic)
    if spec.get("tags"):
        message.set_tags(spec["tags"])
    if spec.get("keys"):
        message.set_keys(spec["keys"])
    for name, value in (spec.get("properties") or {}).items():
        message.set_property(name, value)
    message.set_body(spec["body"].encode())
    return message


def received(message: Any) -> dict[str, Any]:
    """A delivered message as plain JSON (bodies are text: the wrapper reads them as C strings)."""
    properties = {}
    for name in PROPERTY_NAMES:
        value = _text(message.get_property(name))
        if value:
            properties[name] = value
    return {
        "id": message.id,
        "topic": message.topic,
        "tags": _text(message.tags),
        "keys": _text(message.keys),
        "body": _text(message.body),
        "queue_id": message.queue_id,
        "queue_offset": message.queue_offset,
        "reconsume_times": message.reconsume_times,
        "store_size": message.store_size,
        "properties": properties,
    }


# --- scenarios ---
def produce(namesrv_addr: str, args: dict[str, Any]) -> dict[str, Any]:
    from rocketmq.client import Producer

    topic, mode, specs = args["topic"], args["mode"], args["messages"]
    if args.get("await_route"):
        wait_for_route(namesrv_addr, topic)
    producer = Producer(args["group"])
    producer.set_namesrv_addr(namesrv_addr)
    producer.start()
    results = []
    if mode == "batch":
        sent = producer.send_batch([build_message(topic, spec) for spec in specs])
        results.append(sent)
    else:
        for spec in specs:
            message = build_message(topic, spec)
            if mode == "sync":
                results.append(producer.send_sync(message))
            elif mode == "orderly":
                results.append(producer.send_orderly(message, spec["arg"]))
            elif mode == "oneway":
                producer.send_oneway(message)
            else:
                raise ValueError(f"unknown produce mode {mode!r}")
    producer.shutdown()
    return {"results": [{"status": int(r.status), "msg_id": r.msg_id, "offset": r.offset} for r in results]}


def _register_listener(consumer: Any, topic: str, expression: str, listener: Any) -> None:
    """Subscribe with a listener that returns the consume status itself (True: CONSUME_SUCCESS,
    False: RECONSUME_LATER). The wrapper's `subscribe` turns a raised exception into an undefined
    C return value (real-clients.md §1.12); the tests need a deterministic RECONSUME_LATER."""
    from rocketmq.client import RecvMessage
    from rocketmq.exceptions import ffi_check
    from rocketmq.ffi import _CConsumeStatus, dll

    def on_message(_consumer: Any, handle: Any) -> int:
        try:
            ok = listener(RecvMessage(handle))
        except Exception:  # never let an exception cross the ctypes boundary (undefined status)
            traceback.print_exc()
            ok = False
        return int((_CConsumeStatus.CONSUME_SUCCESS if ok else _CConsumeStatus.RECONSUME_LATER).value)

    ffi_check(dll.Subscribe(consumer._handle, topic.encode(), expression.encode()))
    consumer._register_callback(on_message)


def push(namesrv_addr: str, args: dict[str, Any]) -> dict[str, Any]:
    """One push consumer per entry of `groups` (a group may repeat: several consumers share it).

    Phase 1: consume until every group has seen `expect` distinct ids (and a retry of each of
    `fail_first_keys`). Phase 2, when `live` is given: stay idle `live.idle_s` so every pull is
    held by the broker, then send `live.messages` one by one (send_sync) and consume until every
    group has all of them. Finally keep consuming until nothing arrived for `quiet_s` (to catch
    duplicates). Each Received record gets `received_at` (monotonic s), each live send `sent_at`.
    """
    from rocketmq.client import Producer, PushConsumer
    from rocketmq.ffi import MessageModel

    topic, expression = args["topic"], args.get("expression", "*")
    expect, timeout_s, quiet_s = args["expect"], args.get("timeout_s", 30.0), args.get("quiet_s", 1.0)
    fail_first_keys = set(args.get("fail_first_keys", []))
    fail_keys = set(args.get("fail_keys", []))  # RECONSUME_LATER every time: retried until the DLQ
    groups: list[str] = args["groups"]
    wait_for_route(namesrv_addr, topic)
    lock = threading.Lock()
    deliveries: list[list[dict[str, Any]]] = [[] for _ in groups]
    failed: set[tuple[str, str]] = set()
    last_delivery = [time.monotonic()]

    def listener_for(index: int) -> Any:
        def listener(message: Any) -> bool:
            record = received(message)
            record["received_at"] = time.monotonic()
            with lock:
                deliveries[index].append(record)
                last_delivery[0] = record["received_at"]
                key = (groups[index], record["keys"] or "")
                if key[1] in fail_keys:
                    return False
                if key[1] in fail_first_keys and key not in failed:
                    failed.add(key)
                    return False
            return True

        return listener

    consumers = []
    for index, group in enumerate(groups):
        model = MessageModel.BROADCASTING if args.get("broadcasting") else MessageModel.CLUSTERING
        consumer = PushConsumer(group, orderly=bool(args.get("orderly")), message_model=model)
        consumer.set_namesrv_addr(namesrv_addr)
        consumer.set_instance_name(f"scenario-{index}")
        _register_listener(consumer, topic, expression, listener_for(index))
        consumer.start()
        consumers.append(consumer)

    def ids_by_group() -> dict[str, set[str]]:
        seen: dict[str, set[str]] = {group: set() for group in groups}
        with lock:
            for group, records in zip(groups, deliveries, strict=True):
                seen[group].update(record["id"] for record in records)
        return seen

    def retried_everywhere() -> bool:
        with lock:
            retried = {
                (group, record["keys"])
                for group, records in zip(groups, deliveries, strict=True)
                for record in records
                if record["reconsume_times"] >= 1
            }
        return all((group, key) in retried for group in groups for key in fail_first_keys)

    def wait(predicate: Any) -> None:
        while time.monotonic() < deadline and not predicate():
            time.sleep(POLL_INTERVAL_S)

    deadline = time.monotonic() + timeout_s
    wait(lambda: min(len(ids) for ids in ids_by_group().values()) >= expect and retried_everywhere())
    live_sent = []
    if args.get("live"):
        live = args["live"]
        time.sleep(live["idle_s"])  # the scenario itself: consumers idle, their pulls held by the broker
        producer = Producer(live["group"])
        producer.set_namesrv_addr(namesrv_addr)
        producer.start()
        for spec in live["messages"]:
            result = producer.send_sync(build_message(topic, spec))
            live_sent.append({"msg_id": result.msg_id, "keys": spec.get("keys"), "sent_at": time.monotonic()})
        producer.shutdown()
        live_ids = {sent["msg_id"] for sent in live_sent}
        wait(lambda: all(live_ids <= ids for ids in ids_by_group().values()))
    while time.monotonic() < deadline:
        with lock:
            quiet_for_s = time.monotonic() - last_delivery[0]
        if quiet_for_s >= quiet_s:
            break
        time.sleep(POLL_INTERVAL_S)
    for consumer in consumers:
        consumer.shutdown()
    with lock:
        return {
            "consumers": [{"group": g, "deliveries": d} for g, d in zip(groups, deliveries, strict=True)],
            "live": live_sent,
        }


def pull(namesrv_addr: str, args: dict[str, Any]) -> dict[str, Any]:
    from rocketmq.client import PullConsumer

    wait_for_route(namesrv_addr, args["topic"])
    consumer = PullConsumer(args["group"])
    consumer.set_namesrv_addr(namesrv_addr)
    consumer.start()
    messages = [received(message) for message in consumer.pull(args["topic"], args.get("expression", "*"))]
    consumer.shutdown()
    return {"messages": messages}


SCENARIOS = {"produce": produce, "push": push, "pull": pull}


def main() -> None:
    name, namesrv_addr, raw_args = sys.argv[1:4]
    result = SCENARIOS[name](namesrv_addr, json.loads(raw_args))
    sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
    sys.stdout.flush()
    # Skip interpreter teardown: the wrapper's __del__ shuts the .so objects down a second time.
    os._exit(0)


if __name__ == "__main__":
    main()
