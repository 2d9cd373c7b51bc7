"""End-to-end tests against a real Kubernetes cluster made by tests/e2e/run-kind.sh.

run-kind.sh installs the chart, applies tests/e2e/manifests/{namespace,broker,topic}.yaml (one
group: a master and a Sync slave on hostPath) and runs this module inside the cluster as the Job
in manifests/runner.yaml: brokers register their pod IPs with the NameServer, which only pods
can reach. Without SHOAL_E2E_KUBECONFIG (a kubeconfig path, or `in-cluster` for the Job's
ServiceAccount) every test here skips.

Environment: SHOAL_E2E_NAMESPACE, SHOAL_E2E_BROKER (the Broker's name), SHOAL_E2E_TOPIC (its
RocketMQ topic), SHOAL_E2E_ROLL_IMAGE (a second tag of the broker image, for the roll test) and
SHOAL_E2E_SPARK_IMAGE (the Spark image for a StoreAnalysis; empty when none was built).
The tests run in file order and share the cluster: the roll test comes after the data tests.
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import wait_until

E2E_ENV = "SHOAL_E2E_KUBECONFIG"
SKIP_REASON = f"needs a kind cluster: run tests/e2e/run-kind.sh (sets {E2E_ENV}; skips itself without kind/docker)"
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not os.environ.get(E2E_ENV), reason=SKIP_REASON)]

REPO_ROOT = Path(__file__).resolve().parents[2]
CPP_SCENARIOS = REPO_ROOT / "tests" / "scenarios" / "cpp_client_scenarios.py"
STORE_ANALYSIS_EXAMPLE = REPO_ROOT / "examples" / "storeanalysis.yaml"
GROUP = "shoal.io"
VERSION = "v1alpha1"
RESULT_PREFIX = "RESULT "
CPP_SEND_OK = 0

POLL_INTERVAL_S = 1.0
READY_TIMEOUT_S = 300.0
"""A broker pod restarted on its node (image present, store recovered) is Ready well within this."""
ROLL_TIMEOUT_S = 600.0
DELIVERY_TIMEOUT_S = 120.0
CPP_PROCESS_TIMEOUT_S = 120.0
"""Covers the scenario's wait for every NameServer's route (45 s) and the sends after it."""
CPP_LOG_TAIL_BYTES = 4000
STORE_ANALYSIS_TIMEOUT_S = 900.0
STREAM_TIMEOUT_S = 900.0
"""A streaming query's pod is scheduled, its JVM and Spark start, and it catches up within this."""
STREAM_STATE_CLAIM = "stream-state"
"""tests/e2e/manifests/stream-state.yaml: a local PV on one worker, bound to this claim."""
STREAM_MESSAGES = 40
ACKED_BEFORE_KILL = 100
ACKED_AFTER_RETURN = 50
SEND_RETRY_PAUSE_S = 0.2
"""The producer's pause after a failed send while the master is away (an Event wait, not a sleep)."""
ROUND_TRIP_MESSAGES = 50
PULL_BATCH = 32


@dataclass(frozen=True)
class Target:
    namespace: str
    broker: str
    topic: str
    roll_image: str
    spark_image: str


@dataclass
class Kube:
    core: Any
    custom: Any
    target: Target

    def broker(self) -> dict[str, Any]:
        body: dict[str, Any] = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.target.namespace, "brokers", self.target.broker
        )
        return body

    def condition(self, kind: str) -> dict[str, Any]:
        for item in self.broker().get("status", {}).get("conditions", []):
            if item["type"] == kind:
                return dict(item)
        return {}

    def broker_ready(self) -> bool:
        body = self.broker()
        status = body.get("status", {})
        ready = [c for c in status.get("conditions", []) if c["type"] == "Ready"]
        return (
            status.get("observedGeneration") == body["metadata"]["generation"]
            and bool(ready)
            and ready[0]["status"] == "True"
        )

    def group(self) -> dict[str, Any]:
        groups = self.broker().get("status", {}).get("groups", [])
        assert groups, "Broker status has no groups"
        return dict(groups[0])

    def pod(self, name: str) -> Any:  # a V1Pod, or None when there is none
        from kubernetes.client.exceptions import ApiException

        try:
            return self.core.read_namespaced_pod(name, self.target.namespace)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def namesrv_addr(self) -> str:
        addresses = self.broker().get("status", {}).get("nameServerAddresses", [])
        assert addresses, "Broker status has no nameServerAddresses"
        return ";".join(addresses)


