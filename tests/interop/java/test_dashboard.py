"""`shoal dashboard` in front of Apache RocketMQ 4.9.7 (NameServer and broker from Maven Central):
it speaks only the admin protocol, so its pages show RocketMQ's own answers, and its changes are
made by RocketMQ's broker. Over real HTTP; the browser tests are tests/dashboard."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from shoal.client import (
    BlockingAdmin,
    BlockingProducer,
    BlockingPushConsumer,
    ClientSettings,
    ConsumeFromWhere,
    ConsumerSettings,
    ConsumeStatus,
    Message,
    MessageExt,
)
from tests.conftest import wait_until
from tests.dashboard.http_session import Browser
from tests.interop.java import rocketmq_broker as launcher
from tests.ports import free_port

pytestmark = pytest.mark.slow

TOPIC = "DashboardOnRocketMQ"
GROUP = "DashboardRocketMQGroup"
SENT = 24
CONSUMED_BEFORE_STOP = 24
LATE = 6  # sent after the group stopped: its lag
CLIENT_SETTINGS = ClientSettings(client_ip="127.0.0.1", route_refresh_interval_s=1.0)
CONSUMER_SETTINGS = ConsumerSettings(rebalance_interval_s=1.0, offset_persist_interval_s=0.5, shutdown_await_s=5.0)
WAIT_S = 90.0


@dataclass
class Setup:
    namesrv_addr: str
    broker_addr: str
    url: str
    admin: BlockingAdmin
    offset_ids: dict[str, str]


@pytest.fixture(scope="module")
def setup(rocketmq_lib: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    root = tmp_path_factory.mktemp("rocketmq-dashboard")
    namesrv = launcher.RocketMQNamesrv(rocketmq_lib, root / "namesrv")
    namesrv.start()
    broker = launcher.RocketMQBroker(rocketmq_lib, root / "broker", namesrv_addr=namesrv.addr, store_dir=root / "store")
    dashboard: subprocess.Popen[bytes] | None = None
    admin = BlockingAdmin(namesrv.addr, client_settings=CLIENT_SETTINGS)
    try:
        broker.start()
        admin.start()
        admin.create_topic(TOPIC, broker_addr=broker.addr, read_queue_nums=4, write_queue_nums=4)
        offset_ids: dict[str, str] = {}
        received: list[MessageExt] = []
        lock = threading.Lock()

        def listener(messages: list[MessageExt]) -> ConsumeStatus:
            with lock:
                received.extend(messages)
            return ConsumeStatus.CONSUME_SUCCESS

        with BlockingProducer("DashboardRocketMQProducer", namesrv.addr, client_settings=CLIENT_SETTINGS) as producer:
            for n in range(SENT):
                body = f'{{"n": {n}}}'.encode()
                offset_ids[f"k-{n}"] = producer.send(Message(TOPIC, body, keys=(f"k-{n}",))).offset_msg_id
            consumer = BlockingPushConsumer(
                GROUP,
                namesrv.addr,
                listener=listener,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                settings=CONSUMER_SETTINGS,
                client_settings=CLIENT_SETTINGS,
            )
            consumer.subscribe(TOPIC)
            with consumer:
                wait_until(lambda: len(received) >= CONSUMED_BEFORE_STOP, WAIT_S, 0.2, what="the group's messages")
                wait_until(
                    lambda: sum(p.lag for p in admin.consumer_progress(GROUP, TOPIC)) == 0,
                    WAIT_S,
                    0.5,
                    what="the group's committed offsets",
                )
            for n in range(SENT, SENT + LATE):
                offset_ids[f"k-{n}"] = producer.send(Message(TOPIC, b"late", keys=(f"k-{n}",))).offset_msg_id
        port = free_port()
        log_path = root / "dashboard.log"
        with log_path.open("ab") as log_file:
            dashboard = subprocess.Popen(
                [sys.executable, "-m", "shoal.cli.main", "dashboard", "-n", namesrv.addr, "--port", str(port)],
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        wait_until(lambda: "dashboard on http://" in log_path.read_text(), 60.0, 0.1, what="the dashboard's start")
        yield Setup(namesrv.addr, broker.addr, f"http://127.0.0.1:{port}", admin, offset_ids)
    finally:
        if dashboard is not None:
            dashboard.terminate()
            dashboard.wait(10)
        admin.shutdown()
        broker.stop()
        namesrv.stop()


def _page(browser: Browser, path: str) -> str:
    status, _headers, page = browser.request(path)
    assert status == 200, (path, status, page)
    return page


def _cells(page: str, table: str, row_text: str) -> list[str]:
    body = page.split(f'<table id="{table}"', 1)[1].split("</table>", 1)[0]
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.DOTALL):
        if row_text in row:
            return [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)]
    raise AssertionError(f"no row with {row_text} in {table}")


def test_the_cluster_page_shows_rocketmqs_broker(setup: Setup) -> None:
    browser = Browser(setup.url)
    row = _cells(_page(browser, "/"), "brokers", "broker-a")
    assert row[1:6] == ["broker-a", "0", setup.broker_addr, row[4], "V4_9_7"], row
    table = setup.admin.runtime_info(setup.broker_addr)
    in_today = int(table["msgPutTotalTodayNow"]) - int(table["msgPutTotalTodayMorning"])
    assert int(row[8]) <= in_today and int(row[8]) >= SENT + LATE, (row, table)


def test_topic_group_and_message_pages_show_rocketmqs_answers(setup: Setup) -> None:
    browser = Browser(setup.url)
    topic = _page(browser, f"/topics/{TOPIC}")
    assert f"{SENT + LATE} messages kept." in topic
    assert topic.count('<tr><td>broker-a</td><td class="num">') >= 4

    group = _page(browser, f"/groups/{GROUP}")
    lag = sum(progress.lag for progress in setup.admin.consumer_progress(GROUP, TOPIC))
    assert lag == LATE
    assert f'<strong id="total-lag">{lag}</strong>' in group
    assert "No consumer of this group is online." in group
    groups = _page(browser, "/groups")
    assert _cells(groups, "groups", GROUP)[1] == str(LATE)

    found = _page(browser, f"/messages?mode=key&topic={TOPIC}&key=k-5")
    assert found.count("/messages/" + setup.offset_ids["k-5"]) == 1
    message = _page(browser, f"/messages/{setup.offset_ids['k-5']}")
    assert "json (utf-8)" in message and "&#34;n&#34;: 5" in message

    config = _page(browser, f"/config?broker={setup.broker_addr}")
    assert re.search(r"<th>brokerName</th><td>broker-a</td>", config), config[:2000]


def test_a_topic_created_from_the_dashboard_is_created_by_rocketmq(setup: Setup) -> None:
    browser = Browser(setup.url)
    token = browser.token("/topics")
    form: dict[str, Any] = {"csrf_token": token, "topic": "DashboardMade", "cluster": "DefaultCluster", "queues": "2"}
    status, headers, _ = browser.request("/topics", form)
    assert status == 303 and headers["Location"] == "/topics/DashboardMade"
    configs = setup.admin.broker_topic_configs(setup.broker_addr)
    assert configs["DashboardMade"].write_queue_nums == 2
