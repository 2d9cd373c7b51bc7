"""The operator as a real process (the chart's ServiceAccount token) with its Broker's pods played by real
`shoal namesrv` / `shoal broker` processes (pod_runner.py): the Broker becomes Ready as kubectl sees it, a
Topic CR makes a real topic that carries a message, a config change restarts the slave before the master,
failover, StoreAnalysis runs (Local and Spark on Kubernetes), a draining scale-down, and reclaimPolicy Delete
removing the store directories only after the brokers have stopped."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.client import Admin, Message, Producer
from tests.conftest import wait_until
from tests.kube.conftest import SHOAL_PROCESS_IMAGE, SMALL_STORE_CONFIG, SPARK_PROCESS_IMAGE, Helm
from tests.kube.control_plane import ControlPlane, write_kubeconfig
from tests.kube.pod_runner import PodRunner
from tests.scenarios import drain

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "charts" / "shoal"
RELEASE = "procs"
OPERATOR_NAMESPACE = "shoal-procs"
NAMESPACE = "fleet"
CLUSTER = "fleet"
READY_TIMEOUT_S = 480  # the first Ready includes every pod's first start; CI on a loaded 2-core VM took over 240 s
STOP_TIMEOUT_S = 15.0
NAME_SERVER_PORT = 9876
MESSAGES = 20
ANALYSIS_TIMEOUT_S = 600
EXECUTOR_END_TIMEOUT_S = 60
REAPPEAR_CHECK_S = 3.0
"""How long a removed store directory must stay gone (a late writer would bring it back)."""


@dataclass
class Operator:
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def operator(
    shoal_crds: ControlPlane, pod_runner: PodRunner, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    """The chart installed and the operator run locally with its ServiceAccount's token; the Broker's
    namespace is removed (while the runner still runs its pods) before the runner stops."""
    plane = shoal_crds
    home = tmp_path_factory.mktemp("operator-procs")
    helm = Helm.for_cluster(plane, home / "helm", OPERATOR_NAMESPACE)
    helm("install", RELEASE, str(CHART), "--create-namespace", "--wait", "--timeout=180s")
    (account,) = [o["metadata"]["name"] for o in helm.manifest(RELEASE) if o["kind"] == "ServiceAccount"]
    token = plane.kubectl("create", "token", account, "-n", OPERATOR_NAMESPACE, "--duration=2h").stdout.strip()
    assert plane.pki is not None
    kubeconfig = write_kubeconfig(
        home / "operator.kubeconfig", plane.server, plane.pki.ca_cert, account, {"token": token}
    )
    plane.kubectl("create", "namespace", NAMESPACE)
    log = home / "operator.log"
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "SHOAL_WATCH_NAMESPACES": NAMESPACE,
        "SHOAL_ALLOWED_HOSTPATH_ROOTS": "/var/lib/shoal",
        "SHOAL_LOG_LEVEL": "INFO",
    }
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "shoal.operator"], stdout=output, stderr=subprocess.STDOUT, env=env, cwd=home
        )
    try:
        yield Operator(process, log)
    finally:
        plane.kubectl("delete", "storeanalyses,topics,brokers", "--all", "-n", NAMESPACE, "--timeout=80s", check=False)
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        plane.kubectl("delete", "namespace", NAMESPACE, "--timeout=80s", check=False)
        # examples/cluster.yaml keeps its volumes (reclaimPolicy Retain); they are cluster-scoped.
        plane.kubectl("delete", "pv", "-l", f"shoal.io/namespace={NAMESPACE}", "--timeout=80s", check=False)
        helm.uninstall_quietly(RELEASE)


def _get(plane: ControlPlane, *what: str) -> dict[str, Any]:
    return plane.get_json(NAMESPACE, *what)


def _name_server(plane: ControlPlane) -> str:
    pod = _get(plane, "pod", f"{CLUSTER}-ns-0")
    return f"{pod['status']['podIP']}:{NAME_SERVER_PORT}"


def _analysis_state(plane: ControlPlane, operator: Operator, pod_runner: PodRunner, name: str) -> Callable[[], str]:
    """What a timed-out StoreAnalysis wait reports: its status, the namespace's Jobs and pods, the runner's
    last events, the run pods' output and the operator's last lines about the analysis."""

    def state() -> str:
        status = json.dumps(_get(plane, "storeanalysis", name).get("status"), indent=1)
        listing = plane.kubectl("get", "jobs,pods", "-n", NAMESPACE, "-o", "wide", check=False).stdout
        events = "\n".join(str(e) for e in pod_runner.events[-30:])
        outputs = "\n".join(
            f"--- {log.name}\n{log.read_text(errors='replace')[-2000:]}"
            for log in sorted((pod_runner.work_dir / "logs").glob(f"{NAMESPACE}_{name}-*"))
        )
        lines = [line for line in operator.output().splitlines() if name in line or "Error" in line]
        return (f"status: {status}\n{listing}\nrunner events:\n{events}\nrun pod output:\n{outputs}\n"
                "operator:\n" + "\n".join(lines[-40:]))  # fmt: skip

    return state


def _wait_ready(plane: ControlPlane, operator: Operator, what: str, condition: str = "Ready") -> None:
    result = plane.kubectl(
        "wait", f"--for=condition={condition}", what, "-n", NAMESPACE, f"--timeout={READY_TIMEOUT_S}s", check=False
    )
    assert result.returncode == 0, (
        f"{what} not {condition}: {result.stderr}\noperator log:\n{operator.output()[-4000:]}"
    )


def test_a_broker_of_real_processes_becomes_ready(
    shoal_crds: ControlPlane, operator: Operator, pod_runner: PodRunner
) -> None:
    """examples/cluster.yaml with the process image: `kubectl wait --for=condition=Ready broker/fleet`
    returns once the NameServer, the master and the slave run, and both brokers registered."""
    plane = shoal_crds
    body = yaml.safe_load((REPO_ROOT / "examples" / "cluster.yaml").read_text())
    body["metadata"] = {"name": CLUSTER, "namespace": NAMESPACE}
    body["spec"]["image"] = SHOAL_PROCESS_IMAGE
    body["spec"]["nameServer"]["replicas"] = 1
    body["spec"]["config"] = {"autoCreateTopicEnable": "false", **SMALL_STORE_CONFIG}
    body["spec"]["replication"]["failover"] = "Automatic"
    plane.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(body))
    _wait_ready(plane, operator, f"broker/{CLUSTER}")

    async def brokers() -> dict[str, dict[int, str]]:
        async with Admin([_name_server(plane)]) as admin:
            info = await admin.cluster_info()
        return {name: dict(data.broker_addrs) for name, data in info.broker_addr_table.items()}

    table = asyncio.run(brokers())
    pods = {p["metadata"]["name"]: p["status"]["podIP"] for p in _get(plane, "pods")["items"]}
    assert table == {f"{CLUSTER}-g0": {0: f"{pods[f'{CLUSTER}-g0-0']}:10911", 1: f"{pods[f'{CLUSTER}-g0-1']}:10911"}}, (
        table
    )
    stores = list(
        (pod_runner.work_dir / "nodes").glob(f"*/var/lib/shoal/{NAMESPACE}/{CLUSTER}/{CLUSTER}-g0-*/commitlog")
    )
    assert len(stores) == 2, stores


def test_a_topic_cr_makes_a_real_topic(shoal_crds: ControlPlane, operator: Operator) -> None:
    """examples/topic.yaml on the running cluster: the Topic becomes Ready, the master holds the topic
    with 8 queues on the master and in the NameServer's route, and takes messages (acknowledged by the
    SYNC_MASTER once its slave has them)."""
    plane = shoal_crds
    body = yaml.safe_load((REPO_ROOT / "examples" / "topic.yaml").read_text())
    body["metadata"] = {"name": "order-events", "namespace": NAMESPACE}
    body["spec"]["clusterRef"]["name"] = CLUSTER
    plane.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(body))
    _wait_ready(plane, operator, "topic/order-events")
    # Ready means every group has a serving master; a SYNC_MASTER acknowledges writes only while its
    # slave is connected (else SLAVE_NOT_AVAILABLE, as RocketMQ), which ReplicationInSync reports.
    _wait_ready(plane, operator, f"broker/{CLUSTER}", "ReplicationInSync")

    async def check() -> None:
        async with Admin([_name_server(plane)]) as admin:
            route = await admin.topic_route("OrderEvents")
            assert [q.write_queue_nums for q in route.queue_datas] == [8]
            master = route.broker_datas[0].broker_addrs[0]
            assert (await admin.broker_topic_configs(master))["OrderEvents"].read_queue_nums == 8
        async with Producer("PID_kube", [_name_server(plane)]) as producer:
            for index in range(MESSAGES):
                result = await producer.send(Message("OrderEvents", f"order {index}".encode()))
                assert result.status.name == "SEND_OK", result

    asyncio.run(check())


def test_a_config_change_restarts_the_slave_before_the_master(
    shoal_crds: ControlPlane, operator: Operator, pod_runner: PodRunner
) -> None:
    """A changed spec.config is a new config hash: the operator deletes the slave pod first, and the
    master only once the slave is back and in sync (the runner's stop events give the order)."""
    plane = shoal_crds
    before = len(pod_runner.events_of("stop", f"{NAMESPACE}/{CLUSTER}-g0-"))
    patch = {"spec": {"config": {"autoCreateTopicEnable": "false", "slaveReadEnable": "false"}}}
    plane.kubectl("patch", "broker", CLUSTER, "-n", NAMESPACE, "--type=merge", "-p", json.dumps(patch))

    def rolled() -> bool:
        return len(pod_runner.events_of("stop", f"{NAMESPACE}/{CLUSTER}-g0-")) >= before + 2

    wait_until(rolled, READY_TIMEOUT_S, what="both broker pods restarted")
    stops = [e.pod.rsplit("/", 1)[1] for e in pod_runner.events_of("stop", f"{NAMESPACE}/{CLUSTER}-g0-")[before:]]
    assert stops[:2] == [f"{CLUSTER}-g0-1", f"{CLUSTER}-g0-0"], stops
    slave_ready = [e for e in pod_runner.events_of("ready", f"{NAMESPACE}/{CLUSTER}-g0-1")][-1]
    master_stop = pod_runner.events_of("stop", f"{NAMESPACE}/{CLUSTER}-g0-0")[-1]
    assert slave_ready.time_s < master_stop.time_s
    wait_until(
        lambda: plane.pod_ready(NAMESPACE, f"{CLUSTER}-g0-0"), READY_TIMEOUT_S, what="the master pod back and Ready"
    )

    def settled() -> bool:
        groups = _get(plane, "broker", CLUSTER).get("status", {}).get("groups") or [{}]
        return not any(key in groups[0] for key in ("masterRestartedAt", "masterUnreadySince"))

    wait_until(settled, READY_TIMEOUT_S, what="the operator to see the restarted master ready again")
    _wait_ready(plane, operator, f"broker/{CLUSTER}")


def test_losing_the_master_pod_promotes_the_real_slave(
    shoal_crds: ControlPlane, operator: Operator, pod_runner: PodRunner
) -> None:
    """Automatic failover: the master's node is cordoned and its pod deleted, so the StatefulSet's new pod
    cannot start (its hostPath volume pins it there); after the grace the operator promotes the slave
    process (PROMOTE_TO_MASTER) and swaps the ordinals' roles in the ConfigMap. Uncordoned, the old master
    comes back as a slave of the new one and the Broker is Ready again."""
    plane = shoal_crds
    master, slave = f"{CLUSTER}-g0-0", f"{CLUSTER}-g0-1"
    node = _get(plane, "pod", master)["spec"]["nodeName"]
    assert _get(plane, "pod", slave)["spec"]["nodeName"] != node
    slave_address = f"{_get(plane, 'pod', slave)['status']['podIP']}:10911"
    plane.kubectl("cordon", node)
    try:
        plane.kubectl("delete", "pod", master, "-n", NAMESPACE, "--timeout=120s")

        async def role() -> str:
            async with Admin([_name_server(plane)]) as admin:
                return (await admin.ha_status(slave_address)).role

        wait_until(lambda: asyncio.run(role()) == "SYNC_MASTER", READY_TIMEOUT_S, interval_s=2,
                   what=f"{slave} promoted to master")  # fmt: skip
        config = _get(plane, "configmap", f"{CLUSTER}-g0-config")["data"]
        assert config["broker-1.conf"] == "brokerId=0\nbrokerRole=SYNC_MASTER\n", config
        assert config["broker-0.conf"] == "brokerId=1\nbrokerRole=SLAVE\n", config
        assert "promoted fleet-g0-1 to master of fleet-g0" in operator.output()
    finally:
        plane.kubectl("uncordon", node)
    wait_until(lambda: plane.pod_ready(NAMESPACE, master), READY_TIMEOUT_S, what=f"{master} back and Ready")

    async def old_master_role() -> str:
        address = f"{_get(plane, 'pod', master)['status']['podIP']}:10911"
        async with Admin([_name_server(plane)]) as admin:
            return (await admin.ha_status(address)).role

    assert asyncio.run(old_master_role()) == "SLAVE"
    _wait_ready(plane, operator, f"broker/{CLUSTER}")


def test_a_scheduled_store_analysis_runs_spark_on_a_slave_store(
    shoal_crds: ControlPlane, operator: Operator, pod_runner: PodRunner
) -> None:
    """examples/storeanalysis.yaml on a one-minute schedule with the Spark image: the schedule launches a
    Job on the node of a slave's store, its pod runs the TopicStats job (pyspark local[*]) over that store
    through the hostPath volume, and the job's summary (its termination message) reaches status.lastRun."""
    plane = shoal_crds
    body = yaml.safe_load((REPO_ROOT / "examples" / "storeanalysis.yaml").read_text())
    body["metadata"] = {"name": "stats", "namespace": NAMESPACE}
    body["spec"]["clusterRef"]["name"] = CLUSTER
    body["spec"]["schedule"] = "* * * * *"
    body["spec"]["timeZone"] = "UTC"
    body["spec"]["spark"]["image"] = SPARK_PROCESS_IMAGE
    body["spec"]["spark"]["sparkConf"] = {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}
    plane.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(body))

    def last_run() -> dict[str, Any]:
        found: dict[str, Any] = _get(plane, "storeanalysis", "stats").get("status", {}).get("lastRun") or {}
        return found

    wait_until(lambda: last_run().get("phase") in ("Succeeded", "Failed"), ANALYSIS_TIMEOUT_S, interval_s=2,
               what="a scheduled run to finish",
               explain=_analysis_state(plane, operator, pod_runner, "stats"))  # fmt: skip
    plane.kubectl("patch", "storeanalysis", "stats", "-n", NAMESPACE, "--type=merge", "-p", '{"spec":{"suspend":true}}')
    run = last_run()
    assert run["phase"] == "Succeeded", (run, operator.output()[-3000:])
    (target,) = run["targets"]
    summary = target["summary"]
    assert summary["ok"] is True and summary["job"].endswith("topic_stats"), summary
    assert summary["messages"] >= MESSAGES, summary

    async def role() -> str:
        address = f"{_get(plane, 'pod', target['pod'])['status']['podIP']}:10911"
        async with Admin([_name_server(plane)]) as admin:
            return (await admin.ha_status(address)).role

    assert asyncio.run(role()) == "SLAVE", target  # replica PreferSlave
    job_pods = {e.pod for e in pod_runner.events_of("exit", f"{NAMESPACE}/{target['job']}")}
    assert len(job_pods) == 1, job_pods


