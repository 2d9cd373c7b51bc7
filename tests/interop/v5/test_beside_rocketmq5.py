"""The same v5 scenarios against Apache RocketMQ 5.3.3 (NameServer + proxy in local mode, from Maven
Central's jars) and against Shoal (a broker serving gRPC from its own process, as the operator
runs it), with each official client; what differs is named here and in docs/compatibility.md.

Both servers get their topics from the same tool, RocketMQ 5's mqadmin (`updateTopic -a`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cluster
from tests.interop.client_runs import ClientRun
from tests.interop.v5 import rocketmq5
from tests.interop.v5.conftest import MIXED_TOPICS, V5Client, pom_lib
from tests.interop.v5.test_mqadmin5 import MqAdmin, mqadmin5  # noqa: F401 (fixture)
from tests.interop.v5.test_v5_clients import RUN_TIMEOUT_S
from tests.ports import free_broker_port, free_port


@dataclass(frozen=True)
class Server:
    name: str
    namesrv_addr: str
    grpc_addr: str


@pytest.fixture(scope="module")
def rocketmq5_lib() -> Path:
    """RocketMQ 5.3.3's server jars, where bench/v5_vs_rocketmq5.py finds them too (rocketmq5.ensure_lib)."""
    return pom_lib(rocketmq5.POM, rocketmq5.LIB_NAME, rocketmq5.REQUIRED_JARS)


@pytest.fixture(params=["shoal", "rocketmq"])
def server(request: pytest.FixtureRequest, tmp_path: Path, rocketmq5_lib: Path) -> Iterator[Server]:
    """Shoal or RocketMQ 5.3.3, each allowing MIXED topics (the scenarios send every type to one)."""
    if request.param == "shoal":
        cluster = Cluster(tmp_path, free_port(), free_broker_port(), free_port())
        cluster.proxy_port = free_port()
        cluster.start_namesrv()
        cluster.start_broker({**MIXED_TOPICS, "grpcServerPort": str(cluster.proxy_port)})
        yield Server("shoal", cluster.namesrv_addr, cluster.proxy_addr)
        cluster.stop_all()
        return
    ports = rocketmq5.Ports(free_port(), free_broker_port(), free_port(), free_port())
    running = rocketmq5.RocketMQ5(rocketmq5_lib, tmp_path / "rocketmq5", ports, dict(MIXED_TOPICS))
    running.start()
    yield Server("rocketmq", running.namesrv_addr, running.grpc_addr)
    running.stop()


def create(mqadmin: MqAdmin, server: Server, topic: str, message_type: str) -> None:
    output = mqadmin(
        "updateTopic", "-n", server.namesrv_addr, "-c", "DefaultCluster", "-t", topic, "-r", "4", "-w", "4",
        "-a", f"+message.type={message_type}",
    )  # fmt: skip
    assert "success" in output, output


def outcome(run: ClientRun) -> list[tuple[Any, ...]]:
    """What a person compares: each received message's body, tag, keys, user property and attempt."""
    return sorted(
        (event["body"], event["tag"], tuple(event["keys"]), event["properties"].get("index"), event["attempt"])
        for event in run.of("received")
    )


