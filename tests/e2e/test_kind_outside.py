"""End-to-end tests from outside the kind cluster: this host, as a user's application or operator would be.

run-kind.sh runs this module after the in-cluster Job (test_kind.py), on the host, with the host's .venv. It
first routes each node's podCIDR via the node's address on docker's network (as root), because brokers
register their pod IPs with the NameServer; then clients here reach the cluster as clients on another
machine of the same network would. Docker gives these tests what no client has: `docker exec` into a node,
to SIGKILL a container the way the kernel's OOM killer or a crash would.

Environment (run-kind.sh sets it): SHOAL_E2E_KUBECONFIG (a kubeconfig path), SHOAL_E2E_NAMESPACE,
SHOAL_E2E_BROKER, SHOAL_E2E_TOPIC.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.e2e.test_kind import (
    DELIVERY_TIMEOUT_S,
    E2E_ENV,
    POLL_INTERVAL_S,
    READY_TIMEOUT_S,
    REPO_ROOT,
    Kube,
    Stream,
    consume_keys,
    kube,
    pod_ready,
    running_stream,
    unique,
)
from tests.interop.java.conftest import java, java_classes, rocketmq_lib
from tests.scenarios import drain

__all__ = ["java", "java_classes", "kube", "rocketmq_lib"]  # fixtures used by name below

pytestmark = [pytest.mark.e2e]

JAVA_MESSAGES = 30
ACKED_BEFORE_KILL = 100
ACKED_AFTER_RETURN = 50
DOCKER_TIMEOUT_S = 30.0
KILL_OBSERVED_TIMEOUT_S = 60.0
"""The pod's Ready condition falls within the readiness probe's period x threshold of the kill."""
UNREADY_POLL_S = 0.2
"""The pod stays unready for seconds (a restart, then the store's recovery): polled faster than that."""
MAX_GAP_S = 120.0
FAILOVER_TIMEOUT_S = 420.0
EVICTION_S = 360.0
"""Kubernetes' default toleration of an unreachable node (300 s) and a new operator pod's start."""
REJOIN_TIMEOUT_S = 600.0
"""The old master's node resumes, its broker is fenced and restarted as the slave, and catches up."""
UNREPLICATED_WANTED = 10
OPERATOR_NAMESPACE = "shoal-system"
OPERATOR_SELECTOR = "app.kubernetes.io/name=shoal"
"""Node NotReady (kube-controller-manager's 40-50 s grace), then the operator's 30 s failover grace, then
a reconcile: well under this, even on a busy machine; wrong is 'never promoted'."""
"""A generous bound on the producer's gap while a killed master restarts: wrong is 'never comes back'."""
EXAMPLES_NAMESPACE = "shoal-examples"
EXAMPLES_TOPIC = "OrderEvents"
"""examples/topic.yaml's spec.topicName."""
DRAIN_GROUP = "CID_drain"
DRAIN_MESSAGES = 20
REPLICAS_PER_GROUP = 2
"""examples/cluster.yaml's spec.replicasPerGroup."""
EXAMPLES_TIMEOUT = "--timeout=600s"
KUBECTL_TIMEOUT_S = 660.0
NAMESRV_PORT = 9876
HOST_ROOT = "/var/lib/shoal"
"""The chart's allowed hostPath root, where the operator puts each broker's store on its node."""
MEMORY_HEADROOM = 0.9
"""The broker's working set must stay below 90 % of its container's memory limit after the load tests."""


def namesrv_pod_ips(kube: Kube, namespace: str, cluster: str) -> str:
    """A Broker's NameServers by pod IP: status.nameServerAddresses are cluster DNS names, which only pods
    resolve."""
    pods = kube.core.list_namespaced_pod(
        namespace, label_selector=f"app.kubernetes.io/component=nameserver,shoal.io/cluster={cluster}"
    ).items
    addresses = [f"{pod.status.pod_ip}:{NAMESRV_PORT}" for pod in pods if pod_ready(pod)]
    assert addresses, f"no ready NameServer pod of {namespace}/{cluster}"
    return ";".join(addresses)


def outside_namesrv(kube: Kube) -> str:
    return namesrv_pod_ips(kube, kube.target.namespace, kube.target.broker)


def docker_exec(container: str, *command: str) -> str:
    done = subprocess.run(
        ["docker", "exec", container, *command], capture_output=True, text=True, timeout=DOCKER_TIMEOUT_S, check=False
    )
    assert done.returncode == 0, f"docker exec {container} {' '.join(command)}: {done.stderr}"
    return done.stdout


def broker_container_id(pod: Any) -> str:
    (status,) = [s for s in pod.status.container_statuses if s.name == "broker"]
    runtime, _, container_id = str(status.container_id).partition("://")
    assert runtime == "containerd" and container_id, status.container_id
    return container_id


def broker_restarts(pod: Any) -> int:
    (status,) = [s for s in pod.status.container_statuses if s.name == "broker"]
    return int(status.restart_count)


def store_files(pod: Any) -> set[str]:
    """The CommitLog files under the hostPath root of the pod's node (kind names a node's container after it)."""
    listing = docker_exec(pod.spec.node_name, "find", HOST_ROOT, "-path", "*/commitlog/*", "-type", "f")
    return set(listing.split())


@pytest.fixture
def stream(kube: Kube) -> Iterator[Stream]:
    """A producer on this host, sending through the NameServers' pod IPs."""
    with running_stream(outside_namesrv(kube), kube.target.topic) as running:
        yield running


def test_shoal_client_from_outside_the_cluster(kube: Kube) -> None:
    """shoal.client on this host produces through the cluster's NameServer and pulls every message back."""
    from shoal.client import BlockingProducer, Message, SendStatus

    namesrv = outside_namesrv(kube)
    keys = {f"{unique('outside')}-{i}" for i in range(40)}
    with BlockingProducer(unique("PID_outside"), namesrv) as producer:
        for key in sorted(keys):
            result = producer.send(Message(kube.target.topic, key.encode(), keys=(key,)))
            assert result.status is SendStatus.SEND_OK, result
    seen = consume_keys(namesrv, kube.target.topic, unique("CID_outside"), keys, DELIVERY_TIMEOUT_S)
    assert keys <= seen, f"missing: {sorted(keys - seen)[:10]}"


def test_java_client_from_outside_the_cluster(kube: Kube, java: Any) -> None:
    """The official Java client (RocketMQ 4.9.7) on this host: sync sends, then a pull consumer drains them."""
    namesrv = outside_namesrv(kube)
    prefix = unique("java")
    produced = java.run(
        "Produce",
        {"namesrv": namesrv, "topic": kube.target.topic, "mode": "sync", "count": JAVA_MESSAGES, "keys": prefix},
    )
    assert not produced.of("error"), produced.events
    sent = produced.of("sent")
    assert [line["status"] for line in sent] == ["SEND_OK"] * JAVA_MESSAGES, sent
    drained = java.run("PullConsumer", {"namesrv": namesrv, "group": unique("CID_java"), "topic": kube.target.topic})
    assert not drained.of("error"), drained.events
    received = {line["msgId"] for line in drained.of("received")}
    missing = {line["msgId"] for line in sent} - received
    assert not missing, f"{len(missing)} of {JAVA_MESSAGES} Java-sent messages not pulled back"


def test_master_container_sigkill_under_load_loses_no_acknowledged_message(kube: Kube, stream: Stream) -> None:
    """SIGKILL the master's broker container (containerd, on its node) while a producer runs: the pod goes
    unready, kubelet restarts the container on the same node with the same store, the producer's gap is
    bounded, and every acknowledged message is consumed afterwards."""
    master = kube.group()["master"]
    before = kube.pod(master)
    assert pod_ready(before), f"{master} not ready before the test"
    files_before = store_files(before)
    assert files_before, f"no CommitLog file under {HOST_ROOT} on {before.spec.node_name}, where {master} runs"
    wait_until(lambda: len(stream.acked) >= ACKED_BEFORE_KILL, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what="acks")
    restarts = broker_restarts(before)
    docker_exec(
        before.spec.node_name,
        "ctr",
        "--namespace",
        "k8s.io",
        "tasks",
        "kill",
        "--signal",
        "SIGKILL",
        broker_container_id(before),
    )
    killed_at = time.monotonic()
    acked_at_kill = len(stream.acked)
    # The readiness probe gates Ready: the pod leaves the Service's endpoints until the new broker answers.
    wait_until(
        lambda: not pod_ready(kube.pod(master)), KILL_OBSERVED_TIMEOUT_S, UNREADY_POLL_S, what=f"{master} unready"
    )

    def restarted() -> bool:
        pod = kube.pod(master)
        return pod is not None and broker_restarts(pod) > restarts

    wait_until(restarted, KILL_OBSERVED_TIMEOUT_S, POLL_INTERVAL_S, what=f"kubelet restarted {master}'s broker")
    wait_until(lambda: pod_ready(kube.pod(master)), READY_TIMEOUT_S, POLL_INTERVAL_S, what=f"{master} Ready again")
    after = kube.pod(master)
    assert after.metadata.uid == before.metadata.uid and after.spec.node_name == before.spec.node_name
    wait_until(
        lambda: len(stream.acked) >= acked_at_kill + ACKED_AFTER_RETURN,
        DELIVERY_TIMEOUT_S,
        POLL_INTERVAL_S,
        what="sends acknowledged again after the restart",
    )
    gap_s = stream.longest_gap_s()
    print(f"producer gap around the SIGKILL: {gap_s:.1f} s (restart observed {time.monotonic() - killed_at:.0f} s in)")
    assert gap_s < MAX_GAP_S
    assert files_before <= store_files(after), "CommitLog files vanished across the restart"
    stream.stop.set()
    acked = set(stream.acked)
    seen = consume_keys(outside_namesrv(kube), kube.target.topic, unique("CID_sigkill"), acked, DELIVERY_TIMEOUT_S)
    missing = sorted(acked - seen)
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:10]}"


