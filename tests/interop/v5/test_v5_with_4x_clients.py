"""RocketMQ 5 clients and RocketMQ 4.9.7's Java client on the same topic and the same consumer
group: what one kind sends the other receives with its tag, keys and properties, and the group's
progress made by POP acks (v5) is where the 4.x push consumer of that group goes on from."""

from __future__ import annotations

from tests.conftest import Cluster
from tests.interop.java.conftest import JavaRunner, java, java_classes, rocketmq_lib  # noqa: F401 (fixtures)
from tests.interop.v5.conftest import V5Client
from tests.interop.v5.test_v5_clients import RUN_TIMEOUT_S, create_topic, produced

LEGACY_COUNT = 3
V5_NORMAL_COUNT = 2
RECEIVE_TIMEOUT_S = 60.0
"""Bounds a wait for deliveries that take well under 10 s here (the delayed one: 3 s)."""


def test_4x_and_v5_clients_share_a_topic_and_a_group(v5_client: V5Client, proxied: Cluster, java: JavaRunner) -> None:  # noqa: F811
    """Goal: interop both ways on one topic and one group. Method: the 4.9.7 Java producer sends 3
    messages (tag, keys, a user property); the v5 client's SimpleConsumer of group G receives all 3
    with them and acks; the v5 producer then sends normal, FIFO and delayed messages; the 4.9.7
    push consumer of the same group G starts from the group's offset and receives exactly those,
    with the v5 client's tag, keys and property: nothing the v5 consumer acked comes again."""
    create_topic(proxied, "V5Both")
    legacy = java.run(
        "Produce",
        {
            "namesrv": proxied.namesrv_addr,
            "topic": "V5Both",
            "mode": "sync",
            "count": LEGACY_COUNT,
            "tags": "TagA",
            "keys": "legacy",
            "prop": "origin:java4",
        },
    )
    assert [event["status"] for event in legacy.of("sent")] == ["SEND_OK"] * LEGACY_COUNT, legacy.events
    got = v5_client("simple", proxied.proxy_addr, "V5Both", "GID_both", str(LEGACY_COUNT), "*", timeout_s=RUN_TIMEOUT_S)
    got.assert_ok()
    received = {event["body"]: event for event in got.of("received")}
    assert sorted(received) == [f"body-{index}" for index in range(LEGACY_COUNT)]
    for index in range(LEGACY_COUNT):
        event = received[f"body-{index}"]
        assert (event["tag"], event["keys"]) == ("TagA", [f"legacy-{index}"]), event
        assert event["properties"].get("origin") == "java4", event
    assert sorted(event["body"] for event in got.of("acked")) == sorted(received)

    produced(v5_client, proxied, "V5Both", V5_NORMAL_COUNT)
    expected = sorted([*(f"normal-{index}" for index in range(V5_NORMAL_COUNT)), "fifo-0", "delayed-0"])
    consumer = java.spawn("PushConsume", {"namesrv": proxied.namesrv_addr, "group": "GID_both", "topic": "V5Both"})
    consumer.wait_for(
        lambda running: len({line["body"] for line in running.of("received")}) >= len(expected),
        RECEIVE_TIMEOUT_S,
        "every v5 message",
    )
    consumer.stop()
    deliveries = {line["body"]: line for line in consumer.of("received")}
    assert sorted(deliveries) == expected, "the 4.x consumer of the group got only what the group had not acked"
    for index in range(V5_NORMAL_COUNT):
        line = deliveries[f"normal-{index}"]
        assert (line["tags"], line["keys"], line["properties"].get("index")) == ("TagA", f"key-{index}", str(index))