def _spark_account(plane: ControlPlane) -> None:
    """The `shoal-spark` ServiceAccount docs/analysis.md asks for: it may manage pods, Services, ConfigMaps
    and claims in the namespace (spark-submit makes the driver, the driver its executors)."""
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "shoal-spark", "namespace": NAMESPACE},
    }
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "shoal-spark", "namespace": NAMESPACE},
        "rules": [{"apiGroups": [""], "resources": ["pods", "services", "configmaps", "persistentvolumeclaims"],
                   "verbs": ["create", "get", "list", "watch", "delete", "deletecollection", "patch", "update"]},
                  # Spark 4 also applies a NetworkPolicy per application (docs/analysis.md did not say so).
                  {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
                   "verbs": ["create", "get", "list", "watch", "delete", "patch", "update"]}],
    }  # fmt: skip
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "shoal-spark", "namespace": NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "shoal-spark"},
        "subjects": [{"kind": "ServiceAccount", "name": "shoal-spark", "namespace": NAMESPACE}],
    }
    plane.kubectl("apply", "-f", "-", input_text=yaml.safe_dump_all([account, role, binding]))


def test_spark_on_kubernetes_runs_driver_and_executor_pods_over_the_store(
    shoal_crds: ControlPlane, operator: Operator, pod_runner: PodRunner
) -> None:
    """runner SparkSubmit, run now: the Job's pod runs `spark-submit --master k8s://https://kubernetes.default.svc
    --deploy-mode cluster` against this API server; the driver pod Spark makes and the executor pod the driver
    asks for run as processes (Dockerfile.spark's entrypoint), the executor reads the store through the
    hostPath volume, and the driver's summary reaches status.lastRun."""
    plane = shoal_crds
    _spark_account(plane)
    body = yaml.safe_load((REPO_ROOT / "examples" / "storeanalysis.yaml").read_text())
    body["metadata"] = {"name": "onk8s", "namespace": NAMESPACE, "annotations": {"shoal.io/run-now": "first"}}
    body["spec"]["clusterRef"]["name"] = CLUSTER
    body["spec"]["spark"] = {
        "runner": "SparkSubmit",
        "image": SPARK_PROCESS_IMAGE,
        "executor": {"instances": 1, "resources": {"requests": {"cpu": "1", "memory": "512Mi"}}},
        "driver": {"resources": {"requests": {"cpu": "1", "memory": "512Mi"}}},
        "sparkConf": {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"},
    }
    plane.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(body))

    def last_run() -> dict[str, Any]:
        found: dict[str, Any] = _get(plane, "storeanalysis", "onk8s").get("status", {}).get("lastRun") or {}
        return found

    wait_until(lambda: last_run().get("phase") in ("Succeeded", "Failed"), ANALYSIS_TIMEOUT_S, interval_s=2,
               what="the spark-submit run to finish",
               explain=_analysis_state(plane, operator, pod_runner, "onk8s"))  # fmt: skip
    run = last_run()
    assert run["phase"] == "Succeeded", (run, operator.output()[-3000:])
    (target,) = run["targets"]
    assert target["summary"]["ok"] is True and target["summary"]["messages"] >= MESSAGES, target

    def pods(kind: str) -> dict[str, str]:
        return {e.pod.rsplit("/", 1)[1]: e.detail for e in pod_runner.events_of(kind, f"{NAMESPACE}/")}

    def executors() -> set[str]:
        return {n for n in pods("start") if "-exec-" in n}  # named by the job's app name

    # The driver's summary can land before its executor has ended: the executor exits when the
    # driver tells it to, or is stopped when the driver deletes its pod at shutdown.
    wait_until(lambda: bool(executors()) and executors() <= pods("exit").keys() | pods("stop").keys(),
               EXECUTOR_END_TIMEOUT_S, interval_s=1, what="the executor to end")  # fmt: skip
    exits = pods("exit")
    driver = f"{target['job']}-driver"
    submitters = [n for n in exits if n.startswith(target["job"] + "-") and n != driver]
    assert exits.get(driver) == "code 0", exits
    assert len(submitters) == 1 and exits[submitters[0]] == "code 0", exits
    assert all(exits.get(n, "code 0") == "code 0" for n in executors()), exits


