"""StoreAnalysis handler tests: the real kopf operator against KMock, with an injected clock.

The scheduler's timer ticks every SHOAL_ANALYSIS_TICK_S (0.2 s, conftest.py) and reads the time
from `analysis_handlers.clock`, which each test replaces and moves; no test waits for a cron
minute. Jobs get no controller in KMock, so tests write their status (and their pods) themselves.
Brokers are stored directly with their PVs: the Broker handlers are not what these tests cover,
so the brokers resource is left out of discovery and kopf does not reconcile them.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import kmock as km
import kubernetes
import pytest

from shoal.operator import kube, manifests
from shoal.operator.analysis import handlers as analysis_handlers
from shoal.operator.spec import broker_spec_from
from tests.operator.conftest import REPO_ROOT, load_yaml
from tests.operator.test_handlers import (
    ANALYSIS_GRANTS,
    _granted,
    _used,
    get_object,
    patch_object,
    point_kubernetes_client_at,
    post,
    wait_until,
)
from tests.operator.test_handlers import (
    running_operator as running_kopf,
)

NAMESPACE = "mq"
ANALYSES = "shoal.io/v1alpha1/storeanalyses"
JOBS = "batch/v1/jobs"
ANALYSIS_PATH = f"/apis/shoal.io/v1alpha1/namespaces/{NAMESPACE}/storeanalyses"
NAME = "stats"
START = datetime.datetime(2026, 1, 1, 0, 0, 30, tzinfo=datetime.UTC)
"""00:00:30 UTC; with schedule */5 the first run is due at 00:05."""


class FakeClock:
    """The scheduler's clock: time moves only when a test says so."""

    def __init__(self, start: datetime.datetime) -> None:
        self.now = start

    def __call__(self) -> datetime.datetime:
        return self.now

    def set(self, hour: int, minute: int, second: int = 0) -> None:
        self.now = self.now.replace(hour=hour, minute=minute, second=second)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    assert analysis_handlers.TICK_S <= 0.5, "conftest.py sets SHOAL_ANALYSIS_TICK_S before the import"
    fake = FakeClock(START)
    monkeypatch.setattr(analysis_handlers, "clock", fake)
    return fake


@pytest.fixture
def api(kmock: km.KubernetesEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> km.KubernetesEmulator:
    """KMock with the built-ins and StoreAnalysis, a kubeconfig at it, a Broker and its PVs stored."""
    with warnings.catch_warnings():  # kmock 0.8 uses importlib.resources.read_binary (deprecated)
        warnings.simplefilter("ignore", DeprecationWarning)
        kmock.resources.load_bundled()
    kmock.resources[ANALYSES] = km.ResourceInfo(
        kind="StoreAnalysis",
        namespaced=True,
        verbs={"list", "watch", "get", "patch", "create"},
        subresources={"status"},
    )
    point_kubernetes_client_at(kmock, tmp_path, monkeypatch)
    seed_broker(kmock)
    return kmock


def seed_broker(api: km.KubernetesEmulator, groups: int = 2) -> None:
    """examples/cluster.yaml with `groups` groups of master + slave, PVs on node-<g>-<ordinal>."""
    body = copy.deepcopy(load_yaml(REPO_ROOT / "examples" / "cluster.yaml"))
    body["metadata"].update(namespace=NAMESPACE, uid="broker-uid", generation=1)
    body["spec"]["groups"] = groups
    api.objects["shoal.io/v1alpha1/brokers", NAMESPACE, "orders"] = body
    spec = broker_spec_from(body, ("/var/lib/shoal",))
    for group in range(groups):
        for ordinal in range(spec.replicas_per_group):
            volume = manifests.store_persistent_volume(spec, group, ordinal, f"node-{group}-{ordinal}")
            api.objects["v1/persistentvolumes", None, volume["metadata"]["name"]] = volume


def analysis_body(**spec_changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "clusterRef": {"name": "orders"},
        "schedule": "*/5 * * * *",
        "concurrencyPolicy": "Forbid",
        "target": {"replica": "PreferSlave"},
        "analysis": {"kind": "TopicStats"},
    }
    spec.update(spec_changes)
    return {
        "apiVersion": "shoal.io/v1alpha1",
        "kind": "StoreAnalysis",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "uid": "analysis-uid",
            "generation": 1,
            "resourceVersion": "1",
        },
        "spec": spec,
    }


