"""The metrics/health port's bearer token (`metricsTokenFile`): /metrics needs it, /healthz stays
open for kubelet probes; a missing token file is a one-line startup error."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from shoal.broker.metrics_endpoint import bearer_matches, load_metrics_token
from shoal.remoting.settings import ConfigError
from tests.conftest import Cluster, wait_until
from tests.ports import free_broker_port

TOKEN = "s3cr3t-token_value"
UNREGISTERED_WITHIN_S = 30.0  # rounds every second; a refused connect fails at once, a lost one at its timeout


def get(port: int, path: str, token: str | None = None) -> tuple[int, str, dict[str, str]]:
    """Status, body and headers of GET http://127.0.0.1:port/path (with a bearer token when given)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), dict(error.headers)


@pytest.mark.slow
def test_metrics_need_the_bearer_token_and_health_stays_open(
    cluster_factory: Callable[[dict[str, str]], Cluster], tmp_path: Path
) -> None:
    """Goal: with metricsTokenFile, /metrics answers 401 (with a Bearer challenge) without the token
    or with a wrong one, 200 with it; /healthz answers without any. Method: HTTP requests to a real
    broker's metrics port."""
    token_file = tmp_path / "metrics-token"
    token_file.write_text(TOKEN + "\n")  # a trailing newline, as `kubectl create secret --from-file` keeps it
    cluster = cluster_factory({"metricsTokenFile": str(token_file)})
    status, body, headers = get(cluster.metrics_port, "/metrics")
    assert status == 401 and "Bearer" in headers["WWW-Authenticate"] and "Authorization: Bearer" in body
    assert get(cluster.metrics_port, "/metrics", "wrong")[0] == 401
    status, body, _ = get(cluster.metrics_port, "/metrics", TOKEN)
    assert status == 200 and "shoal_store_commitlog_max_offset" in body
    assert get(cluster.metrics_port, "/healthz")[0] == 200
    assert "bearer token required" in cluster.log("broker")


def test_missing_token_file_is_a_one_line_startup_error(tmp_path: Path) -> None:
    """Goal: a metricsTokenFile that does not exist stops the broker at start with one line, before
    the store is created. Method: run `shoal broker` with it; check exit code, stderr, store dir."""
    store = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    missing = tmp_path / "no-token"
    conf.write_text(
        f"listenHost=127.0.0.1\nlistenPort={free_broker_port()}\nstorePathRootDir={store}\nmetricsTokenFile={missing}\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "shoal.cli.main", "broker", "-c", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"Error: metricsTokenFile={missing}: cannot read it: No such file or directory"
    ]
    assert not store.exists()


def test_token_file_content_and_header_matching(tmp_path: Path) -> None:
    """Goal: the token is the file's one word; the header must be `Bearer <token>` exactly (scheme
    case-insensitive). Method: load good and bad files; match header variants."""
    path = tmp_path / "token"
    path.write_text(f"  {TOKEN}\n")
    assert load_metrics_token(str(path)) == TOKEN
    assert load_metrics_token("") is None
    for bad in ("", "two words", "x" * 5000):
        path.write_text(bad)
        with pytest.raises(ConfigError, match="metricsTokenFile="):
            load_metrics_token(str(path))
    assert bearer_matches(f"bearer {TOKEN}", TOKEN)
    assert bearer_matches(f"  Bearer {TOKEN} ", TOKEN)
    assert not bearer_matches(f"Basic {TOKEN}", TOKEN)
    assert not bearer_matches(f"Bearer {TOKEN[:-1]}", TOKEN)
    assert not bearer_matches(None, TOKEN)


def test_the_metrics_port_speaks_plain_http_to_any_client(cluster: Cluster) -> None:
    """Goal: the metrics port is an ordinary HTTP/1.1 server: keep-alive scrapes on one connection,
    404 for an unknown path, 405 for a method other than GET/HEAD, and a malformed request line
    answered 400 while the next client is still served. Method: http.client and a raw socket."""
    import http.client
    import socket

    connection = http.client.HTTPConnection("127.0.0.1", cluster.metrics_port, timeout=10)
    try:
        for _ in range(2):  # the same connection, kept alive
            connection.request("GET", "/metrics")
            response = connection.getresponse()
            body = response.read().decode()
            assert response.status == 200 and "shoal_store_commitlog_max_offset" in body
            assert response.getheader("Content-Type", "").startswith("text/plain; version=0.0.4")
        connection.request("GET", "/nothing-here")
        response = connection.getresponse()
        response.read()
        assert response.status == 404
        connection.request("POST", "/metrics", body=b"x")
        response = connection.getresponse()
        response.read()
        assert response.status == 405
    finally:
        connection.close()
    with socket.create_connection(("127.0.0.1", cluster.metrics_port), timeout=10) as sock:
        sock.sendall(b"\x00\x01 not http at all\r\n\r\n")
        status_line = sock.makefile("rb").readline()
        assert status_line.startswith(b"HTTP/1.") and status_line.split()[1] == b"400", status_line
    assert get(cluster.metrics_port, "/healthz")[0] == 200


def _sample(text: str, series: str) -> float:
    """The value of one exact series line (`name{labels}` as the exposition writes it)."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {series} in:\n{text}")


@pytest.mark.slow
def test_the_alerting_series_follow_the_broker(cluster_factory: Callable[[dict[str, str]], Cluster]) -> None:
    """What the alert rules read (charts/shoal/monitoring): disk use, haSlaveFallbehindMax, and the
    registration with each NameServer, which drops to 0 once the NameServer is gone."""
    cluster = cluster_factory({"registerNameServerPeriod": "1000", "haSlaveFallbehindMax": "1048576"})
    status, text, _ = get(cluster.metrics_port, "/metrics")
    assert status == 200
    assert 0.0 < _sample(text, "shoal_store_disk_used_ratio") <= 1.0
    assert _sample(text, "shoal_ha_slave_fallbehind_max_bytes") == 1048576.0
    registered = f'shoal_namesrv_registered{{namesrv="{cluster.namesrv_addr}"}}'
    assert _sample(text, registered) == 1.0
    assert "# TYPE shoal_put_timeouts_total counter" in text
    cluster.stop("namesrv")

    def unregistered() -> bool:
        return _sample(get(cluster.metrics_port, "/metrics")[1], registered) == 0.0

    wait_until(unregistered, UNREGISTERED_WITHIN_S, 0.5, what="shoal_namesrv_registered 0 after the NameServer stopped")


def test_the_collector_series_show_the_startup_heap_frozen(cluster: Cluster) -> None:
    """Goal: a broker run by `shoal broker` freezes what its start made out of garbage collections
    (remoting/heap.py) and reports its collections and pauses by generation. Method: scrape a real
    broker process's /metrics."""
    status, text, _ = get(cluster.metrics_port, "/metrics")
    assert status == 200
    # The imports alone make about 40,000 objects; an unfrozen process reports 0.
    assert _sample(text, "shoal_gc_frozen_objects") >= 10_000
    # Freezing starts with a full collection, after the timing hook was installed.
    assert _sample(text, 'shoal_gc_collections_total{generation="2"}') >= 1
    for generation in range(3):
        total = _sample(text, f'shoal_gc_pause_seconds_total{{generation="{generation}"}}')
        longest = _sample(text, f'shoal_gc_longest_pause_seconds{{generation="{generation}"}}')
        assert 0.0 <= longest <= total
    assert _sample(text, 'shoal_gc_longest_pause_seconds{generation="2"}') > 0.0