def pod_ready(pod: Any | None) -> bool:
    if pod is None or pod.metadata.deletion_timestamp is not None or not pod.status.conditions:
        return False
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)


@pytest.fixture(scope="module")
def kube() -> Kube:
    from kubernetes import client, config

    source = os.environ[E2E_ENV]
    if source == "in-cluster":
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    else:
        config.load_kube_config(config_file=source)  # type: ignore[no-untyped-call]
    target = Target(
        namespace=os.environ.get("SHOAL_E2E_NAMESPACE", "shoal-e2e"),
        broker=os.environ.get("SHOAL_E2E_BROKER", "e2e"),
        topic=os.environ.get("SHOAL_E2E_TOPIC", "E2EEvents"),
        roll_image=os.environ.get("SHOAL_E2E_ROLL_IMAGE", "shoal:e2e-roll"),
        spark_image=os.environ.get("SHOAL_E2E_SPARK_IMAGE", ""),
    )
    kube = Kube(client.CoreV1Api(), client.CustomObjectsApi(), target)
    wait_until(kube.broker_ready, READY_TIMEOUT_S, POLL_INTERVAL_S, what=f"Broker {target.broker} Ready")
    return kube


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def client_settings() -> Any:
    from shoal.client import ClientSettings

    return ClientSettings(route_refresh_interval_s=2.0)


def consume_keys(namesrv: str, topic: str, group: str, wanted: set[str], timeout_s: float) -> set[str]:
    """Pull every queue of `topic` from its min offset until all `wanted` keys are seen; returns the keys seen."""
    from shoal.client import BlockingPullConsumer, MQClientError, PullStatus

    seen: set[str] = set()
    deadline = time.monotonic() + timeout_s
    with BlockingPullConsumer(group, namesrv, client_settings=client_settings()) as puller:
        offsets: dict[Any, int] = {}
        while not wanted <= seen and time.monotonic() < deadline:
            try:
                queues = puller.fetch_message_queues(topic)
                for queue in queues:
                    offset = offsets.get(queue)
                    if offset is None:
                        offset = puller.min_offset(queue)
                    result = puller.pull(queue, "*", offset, PULL_BATCH, timeout_s=5.0)
                    if result.status is PullStatus.FOUND:
                        seen.update(key for message in result.messages for key in message.keys)
                    offsets[queue] = result.next_begin_offset
            except MQClientError:
                time.sleep(POLL_INTERVAL_S)  # a broker still restarting: try again within the deadline
    return seen


def test_shoal_client_round_trip(kube: Kube) -> None:
    """Produce with shoal.client through the cluster's NameServer, then pull every message back."""
    from shoal.client import BlockingProducer, Message, SendStatus

    namesrv = kube.namesrv_addr()
    run = unique("py")
    keys = {f"{run}-{i}" for i in range(ROUND_TRIP_MESSAGES)}
    with BlockingProducer(unique("PID_e2e"), namesrv, client_settings=client_settings()) as producer:
        for key in sorted(keys):
            result = producer.send(Message(kube.target.topic, key.encode(), tags="py", keys=(key,)))
            assert result.status is SendStatus.SEND_OK, result
    seen = consume_keys(namesrv, kube.target.topic, unique("CID_e2e"), keys, DELIVERY_TIMEOUT_S)
    assert keys <= seen, f"missing: {sorted(keys - seen)[:10]}"


