"""A live cluster for the dashboard's tests: a NameServer and a Broker with aclEnable, `shoal
dashboard` as a real process logging people in against the same plain_acl.yml, and real traffic
(produced, consumed, lagging, dead-lettered) whose numbers the tests compare with what the pages show."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from shoal.client import (
    BlockingAdmin,
    BlockingProducer,
    BlockingPushConsumer,
    ClientSettings,
    ConsumeFromWhere,
    ConsumerSettings,
    ConsumeStatus,
    Credentials,
    Message,
    MessageExt,
)
from shoal.formats.topics import TRACE_TOPIC
from shoal.formats.trace import CONTENT_SEPARATOR, FIELD_SEPARATOR
from tests.conftest import Cluster, wait_until
from tests.ports import free_broker_port, free_port

ADMIN = Credentials("dashAdmin", "dashAdminSecret1")
VIEWER = Credentials("dashViewer", "dashViewerSecret2")
PLAIN_ACL = f"""\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: {ADMIN.access_key}
    secretKey: {ADMIN.secret_key}
    admin: true
  - accessKey: {VIEWER.access_key}
    secretKey: {VIEWER.secret_key}
    admin: false
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""
CLIENT_SETTINGS = ClientSettings(
    client_ip="127.0.0.1", route_refresh_interval_s=1.0, heartbeat_interval_s=1.0, credentials=ADMIN
)  # a producer is listed once its heartbeat after its first send reached the broker
CONSUMER_SETTINGS = ConsumerSettings(rebalance_interval_s=1.0, offset_persist_interval_s=0.5, shutdown_await_s=5.0)
TOPIC = "DashOrders"
POISON_TOPIC = "DashPoison"
TICKER_TOPIC = "DashTicker"  # steady background traffic, so the TPS charts have something to draw
TICKER_INTERVAL_S = 0.05
LIVE_GROUP = "DashReaders"  # online, keeps up
SLOW_GROUP = "DashSlow"  # consumed the first batch, then went away: it lags by LAGGING
POISON_GROUP = "DashPoisonGroup"  # fails every message: one dead letter
FIRST_BATCH = 40
LAGGING = 12
POISONED = 3  # dead letters of POISON_GROUP
TOTAL = FIRST_BATCH + 2 + LAGGING  # the first batch, a binary body, a traced message, then LAGGING more
QUEUES = 4
WAIT_S = 60.0
DASHBOARD_START_S = 30.0


@dataclass
class Live:
    cluster: Cluster
    url: str
    acl_file: Path
    dashboard_log: Path
    admin: BlockingAdmin
    producer: BlockingProducer
    live_consumer: BlockingPushConsumer
    received: list[MessageExt] = field(default_factory=list)
    sent_ids: dict[str, str] = field(default_factory=dict)
    """key -> offset message id of what was produced."""


def trace_body(msg_id: str, offset_msg_id: str) -> bytes:
    """What a Java client with enableMsgTrace writes for one send and one consume of `msg_id`
    (TraceDataEncoder: Pub, SubBefore, SubAfter records)."""
    now = int(time.time() * 1000)
    records = [
        ["Pub", now, "DefaultRegion", "DashProducers", TOPIC, msg_id, "TagT", "traced", "127.0.0.1:10911", 19, 3, 0,
         offset_msg_id, "true"],
        ["SubBefore", now + 40, "DefaultRegion", "DashTraced", "request-1", msg_id, 0, "traced"],
        ["SubAfter", "request-1", msg_id, 25, "true", "traced", 0, now + 65, "DashTraced"],
    ]  # fmt: skip
    return "".join(CONTENT_SEPARATOR.join(map(str, record)) + FIELD_SEPARATOR for record in records).encode()