def running_operator(api: km.KubernetesEmulator) -> contextlib.AbstractAsyncContextManager[None]:
    """kopf in this loop until the block ends, once it watches StoreAnalyses."""
    return running_kopf(api, (ANALYSES,))


def plain(value: Any) -> Any:
    """A KMock object version as plain dicts and lists (storing a version back fails to serialise)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def status_of(api: km.KubernetesEmulator) -> dict[str, Any]:
    return dict((get_object(api, ANALYSES, NAMESPACE, NAME) or {}).get("status") or {})


def condition(api: km.KubernetesEmulator, kind: str) -> dict[str, Any]:
    return next((c for c in status_of(api).get("conditions", []) if c["type"] == kind), {})


def jobs(api: km.KubernetesEmulator) -> dict[str, dict[str, Any]]:
    """Live Jobs by name (KMock keeps a deleted object as an empty one)."""
    found = {}
    for request in api[km.action.CREATE, km.resource(JOBS)]:
        name = (request.data or {}).get("metadata", {}).get("name")
        if name and (job := get_object(api, JOBS, NAMESPACE, name)):
            found[name] = job
    return found


def job_creates(api: km.KubernetesEmulator) -> int:
    return len(list(api[km.action.CREATE, km.resource(JOBS)]))


def finish_job(api: km.KubernetesEmulator, name: str, failed: bool = False, summary: Any = None) -> None:
    """Play the Job controller and kubelet: a terminated pod (with the summary) and the Job's condition."""
    job = plain(get_object(api, JOBS, NAMESPACE, name) or {})
    kind = "Failed" if failed else "Complete"
    job["status"] = {
        "conditions": [{"type": kind, "status": "True", "lastTransitionTime": "2026-01-01T00:06:00Z"}],
        "completionTime": "2026-01-01T00:06:00Z",
    }
    api.objects[JOBS, NAMESPACE, name] = job
    labels = job["spec"]["template"]["metadata"]["labels"]
    message = json.dumps(summary) if summary is not None else ""
    api.objects["v1/pods", NAMESPACE, f"{name}-abcde"] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{name}-abcde", "namespace": NAMESPACE, "labels": labels},
        "status": {
            "containerStatuses": [
                {"name": "analysis", "state": {"terminated": {"exitCode": 1 if failed else 0, "message": message}}}
            ]
        },
    }


def run_jobs(api: km.KubernetesEmulator, run: str) -> list[str]:
    return sorted(name for name in jobs(api) if name.startswith(f"{run}-g"))


RUN_0005 = f"{NAME}-{int(datetime.datetime(2026, 1, 1, 0, 5, tzinfo=datetime.UTC).timestamp()) // 60}"
RUN_0010 = f"{NAME}-{int(datetime.datetime(2026, 1, 1, 0, 10, tzinfo=datetime.UTC).timestamp()) // 60}"


async def start_analysis(api: km.KubernetesEmulator, body: dict[str, Any]) -> None:
    await post(api, ANALYSIS_PATH, body)
    await wait_until(lambda: "nextScheduleTime" in status_of(api))


# ---------------------------------------------------------------- scheduling