def run_cpp(scenario: str, namesrv: str, args: dict[str, Any], home: Path) -> dict[str, Any]:
    """One scenario of tests/scenarios/cpp_client_scenarios.py in its own process (the .so may hang)."""
    home.mkdir(parents=True, exist_ok=True)
    completed = subprocess.run(
        [sys.executable, str(CPP_SCENARIOS), scenario, namesrv, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=CPP_PROCESS_TIMEOUT_S,
        env={**os.environ, "HOME": str(home)},
        check=False,
    )
    lines = [line for line in completed.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    logs = sorted((home / "logs" / "rocketmq-cpp").glob("*"), key=lambda path: path.stat().st_mtime)
    cpp_log = logs[-1].read_bytes()[-CPP_LOG_TAIL_BYTES:].decode("utf-8", "replace") if logs else "<none>"
    assert completed.returncode == 0 and lines, (
        f"{scenario} exited with {completed.returncode}\n{completed.stdout[-CPP_LOG_TAIL_BYTES:]}\n"
        f"{completed.stderr[-CPP_LOG_TAIL_BYTES:]}\n--- rocketmq-cpp log (tail) ---\n{cpp_log}"
    )
    result: dict[str, Any] = json.loads(lines[-1][len(RESULT_PREFIX) :])
    return result


def test_cpp_client_round_trip(kube: Kube, tmp_path: Path) -> None:
    """The real C++ client (PyPI rocketmq 0.4.4) produces through the cluster and pulls its messages back."""
    pytest.importorskip("rocketmq", reason="the runner image installs rocketmq 0.4.4 (x86_64 Linux only)")
    namesrv = kube.namesrv_addr()
    run = unique("cpp")
    messages = [{"body": f"{run}-{i}", "tags": "cpp", "keys": f"{run}-{i}"} for i in range(20)]
    produced = run_cpp(
        "produce",
        namesrv,
        {
            "topic": kube.target.topic,
            "group": unique("PID_cpp"),
            "mode": "sync",
            "messages": messages,
            "await_route": True,  # the C++ client asks one NameServer of its choice and does not retry
        },
        tmp_path,
    )["results"]
    assert [r["status"] for r in produced] == [CPP_SEND_OK] * len(messages)
    pulled = run_cpp(
        "pull", namesrv, {"topic": kube.target.topic, "group": unique("CID_cpp"), "expression": "cpp"}, tmp_path
    )
    bodies = {m["body"] for m in pulled["messages"]}
    assert {m["body"] for m in messages} <= bodies
    python_seen = consume_keys(
        namesrv, kube.target.topic, unique("CID_e2e"), {m["keys"] for m in messages}, DELIVERY_TIMEOUT_S
    )
    assert {m["keys"] for m in messages} <= python_seen, "C++-produced messages not readable with shoal.client"


@dataclass
class Stream:
    """A producer thread sending numbered messages; records which ones were acknowledged (SEND_OK)."""

    namesrv: str
    topic: str
    run: str = field(default_factory=lambda: unique("stream"))
    acked: list[str] = field(default_factory=list)
    acked_at: list[float] = field(default_factory=list)
    unreplicated: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def __call__(self) -> None:
        from shoal.client import BlockingProducer, Message, MQClientError, SendStatus

        with BlockingProducer(unique("PID_stream"), self.namesrv, client_settings=client_settings()) as producer:
            index = 0
            while not self.stop.is_set():
                key = f"{self.run}-{index}"
                index += 1
                try:
                    result = producer.send(Message(self.topic, key.encode(), keys=(key,)), timeout_s=3.0)
                except MQClientError as error:
                    self.failures.append(f"{key}: {error}")
                    self.stop.wait(SEND_RETRY_PAUSE_S)
                    continue
                if result.status is SendStatus.SEND_OK:
                    self.acked.append(key)
                    self.acked_at.append(time.monotonic())
                elif result.status is SendStatus.SLAVE_NOT_AVAILABLE:
                    self.unreplicated.append(key)  # stored by a SYNC_MASTER whose slave is away
                else:
                    self.failures.append(f"{key}: {result.status}")

    def longest_gap_s(self) -> float:
        """The longest time between two consecutive acknowledgements: what a producer saw of an outage."""
        times = list(self.acked_at)
        return max((later - earlier for earlier, later in itertools.pairwise(times)), default=0.0)


@contextlib.contextmanager
def running_stream(namesrv: str, topic: str) -> Iterator[Stream]:
    """A Stream producing on its own thread until the block ends."""
    running = Stream(namesrv, topic)
    thread = threading.Thread(target=running, name="e2e-stream", daemon=True)
    thread.start()
    yield running
    running.stop.set()
    thread.join(30.0)
    assert not thread.is_alive(), "producer thread did not stop"


@pytest.fixture
def stream(kube: Kube) -> Iterator[Stream]:
    with running_stream(kube.namesrv_addr(), kube.target.topic) as running:
        yield running


def test_master_pod_deletion_loses_no_acknowledged_message(kube: Kube, stream: Stream) -> None:
    """Kill the master pod mid-stream; once it is back, every acknowledged message can be consumed."""
    master = kube.group()["master"]
    before = kube.pod(master)
    assert pod_ready(before), f"{master} not ready before the test"
    wait_until(
        lambda: len(stream.acked) >= ACKED_BEFORE_KILL,
        DELIVERY_TIMEOUT_S,
        POLL_INTERVAL_S,
        what=f"{ACKED_BEFORE_KILL} acks",
    )
    kube.core.delete_namespaced_pod(master, kube.target.namespace, grace_period_seconds=0)

    def replaced_and_ready() -> bool:
        pod = kube.pod(master)
        return pod is not None and pod.metadata.uid != before.metadata.uid and pod_ready(pod)

    wait_until(replaced_and_ready, READY_TIMEOUT_S, POLL_INTERVAL_S, what=f"{master} recreated and Ready")
    returned = kube.pod(master)
    assert returned.spec.node_name == before.spec.node_name, "the pod left the node that holds its hostPath store"
    wait_until(kube.broker_ready, READY_TIMEOUT_S, POLL_INTERVAL_S, what="Broker Ready after the master returned")
    acked_on_return = len(stream.acked)
    wait_until(
        lambda: len(stream.acked) >= acked_on_return + ACKED_AFTER_RETURN,
        DELIVERY_TIMEOUT_S,
        POLL_INTERVAL_S,
        what="sends acknowledged again after the master returned",
    )
    stream.stop.set()
    print(f"producer gap around the master pod's deletion: {stream.longest_gap_s():.1f} s")
    acked = set(stream.acked)
    seen = consume_keys(kube.namesrv_addr(), kube.target.topic, unique("CID_failover"), acked, DELIVERY_TIMEOUT_S)
    missing = sorted(acked - seen)
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:10]}"


