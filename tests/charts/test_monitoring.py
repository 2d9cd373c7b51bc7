"""The chart's monitoring files, charts/shoal/monitoring: the alert rules pass `promtool test rules`
on recorded series (tests/charts/monitoring/alerts_test.yaml), a real Prometheus scraping a real
broker fires ShoalBrokerDown once the broker is stopped, and every series the rules and the Grafana
dashboard read is one a real broker exports."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from tests.conftest import Cluster, wait_until
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "charts" / "shoal" / "monitoring"
ALERTS = MONITORING / "alerts.yaml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
RULE_TESTS = Path(__file__).resolve().parent / "monitoring" / "alerts_test.yaml"
PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
PROMETHEUS_START_S = 60.0
ALERT_FIRES_WITHIN_S = 180.0  # ShoalBrokerDown waits `for: 1m` after the first failed scrape
METRIC_NAME = re.compile(r"\b(shoal_[a-z_]+)")

needs_prometheus = pytest.mark.skipif(
    (PROMTOOL is None or PROMETHEUS is None) and os.environ.get("CI") != "true",
    reason="Debian's prometheus package (promtool, prometheus) is not installed; .ci/run installs it",
)


def _rules() -> list[dict[str, Any]]:
    loaded = yaml.safe_load(ALERTS.read_text())
    return [rule for group in loaded["groups"] for rule in group["rules"]]


def _dashboard_exprs() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [target["expr"] for panel in panels for target in panel["targets"]]


@needs_prometheus
def test_promtool_checks_the_rules_and_passes_their_unit_tests() -> None:
    assert PROMTOOL is not None
    checked = subprocess.run([PROMTOOL, "check", "rules", str(ALERTS)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0 and f"SUCCESS: {len(_rules())} rules found" in checked.stdout, checked
    tested = subprocess.run(
        [PROMTOOL, "test", "rules", RULE_TESTS.name],
        cwd=RULE_TESTS.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


def test_every_alert_the_issue_names_is_there_with_a_severity_and_words() -> None:
    rules = {rule["alert"]: rule for rule in _rules()}
    assert set(rules) == {
        "ShoalBrokerDown",
        "ShoalDiskUsageHigh",
        "ShoalDiskUsageCritical",
        "ShoalDiskAlmostFull",
        "ShoalConsumerLagGrowing",
        "ShoalSlaveFallingBehind",
        "ShoalDeadLettersGrowing",
        "ShoalFlushTimeouts",
        "ShoalBrokerNotRegistered",
    }
    for name, rule in rules.items():
        assert rule["labels"]["severity"] in {"warning", "critical"}, name
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name


def test_the_grafana_dashboard_is_importable_json() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "shoal-brokers" and dashboard["panels"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    variables = {variable["name"] for variable in dashboard["templating"]["list"]}
    assert variables == {"datasource", "instance"}
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]


@pytest.fixture
def broker_metrics(cluster: Cluster) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.metrics_port}/metrics", timeout=10) as response:
        text: str = response.read().decode()
    return text


def test_the_rules_and_panels_read_series_a_broker_exports(broker_metrics: str) -> None:
    # Declared families, with or without samples yet (a labelled counter has none before its first event).
    exported = set()
    for name, kind in re.findall(r"^# TYPE (shoal_[a-z_]+) (\w+)$", broker_metrics, re.MULTILINE):
        exported.add(f"{name}_total" if kind == "counter" and not name.endswith("_total") else name)
    wanted = {name for rule in _rules() for name in METRIC_NAME.findall(rule["expr"])}
    wanted |= {name for expr in _dashboard_exprs() for name in METRIC_NAME.findall(expr)}
    assert wanted and wanted <= exported, sorted(wanted - exported)


@pytest.fixture
def prometheus(cluster: Cluster, tmp_path: Path) -> Iterator[str]:
    """A real Prometheus scraping the cluster's broker every second, with the chart's rules."""
    assert PROMETHEUS is not None
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [
            {"job_name": "shoal-broker", "static_configs": [{"targets": [f"127.0.0.1:{cluster.metrics_port}"]}]}
        ],
    }
    config_path = tmp_path / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config))
    log_path = tmp_path / "prometheus.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config_path}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _ready(url) or process.poll() is not None, PROMETHEUS_START_S, 0.5, what="Prometheus")
        assert process.poll() is None, log_path.read_text()
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
            return cast("bool", response.status == 200)
    except OSError:
        return False


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())["data"]


def _alert_states(url: str, name: str) -> list[str]:
    return [alert["state"] for alert in _get(f"{url}/api/v1/alerts")["alerts"] if alert["labels"]["alertname"] == name]


@needs_prometheus
def test_prometheus_fires_broker_down_when_the_broker_stops(cluster: Cluster, prometheus: str) -> None:
    def scraped_up() -> bool:
        result = _get(f"{prometheus}/api/v1/query?query=up%7Bjob%3D%22shoal-broker%22%7D")["result"]
        return bool(result) and result[0]["value"][1] == "1"

    wait_until(scraped_up, PROMETHEUS_START_S, 0.5, what="the broker's first scrape")
    registered = _get(f"{prometheus}/api/v1/query?query=shoal_namesrv_registered")["result"]
    assert [sample["value"][1] for sample in registered] == ["1"], registered
    time.sleep(3)  # a few evaluations with the broker up
    assert _alert_states(prometheus, "ShoalBrokerDown") == []
    cluster.stop("broker")
    wait_until(
        lambda: _alert_states(prometheus, "ShoalBrokerDown") == ["firing"],
        ALERT_FIRES_WITHIN_S,
        1.0,
        what="ShoalBrokerDown firing",
        explain=lambda: f"states: {_alert_states(prometheus, 'ShoalBrokerDown')}",
    )