def test_broker_pods_run_non_root_on_a_read_only_root_and_stay_under_their_memory_limit(kube: Kube) -> None:
    """After the load above: every broker container runs as a non-root UID on a read-only root filesystem
    (while its store on the hostPath volume grew), was never OOM-killed, and its working set (kubelet's
    summary API) is below its memory limit."""
    group = kube.group()
    for member in group["members"]:
        pod = kube.pod(member["pod"])
        assert pod_ready(pod)
        (container,) = [c for c in pod.spec.containers if c.name == "broker"]
        context = container.security_context
        assert context.read_only_root_filesystem is True
        pod_context = pod.spec.security_context
        assert context.run_as_non_root is True or (pod_context is not None and pod_context.run_as_non_root is True)
        uid = docker_exec(
            pod.spec.node_name,
            "ctr",
            "--namespace",
            "k8s.io",
            "tasks",
            "exec",
            "--exec-id",
            unique("id"),
            broker_container_id(pod),
            "id",
            "-u",
        ).strip()
        assert uid != "0", f"{member['pod']} runs as root"
        (status,) = [s for s in pod.status.container_statuses if s.name == "broker"]
        terminated = status.last_state.terminated if status.last_state else None
        assert terminated is None or terminated.reason != "OOMKilled", f"{member['pod']} was OOM-killed"
        limit = container.resources.limits["memory"]
        summary = kube.core.connect_get_node_proxy_with_path(
            pod.spec.node_name, "stats/summary", _preload_content=False
        )
        stats = json.loads(summary.data)
        (pod_stats,) = [p for p in stats["pods"] if p["podRef"]["name"] == member["pod"]]
        (broker_stats,) = [c for c in pod_stats["containers"] if c["name"] == "broker"]
        working_set = int(broker_stats["memory"]["workingSetBytes"])
        limit_bytes = _quantity_bytes(limit)
        print(f"{member['pod']}: working set {working_set / 2**20:.0f} MiB of a {limit} limit")
        assert working_set < MEMORY_HEADROOM * limit_bytes


