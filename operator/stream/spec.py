"""StreamAnalysis spec as a frozen dataclass, parsed from the custom resource (pure).

Like analysis/spec.py: defaults are applied here too, and every CEL rule of
crds/streamanalysis.yaml is repeated with the same message (STREAM_CEL_MESSAGES;
tests/operator/test_crds.py holds the two in step), so an API server that skipped them (an old
one, an emulator) still gets a precise InvalidSpecError.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shoal.operator import limits
from shoal.operator.errors import InvalidSpecError
from shoal.operator.spec import int_in, one_of, require
from shoal.spark.jobs import STREAM_JOBS

STREAM_JOB_KINDS = {"TopicArchive": "topic_archive", "TopicFlow": "topic_flow", "DlqArchive": "dlq_archive"}
"""spec.job -> module of shoal.spark.jobs (a streaming job: stream_runner's command line)."""
assert set(STREAM_JOB_KINDS.values()) == set(STREAM_JOBS), "every streaming job has a StreamAnalysis kind"

STREAM_CEL_MESSAGES = {
    "immutable": "field is immutable",
    "needs_topics": "TopicArchive needs topics or topicPattern",
    "exclusive_topics": "topics and topicPattern are exclusive",
    "owned_spark_conf": "sparkConf must not set spark.master",
}
"""Messages of crds/streamanalysis.yaml's `x-kubernetes-validations`, reused verbatim here."""

NAME_PATTERN = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
RESOURCE_NAME_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
"""Topic and group names as the CRD's patterns take them (RocketMQ's own characters)."""


@dataclass(frozen=True)
class ClaimPath:
    """A directory on a PersistentVolumeClaim."""

    claim_name: str
    sub_path: str = ""


@dataclass(frozen=True)
class StreamSpec:
    name: str
    namespace: str
    uid: str
    cluster: str
    job: str
    checkpoint: ClaimPath
    """The query's directory: its checkpoint in `checkpoint/`, its output in `output/` (unless `output`)."""
    output: ClaimPath | None = None
    """A claim of its own for the job's tables and progress.json; None: beside the checkpoint."""
    topics: tuple[str, ...] = ()
    topic_pattern: str = ""
    group: str = ""
    starting_offsets: str = "earliest"
    max_messages_per_trigger: int | None = None
    trigger_seconds: int = limits.STREAM_TRIGGER_S_DEFAULT
    suspend: bool = False
    image: str = ""
    """Empty: the cluster's image (Broker.spec.image)."""
    resources: Mapping[str, Any] = field(default_factory=dict)
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    account_secret: str = ""
    args: tuple[str, ...] = ()

    @property
    def job_module(self) -> str:
        return STREAM_JOB_KINDS[self.job]

    @property
    def consumer_group(self) -> str:
        return self.group or f"shoal-stream-{self.name}"


def _claim(raw: Mapping[str, Any], field_name: str) -> ClaimPath:
    claim = raw.get("persistentVolumeClaim") or {}
    name = str(claim.get("claimName", ""))
    require(bool(name), f"{field_name}.persistentVolumeClaim.claimName", "a PersistentVolumeClaim's name is required")
    sub_path = str(claim.get("subPath", ""))
    require(
        not sub_path.startswith("/") and ".." not in sub_path.split("/"),
        f"{field_name}.persistentVolumeClaim.subPath",
        "must be a relative path without '..'",
    )
    return ClaimPath(name, sub_path)


def stream_spec_from(body: Mapping[str, Any]) -> StreamSpec:
    """Parse a StreamAnalysis object (metadata + spec), applying defaults; raise InvalidSpecError."""
    metadata = body["metadata"]
    name = str(metadata["name"])
    require(
        len(name) <= limits.STREAM_NAME_LENGTH_MAX and NAME_PATTERN.match(name) is not None,
        "metadata.name",
        f"must be a DNS label of at most {limits.STREAM_NAME_LENGTH_MAX} characters",
    )
    spec = body.get("spec") or {}
    job = one_of(spec.get("job"), "spec.job", tuple(STREAM_JOB_KINDS))
    topics = tuple(str(topic) for topic in spec.get("topics") or ())
    require(len(topics) <= limits.STREAM_TOPICS_MAX, "spec.topics", f"at most {limits.STREAM_TOPICS_MAX}")
    for topic in topics:
        require(RESOURCE_NAME_PATTERN.match(topic) is not None, "spec.topics[]", f"{topic!r} is not a topic name")
    pattern = str(spec.get("topicPattern") or "")
    if pattern:
        try:
            re.compile(pattern)
        except re.error as error:
            raise InvalidSpecError("spec.topicPattern", f"not a regular expression: {error}") from error
    require(not (topics and pattern), "spec", STREAM_CEL_MESSAGES["exclusive_topics"])
    require(job != "TopicArchive" or bool(topics or pattern), "spec", STREAM_CEL_MESSAGES["needs_topics"])
    group = str(spec.get("group") or "")
    require(group == "" or RESOURCE_NAME_PATTERN.match(group) is not None, "spec.group", "is not a group name")
    conf = {str(key): str(value) for key, value in (spec.get("sparkConf") or {}).items()}
    require("spark.master" not in conf, "spec.sparkConf", STREAM_CEL_MESSAGES["owned_spark_conf"])
    args = tuple(str(a) for a in spec.get("args") or ())
    require(len(args) <= limits.STREAM_ARGS_MAX, "spec.args", f"at most {limits.STREAM_ARGS_MAX}")
    checkpoint = _claim(spec.get("checkpoint") or {}, "spec.checkpoint")
    raw_output = spec.get("output") or {}
    output = _claim(raw_output, "spec.output") if raw_output.get("persistentVolumeClaim") else None
    per_trigger = spec.get("maxMessagesPerTrigger")
    return StreamSpec(
        name=name,
        namespace=str(metadata.get("namespace", "default")),
        uid=str(metadata.get("uid", "")),
        cluster=str(spec["clusterRef"]["name"]),
        job=job,
        checkpoint=checkpoint,
        output=output,
        topics=topics,
        topic_pattern=pattern,
        group=group,
        starting_offsets=str(spec.get("startingOffsets") or "earliest"),
        max_messages_per_trigger=None
        if per_trigger is None
        else int_in(per_trigger, "spec.maxMessagesPerTrigger", 1, 100_000_000),
        trigger_seconds=int_in(
            spec.get("triggerSeconds", limits.STREAM_TRIGGER_S_DEFAULT),
            "spec.triggerSeconds",
            1,
            limits.STREAM_TRIGGER_S_MAX,
        ),
        suspend=bool(spec.get("suspend", False)),
        image=str(spec.get("image") or ""),
        resources=dict(spec.get("resources") or {}),
        spark_conf=conf,
        account_secret=str((spec.get("accountSecretRef") or {}).get("name") or ""),
        args=args,
    )
