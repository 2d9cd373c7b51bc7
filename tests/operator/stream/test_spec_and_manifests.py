"""StreamAnalysis pure parts: spec parsing (defaults, the CRD's rules repeated), the StatefulSet
and Service (golden, valid Kubernetes objects), and the job's command line against the job's own
parser.

Regenerate the goldens with SHOAL_UPDATE_GOLDEN=1 after a deliberate change and review the diff.
"""

from __future__ import annotations

import copy
import importlib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from shoal.operator.errors import InvalidSpecError
from shoal.operator.spec import BrokerSpec, broker_spec_from
from shoal.operator.stream import manifests as stream_manifests
from shoal.operator.stream.spec import STREAM_JOB_KINDS, ClaimPath, StreamSpec, stream_spec_from
from tests.operator.conftest import REPO_ROOT, check_golden, load_yaml

GOLDEN_DIR = Path(__file__).parent / "golden"
KUBERNETES_VERSION = "1.30.0"


def _body(**spec_changes: Any) -> dict[str, Any]:
    body = copy.deepcopy(load_yaml(REPO_ROOT / "examples" / "streamanalysis.yaml"))
    body["metadata"].update(namespace="mq", uid="57e40000-1111-4222-8333-944455556666", generation=1)
    body["spec"].update(spec_changes)
    return body


def _stream(**spec_changes: Any) -> StreamSpec:
    return stream_spec_from(_body(**spec_changes))


@pytest.fixture
def cluster(cluster_body: dict[str, Any]) -> BrokerSpec:
    return broker_spec_from(cluster_body, ("/var/lib/shoal",))


# ---------------------------------------------------------------- spec


def test_example_parses_with_defaults() -> None:
    """Goal: examples/streamanalysis.yaml parses; omitted fields take the CRD's defaults. Method:
    parse it and read the fields a user did not set."""
    stream = stream_spec_from(_body())
    assert (stream.job, stream.job_module, stream.trigger_seconds, stream.max_messages_per_trigger) == (
        "TopicFlow",
        "topic_flow",
        10,
        500000,
    )
    assert stream.checkpoint == ClaimPath("stream-state", "orders-flow") and stream.output is None
    assert (stream.starting_offsets, stream.consumer_group, stream.suspend) == (
        "earliest",
        "shoal-stream-orders-flow",
        False,
    )


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"job": "Nope"}, "spec.job", "must be one of"),
        ({"job": "TopicArchive"}, "spec", "TopicArchive needs topics or topicPattern"),
        ({"topics": ["A"], "topicPattern": "B.*"}, "spec", "topics and topicPattern are exclusive"),
        ({"topicPattern": "("}, "spec.topicPattern", "not a regular expression"),
        ({"topics": ["bad topic"]}, "spec.topics[]", "is not a topic name"),
        ({"triggerSeconds": 0}, "spec.triggerSeconds", "must be an integer in"),
        ({"sparkConf": {"spark.master": "yarn"}}, "spec.sparkConf", "must not set spark.master"),
        ({"checkpoint": {"persistentVolumeClaim": {"claimName": ""}}}, "spec.checkpoint", "is required"),
        ({"checkpoint": {"persistentVolumeClaim": {"claimName": "c", "subPath": "a/../b"}}}, "spec.checkpoint", ".."),
        ({"args": ["x"] * 33}, "spec.args", "at most 32"),
    ],
)
def test_invalid_specs_name_their_field(changes: dict[str, Any], field: str, message: str) -> None:
    """Goal: what the CRD's schema and CEL rules refuse, the parser refuses too, naming the field
    (an API server that skipped them still gets a precise status). Method: one bad field each."""
    with pytest.raises(InvalidSpecError) as raised:
        _stream(**changes)
    assert raised.value.field.startswith(field) and message in str(raised.value), raised.value


def test_a_long_name_is_refused_before_its_children_would_be() -> None:
    """Goal: a name whose StatefulSet's pods could not be labelled is refused up front."""
    body = _body()
    body["metadata"]["name"] = "a" * 46
    with pytest.raises(InvalidSpecError, match=r"metadata\.name"):
        stream_spec_from(body)
    body["metadata"]["name"] = "a" * 45
    assert stream_spec_from(body).name == "a" * 45


# ---------------------------------------------------------------- manifests


def test_children_golden_and_valid(cluster: BrokerSpec) -> None:
    """Goal: the StatefulSet and Service are what a review accepted, and valid objects for the API
    server. Method: golden YAML; kubernetes-validate strict on each."""
    stream = _stream(image="shoal-spark:1.0")
    objects = [stream_manifests.service(stream), stream_manifests.stateful_set(stream, cluster)]
    for item in objects:
        kubernetes_validate.validate(item, KUBERNETES_VERSION, strict=True)
    check_golden(GOLDEN_DIR / "stream-flow.yaml", objects)
    archive = _stream(
        job="TopicArchive",
        topics=["Orders", "Payments"],
        output={"persistentVolumeClaim": {"claimName": "lake", "subPath": "raw/orders"}},
        accountSecretRef={"name": "stream-account"},
        suspend=True,
        startingOffsets="latest",
        group="archive",
        args=["--tag", "paid"],
    )
    objects = [stream_manifests.stateful_set(archive, cluster)]
    kubernetes_validate.validate(objects[0], KUBERNETES_VERSION, strict=True)
    check_golden(GOLDEN_DIR / "stream-archive-suspended.yaml", objects)


def test_one_replica_at_most_and_none_while_suspended(cluster: BrokerSpec) -> None:
    """Goal: never two queries on one checkpoint: one replica of a StatefulSet (not a Deployment),
    zero while suspended, the state claim mounted where --checkpoint points."""
    running = stream_manifests.stateful_set(_stream(), cluster)
    suspended = stream_manifests.stateful_set(_stream(suspend=True), cluster)
    assert (running["kind"], running["spec"]["replicas"], suspended["spec"]["replicas"]) == ("StatefulSet", 1, 0)
    container = running["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[args.index("--checkpoint") + 1] == "/stream/orders-flow/checkpoint"
    assert args[args.index("--output") + 1] == "/stream/orders-flow/output"
    # the claim mounted whole: a subPath the kubelet makes would be root's, not the query's
    assert container["volumeMounts"][0] == {"name": "state", "mountPath": "/stream"}
    assert running["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "stream-state"


@pytest.mark.parametrize("job", sorted(STREAM_JOB_KINDS))
def test_the_command_line_is_the_jobs_own(cluster: BrokerSpec, job: str) -> None:
    """Goal: every job takes the command line the operator writes (no option it does not know).
    Method: the job's own argparse parser over the operator's arguments."""
    stream = _stream(job=job, topics=["Orders"], maxMessagesPerTrigger=1000, args=[])
    module = importlib.import_module(f"shoal.spark.jobs.{STREAM_JOB_KINDS[job]}")
    parsed = module.build_parser().parse_args(stream_manifests.job_arguments(stream, cluster))
    assert parsed.namesrv == "orders-ns-0.orders-ns.mq.svc:9876;orders-ns-1.orders-ns.mq.svc:9876"
    assert (parsed.topic, parsed.max_messages_per_trigger, parsed.metrics_port) == (["Orders"], 1000, 9108)
    assert str(parsed.checkpoint) == stream_manifests.checkpoint_path(stream) == "/stream/orders-flow/checkpoint"