def _quantity_bytes(quantity: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "K": 10**3, "M": 10**6, "G": 10**9}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(float(quantity[: -len(suffix)]) * factor)
    return int(quantity)


def kubectl(*args: str) -> str:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", os.environ[E2E_ENV], *args],
        capture_output=True,
        text=True,
        timeout=KUBECTL_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


def test_kubectl_apply_of_the_examples_folder_then_a_scale_down_that_drains(kube: Kube) -> None:
    """`kubectl apply -f examples/` as the README says, into a namespace of its own (Pod Security baseline):
    the Broker `orders` and its Topic become Ready and the operator schedules the StoreAnalysis. Then groups
    1 -> 2 -> 1 with messages left unconsumed on the second group: its pods stay (Progressing Draining)
    until a consumer group has read and committed them, and go after that."""
    kubectl("create", "namespace", EXAMPLES_NAMESPACE)
    try:
        kubectl("label", "namespace", EXAMPLES_NAMESPACE, "pod-security.kubernetes.io/enforce=baseline")
        kubectl("-n", EXAMPLES_NAMESPACE, "apply", "-f", str(REPO_ROOT / "examples"))
        wait_ready("broker/orders")
        wait_ready("topic/order-events")

        def scheduled() -> bool:
            analysis = examples_object("storeanalysis", "nightly-topic-stats")
            return bool(analysis.get("status", {}).get("nextScheduleTime"))

        wait_until(scheduled, READY_TIMEOUT_S, POLL_INTERVAL_S, what="StoreAnalysis nightly-topic-stats scheduled")
        _scale_down_drains(kube)
    finally:
        kubectl("delete", "namespace", EXAMPLES_NAMESPACE, "--wait=true", "--timeout=300s")


