"""TLS with RocketMQ 4.9.7's Java client: `-Dtls.enable=true` (and its tls.client.* properties)
against a Shoal NameServer and broker in `tls.server.mode=enforcing`, which closes any plain
connection, so every success here went over TLS."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Cluster
from tests.ports import free_broker_port, free_port
from tests.tls_certs import TlsFiles, make_tls_files

COUNT = 6
TLS_ON = {"tls.enable": "true"}
"""The Java client's switch (TlsSystemConfig.tlsEnable); RocketMQ's test mode trusts any server."""


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def enforcing(tmp_path_factory: pytest.TempPathFactory, tls_files: TlsFiles) -> Iterator[Cluster]:
    """A NameServer and a broker that take TLS only (the broker registers over TLS: useTLS follows enforcing)."""
    root = tmp_path_factory.mktemp("shoal-tls")
    tls = {
        "tls.server.mode": "enforcing",
        "tls.server.certPath": str(tls_files.server_cert),
        "tls.server.keyPath": str(tls_files.server_key),
    }
    running = Cluster(root, free_port(), free_broker_port(), free_port())
    namesrv_conf = root / "namesrv.conf"
    namesrv_conf.write_text("".join(f"{key}={value}\n" for key, value in {"listenHost": "127.0.0.1", **tls}.items()))
    try:
        running._spawn(
            "namesrv",
            ["namesrv", "-c", str(namesrv_conf), "--port", str(running.namesrv_port)],
            running.namesrv_port,
            "NameServer listening",
        )
        running.start_broker(tls)
    except BaseException:
        running.stop_all()
        raise
    yield running
    running.stop_all()


def produce_and_read_back(java: Any, cluster: Cluster, topic: str, properties: dict[str, str]) -> list[str]:
    """COUNT sync sends, then a lite pull consumer reads the topic from its first offsets; both
    programs run with `properties` as JVM system properties. The bodies read back."""
    sent = java.run(
        "Produce",
        {"namesrv": cluster.namesrv_addr, "topic": topic, "mode": "sync", "count": COUNT},
        properties=properties,
    )
    assert not sent.of("error"), sent.events
    assert [line["status"] for line in sent.of("sent")] == ["SEND_OK"] * COUNT
    read = java.run(
        "LitePull",
        {
            "namesrv": cluster.namesrv_addr,
            "group": f"{topic}_reader",
            "topic": topic,
            "mode": "assign",
            "count": COUNT,
            "timeoutMs": 30_000,
        },
        properties=properties,
    )
    assert not read.of("error"), read.events
    return sorted(line["body"] for line in read.of("received"))


def test_java_client_with_tls_enable_produces_and_consumes(java: Any, enforcing: Cluster, unique: Any) -> None:
    """Goal: the Java producer and consumer with -Dtls.enable=true (RocketMQ's defaults: test mode,
    any server certificate trusted) work against TLS-only ports. Method: send COUNT messages, read
    them all back with a lite pull consumer, both over TLS."""
    bodies = produce_and_read_back(java, enforcing, unique("TlsJava"), TLS_ON)
    assert bodies == sorted(f"body-{index}" for index in range(COUNT))


def test_java_client_checking_the_server_certificate(
    java: Any, enforcing: Cluster, tls_files: TlsFiles, unique: Any
) -> None:
    """Goal: with tls.test.mode.enable=false and tls.client.authServer=true the Java client checks
    Shoal's certificate against tls.client.trustCertPath: the signing CA works, an unrelated CA is
    refused. Method: produce and read back with the right CA; a producer trusting the other CA fails."""
    checking = {
        **TLS_ON,
        "tls.test.mode.enable": "false",
        "tls.client.authServer": "true",
        "tls.client.trustCertPath": str(tls_files.ca),
    }
    assert len(produce_and_read_back(java, enforcing, unique("TlsJavaAuth"), checking)) == COUNT
    wrong = java.run(
        "Produce",
        {
            "namesrv": enforcing.namesrv_addr,
            "topic": unique("TlsJavaWrongCa"),
            "mode": "sync",
            "count": 1,
            "sendTimeout": 3000,
        },
        properties={**checking, "tls.client.trustCertPath": str(tls_files.other_ca)},
    )
    assert wrong.of("error") and not wrong.of("sent"), wrong.events


def test_java_client_without_tls_is_refused_by_enforcing_ports(java: Any, enforcing: Cluster, unique: Any) -> None:
    """Goal: a plain Java client cannot use an enforcing cluster, and the refusal is logged once per
    host. Method: a producer without tls.enable fails (no route: the NameServer closed it); the
    NameServer's log has one refusal line."""
    plain = java.run(
        "Produce",
        {
            "namesrv": enforcing.namesrv_addr,
            "topic": unique("TlsJavaPlain"),
            "mode": "sync",
            "count": 1,
            "sendTimeout": 3000,
        },
    )
    assert plain.of("error") and not plain.of("sent"), plain.events
    refusals = [line for line in enforcing.log("namesrv").splitlines() if "closed a plain connection" in line]
    assert len(refusals) == 1 and "tls.server.mode=enforcing" in refusals[0], refusals