@pytest.mark.asyncio
async def test_first_due_run_launches_one_pinned_read_only_job_per_target(
    api: km.KubernetesEmulator, clock: FakeClock
) -> None:
    """At 00:05 the */5 run starts: one Job per group, on the slave's node, store mounted read-only."""
    async with running_operator(api):
        await start_analysis(api, analysis_body())
        assert status_of(api)["nextScheduleTime"] == "2026-01-01T00:05:00Z"
        assert condition(api, "Ready")["status"] == "True"
        assert job_creates(api) == 0
        clock.set(0, 5, 3)
        await wait_until(lambda: len(status_of(api).get("active", [])) == 1)
    status = status_of(api)
    assert status["lastScheduleTime"] == "2026-01-01T00:05:00Z"
    assert status["nextScheduleTime"] == "2026-01-01T00:10:00Z"
    assert status["active"][0]["name"] == RUN_0005
    assert run_jobs(api, RUN_0005) == [f"{RUN_0005}-g0-1", f"{RUN_0005}-g1-1"]
    job = jobs(api)[f"{RUN_0005}-g1-1"]
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/hostname": "node-1-1"}
    assert pod["volumes"][0]["hostPath"] == {"path": "/var/lib/shoal/mq/orders/orders-g1-1", "type": "Directory"}
    mount = pod["containers"][0]["volumeMounts"][0]
    assert (mount["mountPath"], mount["readOnly"]) == ("/store", True)
    assert job["metadata"]["ownerReferences"][0]["uid"] == "analysis-uid"


@pytest.mark.asyncio
async def test_schedule_change_recomputes_the_next_run(api: km.KubernetesEmulator, clock: FakeClock) -> None:
    """Editing schedule or time zone changes scheduleHash and nextScheduleTime at once."""
    async with running_operator(api):
        await start_analysis(api, analysis_body(schedule="0 3 * * *"))
        first = status_of(api)
        assert first["nextScheduleTime"] == "2026-01-01T03:00:00Z"
        await patch_object(api, f"{ANALYSIS_PATH}/{NAME}", {"spec": {"schedule": "*/5 * * * *"}})
        await wait_until(lambda: status_of(api)["nextScheduleTime"] == "2026-01-01T00:05:00Z")
        assert status_of(api)["scheduleHash"] != first["scheduleHash"]
        await patch_object(
            api, f"{ANALYSIS_PATH}/{NAME}", {"spec": {"schedule": "0 3 * * *", "timeZone": "Asia/Tokyo"}}
        )
        await wait_until(lambda: status_of(api)["nextScheduleTime"] == "2026-01-01T18:00:00Z")
    assert job_creates(api) == 0


@pytest.mark.asyncio
async def test_missed_starting_deadline_is_recorded_as_skipped(api: km.KubernetesEmulator, clock: FakeClock) -> None:
    """A run noticed 2 minutes late with a 60 s starting deadline is Skipped, recorded, never started."""
    async with running_operator(api):
        await start_analysis(api, analysis_body(startingDeadlineSeconds=60))
        clock.set(0, 7)
        await wait_until(lambda: condition(api, "LastRunSucceeded").get("reason") == "Skipped")
    status = status_of(api)
    assert status["lastRun"]["name"] == RUN_0005
    assert status["lastRun"]["phase"] == "Skipped"
    assert "starting deadline" in status["lastRun"]["message"]
    assert status["lastScheduleTime"] == "2026-01-01T00:05:00Z"
    assert status["nextScheduleTime"] == "2026-01-01T00:10:00Z"
    assert condition(api, "LastRunSucceeded")["status"] == "False"
    assert job_creates(api) == 0


@pytest.mark.asyncio
async def test_forbid_does_not_start_a_run_while_one_is_active(api: km.KubernetesEmulator, clock: FakeClock) -> None:
    """concurrencyPolicy Forbid: the 00:10 run is Skipped while the 00:05 one is still active."""
    async with running_operator(api):
        await start_analysis(api, analysis_body(concurrencyPolicy="Forbid"))
        clock.set(0, 5, 1)
        await wait_until(lambda: len(status_of(api).get("active", [])) == 1)
        clock.set(0, 10, 1)
        await wait_until(lambda: status_of(api).get("lastScheduleTime") == "2026-01-01T00:10:00Z")
    status = status_of(api)
    assert status["lastRun"]["name"] == RUN_0010
    assert status["lastRun"]["phase"] == "Skipped"
    assert "Forbid" in status["lastRun"]["message"]
    assert [run["name"] for run in status["active"]] == [RUN_0005]
    assert run_jobs(api, RUN_0010) == []
    assert job_creates(api) == 2


