"""StoreAnalysis pure parts: spec parsing, target resolution, run Jobs (golden), run status.

Regenerate the goldens with SHOAL_UPDATE_GOLDEN=1 after a deliberate change and review the diff.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

import shoal.spark.jobs
from shoal.operator.analysis import manifests as analysis_manifests
from shoal.operator.analysis import status as analysis_status
from shoal.operator.analysis.manifests import SUMMARY_PATH, Target, UnresolvedTargetError, resolve_targets
from shoal.operator.analysis.spec import ANALYSIS_KINDS, AnalysisSpec, analysis_spec_from
from shoal.operator.errors import InvalidSpecError
from shoal.operator.spec import BrokerSpec, broker_spec_from
from shoal.spark.jobs import JOBS, SUMMARY_FILE_NAME, TERMINATION_MESSAGE_ENV
from tests.operator.conftest import REPO_ROOT, check_golden, load_yaml

GOLDEN_DIR = Path(__file__).parent / "golden"
KUBERNETES_VERSION = "1.30.0"
RUN = "nightly-topic-stats-29453765"
SCHEDULED = "2026-01-01T00:05:00Z"


def _analysis_body() -> dict[str, Any]:
    body = copy.deepcopy(load_yaml(REPO_ROOT / "examples" / "storeanalysis.yaml"))
    body["metadata"].update(namespace="mq", uid="5a1e0000-1111-4222-8333-944455556666", generation=1)
    return body


def _analysis(**spec_changes: Any) -> AnalysisSpec:
    body = _analysis_body()
    body["spec"].update(spec_changes)
    return analysis_spec_from(body)


@pytest.fixture
def cluster(cluster_body: dict[str, Any]) -> BrokerSpec:
    cluster_body["spec"]["groups"] = 2
    return broker_spec_from(cluster_body, ("/var/lib/shoal",))


NODES = {"orders-g0-0": "worker-a", "orders-g0-1": "worker-b", "orders-g1-0": "worker-c", "orders-g1-1": "worker-a"}


# ---------------------------------------------------------------- spec


def test_example_parses_with_defaults() -> None:
    """examples/storeanalysis.yaml parses; omitted fields take the CRD's defaults."""
    spec = analysis_spec_from(_analysis_body())
    assert (spec.kind, spec.job_module, spec.time_zone, spec.concurrency_policy) == (
        "TopicStats",
        "topic_stats",
        "Europe/Berlin",
        "Forbid",
    )
    assert spec.spark.service_account_name == "shoal-spark"
    bare = analysis_spec_from({"metadata": {"name": "a"}, "spec": {"clusterRef": {"name": "c"}, "schedule": "@daily"}})
    assert (bare.time_zone, bare.target.replica, bare.starting_deadline_s, bare.output.config_map) == (
        "UTC",
        "PreferSlave",
        None,
        True,
    )


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"schedule": "61 * * * *"}, "spec.schedule"),
        ({"timeZone": "Nowhere/City"}, "spec.timeZone"),
        ({"analysis": {"kind": "Export"}}, "spec.output"),
        (
            {"spark": {"sparkConf": {"spark.kubernetes.executor.volumes.hostPath.x.mount.path": "/"}}},
            "spec.spark.sparkConf",
        ),
        ({"concurrencyPolicy": "Sometimes"}, "spec.concurrencyPolicy"),
        ({"analysis": {"kind": "StoreAudit", "window": {"since": "1h"}}}, "spec.analysis.window"),
        ({"analysis": {"kind": "TopicStats", "window": {"since": "1w"}}}, "spec.analysis.window.since"),
    ],
)
def test_invalid_specs_name_their_field(changes: dict[str, Any], field: str) -> None:
    """Each check the CRD cannot make (or repeats) raises InvalidSpecError on the right field."""
    with pytest.raises(InvalidSpecError) as caught:
        _analysis(**changes)
    assert caught.value.field == field


def test_long_names_are_refused() -> None:
    """A name longer than ANALYSIS_NAME_LENGTH_MAX would overflow the driver pod name."""
    body = _analysis_body()
    body["metadata"]["name"] = "a" * 37
    with pytest.raises(InvalidSpecError):
        analysis_spec_from(body)


