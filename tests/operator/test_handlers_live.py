"""Handler tests against real brokers: kopf + KMock for the Kubernetes API, real NameServer and
Broker processes on 127.0.0.1 for everything the operator asks the brokers.

KMock has no kubelet, so pods are written into it by the test (as the StatefulSet controller
would), and `handlers.broker_address` maps each pod to the real broker playing it. Every step of
a roll, a promotion or a drain needs a reconcile; instead of waiting for the timer the tests
"poke" the Broker with an annotation, which kopf delivers as an update.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kmock as km
import pytest

from shoal.client import Admin, Message, Producer, SendStatus
from shoal.operator import failover, handlers, limits
from shoal.protocol import PermName, RequestCode, ResponseCode
from tests.conftest import Cluster
from tests.operator import test_handlers as harness
from tests.operator.test_handlers import (
    BROKER_PATH,
    BROKERS,
    NAMESPACE,
    TOPICS,
    broker_status,
    condition_of,
    get_object,
    patch_object,
    post,
    running_operator,
    seed_cluster,
    wait_until,
)
from tests.operator.test_handlers import broker_body as example_broker_body
from tests.ports import free_broker_port, free_port

# The KMock API server and the handler registration are test_handlers.py's fixtures.
kube_api = harness.kube_api
_handlers_registered = harness._handlers_registered

TOPIC_PATH = f"/apis/shoal.io/v1alpha1/namespaces/{NAMESPACE}/topics"
LIVE_WAIT_S = 15.0
CLUSTER_NAME = "orders"


# ---------------------------------------------------------------- real brokers


@pytest.fixture
def real_group(tmp_path: Path) -> Iterator[tuple[Cluster, Cluster]]:
    """A NameServer, a SYNC_MASTER `orders-g0` and its slave, as real processes."""
    ha_port = free_port()
    master = Cluster(tmp_path / "master", free_port(), free_broker_port(), free_port())
    master.root.mkdir()
    slave = Cluster(tmp_path / "slave", master.namesrv_port, free_broker_port(), free_port())
    slave.root.mkdir()
    common = {"brokerClusterName": CLUSTER_NAME, "brokerName": "orders-g0", "slaveTimeout": "1500"}
    try:
        master.start_namesrv()
        master.start_broker({**common, "brokerId": "0", "brokerRole": "SYNC_MASTER", "haListenPort": str(ha_port)})
        slave.start_broker(
            {**common, "brokerId": "1", "brokerRole": "SLAVE", "haMasterAddress": f"127.0.0.1:{ha_port}"}
        )
        yield master, slave
    finally:
        slave.stop_all()
        master.stop_all()


@pytest.fixture
def real_broker(tmp_path: Path) -> Iterator[Callable[[str], Cluster]]:
    """A NameServer + one master named `brokerName` of cluster `orders`."""
    started: list[Cluster] = []

    def start(broker_name: str) -> Cluster:
        running = Cluster(tmp_path / broker_name, free_port(), free_broker_port(), free_port())
        running.root.mkdir()
        started.append(running)
        running.start_namesrv()
        running.start_broker({"brokerClusterName": CLUSTER_NAME, "brokerName": broker_name})
        return running

    yield start
    for running in started:
        running.stop_all()


# ---------------------------------------------------------------- Kubernetes side


def live_broker_body(namesrv_addr: str, **spec: Any) -> dict[str, Any]:
    body = example_broker_body(nameServer={"replicas": 0, "external": [namesrv_addr]}, **spec)
    body["spec"]["clusterName"] = CLUSTER_NAME
    return body


def put_pod(api: km.KubernetesEmulator, name: str, revision: str, ready: bool = True) -> None:
    """A broker pod as the StatefulSet controller and kubelet would leave it."""
    group = name.rsplit("-", 1)[0]
    api.objects["v1/pods", NAMESPACE, name] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "resourceVersion": "1",
            "labels": {"shoal.io/cluster": "orders", "shoal.io/group": group, "controller-revision-hash": revision},
        },
        "spec": {"nodeName": "node-0"},
        "status": {"podIP": "127.0.0.1", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def set_update_revision(api: km.KubernetesEmulator, name: str, revision: str) -> None:
    """What the StatefulSet controller reports after a template change (KMock runs none)."""
    api.objects["apps/v1/statefulsets", NAMESPACE, name]["status"] = {
        "replicas": 2,
        "readyReplicas": 2,
        "updateRevision": revision,
    }


def exists(api: km.KubernetesEmulator, resource: str, name: str) -> bool:
    """KMock soft-deletes: a deleted object stays in `objects` with `.deleted` set."""
    try:
        return not api.objects[resource, NAMESPACE, name].deleted
    except (KeyError, LookupError):
        return False


class Poker:
    """Triggers a reconcile of one object by changing a test annotation (kopf: an update)."""

    def __init__(self, api: km.KubernetesEmulator, path: str, resource: str = BROKERS) -> None:
        self.api, self.path, self.resource, self.count = api, path, resource, 0

    def _patches(self) -> int:
        return len(list(self.api[km.action.UPDATE, km.resource(self.resource)]))

    async def __call__(self, **annotations: str | None) -> None:
        self.count += 1
        changes = {"test.shoal.io/poke": str(self.count), **annotations}
        await patch_object(self.api, self.path, {"metadata": {"annotations": changes}})

    async def settled(self) -> None:
        """Poke and wait until the handler wrote its result (a patch after the poke's own)."""
        before = self._patches()
        await self()
        await wait_until(lambda: self._patches() >= before + 2, LIVE_WAIT_S)


def reason(api: km.KubernetesEmulator, kind: str) -> str:
    """The Broker's condition `kind` reason, "" before the first status."""
    conditions = broker_status(api).get("conditions") or []
    return next((str(c["reason"]) for c in conditions if c["type"] == kind), "")


async def wait_for(predicate: Callable[[], bool]) -> None:
    await wait_until(predicate, LIVE_WAIT_S)


def map_pods(monkeypatch: pytest.MonkeyPatch, addresses: dict[str, str]) -> None:
    monkeypatch.setattr(handlers, "broker_address", lambda pod: addresses.get(pod["metadata"]["name"], ""))


async def send(namesrv_addr: str, topic: str, count: int) -> None:
    """Send `count` messages once the NameServer routes `topic` (a topic created on a broker is
    routed after that broker's next registration; before it the producer would use TBW102's)."""
    async with Admin(namesrv_addr) as admin:
        for _ in range(200):
            if topic in await admin.topic_list():
                break
            await asyncio.sleep(0.05)
    async with Producer("PID_operator_live", namesrv_addr) as producer:
        for number in range(count):
            result = await producer.send(Message(topic, f"m{number}".encode()))
            assert result.status == SendStatus.SEND_OK


async def commit(broker_addr: str, topic: str, group: str, offsets: dict[int, int]) -> None:
    from shoal.remoting import RemotingClient

    client = RemotingClient()
    try:
        for queue_id, offset in offsets.items():
            fields = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "commitOffset": str(offset)}
            response = await client.invoke(broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET, fields, timeout_s=5.0)
            assert response.code == ResponseCode.SUCCESS, response.remark
    finally:
        await client.close()