@pytest.mark.asyncio
async def test_a_run_finishing_after_a_forbid_skip_becomes_the_last_run(
    api: km.KubernetesEmulator, clock: FakeClock
) -> None:
    """A run longer than the schedule's period: the 00:10 tick is Skipped while the 00:05 run is active,
    then the 00:05 run finishes. lastRun shows that outcome, not the earlier skip (with runs always
    longer than the period, ordering by scheduled time would show Skipped forever)."""
    async with running_operator(api):
        await start_analysis(
            api, analysis_body(concurrencyPolicy="Forbid", target={"replica": "Master", "groups": [0]})
        )
        clock.set(0, 5, 1)
        await wait_until(lambda: len(run_jobs(api, RUN_0005)) == 1)
        clock.set(0, 10, 1)
        await wait_until(lambda: (status_of(api).get("lastRun") or {}).get("name") == RUN_0010)
        assert status_of(api)["lastRun"]["phase"] == "Skipped"
        finish_job(api, f"{RUN_0005}-g0-0", summary={"topics": 3})
        await wait_until(lambda: (status_of(api).get("lastRun") or {}).get("phase") == "Succeeded")
    status = status_of(api)
    assert status["lastRun"]["name"] == RUN_0005
    assert status["lastRun"]["targets"][0]["summary"] == {"topics": 3}
    assert condition(api, "LastRunSucceeded")["status"] == "True"
    assert [r["name"] for r in status["pastSuccessfulRuns"]] == [RUN_0005]
    assert run_jobs(api, RUN_0010) == []


@pytest.mark.asyncio
async def test_replace_stops_the_active_run_and_starts_the_new_one(
    api: km.KubernetesEmulator, clock: FakeClock
) -> None:
    """concurrencyPolicy Replace: the 00:05 run's Jobs are deleted and the 00:10 run's created."""
    async with running_operator(api):
        await start_analysis(api, analysis_body(concurrencyPolicy="Replace"))
        clock.set(0, 5, 1)
        await wait_until(lambda: len(run_jobs(api, RUN_0005)) == 2)
        clock.set(0, 10, 1)
        await wait_until(lambda: [r["name"] for r in status_of(api).get("active", [])] == [RUN_0010])
    assert run_jobs(api, RUN_0005) == []
    assert len(run_jobs(api, RUN_0010)) == 2
    deletes = list(api[km.action.DELETE, km.resource(JOBS)])
    assert sorted(str(r.name) for r in deletes) == [f"{RUN_0005}-g0-1", f"{RUN_0005}-g1-1"]


@pytest.mark.asyncio
async def test_suspend_starts_nothing_and_resuming_does_not_catch_up(
    api: km.KubernetesEmulator, clock: FakeClock
) -> None:
    """A suspended analysis starts no run; after resuming, the next run is the next fire time."""
    async with running_operator(api):
        await start_analysis(api, analysis_body(suspend=True))
        assert condition(api, "Suspended")["status"] == "True"
        clock.set(0, 12)
        await wait_until(lambda: status_of(api)["nextScheduleTime"] == "2026-01-01T00:15:00Z")
        assert job_creates(api) == 0
        await patch_object(api, f"{ANALYSIS_PATH}/{NAME}", {"spec": {"suspend": False}})
        await wait_until(lambda: condition(api, "Suspended")["status"] == "False")
        clock.set(0, 14)
        await asyncio.sleep(0.5)  # ticks happen; nothing is due before 00:15
        assert job_creates(api) == 0
        clock.set(0, 15, 2)
        await wait_until(lambda: len(status_of(api).get("active", [])) == 1)
    assert status_of(api)["lastScheduleTime"] == "2026-01-01T00:15:00Z"