def _start_dashboard(cluster: Cluster, acl_file: Path, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    command = [
        sys.executable, "-m", "shoal.cli.main", "dashboard",
        "-n", cluster.namesrv_addr, "--port", str(port), "--acl-file", str(acl_file),
        "--access-key", ADMIN.access_key, "--secret-key", ADMIN.secret_key, "--sample-interval", "1",
    ]  # fmt: skip
    with log_path.open("ab") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)
    wait_until(
        lambda: "dashboard on http://" in log_path.read_text() or process.poll() is not None,
        DASHBOARD_START_S,
        0.1,
        what="the dashboard's start",
    )
    assert process.poll() is None, log_path.read_text()
    return process


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    root = tmp_path_factory.mktemp("dashboard")
    acl_file = root / "plain_acl.yml"
    acl_file.write_text(PLAIN_ACL)
    cluster = Cluster(root, free_port(), free_broker_port(), free_port())
    cluster.start_namesrv()
    dashboard: subprocess.Popen[bytes] | None = None
    clients: list[BlockingAdmin | BlockingProducer | BlockingPushConsumer] = []
    stoppers: list[Callable[[], object]] = []
    try:
        cluster.start_broker(
            {
                "aclEnable": "true",
                "plainAclFile": str(acl_file),
                "accessKey": ADMIN.access_key,
                "secretKey": ADMIN.secret_key,
                "messageDelayLevel": "100ms 200ms 300ms 400ms 500ms 600ms",
                "traceTopicEnable": "true",  # the broker creates RMQ_SYS_TRACE_TOPIC
            }
        )
        admin = BlockingAdmin(cluster.namesrv_addr, client_settings=CLIENT_SETTINGS)
        clients.append(admin)
        admin.start()
        for topic in (TOPIC, POISON_TOPIC, TICKER_TOPIC):
            admin.create_topic(topic, cluster="DefaultCluster", read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        producer = BlockingProducer("DashProducers", cluster.namesrv_addr, client_settings=CLIENT_SETTINGS)
        clients.append(producer)
        producer.start()
        sent_ids: dict[str, str] = {}
        for n in range(FIRST_BATCH):
            body = json.dumps({"order": n, "item": f"widget-{n}"}).encode()
            result = producer.send(Message(TOPIC, body, tags="TagA" if n % 2 else "TagB", keys=(f"order-{n}",)))
            sent_ids[f"order-{n}"] = result.offset_msg_id
        sent_ids["blob"] = producer.send(Message(TOPIC, bytes(range(256)), keys=("blob",))).offset_msg_id
        traced = producer.send(Message(TOPIC, b'{"order": "traced"}', tags="TagT", keys=("traced",)))
        sent_ids["traced"] = traced.offset_msg_id
        producer.send(
            Message(TRACE_TOPIC, trace_body(traced.msg_id, traced.offset_msg_id), keys=(traced.msg_id, "traced"))
        )

        seen: dict[str, list[MessageExt]] = {LIVE_GROUP: [], SLOW_GROUP: [], POISON_GROUP: []}
        lock = threading.Lock()

        def keep(group: str, status: ConsumeStatus = ConsumeStatus.CONSUME_SUCCESS) -> object:
            def listener(messages: list[MessageExt]) -> ConsumeStatus:
                with lock:
                    seen[group].extend(messages)
                return status

            return listener

        slow = _consumer(cluster, SLOW_GROUP, TOPIC, keep(SLOW_GROUP))
        slow.start()
        wait_until(lambda: len(seen[SLOW_GROUP]) >= TOTAL - LAGGING, WAIT_S, 0.1, what="the slow group's first batch")

        def admin_progress() -> int:
            return sum(p.lag for p in admin.consumer_progress(SLOW_GROUP))

        wait_until(lambda: admin_progress() == 0, WAIT_S, 0.2, what="the slow group's committed offsets")
        slow.shutdown()

        poison = _consumer(
            cluster,
            POISON_GROUP,
            POISON_TOPIC,
            keep(POISON_GROUP, ConsumeStatus.RECONSUME_LATER),
            max_reconsume_times=1,
        )
        clients.append(poison)
        poison.start()
        for n in range(1, POISONED + 1):
            poisoned = producer.send(Message(POISON_TOPIC, b"cannot be parsed", keys=(f"poison-{n}",)))
            sent_ids[f"poison-{n}"] = poisoned.offset_msg_id
        wait_until(
            lambda: len(admin.dlq_messages(POISON_GROUP, POISONED)) == POISONED,
            WAIT_S,
            0.2,
            what="the poison messages' dead letters",
        )
        poison.shutdown()

        live_consumer = _consumer(cluster, LIVE_GROUP, TOPIC, keep(LIVE_GROUP))
        clients.append(live_consumer)
        live_consumer.start()
        for n in range(FIRST_BATCH, FIRST_BATCH + LAGGING):
            result = producer.send(Message(TOPIC, json.dumps({"order": n}).encode(), keys=(f"order-{n}",)))
            sent_ids[f"order-{n}"] = result.offset_msg_id
        wait_until(lambda: len(seen[LIVE_GROUP]) >= TOTAL, WAIT_S, 0.1, what="the live group's messages")
        wait_until(
            lambda: sum(p.lag for p in admin.consumer_progress(LIVE_GROUP)) == 0,
            WAIT_S,
            0.2,
            what="the live group's offsets",
        )

        stop_ticker = threading.Event()

        def tick() -> None:
            while not stop_ticker.wait(TICKER_INTERVAL_S):
                producer.send(Message(TICKER_TOPIC, b"tick"))

        ticker = threading.Thread(target=tick, name="dashboard-ticker", daemon=True)
        ticker.start()
        stoppers.append(lambda: (stop_ticker.set(), ticker.join(30)))  # type: ignore[func-returns-value]
        port = free_port()
        log_path = root / "dashboard.log"
        dashboard = _start_dashboard(cluster, acl_file, port, log_path)
        yield Live(
            cluster,
            f"http://127.0.0.1:{port}",
            acl_file,
            log_path,
            admin,
            producer,
            live_consumer,
            seen[LIVE_GROUP],
            sent_ids,
        )
    finally:
        for stop in stoppers:
            stop()
        if dashboard is not None:
            dashboard.terminate()
            try:
                dashboard.wait(10)
            except subprocess.TimeoutExpired:
                dashboard.kill()
        for client in reversed(clients):
            client.shutdown()
        cluster.stop_all()
        cluster.discard_store()


def _consumer(cluster: Cluster, group: str, topic: str, listener: object, **options: object) -> BlockingPushConsumer:
    push = BlockingPushConsumer(
        group,
        cluster.namesrv_addr,
        listener=listener,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        settings=CONSUMER_SETTINGS,
        client_settings=CLIENT_SETTINGS,
        **options,
    )
    push.subscribe(topic)
    return push
