"""A StreamAnalysis' status from its pod and its query's /metrics: the progress read over HTTP from
a real StreamMetrics server (the one the streaming jobs run), the pod's state, and the phases."""

from __future__ import annotations

from typing import Any

from shoal.operator.analysis.status import Health
from shoal.operator.stream.handlers import read_metrics
from shoal.operator.stream.status import PodFacts, pod_facts, progress_from_metrics, stream_status
from shoal.spark.jobs.stream_metrics import StreamMetrics
from tests.ports import free_port

NOW = "2026-11-29T12:00:00Z"
FOUND = Health(True, "ClusterFound", "reading topics of cluster orders")


def test_progress_is_read_from_a_running_jobs_metrics_endpoint() -> None:
    """Goal: status.progress carries what the job's /metrics says: batch, rows, rates, duration,
    total lag and the queues furthest behind first; nothing before the first micro-batch. Method:
    the jobs' StreamMetrics on a real port, read with the operator's reader."""
    port = free_port()
    served = StreamMetrics("topic_flow", port)
    try:
        text = read_metrics("127.0.0.1", port)
        assert text is not None and progress_from_metrics(text, NOW) is None  # no micro-batch yet
        served.update(
            {
                "batch": 41,
                "rows": 5000,
                "inputRowsPerSecond": 812.5,
                "processedRowsPerSecond": 2400.0,
                "batchDurationMs": 2083,
                "lag": 130,
                "lagPerQueue": {"Orders": {"broker-a": {"0": 100, "1": 0}}, "Payments": {"broker-b": {"3": 30}}},
            }
        )
        text = read_metrics("127.0.0.1", port)
        assert text is not None
        progress = progress_from_metrics(text, NOW)
    finally:
        served.close()
    assert progress is not None
    assert {key: progress[key] for key in ("batch", "rows", "inputRowsPerSecond", "processedRowsPerSecond")} == {
        "batch": 41,
        "rows": 5000,
        "inputRowsPerSecond": 812.5,
        "processedRowsPerSecond": 2400.0,
    }
    assert (progress["batchDurationSeconds"], progress["lag"], progress["readAt"]) == (2.083, 130, NOW)
    assert progress["lagPerQueue"] == [
        {"topic": "Orders", "broker": "broker-a", "queue": 0, "lag": 100},
        {"topic": "Payments", "broker": "broker-b", "queue": 3, "lag": 30},
        {"topic": "Orders", "broker": "broker-a", "queue": 1, "lag": 0},
    ]
    assert progress["finishedAt"].endswith("Z")


def test_a_pod_that_does_not_answer_reads_as_none() -> None:
    """Goal: a query that is not listening (starting, gone) is 'not answering', not an error."""
    assert read_metrics("127.0.0.1", free_port()) is None


def _pod(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "flow-stream-0"}, "status": status}


def test_pod_facts_read_restarts_and_the_last_termination() -> None:
    """Goal: restarts and how the query last ended come from the container's status. Method: a
    pod status as the kubelet writes it after an OOM kill and a restart."""
    facts = pod_facts(
        _pod(
            phase="Running",
            podIP="10.244.1.7",
            containerStatuses=[
                {"name": "sidecar", "restartCount": 9},
                {
                    "name": "query",
                    "ready": True,
                    "restartCount": 2,
                    "state": {"running": {"startedAt": "2026-11-29T11:59:00Z"}},
                    "lastState": {
                        "terminated": {
                            "reason": "OOMKilled",
                            "exitCode": 137,
                            "finishedAt": "2026-11-29T11:58:50Z",
                            "message": "x" * 5000,
                        }
                    },
                },
            ],
        ),
        "query",
    )
    assert (facts.running, facts.ready, facts.restarts, facts.ip) == (True, True, 2, "10.244.1.7")
    assert facts.last_termination is not None
    assert (facts.last_termination["reason"], facts.last_termination["exitCode"]) == ("OOMKilled", 137)
    assert len(facts.last_termination["message"]) == 1024


def _phase(status: dict[str, Any]) -> tuple[str, str, str]:
    (ready,) = status["conditions"]
    return status["phase"], ready["status"], ready["reason"]


def test_phases_and_the_ready_condition() -> None:
    """Goal: the phase and Ready say what a person on call needs: running, starting, failing,
    pending, suspended, or why nothing runs. Method: stream_status over each situation."""
    running = PodFacts("flow-stream-0", "Running", True, True, 0, "", "10.0.0.1", None)
    crashing = PodFacts(
        "flow-stream-0", "Running", False, False, 3, "CrashLoopBackOff", "10.0.0.1", {"reason": "Error", "exitCode": 1}
    )
    cases = [
        (FOUND, False, running, True, ("Running", "True", "Running")),
        (FOUND, False, running, False, ("Running", "False", "Starting")),
        (FOUND, False, crashing, False, ("Failing", "False", "Failing")),
        (FOUND, False, None, False, ("Pending", "False", "Pending")),
        (FOUND, True, None, False, ("Suspended", "False", "Suspended")),
        (Health(False, "ClusterNotFound", "no Broker"), False, None, False, ("Pending", "False", "ClusterNotFound")),
    ]
    for health, suspended, pod, answering, expected in cases:
        status = stream_status(3, health, suspended, pod, None, answering, NOW)
        assert _phase(status) == expected, (health, suspended, pod, answering)
    failing = stream_status(3, FOUND, False, crashing, {"batch": 7}, False, NOW)
    assert failing["restarts"] == 3 and "CrashLoopBackOff" in failing["conditions"][0]["message"]
    assert failing["progress"] == {"batch": 7}  # the last progress stays while the query is down