def wait_ready(name: str) -> None:
    kubectl("-n", EXAMPLES_NAMESPACE, "wait", "--for=condition=Ready", name, EXAMPLES_TIMEOUT)


def examples_object(kind: str, name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(kubectl("-n", EXAMPLES_NAMESPACE, "get", kind, name, "-o", "json"))
    return body


def _scale_down_drains(kube: Kube) -> None:
    group = "orders-g1"
    kubectl("-n", EXAMPLES_NAMESPACE, "patch", "broker", "orders", "--type=merge", "-p", '{"spec":{"groups":2}}')
    wait_until(
        lambda: _group_pods(kube, group, ready=True) == REPLICAS_PER_GROUP,
        READY_TIMEOUT_S,
        POLL_INTERVAL_S,
        what=f"{group}'s pods Ready",
    )
    namesrv = namesrv_pod_ips(kube, EXAMPLES_NAMESPACE, "orders").split(";")

    wait_until(
        lambda: asyncio.run(drain.reaches(namesrv, EXAMPLES_TOPIC, group, DRAIN_GROUP)),
        READY_TIMEOUT_S,
        POLL_INTERVAL_S,
        what=f"{EXAMPLES_TOPIC} on {group}",
    )
    asyncio.run(drain.leave_messages(namesrv, EXAMPLES_TOPIC, group, DRAIN_GROUP, unique("PID_drain"), DRAIN_MESSAGES))
    kubectl("-n", EXAMPLES_NAMESPACE, "patch", "broker", "orders", "--type=merge", "-p", '{"spec":{"groups":1}}')
    waiting = f"{group}: draining, {DRAIN_MESSAGES} messages not consumed yet"

    def progressing() -> dict[str, Any]:
        conditions = examples_object("broker", "orders").get("status", {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "Progressing"), {})

    wait_until(lambda: waiting in progressing().get("message", ""), READY_TIMEOUT_S, POLL_INTERVAL_S, what=waiting)
    assert progressing()["reason"] == "Draining"
    assert _group_pods(kube, group) == REPLICAS_PER_GROUP, f"{group}'s pods went before its messages were consumed"

    assert asyncio.run(drain.read_and_commit(namesrv, EXAMPLES_TOPIC, group, DRAIN_GROUP)) == DRAIN_MESSAGES
    wait_until(lambda: _group_pods(kube, group) == 0, READY_TIMEOUT_S, POLL_INTERVAL_S, what=f"{group}'s pods gone")
    wait_ready("broker/orders")


def _group_pods(kube: Kube, group: str, *, ready: bool = False) -> int:
    pods = kube.core.list_namespaced_pod(EXAMPLES_NAMESPACE, label_selector=f"shoal.io/group={group}").items
    return len([pod for pod in pods if pod_ready(pod) or not ready])


def test_losing_the_master_node_promotes_the_slave_without_losing_acknowledged_messages(
    kube: Kube, stream: Stream
) -> None:
    """Freeze the master's node (`docker pause` of its kind container: kubelet, broker and the NameServer
    there stop answering, as in a node failure or a cut link) under load. The node goes NotReady and the
    operator's Automatic failover promotes the in-sync slave; the producer finds it through the other
    NameServer, and its sends are stored there, answered SLAVE_NOT_AVAILABLE as RocketMQ's SYNC_MASTER
    answers while its slave is away. Once the node returns, the old master rejoins as the slave, sends are
    acknowledged SEND_OK again, and every message acknowledged or stored is consumed."""
    group = kube.group()
    master = group["master"]
    master_node = kube.pod(master).spec.node_name
    operator_nodes = {
        pod.spec.node_name
        for pod in kube.core.list_namespaced_pod(OPERATOR_NAMESPACE, label_selector=OPERATOR_SELECTOR).items
    }
    wait_until(lambda: len(stream.acked) >= ACKED_BEFORE_KILL, DELIVERY_TIMEOUT_S, POLL_INTERVAL_S, what="acks")
    subprocess.run(["docker", "pause", master_node], check=True, timeout=DOCKER_TIMEOUT_S)
    paused_at = time.monotonic()
    try:
        # The operator on the frozen node too is rescheduled only after Kubernetes evicts it (300 s).
        timeout_s = FAILOVER_TIMEOUT_S + (EVICTION_S if master_node in operator_nodes else 0.0)
        wait_until(
            lambda: kube.group()["master"] != master,
            timeout_s,
            POLL_INTERVAL_S,
            what=f"a slave promoted after {master}'s node {master_node} froze",
        )
        promoted_after_s = time.monotonic() - paused_at
        wait_until(
            lambda: len(stream.unreplicated) >= UNREPLICATED_WANTED,
            DELIVERY_TIMEOUT_S,
            POLL_INTERVAL_S,
            what="sends stored by the promoted master (SLAVE_NOT_AVAILABLE while its slave is frozen)",
        )
    finally:
        subprocess.run(["docker", "unpause", master_node], check=False, timeout=DOCKER_TIMEOUT_S)
    acked_on_return = len(stream.acked)
    wait_until(
        lambda: len(stream.acked) >= acked_on_return + ACKED_AFTER_RETURN,
        REJOIN_TIMEOUT_S,
        POLL_INTERVAL_S,
        what="SEND_OK again once the old master rejoined as the slave",
    )
    print(
        f"node {master_node} frozen: {kube.group()['master']} promoted after {promoted_after_s:.0f} s; "
        f"{len(stream.unreplicated)} sends stored unreplicated meanwhile; longest gap between SEND_OKs "
        f"{stream.longest_gap_s():.0f} s"
    )
    stream.stop.set()
    stored = set(stream.acked) | set(stream.unreplicated)
    seen = consume_keys(outside_namesrv(kube), kube.target.topic, unique("CID_node_loss"), stored, DELIVERY_TIMEOUT_S)
    missing = sorted(stored - seen)
    assert not missing, f"{len(missing)} acknowledged or stored messages lost, e.g. {missing[:10]}"
    wait_until(kube.broker_ready, READY_TIMEOUT_S, POLL_INTERVAL_S, what="Broker Ready once the node returned")