@pytest.mark.asyncio
async def test_operator_restart_does_not_create_a_run_twice(api: km.KubernetesEmulator, clock: FakeClock) -> None:
    """A restart that lost the status write (next time still 00:05) finds the run by its name and
    launches nothing: each Job exists once and the run is active once."""
    async with running_operator(api):
        await start_analysis(api, analysis_body())
        clock.set(0, 5, 1)
        await wait_until(lambda: len(status_of(api).get("active", [])) == 1)
    body = plain(get_object(api, ANALYSES, NAMESPACE, NAME) or {})
    body["status"] = {**body["status"], "nextScheduleTime": "2026-01-01T00:05:00Z", "active": []}
    body["status"].pop("lastScheduleTime")
    api.objects[ANALYSES, NAMESPACE, NAME] = body  # as if the operator died before writing the status
    creates_before = job_creates(api)
    async with running_operator(api):
        await wait_until(lambda: status_of(api).get("lastScheduleTime") == "2026-01-01T00:05:00Z")
        await wait_until(lambda: len(status_of(api).get("active", [])) == 1)
    assert job_creates(api) == creates_before
    assert run_jobs(api, RUN_0005) == [f"{RUN_0005}-g0-1", f"{RUN_0005}-g1-1"]
    for name in run_jobs(api, RUN_0005):
        assert len(api.objects[JOBS, NAMESPACE, name].history) == 1, f"{name} was created once"


@pytest.mark.asyncio
async def test_launching_a_run_that_exists_is_done_not_an_error(api: km.KubernetesEmulator) -> None:
    """The second line of defence when a list missed the run: create_once meets AlreadyExists."""
    kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"{RUN_0005}-g0-1", "namespace": NAMESPACE}}
    job["spec"] = {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "a", "image": "i"}]}}}
    # The client is synchronous and KMock serves from this loop: call it from a thread.
    assert await asyncio.to_thread(kube.create_once, job) is True
    assert await asyncio.to_thread(kube.create_once, job) is False
    assert len(api.objects[JOBS, NAMESPACE, f"{RUN_0005}-g0-1"].history) == 1


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"schedule": "61 * * * *"}, "InvalidSchedule"),
        ({"schedule": "* * * * * *"}, "InvalidSchedule"),
        ({"timeZone": "Mars/Olympus_Mons"}, "InvalidTimeZone"),
        ({"clusterRef": {"name": "nowhere"}}, "ClusterNotFound"),
    ],
)
@pytest.mark.asyncio
async def test_invalid_schedule_time_zone_or_cluster_gives_ready_false(
    api: km.KubernetesEmulator, clock: FakeClock, changes: dict[str, Any], reason: str
) -> None:
    """A schedule or time zone that cannot work, or a missing Broker: Ready=False with the reason."""
    async with running_operator(api):
        await post(api, ANALYSIS_PATH, analysis_body(**changes))
        await wait_until(lambda: condition(api, "Ready").get("reason") == reason)
        clock.set(0, 5, 1)
        await asyncio.sleep(0.5)
    ready = condition(api, "Ready")
    assert ready["status"] == "False"
    assert status_of(api)["observedGeneration"] == 1
    assert job_creates(api) == 0


# ---------------------------------------------------------------- results and history


@pytest.mark.asyncio
async def test_finished_run_summary_is_mirrored_and_history_pruned(
    api: km.KubernetesEmulator, clock: FakeClock
) -> None:
    """A finished run's summaries land in status.lastRun and a ConfigMap; with a history limit of 1
    the older successful run is deleted as soon as the newer one finishes."""
    body = analysis_body(successfulRunsHistoryLimit=1, target={"replica": "Master", "groups": [0]})
    async with running_operator(api):
        await start_analysis(api, body)
        clock.set(0, 5, 1)
        await wait_until(lambda: len(run_jobs(api, RUN_0005)) == 1)
        finish_job(api, f"{RUN_0005}-g0-0", summary={"topics": 41, "messages": 1200})
        await wait_until(lambda: (status_of(api).get("lastRun") or {}).get("phase") == "Succeeded")
        status = status_of(api)
        assert status["lastRun"]["targets"][0]["summary"] == {"topics": 41, "messages": 1200}
        assert status["lastRun"]["targets"][0]["node"] == "node-0-0"
        assert condition(api, "LastRunSucceeded")["status"] == "True"
        config_map = get_object(api, "v1/configmaps", NAMESPACE, RUN_0005) or {}
        assert json.loads(config_map["data"]["orders-g0-0.json"]) == {"topics": 41, "messages": 1200}
        clock.set(0, 10, 1)
        await wait_until(lambda: len(run_jobs(api, RUN_0010)) == 1)
        finish_job(api, f"{RUN_0010}-g0-0", failed=False, summary={"topics": 42})
        await wait_until(lambda: (status_of(api).get("lastRun") or {}).get("name") == RUN_0010)
        await wait_until(lambda: run_jobs(api, RUN_0005) == [])
    status = status_of(api)
    assert [r["name"] for r in status["pastSuccessfulRuns"]] == [RUN_0010]
    assert status["lastSuccessfulTime"] == "2026-01-01T00:06:00Z"
    assert not get_object(api, "v1/configmaps", NAMESPACE, RUN_0005)
    assert get_object(api, "v1/configmaps", NAMESPACE, RUN_0010)