async def in_sync(master: Cluster, slave: Cluster) -> None:
    async with Admin(master.namesrv_addr) as admin:
        for _ in range(200):
            status = await admin.ha_status(slave.broker_addr)
            if status.master_connected and status.lag_bytes == 0:
                return
            await asyncio.sleep(0.05)
    raise AssertionError("slave never reported itself in sync")


# ---------------------------------------------------------------- roll and failover


@pytest.mark.asyncio
async def test_roll_restarts_the_slave_first_and_the_master_once_the_slave_is_in_sync(
    kube_api: km.KubernetesEmulator, real_group: tuple[Cluster, Cluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: an image change rolls slave first, then the master, never both. Method: StatefulSet
    updateRevision r2 over pods on r1; the operator deletes orders-g0-1; while it is gone the
    master stays; once it is back (r2, ready) and the real slave reports lag 0, the master goes."""
    master, slave = real_group
    map_pods(monkeypatch, {"orders-g0-0": master.broker_addr, "orders-g0-1": slave.broker_addr})
    await seed_cluster(kube_api)
    await in_sync(master, slave)
    poke = Poker(kube_api, f"{BROKER_PATH}/orders")
    async with running_operator(kube_api):
        await post(kube_api, BROKER_PATH, live_broker_body(master.namesrv_addr))
        await wait_for(lambda: "conditions" in broker_status(kube_api))
        put_pod(kube_api, "orders-g0-0", "r1")
        put_pod(kube_api, "orders-g0-1", "r1")
        set_update_revision(kube_api, "orders-g0", "r2")
        await poke()
        await wait_for(lambda: not exists(kube_api, "v1/pods", "orders-g0-1"))
        assert exists(kube_api, "v1/pods", "orders-g0-0"), "the master must not go with its slave"

        await poke()
        await wait_for(
            lambda: "waiting for orders-g0-1" in condition_of(broker_status(kube_api), "Progressing")["message"]
        )
        assert exists(kube_api, "v1/pods", "orders-g0-0")

        put_pod(kube_api, "orders-g0-1", "r2")
        await poke()
        await wait_for(lambda: not exists(kube_api, "v1/pods", "orders-g0-0"))
        await wait_for(lambda: "masterRestartedAt" in broker_status(kube_api)["groups"][0])
        put_pod(kube_api, "orders-g0-0", "r2")
        await poke()
        await wait_for(lambda: reason(kube_api, "Progressing") == "UpToDate")
    members = broker_status(kube_api)["groups"][0]["members"]
    assert [m["role"] for m in members] == ["Master", "Slave"]
    assert members[1]["haLagBytes"] == 0


@pytest.mark.asyncio
async def test_manual_failover_promotes_the_named_slave_and_swaps_roles(
    kube_api: km.KubernetesEmulator, real_group: tuple[Cluster, Cluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: `shoal.io/promote: orders-g0-1` makes the real slave the master. Method: SIGKILL the
    master process, mark its pod unready, annotate; the slave answers as SYNC_MASTER at epoch 1,
    the status and ConfigMap name ordinal 1 as master, and the annotation is removed."""
    master, slave = real_group
    map_pods(monkeypatch, {"orders-g0-0": master.broker_addr, "orders-g0-1": slave.broker_addr})
    await seed_cluster(kube_api)
    await send(master.namesrv_addr, "FailoverTopic", 20)
    await in_sync(master, slave)
    poke = Poker(kube_api, f"{BROKER_PATH}/orders")
    async with running_operator(kube_api):
        await post(kube_api, BROKER_PATH, live_broker_body(master.namesrv_addr))
        await wait_for(lambda: "conditions" in broker_status(kube_api))
        put_pod(kube_api, "orders-g0-0", "r1")
        put_pod(kube_api, "orders-g0-1", "r1")
        assert master.stop("broker", signal.SIGKILL) == -signal.SIGKILL
        put_pod(kube_api, "orders-g0-0", "r1", ready=False)
        await poke(**{"shoal.io/promote": "orders-g0-1"})
        await wait_for(lambda: broker_status(kube_api).get("groups", [{}])[0].get("master") == "orders-g0-1")
        await wait_for(
            lambda: (
                "shoal.io/promote"
                not in ((get_object(kube_api, BROKERS, NAMESPACE, "orders") or {})["metadata"].get("annotations") or {})
            )
        )
    async with Admin(master.namesrv_addr) as admin:
        promoted = await admin.ha_status(slave.broker_addr)
    assert promoted.is_master and promoted.role == "SYNC_MASTER" and promoted.epoch >= 1
    config = (get_object(kube_api, "v1/configmaps", NAMESPACE, "orders-g0-config") or {})["data"]
    assert config["broker-1.conf"] == "brokerId=0\nbrokerRole=SYNC_MASTER\n"
    assert config["broker-0.conf"] == "brokerId=1\nbrokerRole=SLAVE\n"


@pytest.mark.asyncio
async def test_automatic_failover_waits_the_grace_then_promotes(
    kube_api: km.KubernetesEmulator, real_group: tuple[Cluster, Cluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: with failover Automatic, a master unready past the grace is replaced by its slave.
    Method: grace shortened to 2 s; the first reconcile after the master dies records when it
    went unready and promotes nothing; one after the grace promotes the real slave."""
    master, slave = real_group
    monkeypatch.setattr(limits, "FAILOVER_GRACE_S", 2.0)
    map_pods(monkeypatch, {"orders-g0-0": master.broker_addr, "orders-g0-1": slave.broker_addr})
    await seed_cluster(kube_api)
    await in_sync(master, slave)
    poke = Poker(kube_api, f"{BROKER_PATH}/orders")
    body = live_broker_body(master.namesrv_addr, replication={"mode": "Sync", "failover": "Automatic"})
    put_pod(kube_api, "orders-g0-0", "r1")
    put_pod(kube_api, "orders-g0-1", "r1")
    async with running_operator(kube_api):
        await post(kube_api, BROKER_PATH, body)
        await wait_for(lambda: reason(kube_api, "Ready") == "AllGroupsServing")
        master.stop("broker", signal.SIGKILL)
        put_pod(kube_api, "orders-g0-0", "r1", ready=False)
        await poke()
        await wait_for(lambda: reason(kube_api, "Ready") == "GroupWithoutMaster")
        assert "masterUnreadySince" in broker_status(kube_api)["groups"][0]
        assert broker_status(kube_api)["groups"][0]["master"] == "orders-g0-0"
        await asyncio.sleep(2.2)
        await poke()
        await wait_for(lambda: broker_status(kube_api)["groups"][0]["master"] == "orders-g0-1")
    async with Admin(master.namesrv_addr) as admin:
        assert (await admin.ha_status(slave.broker_addr)).is_master


# ---------------------------------------------------------------- scale-down drain


@pytest.mark.asyncio
async def test_scale_down_drains_a_group_before_deleting_it(
    kube_api: km.KubernetesEmulator, real_broker: Callable[[str], Cluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: a group removed by `groups: 1` is drained, not cut. Method: a real broker plays
    orders-g1 (StatefulSet and pod present in KMock), holding 10 messages of which a consumer
    group committed 4: the operator wipes its write permission and reports Draining with 6 left;
    after the group commits the rest, the group's StatefulSet is deleted."""
    g1 = real_broker("orders-g1")
    map_pods(monkeypatch, {"orders-g1-0": g1.broker_addr})
    await seed_cluster(kube_api)
    async with Admin(g1.namesrv_addr) as admin:
        await admin.create_topic("DrainTopic", broker_addr=g1.broker_addr, read_queue_nums=1, write_queue_nums=1)
    await send(g1.namesrv_addr, "DrainTopic", 10)
    await commit(g1.broker_addr, "DrainTopic", "GID_drain", {0: 4})
    kube_api.objects["apps/v1/statefulsets", NAMESPACE, "orders-g1"] = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "orders-g1", "namespace": NAMESPACE, "labels": {"shoal.io/cluster": "orders"}},
        "spec": {"replicas": 1},
    }
    put_pod(kube_api, "orders-g1-0", "r1")
    poke = Poker(kube_api, f"{BROKER_PATH}/orders")
    async with running_operator(kube_api):
        await post(kube_api, BROKER_PATH, live_broker_body(g1.namesrv_addr))
        await wait_for(lambda: reason(kube_api, "Progressing") == "Draining")
        assert "6 messages not consumed" in condition_of(broker_status(kube_api), "Progressing")["message"]
        async with Admin(g1.namesrv_addr) as admin:
            route = await admin.topic_route("DrainTopic")
        assert route.queue_datas and all(q.perm & PermName.WRITE == 0 for q in route.queue_datas)
        assert exists(kube_api, "apps/v1/statefulsets", "orders-g1")
        await commit(g1.broker_addr, "DrainTopic", "GID_drain", {0: 10})
        await poke()
        await wait_for(lambda: not exists(kube_api, "apps/v1/statefulsets", "orders-g1"))


# ---------------------------------------------------------------- topics on a live cluster


def topic_status(api: km.KubernetesEmulator, name: str = "orders-created") -> dict[str, Any]:
    return dict((get_object(api, TOPICS, NAMESPACE, name) or {}).get("status") or {})


def topic_ready(api: km.KubernetesEmulator) -> tuple[str, str]:
    """(status, reason) of the Topic's Ready condition; ("", "") before the first status."""
    ready: dict[str, Any] = next((c for c in topic_status(api).get("conditions") or [] if c["type"] == "Ready"), {})
    return str(ready.get("status", "")), str(ready.get("reason", ""))


def topic_cr(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "shoal.io/v1alpha1",
        "kind": "Topic",
        "metadata": {
            "name": "orders-created",
            "namespace": NAMESPACE,
            "uid": "uid-orders-created",
            "generation": 1,
            "resourceVersion": "1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"clusterRef": {"name": "orders"}, "topicName": "OrdersCreated", **spec},
    }


async def live_topic(cluster: Cluster) -> Any:
    async with Admin(cluster.namesrv_addr) as admin:
        return (await admin.broker_topic_configs(cluster.broker_addr)).get("OrdersCreated")


@pytest.mark.asyncio
async def test_topic_is_created_corrected_after_drift_and_shrunk_in_two_phases(
    kube_api: km.KubernetesEmulator, real_broker: Callable[[str], Cluster], caplog: pytest.LogCaptureFixture
) -> None:
    """Goal: one-way Kubernetes -> broker sync on a real broker. Method: a Topic creates 4/4
    queues; the topic is then made read-only and later deleted behind the operator's back, and
    each reconcile puts it back; a shrink to 2 queues is refused without allowShrink and, with
    it, shrinks writes first and reads only once the consumer group emptied queues 2 and 3."""
    g0 = real_broker("orders-g0")
    await seed_cluster(kube_api)
    poke = Poker(kube_api, f"{TOPIC_PATH}/orders-created", TOPICS)
    async with running_operator(kube_api):
        await post(kube_api, BROKER_PATH, live_broker_body(g0.namesrv_addr))
        await post(kube_api, TOPIC_PATH, topic_cr(readQueueNums=4, writeQueueNums=4))
        await wait_for(lambda: topic_ready(kube_api)[0] == "True")
        assert topic_ready(kube_api)[1] == "Created"
        assert topic_status(kube_api)["brokers"] == ["orders-g0"]
        created = await live_topic(g0)
        assert (created.read_queue_nums, created.write_queue_nums, int(created.perm)) == (4, 4, 6)

        async with Admin(g0.namesrv_addr) as admin:
            await admin.create_topic(
                "OrdersCreated", broker_addr=g0.broker_addr, read_queue_nums=4, write_queue_nums=4, perm=PermName.READ
            )
        await poke()
        await wait_for(lambda: topic_ready(kube_api)[1] == "Updated")
        assert int((await live_topic(g0)).perm) == 6

        async with Admin(g0.namesrv_addr) as admin:
            await admin.delete_topic("OrdersCreated", cluster=CLUSTER_NAME)
        assert await live_topic(g0) is None
        await poke()
        await wait_for(lambda: topic_ready(kube_api)[1] == "Created")
        assert (await live_topic(g0)) is not None

        await send(g0.namesrv_addr, "OrdersCreated", 40)
        async with Admin(g0.namesrv_addr) as admin:
            stats = await admin.topic_stats("OrdersCreated")
        maxima = {mq.queue_id: offset.max_offset for mq, offset in stats.offset_table.items()}
        await commit(g0.broker_addr, "OrdersCreated", "GID_shrink", {q: 0 for q in maxima})

        await patch_object(
            kube_api, f"{TOPIC_PATH}/orders-created", {"spec": {"readQueueNums": 2, "writeQueueNums": 2}}
        )
        await wait_for(lambda: topic_ready(kube_api)[1] == "QueueShrinkRefused")
        assert (await live_topic(g0)).write_queue_nums == 4

        await patch_object(kube_api, f"{TOPIC_PATH}/orders-created", {"spec": {"allowShrink": True}})
        await wait_for(lambda: topic_ready(kube_api)[1] == "ShrinkingQueues")
        phase_one = await live_topic(g0)
        assert (phase_one.read_queue_nums, phase_one.write_queue_nums) == (4, 2)
        caplog.set_level(logging.INFO)
        mark = len(caplog.records)
        await poke()
        await wait_for(lambda: any("wait for consumers" in r.getMessage() for r in caplog.records[mark:]))
        assert (await live_topic(g0)).read_queue_nums == 4, "queues 2 and 3 still hold unconsumed messages"

        await commit(g0.broker_addr, "OrdersCreated", "GID_shrink", maxima)
        await poke()
        await wait_for(lambda: topic_ready(kube_api)[1] in ("Updated", "InSync"))
        final = await live_topic(g0)
        assert (final.read_queue_nums, final.write_queue_nums) == (2, 2)


@pytest.mark.asyncio
async def test_topic_adopts_an_existing_topic_and_deletes_it_with_the_resource(
    kube_api: km.KubernetesEmulator, real_broker: Callable[[str], Cluster]
) -> None:
    """Goal: a Topic naming a topic the broker already has adopts it (Ready reason Adopted, its
    queues brought to the spec); deleting the Topic deletes the topic on the broker and releases
    the finalizer. Method: create the topic by admin first, then the Topic, then delete it."""
    g0 = real_broker("orders-g0")
    await seed_cluster(kube_api)
    async with Admin(g0.namesrv_addr) as admin:
        await admin.create_topic("OrdersCreated", broker_addr=g0.broker_addr, read_queue_nums=2, write_queue_nums=2)
    async with running_operator(kube_api):
        await post(kube_api, BROKER_PATH, live_broker_body(g0.namesrv_addr))
        await post(kube_api, TOPIC_PATH, topic_cr(readQueueNums=4, writeQueueNums=4))
        await wait_for(lambda: topic_ready(kube_api)[0] == "True")
        assert topic_ready(kube_api)[1] == "Adopted"
        adopted = await live_topic(g0)
        assert (adopted.read_queue_nums, adopted.write_queue_nums) == (4, 4)
        response = await kube_api.delete(f"{TOPIC_PATH}/orders-created", headers={"Connection": "close"})
        assert response.status < 300, await response.text()
        response.close()
        await wait_for(lambda: kube_api.objects[TOPICS, NAMESPACE, "orders-created"].deleted)
    assert await live_topic(g0) is None
    async with Admin(g0.namesrv_addr) as admin:
        assert "OrdersCreated" not in await admin.topic_list()


@pytest.mark.asyncio
async def test_topic_message_type_becomes_the_brokers_attribute_and_follows_the_spec(
    kube_api: km.KubernetesEmulator, real_broker: Callable[[str], Cluster]
) -> None:
    """Goal: spec.messageType reaches the broker as RocketMQ 5's `message.type` attribute (what the
    gRPC port checks v5 sends against) and a change of it is applied. Method: a FIFO Topic, then
    patched to Delay; the broker's GET_ALL_TOPIC_CONFIG read after each."""
    g0 = real_broker("orders-g0")
    await seed_cluster(kube_api)
    async with running_operator(kube_api):
        await post(kube_api, BROKER_PATH, live_broker_body(g0.namesrv_addr))
        await post(kube_api, TOPIC_PATH, topic_cr(messageType="FIFO"))
        await wait_for(lambda: topic_ready(kube_api)[0] == "True")
        assert dict((await live_topic(g0)).attributes) == {"message.type": "FIFO"}
        await patch_object(kube_api, f"{TOPIC_PATH}/orders-created", {"spec": {"messageType": "Delay"}})
        await wait_for(lambda: topic_ready(kube_api)[1] == "Updated")
        assert dict((await live_topic(g0)).attributes) == {"message.type": "DELAY"}


@pytest.mark.asyncio
async def test_topic_reaches_a_group_added_by_scaling_up(
    kube_api: km.KubernetesEmulator, real_broker: Callable[[str], Cluster], tmp_path: Path
) -> None:
    """Goal: a Topic follows the cluster's groups: with `groups: 2` and only orders-g0 serving it
    reports GroupNotServing; once orders-g1 registers, the next reconcile creates the topic there
    too. A second Topic placed on group 1 only never reaches orders-g0."""
    g0 = real_broker("orders-g0")
    await seed_cluster(kube_api)
    poke = Poker(kube_api, f"{TOPIC_PATH}/orders-created", TOPICS)
    g1 = Cluster(tmp_path / "g1", g0.namesrv_port, free_broker_port(), free_port())
    g1.root.mkdir()
    try:
        async with running_operator(kube_api):
            await post(kube_api, BROKER_PATH, live_broker_body(g0.namesrv_addr, groups=2))
            await post(kube_api, TOPIC_PATH, topic_cr())
            await wait_for(lambda: topic_ready(kube_api)[1] == "GroupNotServing")
            assert (
                "orders-g1" in next(c for c in topic_status(kube_api)["conditions"] if c["type"] == "Ready")["message"]
            )
            assert await live_topic(g0) is not None
            g1.start_broker({"brokerClusterName": CLUSTER_NAME, "brokerName": "orders-g1"})
            async with Admin(g0.namesrv_addr) as admin:
                for _ in range(100):
                    if "orders-g1" in (await admin.cluster_info()).broker_addr_table:
                        break
                    await asyncio.sleep(0.05)
            await poke()
            await wait_for(lambda: topic_status(kube_api).get("brokers") == ["orders-g0", "orders-g1"])
            assert topic_ready(kube_api)[0] == "True"

            placed = topic_cr()
            placed["metadata"].update(name="placed", uid="uid-placed")
            placed["spec"].update(topicName="PlacedOnG1", groups=[1])
            await post(kube_api, TOPIC_PATH, placed)
            await wait_for(lambda: topic_status(kube_api, "placed").get("brokers") == ["orders-g1"])
        async with Admin(g0.namesrv_addr) as admin:
            on_g1 = await admin.broker_topic_configs(g1.broker_addr)
            on_g0 = await admin.broker_topic_configs(g0.broker_addr)
        assert "OrdersCreated" in on_g1 and "PlacedOnG1" in on_g1 and "PlacedOnG1" not in on_g0
    finally:
        g1.stop_all()


@pytest.mark.asyncio
async def test_a_promotion_whose_answer_was_lost_counts_once_the_slave_reports_master(
    real_group: tuple[Cluster, Cluster], spec: Any
) -> None:
    """Goal: the failover does not spin when the broker promoted itself but its answer never came
    back (it answers after re-registering with every NameServer, and one may be on the lost node):
    the operator's retry, refused with "already a master", counts as done because the broker reports
    the master role. Method: SIGKILL the master; promote the real slave; promote it again."""
    master, slave = real_group
    assert master.stop("broker", signal.SIGKILL) == -signal.SIGKILL
    promotion = failover.Promotion(group=0, pod="orders-g0-1", ordinal=1, reason="test", requested=False)
    logger = logging.getLogger("test.promote")
    assert await handlers._promote(spec, promotion, slave.broker_addr, logger)
    assert await handlers._promote(spec, promotion, slave.broker_addr, logger)  # refused, yet done
    async with Admin(master.namesrv_addr) as admin:
        assert (await admin.ha_status(slave.broker_addr)).is_master