def test_scale_down_drains_a_group_before_its_pods_go(
    shoal_crds: ControlPlane, operator: Operator, pod_runner: PodRunner
) -> None:
    """groups 2 -> 1: the operator wipes fleet-g1's write permission and keeps its pods while a consumer
    group has messages left there; once they are read and committed, it deletes the group and the
    runner stops both of its brokers, never before."""
    plane = shoal_crds
    group = f"{CLUSTER}-g1"
    plane.kubectl("patch", "broker", CLUSTER, "-n", NAMESPACE, "--type=merge", "-p", '{"spec":{"groups":2}}')
    for ordinal in (0, 1):
        wait_until(
            lambda o=ordinal: plane.pod_ready(NAMESPACE, f"{group}-{o}"),  # type: ignore[misc]
            READY_TIMEOUT_S,
            what=f"{group}-{ordinal} Ready",
        )

    namesrv = [_name_server(plane)]
    wait_until(
        lambda: asyncio.run(drain.reaches(namesrv, "OrderEvents", group, "CID_drain")),
        READY_TIMEOUT_S,
        interval_s=2,
        what="the Topic on the new group",
    )
    asyncio.run(drain.leave_messages(namesrv, "OrderEvents", group, "CID_drain", "PID_drain", MESSAGES))
    plane.kubectl("patch", "broker", CLUSTER, "-n", NAMESPACE, "--type=merge", "-p", '{"spec":{"groups":1}}')
    waiting = f"{group}: draining, {MESSAGES} messages not consumed yet"

    def progressing() -> dict[str, Any]:
        conditions = _get(plane, "broker", CLUSTER).get("status", {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "Progressing"), {})

    wait_until(lambda: waiting in progressing().get("message", ""), READY_TIMEOUT_S, what=f"Progressing: {waiting}")
    assert progressing()["reason"] == "Draining"
    assert not pod_runner.events_of("stop", f"{NAMESPACE}/{group}-")

    assert asyncio.run(drain.read_and_commit(namesrv, "OrderEvents", group, "CID_drain")) == MESSAGES
    drained_s = pod_runner.elapsed_s()
    assert not pod_runner.events_of("stop", f"{NAMESPACE}/{group}-")

    def stopped() -> list[str]:
        return sorted({e.pod for e in pod_runner.events_of("stop", f"{NAMESPACE}/{group}-")})

    wait_until(lambda: len(stopped()) == 2, READY_TIMEOUT_S, what=f"both pods of {group} stopped")
    assert all(e.time_s > drained_s for e in pod_runner.events_of("stop", f"{NAMESPACE}/{group}-"))
    assert f"scale-down: {group}: drained" in operator.output()
    _wait_ready(plane, operator, f"broker/{CLUSTER}")