# ---------------------------------------------------------------- targets


def test_prefer_slave_takes_a_slave_per_group(cluster: BrokerSpec) -> None:
    """PreferSlave reads ordinal 1 of each group, on its PV's node and path."""
    targets = resolve_targets(_analysis(), cluster, NODES)
    assert [(t.pod, t.node, t.role) for t in targets] == [
        ("orders-g0-1", "worker-b", "Slave"),
        ("orders-g1-1", "worker-a", "Slave"),
    ]
    assert targets[0].path == "/var/lib/shoal/mq/orders/orders-g0-1"


def test_master_follows_a_failover_and_prefer_slave_falls_back(cluster: BrokerSpec) -> None:
    """After group 0's master moved to ordinal 1, Master reads ordinal 1 and PreferSlave ordinal 0."""
    masters = {0: 1}
    master = resolve_targets(_analysis(target={"replica": "Master", "groups": [0]}), cluster, NODES, masters)
    assert [t.pod for t in master] == ["orders-g0-1"]
    slave = resolve_targets(_analysis(target={"replica": "PreferSlave", "groups": [0]}), cluster, NODES, masters)
    assert [t.pod for t in slave] == ["orders-g0-0"]
    single = broker_spec_from(
        {**load_yaml(REPO_ROOT / "examples" / "cluster.yaml"), "metadata": {"name": "solo", "namespace": "mq"}}
        | {"spec": {"image": "i", "replicasPerGroup": 1}},
        ("/var/lib/shoal",),
    )
    only = resolve_targets(_analysis(), single, {"solo-g0-0": "n"})
    assert [(t.pod, t.role) for t in only] == [("solo-g0-0", "Master")]


def test_all_replicas_and_missing_nodes(cluster: BrokerSpec) -> None:
    """AllReplicas reads every pod; a pod whose PV has no node yet cannot be a target."""
    every = resolve_targets(_analysis(target={"replica": "AllReplicas"}), cluster, NODES)
    assert len(every) == 4
    with pytest.raises(UnresolvedTargetError):
        resolve_targets(_analysis(target={"replica": "AllReplicas"}), cluster, {"orders-g0-0": "worker-a"})
    with pytest.raises(UnresolvedTargetError):
        resolve_targets(_analysis(target={"groups": [5]}), cluster, NODES)


# ---------------------------------------------------------------- Jobs


def _jobs(analysis: AnalysisSpec, cluster: BrokerSpec) -> list[dict[str, Any]]:
    targets = resolve_targets(analysis, cluster, NODES)
    return analysis_manifests.run_jobs(analysis, cluster, RUN, targets, SCHEDULED)


