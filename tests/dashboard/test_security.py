"""What the dashboard refuses, over real HTTP against `shoal dashboard` on a live cluster: pages
without a login, wrong keys, a POST without the session's CSRF token, a change by a non-admin
account, serving beyond loopback without accounts."""

from __future__ import annotations

from click.testing import CliRunner

from shoal.cli.main import cli
from tests.dashboard.conftest import ADMIN, TOPIC, VIEWER, Live
from tests.dashboard.http_session import Browser


def test_every_page_needs_a_login_and_wrong_keys_are_refused(live: Live) -> None:
    browser = Browser(live.url)
    for path in ("/", "/topics", f"/topics/{TOPIC}", "/groups", "/messages", "/config", "/acl"):
        status, headers, _ = browser.request(path)
        assert status == 303 and headers["Location"].startswith("/login?next="), (path, status)
    assert browser.request("/healthz")[0] == 200
    assert browser.log_in(ADMIN.access_key, "not-the-secret") == 401
    assert browser.log_in("nobody-at-all", ADMIN.secret_key) == 401
    assert browser.request("/")[0] == 303
    assert browser.log_in(ADMIN.access_key, ADMIN.secret_key) == 303
    status, headers, page = browser.request("/")
    assert status == 200 and "broker-a" in page
    assert headers["X-Frame-Options"] == "DENY" and "default-src 'self'" in headers["Content-Security-Policy"]


def test_a_login_form_from_elsewhere_is_refused(live: Live) -> None:
    """Login CSRF: the form's token must match the cookie the login page set."""
    browser = Browser(live.url)
    form = {"csrf_token": "forged", "access_key": ADMIN.access_key, "secret_key": ADMIN.secret_key}
    assert browser.request("/login", form)[0] == 403


def test_a_change_without_the_csrf_token_is_refused_and_changes_nothing(live: Live) -> None:
    browser = Browser(live.url)
    assert browser.log_in(ADMIN.access_key, ADMIN.secret_key) == 303
    form = {"topic": "DashForged", "cluster": "DefaultCluster", "queues": "4"}
    assert browser.request("/topics", form)[0] == 403
    assert browser.request("/topics", {**form, "csrf_token": "a-guess"})[0] == 403
    other = Browser(live.url)
    assert other.log_in(ADMIN.access_key, ADMIN.secret_key) == 303
    assert browser.request("/topics", {**form, "csrf_token": other.token("/topics")})[0] == 403  # not this session's
    assert "DashForged" not in live.admin.topic_list()


def test_a_viewer_sees_the_pages_but_cannot_change_anything(live: Live) -> None:
    browser = Browser(live.url)
    assert browser.log_in(VIEWER.access_key, VIEWER.secret_key) == 303
    status, _, page = browser.request("/topics")
    assert status == 200 and TOPIC in page and 'id="create-topic"' not in page
    token = browser.token("/topics")
    status, _, _ = browser.request(
        "/topics", {"csrf_token": token, "topic": "DashByViewer", "cluster": "DefaultCluster"}
    )
    assert status == 403
    status, _, _ = browser.request(f"/topics/{TOPIC}/delete", {"csrf_token": token, "confirm": TOPIC})
    assert status == 403
    assert "DashByViewer" not in live.admin.topic_list() and TOPIC in live.admin.topic_list()


def test_logging_out_ends_the_session(live: Live) -> None:
    browser = Browser(live.url)
    assert browser.log_in(ADMIN.access_key, ADMIN.secret_key) == 303
    assert browser.request("/logout", {"csrf_token": browser.token("/")})[0] == 303
    assert browser.request("/")[0] == 303


def test_without_accounts_only_loopback_is_served() -> None:
    result = CliRunner().invoke(cli, ["dashboard", "-n", "127.0.0.1:9876", "--host", "0.0.0.0"])
    assert result.exit_code == 2 and "without accounts" in result.output, result.output
