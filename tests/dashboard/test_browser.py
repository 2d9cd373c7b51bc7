"""The dashboard in a real browser: Debian's chromium driven by Playwright clicks through every page
against the live cluster of conftest.py and checks what a person sees against what the admin API
answers. Screenshots go to the test's temporary folder, or to $SHOAL_DASHBOARD_SCREENSHOTS: the
docs' pictures are made by `SHOAL_DASHBOARD_SCREENSHOTS=docs/images/dashboard pytest tests/dashboard`."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from shoal.formats.topics import retry_topic
from tests.conftest import wait_until
from tests.dashboard.conftest import (
    ADMIN,
    LAGGING,
    LIVE_GROUP,
    POISON_GROUP,
    POISONED,
    QUEUES,
    SLOW_GROUP,
    TOPIC,
    TOTAL,
    VIEWER,
    Live,
)

CHROMIUM = Path(os.environ.get("SHOAL_CHROMIUM", "/usr/bin/chromium"))
WAIT_S = 60.0
UI_TIMEOUT_MS = 30_000  # a page render on a loaded 2-core machine: a bound for a hang, not a speed check

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists() and os.environ.get("CI") != "true",
    reason=f"no chromium at {CHROMIUM} (apt-get install chromium; .ci/run installs it)",
)


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("SHOAL_DASHBOARD_SCREENSHOTS")
    path = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert shutil.which(str(CHROMIUM)) or CHROMIUM.exists(), f"no chromium at {CHROMIUM}"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield launched
        launched.close()


def log_in(browser: Browser, live: Live, access_key: str, secret_key: str) -> Page:
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    context.set_default_timeout(UI_TIMEOUT_MS)
    page = context.new_page()
    page.goto(live.url + "/")
    expect(page).to_have_url(re.compile(r"/login\?next=/$"))
    page.get_by_label("Access key").fill(access_key)
    page.get_by_label("Secret key").fill(secret_key)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Cluster")).to_be_visible()
    return page


@pytest.fixture(scope="module")
def page(browser: Browser, live: Live) -> Iterator[Page]:
    admin_page = log_in(browser, live, ADMIN.access_key, ADMIN.secret_key)
    yield admin_page
    admin_page.context.close()


def cells(page: Page, table: str, row_text: str) -> list[str]:
    row = page.locator(f"table#{table} tbody tr", has_text=row_text).first
    return [text.strip() for text in row.locator("td").all_inner_texts()]


def test_cluster_page_shows_the_broker_as_runtime_info_does(page: Page, live: Live, screenshots: Path) -> None:
    before = live.admin.runtime_info(live.cluster.broker_addr)
    page.goto(live.url + "/")
    after = live.admin.runtime_info(live.cluster.broker_addr)
    row = cells(page, "brokers", "broker-a")
    assert row[:6] == ["DefaultCluster", "broker-a", "0", live.cluster.broker_addr, "ASYNC_MASTER", "V4_9_7"], row

    def today(table: dict[str, str]) -> int:
        return int(table["msgPutTotalTodayNow"]) - int(table["msgPutTotalTodayMorning"])

    assert today(before) <= int(row[8]) <= today(after), (row, before, after)
    assert int(row[8]) >= TOTAL
    assert row[10].endswith("%")

    # The background ticker puts about 20 messages a second: once the broker's 10 s window has
    # filled, the row shows a put rate and the charts draw it as the dashboard samples (every second).
    def charted() -> bool:
        page.reload()
        put_tps = float(cells(page, "brokers", "broker-a")[6])
        lines = page.locator("svg.chart polyline")
        if put_tps <= 0 or lines.count() < 2:
            return False
        heights = [float(point.split(",")[1]) for point in (lines.first.get_attribute("points") or "").split()]
        return min(heights) < max(heights)  # the put line has risen off zero

    wait_until(charted, WAIT_S, 1.0, what="a put rate in the row and the TPS charts' lines")
    expect(page.get_by_role("img", name="Put TPS by broker")).to_be_visible()
    page.screenshot(path=str(screenshots / "cluster.png"), full_page=True)


def test_topic_pages_count_what_topic_stats_counts(page: Page, live: Live, screenshots: Path) -> None:
    page.goto(live.url + "/topics")
    page.get_by_role("link", name=TOPIC, exact=True).click()
    expect(page.get_by_role("heading", name=f"Topic {TOPIC}")).to_be_visible()
    stats = live.admin.topic_stats(TOPIC)
    kept = sum(offsets.max_offset - offsets.min_offset for offsets in stats.offset_table.values())
    assert kept == TOTAL
    expect(page.locator("main")).to_contain_text(f"{kept} messages kept.")
    expect(page.locator("table#queues tbody tr")).to_have_count(QUEUES)
    page.screenshot(path=str(screenshots / "topic.png"), full_page=True)


def test_create_send_to_and_delete_a_topic(page: Page, live: Live) -> None:
    topic = "DashCreated"
    page.goto(live.url + "/topics")
    form = page.locator("form#create-topic")
    form.get_by_label("Topic").fill(topic)
    form.get_by_label("Queues").fill("2")
    form.get_by_role("button", name="Create").click()
    expect(page.locator(".flash")).to_contain_text(f"Topic {topic} created")
    assert topic in live.admin.topic_list()

    send = page.locator("form#send-test")
    send.get_by_label("Keys").fill("hello-key")
    send.get_by_label("Body").fill("hello from the dashboard")
    send.get_by_role("button", name="Send").click()
    expect(page.locator(".flash")).to_contain_text("Sent: SEND_OK")
    found = live.admin.query_message(topic, "hello-key")
    assert [message.body for message in found] == [b"hello from the dashboard"]

    page.get_by_role("link", name="Delete this topic…").click()
    expect(page.locator(".warning")).to_contain_text(f"deletes {topic}")
    page.get_by_label("to confirm").fill("wrong name")
    page.get_by_role("button", name="Confirm").click()
    expect(page.locator(".flash")).to_contain_text(f"Not deleted: type {topic} to confirm.")
    assert topic in live.admin.topic_list()
    page.get_by_label("to confirm").fill(topic)
    page.get_by_role("button", name="Confirm").click()
    expect(page.locator(".flash")).to_contain_text(f"Topic {topic} deleted.")
    assert topic not in live.admin.topic_list()


def test_groups_show_the_lag_consumer_progress_shows(page: Page, live: Live, screenshots: Path) -> None:
    lag = sum(progress.lag for progress in live.admin.consumer_progress(SLOW_GROUP))
    assert lag == LAGGING
    page.goto(live.url + "/groups")
    assert cells(page, "groups", SLOW_GROUP)[1] == str(LAGGING)
    assert cells(page, "groups", LIVE_GROUP)[1] == "0"
    page.screenshot(path=str(screenshots / "groups.png"), full_page=True)
    page.get_by_role("link", name=SLOW_GROUP, exact=True).click()
    expect(page.locator("#total-lag")).to_have_text(str(LAGGING))
    expect(page.locator("p#consumers")).to_contain_text("No consumer of this group is online.")

    page.goto(live.url + f"/groups/{LIVE_GROUP}")
    row = cells(page, "consumers", live.live_consumer.client_id)
    (connection,) = live.admin.consumer_connections(LIVE_GROUP).connections
    expected = [connection.client_id, connection.client_addr, connection.language, str(connection.version)]
    assert row[:4] == expected and connection.client_id == live.live_consumer.client_id, row
    page.screenshot(path=str(screenshots / "group.png"), full_page=True)

    page.get_by_role("link", name="Running info").click()
    info = live.admin.consumer_running_info(LIVE_GROUP, connection.client_id)
    assert info.properties["consumerGroup"] == LIVE_GROUP
    assert len([mq for mq in info.queues if mq.topic == TOPIC]) == QUEUES  # and its retry queue
    expect(page.locator("table#running-properties")).to_contain_text(f"consumerGroup{LIVE_GROUP}")
    expect(page.locator("table#running-queues tbody tr", has_text=TOPIC)).to_have_count(QUEUES)
    expect(page.locator("table#running-subscriptions")).to_contain_text(TOPIC)


def test_reset_by_time_makes_the_live_group_consume_again(page: Page, live: Live) -> None:
    received = len(live.received)
    page.goto(live.url + f"/groups/{LIVE_GROUP}")
    reset = page.locator("form#reset")
    reset.get_by_label("Reset to").fill("2000-01-01T00:00")
    reset.get_by_role("button", name="Reset…").click()
    expect(page.locator(".warning")).to_contain_text(f"Every queue of {TOPIC}")
    page.get_by_label("to confirm").fill(LIVE_GROUP)
    page.get_by_role("button", name="Confirm").click()
    expect(page.locator(".flash")).to_contain_text(f"Reset {QUEUES} queues of {TOPIC}")
    wait_until(lambda: len(live.received) >= received + TOTAL, WAIT_S, 0.2, what="the group consuming again")


def test_a_dead_letter_is_listed_and_resent(page: Page, live: Live) -> None:
    page.goto(live.url + f"/groups/{POISON_GROUP}")
    row = page.locator("table#dead-letters tbody tr", has_text="poison-1").first
    expect(row).to_have_count(1)
    row.get_by_role("button", name="Resend").click()
    expect(page.locator(".flash")).to_contain_text("resent to DashPoisonGroup's retry topic: SEND_OK")
    wait_until(
        lambda: bool(live.admin.query_message(retry_topic(POISON_GROUP), "poison-1")),
        WAIT_S,
        0.5,
        what="the resent message in the retry topic",
    )


def test_resending_all_dead_letters_shows_its_progress_and_resends_each(
    page: Page, live: Live, screenshots: Path
) -> None:
    page.goto(live.url + f"/groups/{POISON_GROUP}")
    expect(page.locator("table#dead-letters tbody tr")).to_have_count(POISONED)
    page.get_by_role("button", name=f"Resend all dead letters to {POISON_GROUP}").click()
    expect(page).to_have_url(re.compile(r"/jobs/\d+"))
    expect(page.get_by_role("heading", name=f"Resend {POISONED} dead letters of {POISON_GROUP}")).to_be_visible()
    expect(page.locator("#job-progress")).to_have_text(f"{POISONED} of {POISONED} done: finished.", timeout=60_000)
    expect(page.locator("#job-results li")).to_have_count(POISONED)
    page.screenshot(path=str(screenshots / "resend-job.png"), full_page=True)
    for n in range(1, POISONED + 1):
        wait_until(
            lambda n=n: bool(live.admin.query_message(retry_topic(POISON_GROUP), f"poison-{n}")),  # type: ignore[misc]
            WAIT_S,
            0.5,
            what=f"poison-{n} in the retry topic",
        )


def test_messages_by_key_by_id_and_by_time(page: Page, live: Live, screenshots: Path) -> None:
    page.goto(live.url + "/messages")
    by_key = page.locator("form#by-key")
    by_key.get_by_label("Topic").fill(TOPIC)
    by_key.get_by_label("Key").fill("order-7")
    by_key.get_by_role("button", name="By key").click()
    expect(page.locator("table#found tbody tr")).to_have_count(1)
    page.locator("table#found tbody tr a").first.click()
    expect(page.locator("#body-kind")).to_contain_text("json (utf-8)")
    expect(page.locator("pre#body")).to_contain_text('"item": "widget-7"')
    expect(page.locator("table#fields")).to_contain_text(live.sent_ids["order-7"])

    page.goto(live.url + f"/messages?mode=id&id={live.sent_ids['blob']}")
    page.locator("table#found tbody tr a").first.click()
    expect(page.locator("#body-kind")).to_contain_text("256 bytes, binary")
    expect(page.locator("pre#body")).to_contain_text("00000000  00 01 02 03")

    page.goto(live.url + "/messages")
    by_time = page.locator("form#by-time")
    by_time.get_by_label("Topic").fill(TOPIC)
    by_time.get_by_role("button", name="By time").click()
    expect(page.locator("main")).to_contain_text("messages found")
    assert page.locator("table#found tbody tr").count() == min(TOTAL, 64)
    page.screenshot(path=str(screenshots / "messages.png"), full_page=True)


def test_a_traced_message_shows_its_timeline(page: Page, live: Live, screenshots: Path) -> None:
    page.goto(live.url + f"/messages/{live.sent_ids['traced']}")
    steps = page.locator("ol#trace li")
    expect(steps).to_have_count(3)
    expect(steps.nth(0)).to_contain_text("PUB · DashProducers · ok")
    expect(steps.nth(1)).to_contain_text("SUB_BEFORE · DashTraced")
    expect(steps.nth(2)).to_contain_text("took 25 ms")
    page.screenshot(path=str(screenshots / "message-trace.png"), full_page=True)


def test_producers_page_lists_the_live_producer(page: Page, live: Live) -> None:
    def listed() -> bool:
        page.goto(live.url + f"/producers?topic={TOPIC}&group=DashProducers")
        return "No producer of" not in page.locator("table#producers").inner_text()

    wait_until(listed, WAIT_S, 1.0, what="the producer's row")
    expect(page.locator("table#producers tbody tr")).to_have_count(1)
    expect(page.locator("table#producers")).to_contain_text(live.cluster.namesrv_addr.split(":")[0])


def test_config_shows_and_changes_a_hot_key_and_shows_a_refusal(page: Page, live: Live, screenshots: Path) -> None:
    page.goto(live.url + "/config")
    config = live.admin.broker_config(live.cluster.broker_addr)
    row = page.locator("table#config tr", has_text="maxMessageSize").first
    expect(row.locator("td")).to_have_text(config["maxMessageSize"])
    page.screenshot(path=str(screenshots / "config.png"), full_page=True)
    form = page.locator("form#update-config")
    form.get_by_label("Key").fill("maxMessageSize")
    form.get_by_label("Value").fill("2097152")
    form.get_by_role("button", name="Apply").click()
    expect(page.locator(".flash")).to_contain_text("maxMessageSize set to '2097152'")
    assert live.admin.broker_config(live.cluster.broker_addr)["maxMessageSize"] == "2097152"
    form = page.locator("form#update-config")
    form.get_by_label("Key").fill("listenPort")
    form.get_by_label("Value").fill("1")
    form.get_by_role("button", name="Apply").click()
    expect(page.locator("p.error")).to_contain_text("listenPort")


def test_acl_page_masks_every_secret(page: Page, live: Live, screenshots: Path) -> None:
    page.goto(live.url + "/acl")
    expect(page.locator("table#accounts tbody tr")).to_have_count(2)
    text = page.locator("main").inner_text()
    assert ADMIN.access_key in text and VIEWER.access_key in text
    assert ADMIN.secret_key not in page.content() and VIEWER.secret_key not in page.content()
    expect(page.locator("table#accounts")).to_contain_text("da************t1")
    page.screenshot(path=str(screenshots / "acl.png"), full_page=True)


def test_a_viewer_sees_no_change_buttons(browser: Browser, live: Live) -> None:
    viewer = log_in(browser, live, VIEWER.access_key, VIEWER.secret_key)
    try:
        viewer.goto(live.url + "/topics")
        expect(viewer.get_by_role("link", name=TOPIC, exact=True)).to_be_visible()
        expect(viewer.locator("form#create-topic")).to_have_count(0)
        viewer.goto(live.url + f"/groups/{POISON_GROUP}")
        expect(viewer.get_by_role("button", name="Resend")).to_have_count(0)
    finally:
        viewer.context.close()