def _creation(pod: Any) -> datetime.datetime:
    created: datetime.datetime = pod.metadata.creation_timestamp
    return created


def _broker_image(pod: Any) -> str:
    (container,) = [c for c in pod.spec.containers if c.name == "broker"]
    return str(container.image)


def test_image_change_rolls_the_slave_before_the_master(kube: Kube) -> None:
    """Change spec.image: the slave pod is replaced (and Ready) before the master pod is deleted."""
    group = kube.group()
    master = group["master"]
    (slave,) = [m["pod"] for m in group["members"] if m["role"] == "Slave"]
    old = {name: kube.pod(name) for name in (master, slave)}
    assert all(pod_ready(pod) for pod in old.values())
    assert _broker_image(old[master]) != kube.target.roll_image
    kube.custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        kube.target.namespace,
        "brokers",
        kube.target.broker,
        {"spec": {"image": kube.target.roll_image}},
    )
    slave_ready_when_master_went: list[bool] = []

    def rolled() -> bool:
        now = {name: kube.pod(name) for name in (master, slave)}
        master_replaced = now[master] is None or now[master].metadata.uid != old[master].metadata.uid
        master_leaving = now[master] is not None and now[master].metadata.deletion_timestamp is not None
        if (master_replaced or master_leaving) and not slave_ready_when_master_went:
            slave_pod = now[slave]
            slave_ready_when_master_went.append(
                slave_pod is not None and slave_pod.metadata.uid != old[slave].metadata.uid and pod_ready(slave_pod)
            )
        return all(
            pod is not None and pod_ready(pod) and _broker_image(pod) == kube.target.roll_image for pod in now.values()
        )

    wait_until(rolled, ROLL_TIMEOUT_S, POLL_INTERVAL_S, what=f"both pods running {kube.target.roll_image}")
    assert slave_ready_when_master_went == [True], "the master was deleted before the new slave was Ready"
    new = {name: kube.pod(name) for name in (master, slave)}
    assert _creation(new[slave]) <= _creation(new[master])
    wait_until(kube.broker_ready, READY_TIMEOUT_S, POLL_INTERVAL_S, what="Broker Ready after the roll")

    def up_to_date() -> bool:
        # Ready (serving) can come a reconcile before Progressing notes that the restarted master is back.
        progressing = kube.condition("Progressing")
        return progressing.get("status") == "False" and progressing.get("reason") == "UpToDate"

    wait_until(up_to_date, READY_TIMEOUT_S, POLL_INTERVAL_S, what="Progressing False (UpToDate) after the roll")