def test_the_same_sends_and_receives_on_both(
    v5_client: V5Client,
    server: Server,
    mqadmin5: MqAdmin,  # noqa: F811
    request: pytest.FixtureRequest,
) -> None:
    """Goal: normal, FIFO and delayed sends to a MIXED topic, then a SimpleConsumer that nacks its
    first message once, give the same deliveries on RocketMQ 5.3.3 as on Shoal. Method: the same
    client program against each; the expected outcome is written once below and held to both.
    The one difference: rocketmq-python-client 5.1.2 writes a delivery time's milliseconds into
    Timestamp.seconds; Shoal reads such a value as milliseconds, RocketMQ 5.3.3 refuses the send
    ("Timestamp is not valid", INTERNAL_ERROR), so that client's delayed message exists only on Shoal.
    And RocketMQ 5.3.3 may refuse that client's first receive when it arrives before the client's
    settings ("settings" is null): the program then tries once more after a second."""
    refused_delay = request.node.callspec.params["v5_client"] == "python" and server.name == "rocketmq"
    create(mqadmin5, server, "Side", "MIXED")
    sent = v5_client("produce", server.grpc_addr, "Side", "2", timeout_s=RUN_TIMEOUT_S)
    if refused_delay:
        errors = [event["error"] for event in sent.of("error")]
        assert len(errors) == 1 and "Timestamp is not valid" in errors[0], sent.events
        assert [event["body"] for event in sent.of("sent")] == ["normal-0", "normal-1", "fifo-0"]
    else:
        sent.assert_ok()
    expected = sorted(
        [
            ("normal-0", "TagA", ("key-0",), "0", 1),
            ("normal-1", "TagA", ("key-1",), "1", 1),
            ("fifo-0", "TagA", (), None, 1),
            *([] if refused_delay else [("delayed-0", "TagA", (), None, 1)]),
        ]
    )
    got = v5_client("simple", server.grpc_addr, "Side", "GID_side", str(len(expected)), "*", timeout_s=RUN_TIMEOUT_S)
    got.assert_ok()
    first = got.of("nacked")[0]["body"]
    again = next(row for row in expected if row[0] == first)
    assert outcome(got) == sorted([*expected, (*again[:4], 2)]), (server.name, got.events)


def test_a_send_of_another_type_is_refused_by_both(
    v5_client: V5Client,
    server: Server,
    mqadmin5: MqAdmin,  # noqa: F811
) -> None:
    """Goal: RocketMQ 5's message-type check, the same on both: the scenario's first (normal) send
    to a FIFO topic fails and nothing is sent. Method: `produce` against a FIFO topic."""
    create(mqadmin5, server, "SideFifo", "FIFO")
    refused = v5_client("produce", server.grpc_addr, "SideFifo", "1", timeout_s=RUN_TIMEOUT_S)
    assert refused.of("error") and not refused.of("sent"), (server.name, refused.events)


@pytest.mark.parametrize("v5_client", ["java", "go"], indirect=True)
def test_a_fifo_group_the_same_on_both(
    v5_client: V5Client,
    server: Server,
    mqadmin5: MqAdmin,  # noqa: F811
    request: pytest.FixtureRequest,
) -> None:
    """Goal: a FIFO group's push consumer sees the same order on RocketMQ 5.3.3 as on Shoal: each
    message group's first deliveries in the order sent, and the message its listener failed once
    delivered again where that client puts retries (the Java and Python clients before
    the rest of its group, the Go client after: test_v5_clients.py's FIFO test says why). Method:
    a FIFO topic and a FIFO group (`updateSubGroup -o true`) made by mqadmin on each server; the
    `fifo` scenario (two groups of 3; fifo-g1-1 fails once). The Python client holds its groups as
    the Java client does (test_v5_clients.py), so these two cover both orders."""
    create(mqadmin5, server, "SideOrder", "FIFO")
    group = mqadmin5(
        "updateSubGroup", "-n", server.namesrv_addr, "-c", "DefaultCluster", "-g", "GID_side_fifo", "-o", "true"
    )
    assert "success" in group, group
    run = v5_client("fifo", server.grpc_addr, "SideOrder", "GID_side_fifo", timeout_s=RUN_TIMEOUT_S)
    run.assert_ok()
    retry_before_the_rest = request.node.callspec.params["v5_client"] != "go"
    g1 = [event["body"] for event in run.of("consumed") if "-g1-" in event["body"]]
    g2 = [event["body"] for event in run.of("consumed") if "-g2-" in event["body"]]
    expected_g1 = ["fifo-g1-0", "fifo-g1-1", "fifo-g1-2"]
    expected_g1.insert(2 if retry_before_the_rest else 3, "fifo-g1-1")
    assert (g1, g2) == (expected_g1, ["fifo-g2-0", "fifo-g2-1", "fifo-g2-2"]), (server.name, run.events)
