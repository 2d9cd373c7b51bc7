"""The C++ RocketMQ client (PyPI `rocketmq` 0.4.4) with session credentials; not a test module.

    python cpp_acl_client.py produce|push NAMESRV_ADDR 'JSON_ARGS'

produce {topic, group, access_key, secret_key, count} -> {"sent": [status...], "errors": [text...]}
push    {topic, group, access_key, secret_key, expect, timeout_s} -> {"received": [body...]}
Prints one line `RESULT <json>`. Run in its own process (the `.so` may hang or crash) with HOME set
to a temporary directory (it writes logs to $HOME/logs/rocketmq-cpp/).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any


def produce(namesrv_addr: str, args: dict[str, Any]) -> dict[str, Any]:
    from rocketmq.client import Message, Producer

    producer = Producer(args["group"])
    producer.set_namesrv_addr(namesrv_addr)
    producer.set_session_credentials(args["access_key"], args["secret_key"], "ALIYUN")
    producer.start()
    sent, errors = [], []
    for index in range(args["count"]):
        message = Message(args["topic"])
        message.set_body(f"cpp-acl-{index}")
        try:
            sent.append(int(producer.send_sync(message).status))
        except Exception as error:  # the wrapper raises on a refused send
            errors.append(f"{type(error).__name__}: {error}")
    producer.shutdown()
    return {"sent": sent, "errors": errors}


def push(namesrv_addr: str, args: dict[str, Any]) -> dict[str, Any]:
    from rocketmq.client import PushConsumer

    received: list[str] = []
    lock = threading.Lock()

    def listener(message: Any) -> None:  # returning normally is CONSUME_SUCCESS
        with lock:
            received.append(message.body.decode())

    consumer = PushConsumer(args["group"])
    consumer.set_namesrv_addr(namesrv_addr)
    consumer.set_session_credentials(args["access_key"], args["secret_key"], "ALIYUN")
    consumer.subscribe(args["topic"], listener)
    consumer.start()
    deadline = time.monotonic() + args["timeout_s"]
    while time.monotonic() < deadline:
        with lock:
            if len(received) >= args["expect"]:
                break
        time.sleep(0.05)
    consumer.shutdown()
    return {"received": sorted(set(received))}


if __name__ == "__main__":
    scenario, address, raw = sys.argv[1:4]
    result = {"produce": produce, "push": push}[scenario](address, json.loads(raw))
    print("RESULT " + json.dumps(result), flush=True)