def test_reclaim_delete_removes_the_store_directories_once_the_brokers_have_stopped(
    shoal_crds: ControlPlane, operator: Operator, pod_runner: PodRunner
) -> None:
    """reclaimPolicy Delete: the group the scale-down stopped is released at once (its cleanup Jobs remove
    its directories); then `kubectl delete broker`: the operator stops the running brokers first (it
    deletes the StatefulSet and holds its finalizer until their pods are gone), and only then do the
    cleanup Jobs run the image's cleanup-store for their stores. The directories are gone and stay gone
    (a broker stopping on a removed directory would write its tables back), and so are the claims and PVs."""
    plane = shoal_crds
    root = pod_runner.work_dir / "nodes"
    stores = sorted(root.glob(f"*/var/lib/shoal/{NAMESPACE}/{CLUSTER}/{CLUSTER}-g*-*"))
    assert len(stores) == 4, stores  # g0's two pods, and g1's two kept by the Retain scale-down
    patch = {"spec": {"storage": {"hostPath": {"reclaimPolicy": "Delete"}}}}
    plane.kubectl("patch", "broker", CLUSTER, "-n", NAMESPACE, "--type=merge", "-p", json.dumps(patch))
    g1_stores = [store for store in stores if store.name.startswith(f"{CLUSTER}-g1-")]
    wait_until(lambda: not any(store.exists() for store in g1_stores), READY_TIMEOUT_S, what="g1's directories removed")
    plane.kubectl("delete", "broker", CLUSTER, "-n", NAMESPACE, f"--timeout={READY_TIMEOUT_S}s")
    wait_until(
        lambda: not any(store.exists() for store in stores),
        READY_TIMEOUT_S,
        what="every store directory removed by the cleanup Jobs",
        explain=lambda: "\n".join(str(e) for e in pod_runner.events[-30:]),
    )
    jobs = _get(plane, "jobs")["items"]
    g0_jobs = [
        job["metadata"]["name"]
        for job in jobs
        if (job["metadata"].get("annotations") or {})
        .get("shoal.io/persistent-volume", "")
        .startswith(f"shoal-{NAMESPACE}-{CLUSTER}-g0-")
    ]
    assert len(g0_jobs) == 2, [job["metadata"]["name"] for job in jobs]
    broker_stops = [e.time_s for e in pod_runner.events_of("stop", f"{NAMESPACE}/{CLUSTER}-g0-")]
    cleanups = [e for job in g0_jobs for e in pod_runner.events_of("start", f"{NAMESPACE}/{job}-")]
    assert len({e.pod for e in cleanups}) == 2, cleanups
    assert min(e.time_s for e in cleanups) > max(broker_stops), (cleanups, broker_stops)
    assert "waiting for the pods of fleet-g0 to stop" in operator.output()

    def leftovers() -> list[str]:
        claims = plane.kubectl("get", "pvc", "-n", NAMESPACE, "-o", "name").stdout.split()
        volumes = plane.kubectl("get", "pv", "-l", f"shoal.io/namespace={NAMESPACE}", "-o", "name").stdout.split()
        return claims + volumes

    wait_until(
        lambda: not leftovers(), READY_TIMEOUT_S, what="the claims and PVs deleted", explain=lambda: str(leftovers())
    )
    time.sleep(REAPPEAR_CHECK_S)
    assert not any(store.exists() for store in stores), [store for store in stores if store.exists()]
