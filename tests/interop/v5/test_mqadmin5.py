"""RocketMQ 5's mqadmin (rocketmq-tools 5.3.3 from Maven Central, its own JVM classpath) against
Shoal: typed topics (`updateTopic -a +message.type=FIFO`), MIXED refused as a 5.x broker refuses it,
and the read commands a 5.x operator runs (topicRoute, topicStatus, topicList, clusterList,
updateSubGroup with consumeMessageOrderly, getBrokerConfig). The attribute written is then checked
at the source: GET_TOPIC_CONFIG and the gRPC port's route."""

from __future__ import annotations

import asyncio
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from shoal.formats.json_compat import loads
from shoal.protocol import RequestCode, ResponseCode
from shoal.protocol.v2 import definition_pb2 as v2
from shoal.protocol.v2 import service_pb2 as rpc
from shoal.protocol.v2.service_pb2_grpc import MessagingServiceStub
from shoal.remoting import RemotingClient
from tests.conftest import Cluster
from tests.interop.v5.conftest import pom_lib
from tests.ports import free_broker_port, free_port

HERE = Path(__file__).resolve().parent
POM = HERE / "mqadmin" / "pom.xml"
TOOLS_JAR = "rocketmq-tools-5.3.3.jar"
COMMAND_TIMEOUT_S = 120.0
"""One mqadmin run: a JVM start (2-4 s here) and a few requests."""

MqAdmin = Callable[..., str]


@pytest.fixture(scope="session")
def mqadmin5() -> MqAdmin:
    """`mqadmin <command> ...` of RocketMQ 5.3.3: its jars fetched once into the cache."""
    lib = pom_lib(POM, "rocketmq-tools", (TOOLS_JAR,))
    directory = lib.parent

    def run(*args: str) -> str:
        command = ["java", "-cp", f"{lib}/*", "org.apache.rocketmq.tools.command.MQAdminStartup", *args]
        # ROCKETMQ_HOME: mqadmin reads conf/tools.yml under it for ACL; none here.
        env = {"ROCKETMQ_HOME": str(directory), "PATH": "/usr/bin:/bin"}
        done = subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, env=env, check=False)
        return done.stdout + done.stderr

    return run


@pytest.fixture
def typed_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A NameServer, a broker serving gRPC from its own process (grpcServerPort), as the operator runs it."""
    running = Cluster(tmp_path, free_port(), free_broker_port(), free_port())
    running.proxy_port = free_port()
    running.start_namesrv()
    running.start_broker({"grpcServerPort": str(running.proxy_port)})
    yield running
    running.stop_all()


def topic_attributes(cluster: Cluster, topic: str) -> dict[str, object]:
    async def read() -> dict[str, object]:
        client = RemotingClient()
        try:
            answer = await client.invoke(cluster.broker_addr, RequestCode.GET_TOPIC_CONFIG, {"topic": topic})
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            config = loads(answer.body or b"")
            assert isinstance(config, dict)
            attributes = config.get("attributes", {})
            assert isinstance(attributes, dict)
            return {str(key): value for key, value in attributes.items()}
        finally:
            await client.close()

    return asyncio.run(read())


def accepted_types(cluster: Cluster, topic: str) -> set[tuple[int, ...]]:
    async def route() -> set[tuple[int, ...]]:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{cluster.proxy_port}") as channel:
            answer = await MessagingServiceStub(channel).QueryRoute(  # type: ignore[no-untyped-call]
                rpc.QueryRouteRequest(topic=v2.Resource(name=topic)), timeout=30
            )
            assert answer.status.code == v2.OK, answer.status
            return {tuple(queue.accept_message_types) for queue in answer.message_queues}

    return asyncio.run(route())


def test_typed_topics_from_mqadmin5_reach_the_broker_and_the_grpc_port(
    mqadmin5: MqAdmin, typed_cluster: Cluster
) -> None:
    """Goal: a RocketMQ 5 operator's `mqadmin updateTopic -a +message.type=FIFO` makes a FIFO topic
    that Shoal keeps and the gRPC port enforces; `-a +message.type=MIXED` fails as on a 5.x broker
    (CODE 29, its remark). Method: the real 5.3.3 mqadmin, then GET_TOPIC_CONFIG and QueryRoute."""
    ns = ("-n", typed_cluster.namesrv_addr)
    created = mqadmin5(
        "updateTopic", *ns, "-c", "DefaultCluster", "-t", "Typed5", "-r", "4", "-w", "4", "-a", "+message.type=FIFO"
    )
    assert f"create topic to {typed_cluster.broker_addr} success." in created, created
    assert topic_attributes(typed_cluster, "Typed5") == {"message.type": "FIFO"}
    assert accepted_types(typed_cluster, "Typed5") == {(v2.FIFO,)}
    mixed = mqadmin5("updateTopic", *ns, "-c", "DefaultCluster", "-t", "Mixed5", "-a", "+message.type=MIXED")
    assert "CODE: 29  DESC: MIXED message type is not supported." in mixed, mixed
    changed = mqadmin5(
        "updateTopic", *ns, "-c", "DefaultCluster", "-t", "Typed5", "-r", "4", "-w", "4", "-a", "+message.type=DELAY"
    )
    assert "success" in changed, changed
    assert topic_attributes(typed_cluster, "Typed5") == {"message.type": "DELAY"}
    unknown = mqadmin5("updateTopic", *ns, "-c", "DefaultCluster", "-t", "Typed5", "-a", "+colour=red")
    assert "unsupported key: colour" in unknown, unknown


def test_mqadmin5_read_commands_and_a_fifo_group(mqadmin5: MqAdmin, typed_cluster: Cluster) -> None:
    """Goal: the everyday 5.x commands answer against Shoal as against a 5.x broker. Method:
    topicRoute, topicStatus, topicList, clusterList (the master ACTIVATED), updateSubGroup -o true
    (a FIFO group, read back by GET_SUBSCRIPTIONGROUP_CONFIG) and getBrokerConfig."""
    ns = ("-n", typed_cluster.namesrv_addr)
    assert "success" in mqadmin5("updateTopic", *ns, "-c", "DefaultCluster", "-t", "Read5", "-r", "2", "-w", "2")
    route = mqadmin5("topicRoute", *ns, "-t", "Read5")
    assert '"brokerName":"broker-a"' in route and '"readQueueNums":2' in route, route
    status = mqadmin5("topicStatus", *ns, "-t", "Read5")
    assert len(re.findall(r"^broker-a\s+\d\s+0\s+0", status, re.MULTILINE)) == 2, status
    assert "Read5" in mqadmin5("topicList", *ns).split()
    cluster = mqadmin5("clusterList", *ns)
    row = next(line for line in cluster.splitlines() if typed_cluster.broker_addr in line)
    assert row.split()[0] == "DefaultCluster" and row.split()[-1] == "true", cluster
    group = mqadmin5("updateSubGroup", *ns, "-c", "DefaultCluster", "-g", "GID_fifo5", "-o", "true")
    assert "create subscription group to" in group and "success" in group, group

    async def read_group() -> object:
        client = RemotingClient()
        try:
            answer = await client.invoke(
                typed_cluster.broker_addr, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "GID_fifo5"}
            )
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            return loads(answer.body or b"")
        finally:
            await client.close()

    config = asyncio.run(read_group())
    assert isinstance(config, dict) and config.get("consumeMessageOrderly") is True, config
    broker_config = mqadmin5("getBrokerConfig", *ns, "-c", "DefaultCluster")
    assert "brokerName" in broker_config and "broker-a" in broker_config, broker_config
