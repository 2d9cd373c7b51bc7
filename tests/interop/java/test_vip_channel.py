"""The VIP channel with RocketMQ 4.9.7's Java client: `com.rocketmq.sendMessageWithVIPChannel=true`
sends to the registered broker port - 2, pulls stay on the main port."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import wait_until

VIP = {"com.rocketmq.sendMessageWithVIPChannel": "true"}
COUNT = 8
WAIT_S = 60.0


def established_on(port: int) -> int:
    """How many ESTABLISHED TCP connections have `port` as their local port (the server side of
    connections accepted there), from /proc/net/tcp and tcp6."""
    count = 0
    for table in (Path("/proc/net/tcp"), Path("/proc/net/tcp6")):
        if not table.exists():
            continue
        for line in table.read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rpartition(":")[2], 16)
            if local_port == port and fields[3] == "01":
                count += 1
    return count


def test_vip_producer_sends_through_port_minus_two_and_vip_consumer_pulls_from_the_main_port(
    java: Any, shoal: Any, unique: Any
) -> None:
    """Goal: a VIP-channel producer's sends reach Shoal on listenPort - 2 and a VIP-channel push
    consumer receives them (its pulls go to the main port, which RocketMQ's client always uses for
    pulls; its offsets and consumer lists go to the VIP port). Method: the producer stays connected
    after sending while the test reads the broker's accepted connections on port - 2 from
    /proc/net/tcp, and the producer lists its own connections (NettyRemotingClient.channelTables);
    the consumer runs with the same property and must receive every message."""
    topic, group = unique("Vip"), unique("vip_cg")
    vip_port = shoal.broker_port - 2
    before = established_on(vip_port)
    producer = java.spawn("VipChannel", {"namesrv": shoal.namesrv_addr, "topic": topic, "count": COUNT}, properties=VIP)
    producer.wait_for(lambda p: p.of("channels"), WAIT_S, "the sends")
    assert producer.of("started")[0]["vipChannelEnabled"] is True
    sent = producer.of("sent")
    assert [s["status"] for s in sent] == ["SEND_OK"] * COUNT, producer.of("error")
    assert f"127.0.0.1:{vip_port}" in producer.of("channels")[0]["addresses"]
    assert established_on(vip_port) > before  # the broker's end of the producer's VIP connection
    assert producer.stop() == 0

    consumer = java.spawn(
        "PushConsume",
        {"namesrv": shoal.namesrv_addr, "group": group, "topic": topic, "pollNameServerMs": 1000},
        properties=VIP,
    )
    consumer.wait_for(lambda c: len(c.of("received")) >= COUNT, WAIT_S, f"{COUNT} messages")
    assert {r["msgId"] for r in consumer.of("received")} == {s["msgId"] for s in sent}
    wait_until(lambda: established_on(vip_port) > before, WAIT_S, 0.2, what="the consumer's VIP connection")
    assert consumer.stop() == 0