@pytest.mark.asyncio
async def test_failed_run_is_reported(api: km.KubernetesEmulator, clock: FakeClock) -> None:
    """A failed Job makes the run Failed and LastRunSucceeded False with reason Failed."""
    async with running_operator(api):
        await start_analysis(api, analysis_body(target={"replica": "Master", "groups": [1]}))
        clock.set(0, 5, 1)
        await wait_until(lambda: len(run_jobs(api, RUN_0005)) == 1)
        finish_job(api, f"{RUN_0005}-g1-0", failed=True)
        await wait_until(lambda: condition(api, "LastRunSucceeded").get("reason") == "Failed")
    assert [r["name"] for r in status_of(api)["pastFailedRuns"]] == [RUN_0005]


@pytest.mark.asyncio
async def test_run_now_annotation_launches_one_ad_hoc_run(api: km.KubernetesEmulator, clock: FakeClock) -> None:
    """`shoal.io/run-now` starts a run at once (AllReplicas: every replica) and is removed."""
    async with running_operator(api):
        await start_analysis(api, analysis_body(schedule="0 3 * * *", target={"replica": "AllReplicas"}))
        annotation = {"metadata": {"annotations": {"shoal.io/run-now": "please"}}}
        await patch_object(api, f"{ANALYSIS_PATH}/{NAME}", annotation)
        await wait_until(lambda: len(status_of(api).get("active", [])) == 1)
        await wait_until(
            lambda: (
                "shoal.io/run-now"
                not in ((get_object(api, ANALYSES, NAMESPACE, NAME) or {})["metadata"].get("annotations") or {})
            )
        )
    (run,) = status_of(api)["active"]
    assert run["name"].startswith(f"{NAME}-now-")
    assert sorted(t["pod"] for t in run["targets"]) == ["orders-g0-0", "orders-g0-1", "orders-g1-0", "orders-g1-1"]
    assert job_creates(api) == 4


# ---------------------------------------------------------------- RBAC coverage


@pytest.mark.asyncio
async def test_rbac_grants_every_request_of_the_scheduler(api: km.KubernetesEmulator, clock: FakeClock) -> None:
    """Every verb/resource sent while launching, replacing, finishing and pruning runs is granted
    by the chart's ClusterRole."""
    body = analysis_body(concurrencyPolicy="Replace", successfulRunsHistoryLimit=0, spark={"runner": "SparkSubmit"})
    async with running_operator(api):
        await start_analysis(api, body)
        clock.set(0, 5, 1)
        await wait_until(lambda: len(run_jobs(api, RUN_0005)) == 2)
        clock.set(0, 10, 1)
        await wait_until(lambda: len(run_jobs(api, RUN_0010)) == 2)
        for name in run_jobs(api, RUN_0010):
            finish_job(api, name, summary={"ok": True})
        await wait_until(lambda: run_jobs(api, RUN_0010) == [])
    seeded = {("shoal.io", "storeanalyses", "create")}
    used = set(_used(api)) - seeded
    assert ("batch", "jobs", "create") in used and ("batch", "jobs", "delete") in used
    unused = ANALYSIS_GRANTS - used
    assert not unused, f"test_handlers.ANALYSIS_GRANTS names grants the scheduler never used: {sorted(unused)}"
    missing = used - _granted()
    assert not missing, f"not granted by charts/shoal/templates/rbac.yaml: {sorted(missing)}"