def test_store_analysis_run_now_succeeds(kube: Kube) -> None:
    """examples/storeanalysis.yaml with shoal.io/run-now runs once and reports lastRun.phase Succeeded."""
    if not STORE_ANALYSIS_EXAMPLE.exists():
        pytest.skip(reason="examples/storeanalysis.yaml does not exist yet (StoreAnalysis is not in this tree)")
    if not kube.target.spark_image:
        pytest.skip(reason="no Spark image: run-kind.sh builds shoal-spark:e2e only from broker_image/Dockerfile.spark")
    body = yaml.safe_load(STORE_ANALYSIS_EXAMPLE.read_text())
    name = unique("e2e").replace("_", "-").lower()
    body["metadata"] = {
        "name": name,
        "namespace": kube.target.namespace,
        "annotations": {"shoal.io/run-now": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")},
    }
    spec = body.setdefault("spec", {})
    if isinstance(spec.get("clusterRef"), dict):
        spec["clusterRef"]["name"] = kube.target.broker
    spec.setdefault("spark", {})["image"] = kube.target.spark_image
    kube.custom.create_namespaced_custom_object(GROUP, VERSION, kube.target.namespace, "storeanalyses", body)

    def finished() -> bool:
        current = kube.custom.get_namespaced_custom_object(GROUP, VERSION, kube.target.namespace, "storeanalyses", name)
        return current.get("status", {}).get("lastRun", {}).get("phase") in ("Succeeded", "Failed")

    wait_until(finished, STORE_ANALYSIS_TIMEOUT_S, POLL_INTERVAL_S, what=f"StoreAnalysis {name} finished")
    final = kube.custom.get_namespaced_custom_object(GROUP, VERSION, kube.target.namespace, "storeanalyses", name)
    assert final["status"]["lastRun"]["phase"] == "Succeeded", final["status"]


def _stream_status(kube: Kube, name: str) -> dict[str, Any]:
    body = kube.custom.get_namespaced_custom_object(GROUP, VERSION, kube.target.namespace, "streamanalyses", name)
    return dict(body.get("status") or {})


def _stream_ready(status: dict[str, Any]) -> bool:
    """Ready True (reason Running): the query's pod runs and answers on /metrics."""
    ready: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    return status.get("phase") == "Running" and ready.get("status") == "True"


def _produce(kube: Kube, count: int) -> None:
    from shoal.client import BlockingProducer, Message, SendStatus

    run = unique("stream")
    with BlockingProducer(unique("PID_stream"), kube.namesrv_addr(), client_settings=client_settings()) as producer:
        for index in range(count):
            result = producer.send(Message(kube.target.topic, f"{run}-{index}".encode(), tags="stream"))
            assert result.status is SendStatus.SEND_OK, result


def test_stream_analysis_runs_a_query_that_resumes_from_its_checkpoint(kube: Kube) -> None:
    """Goal: a StreamAnalysis runs its query as a real pod, its progress reaches the status, and a
    query whose pod is killed is started again and goes on from its checkpoint (its micro-batch
    ids go on; a lost checkpoint would start over at 0). Method: TopicArchive over the e2e topic
    with its checkpoint on a local PV; produce, wait until caught up, delete the pod, produce,
    wait for a later micro-batch of the new pod."""
    if not kube.target.spark_image:
        pytest.skip(reason="no Spark image: run-kind.sh builds shoal-spark:e2e only from broker_image/Dockerfile.spark")
    name = unique("e2e-stream").replace("_", "-").lower()
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "StreamAnalysis",
        "metadata": {"name": name, "namespace": kube.target.namespace},
        "spec": {
            "clusterRef": {"name": kube.target.broker},
            "job": "TopicArchive",
            "topics": [kube.target.topic],
            "triggerSeconds": 2,
            "image": kube.target.spark_image,
            "checkpoint": {"persistentVolumeClaim": {"claimName": STREAM_STATE_CLAIM, "subPath": name}},
            "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}},
        },
    }
    _produce(kube, STREAM_MESSAGES)
    kube.custom.create_namespaced_custom_object(GROUP, VERSION, kube.target.namespace, "streamanalyses", body)
    try:

        def caught_up(after_batch: int) -> Callable[[], bool]:
            def check() -> bool:
                status = _stream_status(kube, name)
                progress = status.get("progress") or {}
                later = int(progress.get("batch", -1)) > after_batch
                return _stream_ready(status) and later and progress.get("lag") == 0

            return check

        wait_until(caught_up(-1), STREAM_TIMEOUT_S, POLL_INTERVAL_S, what=f"StreamAnalysis {name} caught up")
        first = _stream_status(kube, name)
        assert first["pod"] == f"{name}-stream-0" and first["restarts"] == 0, first
        _produce(kube, STREAM_MESSAGES)
        wait_until(caught_up(first["progress"]["batch"]), STREAM_TIMEOUT_S, POLL_INTERVAL_S, what="a later batch")
        before_kill = int(_stream_status(kube, name)["progress"]["batch"])
        old_pod = kube.pod(f"{name}-stream-0")
        assert old_pod is not None
        kube.core.delete_namespaced_pod(f"{name}-stream-0", kube.target.namespace)
        _produce(kube, STREAM_MESSAGES)

        def caught_up_in_a_new_pod() -> bool:
            """The progress is the new pod's: a batch it finished (after it was made), all read."""
            pod = kube.pod(f"{name}-stream-0")
            if pod is None or pod.metadata.uid == old_pod.metadata.uid:
                return False
            status = _stream_status(kube, name)
            progress = status.get("progress") or {}
            finished = progress.get("finishedAt")
            made = pod.metadata.creation_timestamp.strftime("%Y-%m-%dT%H:%M:%SZ")
            if not (_stream_ready(status) and finished is not None and finished >= made):
                return False
            batch = int(progress["batch"])
            assert batch >= before_kill, f"the query started over in its new pod (checkpoint not found): {status}"
            return batch > before_kill and progress.get("lag") == 0

        wait_until(
            caught_up_in_a_new_pod, STREAM_TIMEOUT_S, POLL_INTERVAL_S, what=f"StreamAnalysis {name} in a new pod"
        )
        resumed = _stream_status(kube, name)
        assert int(resumed["progress"]["batch"]) > before_kill, resumed  # the checkpoint's ids go on
    finally:
        kube.custom.delete_namespaced_custom_object(GROUP, VERSION, kube.target.namespace, "streamanalyses", name)