def _spark_submit(analysis_changes: dict[str, Any] | None = None) -> AnalysisSpec:
    return _analysis(
        spark={
            "runner": "SparkSubmit",
            "image": "shoal-spark:0.1.0",
            "sparkConf": {"spark.sql.shuffle.partitions": "8"},
            "driver": {"resources": {"requests": {"cpu": "1", "memory": "2Gi"}}},
            "executor": {"instances": 2, "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}},
            "serviceAccountName": "spark",
        },
        **(analysis_changes or {}),
    )


def test_local_run_matches_golden(cluster: BrokerSpec) -> None:
    """runner Local: one Job per slave, pinned, read-only store, summary as termination message."""
    check_golden(GOLDEN_DIR / "analysis-local.yaml", _jobs(_analysis(), cluster))


def test_spark_submit_run_matches_golden(cluster: BrokerSpec) -> None:
    """runner SparkSubmit with an Export to a claim: the submitter Job and its confs."""
    analysis = _spark_submit(
        {
            "analysis": {"kind": "Export", "args": ["--format", "parquet"]},
            "output": {"persistentVolumeClaim": {"claimName": "exports", "subPath": "orders"}},
        }
    )
    check_golden(GOLDEN_DIR / "analysis-spark-submit.yaml", _jobs(analysis, cluster))


def test_every_run_object_is_valid_kubernetes(cluster: BrokerSpec) -> None:
    """Jobs of both runners and the summary ConfigMap pass kubernetes-validate's strict schema."""
    objects = _jobs(_analysis(), cluster) + _jobs(_spark_submit(), cluster)
    objects += _jobs(
        _analysis(
            analysis={"kind": "Export"}, output={"persistentVolumeClaim": {"claimName": "exports", "subPath": "x"}}
        ),
        cluster,
    )
    objects.append(analysis_manifests.summary_config_map(_analysis(), RUN, {"orders-g0-1": {"topics": 3}}))
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_local_job_is_pinned_and_mounts_the_store_read_only(cluster: BrokerSpec) -> None:
    """The pod runs on the store's node, mounts it read-only and never as root."""
    job = _jobs(_analysis(), cluster)[0]
    pod = job["spec"]["template"]["spec"]
    assert job["metadata"]["name"] == f"{RUN}-g0-1"
    assert pod["nodeSelector"] == {"kubernetes.io/hostname": "worker-b"}
    assert pod["volumes"][0] == {
        "name": "store",
        "hostPath": {"path": "/var/lib/shoal/mq/orders/orders-g0-1", "type": "Directory"},
    }
    container = pod["containers"][0]
    assert {"name": "store", "mountPath": "/store", "readOnly": True} in container["volumeMounts"]
    assert container["command"] == ["python", "-m", "shoal.spark.jobs.topic_stats"]
    # The example's 24h window before the 00:05 run.
    assert container["args"] == [
        "/store",
        "--output",
        "/output",
        "--since",
        "2025-12-31T00:05:00Z",
        "--master",
        "local[*]",
    ]
    assert container["terminationMessagePath"] == "/output/summary.json"
    assert {"name": "output", "mountPath": "/output"} in container["volumeMounts"]
    assert container["securityContext"]["runAsNonRoot"] is True
    assert job["spec"]["backoffLimit"] == 0


def test_spark_submit_pins_driver_and_executors_with_read_only_store(cluster: BrokerSpec) -> None:
    """spark-submit confs pin both roles to the node and mount the store read-only on both."""
    args = _jobs(_spark_submit(), cluster)[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    confs = dict(a.split("=", 1) for a in args[args.index("--conf") :: 1] if "=" in a and a.startswith("spark."))
    assert args[:4] == ["--master", "k8s://https://kubernetes.default.svc", "--deploy-mode", "cluster"]
    for role in ("driver", "executor"):
        assert confs[f"spark.kubernetes.{role}.node.selector.kubernetes.io/hostname"] == "worker-b"
        assert confs[f"spark.kubernetes.{role}.volumes.hostPath.store.options.path"] == (
            "/var/lib/shoal/mq/orders/orders-g0-1"
        )
        assert confs[f"spark.kubernetes.{role}.volumes.hostPath.store.mount.readOnly"] == "true"
    assert confs["spark.kubernetes.container.image"] == "shoal-spark:0.1.0"
    assert confs["spark.kubernetes.namespace"] == "mq"
    assert confs["spark.kubernetes.driver.pod.name"] == f"{RUN}-g0-1-driver"
    assert confs["spark.executor.memory"] == "4g"
    assert "local:///opt/shoal/spark/jobs/topic_stats.py" in args
    assert args[-5:] == ["/store", "--output", "/tmp/shoal-output", "--since", "2025-12-31T00:05:00Z"]
    assert confs["spark.kubernetes.driverEnv.SHOAL_TERMINATION_MESSAGE_PATH"] == "/dev/termination-log"


# ---------------------------------------------------------------- run status


def _job(name: str, run: str, condition: str | None, scheduled: str = SCHEDULED, reason: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {}
    if condition:
        status = {
            "conditions": [
                {"type": condition, "status": "True", "reason": reason, "lastTransitionTime": "2026-01-01T00:09:00Z"}
            ],
            "completionTime": "2026-01-01T00:09:00Z",
        }
    return {
        "metadata": {
            "name": name,
            "labels": {"shoal.io/run": run, "shoal.io/target": name.rsplit("-", 2)[0]},
            "annotations": {"shoal.io/scheduled-time": scheduled, "shoal.io/node": "n"},
        },
        "status": status,
    }


def test_run_phase_from_its_jobs() -> None:
    """Active until every Job finished; any failure fails the run; a deadline is its own phase."""
    runs = analysis_status.observe_runs(
        [
            _job("r1-g0-1", "r1", "Complete"),
            _job("r1-g1-1", "r1", None),
            _job("r2-g0-1", "r2", "Complete", "2026-01-01T00:10:00Z"),
            _job("r2-g1-1", "r2", "Failed", "2026-01-01T00:10:00Z"),
            _job("r3-g0-1", "r3", "Failed", "2026-01-01T00:15:00Z", reason="DeadlineExceeded"),
            _job("r4-g0-1", "r4", "Complete", "2026-01-01T00:20:00Z"),
        ]
    )
    assert [(r.name, r.phase) for r in runs] == [
        ("r1", "Active"),
        ("r2", "Failed"),
        ("r3", "DeadlineExceeded"),
        ("r4", "Succeeded"),
    ]
    assert runs[0].completion_time == "" and runs[3].completion_time == "2026-01-01T00:09:00Z"


def test_history_pruning_keeps_the_newest_finished_runs() -> None:
    """Oldest finished runs beyond each limit go; active runs never do."""
    jobs = [_job(f"s{i}-g0-1", f"s{i}", "Complete", f"2026-01-01T00:0{i}:00Z") for i in range(4)]
    jobs += [_job("f-g0-1", "f", "Failed"), _job("a-g0-1", "a", None)]
    runs = analysis_status.observe_runs(jobs)
    assert analysis_status.runs_to_prune(runs, successful_limit=2, failed_limit=1) == ["s0", "s1"]
    assert analysis_status.runs_to_prune(runs, successful_limit=0, failed_limit=0) == ["f", "s0", "s1", "s2", "s3"]


def test_summary_is_the_termination_message() -> None:
    """A JSON object is kept as is; other text is wrapped; the 4 KiB cap holds."""
    pod = {"status": {"containerStatuses": [{"state": {"terminated": {"message": json.dumps({"topics": 3})}}}]}}
    assert analysis_status.pod_summary(pod) == {"topics": 3}
    assert analysis_status.parse_summary("boom") == {"message": "boom"}
    assert analysis_status.parse_summary("[1]") == {"value": [1]}
    assert len(analysis_status.parse_summary("x" * 10_000)["message"]) == 4096
    assert analysis_status.pod_summary({"status": {}}) == {}


def test_conditions_of_a_skipped_run_and_of_no_run() -> None:
    """LastRunSucceeded is Unknown before any run and False/Skipped after a skip."""
    health = analysis_status.Health(True, "Scheduled", "ok")
    empty = analysis_status.analysis_status(1, health, False, {}, [], None, SCHEDULED)
    assert [(c["type"], c["status"], c["reason"]) for c in empty["conditions"]] == [
        ("Ready", "True", "Scheduled"),
        ("Suspended", "False", "Scheduling"),
        ("LastRunSucceeded", "Unknown", "NoRunYet"),
    ]
    skipped = analysis_status.skipped_record("r", SCHEDULED, "late")
    status = analysis_status.analysis_status(1, health, True, {}, [], skipped, SCHEDULED)
    assert status["conditions"][2]["reason"] == "Skipped" and status["conditions"][1]["status"] == "True"


def test_target_suffix_and_names_fit_kubernetes_limits() -> None:
    """The longest run child (a spark-submit driver pod) fits a DNS label."""
    target = Target(group=15, ordinal=2, pod="p", role="Slave", node="n", path="/p")
    run = "a" * 36 + "-now-" + "f" * 8
    assert len(analysis_manifests.driver_pod_name(run, target)) <= 63


def test_every_analysis_kind_runs_a_job_the_spark_package_has_and_reads_its_summary_file() -> None:
    """Goal: the operator and the jobs agree on one declaration of job names, the summary file and
    the termination-message variable (they used to be written twice). Method: compare with
    shoal.spark.jobs and the job modules on disk."""
    jobs_dir = Path(shoal.spark.jobs.__file__).parent
    for kind, job in ANALYSIS_KINDS.items():
        assert job in JOBS, kind
        assert (jobs_dir / f"{job}.py").is_file(), job
    assert SUMMARY_PATH.endswith("/" + SUMMARY_FILE_NAME)
    assert TERMINATION_MESSAGE_ENV == "SHOAL_TERMINATION_MESSAGE_PATH"  # the name docs/analysis.md gives
