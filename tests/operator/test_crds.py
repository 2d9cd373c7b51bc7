"""CRD checks: structure, examples valid against the schema, bad specs rejected, chart copies in step."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from shoal.operator.analysis.spec import ANALYSIS_CEL_MESSAGES, OPERATOR_OWNED_SPARK_CONF_PREFIXES
from shoal.operator.spec import (
    CEL_MESSAGES,
    OPERATOR_OWNED_CONFIG_KEYS,
    OPERATOR_OWNED_CONFIG_PREFIX,
    RESERVED_TOPIC_NAMES,
)
from shoal.operator.stream.spec import STREAM_CEL_MESSAGES

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD_FILES = ("broker.yaml", "topic.yaml", "storeanalysis.yaml", "streamanalysis.yaml")


def _load(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text())
    assert isinstance(document, dict)
    return document


def _schema(crd_file: str) -> dict[str, Any]:
    crd = _load(REPO_ROOT / "crds" / crd_file)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert isinstance(schema, dict)
    return schema


def _walk(node: Any) -> list[dict[str, Any]]:
    found = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found += _walk(value)
    elif isinstance(node, list):
        for value in node:
            found += _walk(value)
    return found


def _cel_rules(crd_file: str) -> list[dict[str, str]]:
    rules = []
    for node in _walk(_schema(crd_file)):
        rules += node.get("x-kubernetes-validations", [])
    return rules


@pytest.mark.parametrize("crd_file", CRD_FILES)
def test_chart_crds_are_identical_copies(crd_file: str) -> None:
    """charts/shoal/crds/ holds byte-identical copies of crds/ (one source of truth)."""
    assert (REPO_ROOT / "charts" / "shoal" / "crds" / crd_file).read_bytes() == (
        REPO_ROOT / "crds" / crd_file
    ).read_bytes()


@pytest.mark.parametrize("crd_file", CRD_FILES)
def test_crd_conventions(crd_file: str) -> None:
    """shoal.io/v1alpha1, namespaced, status subresource, printer columns with Ready, category shoal."""
    crd = _load(REPO_ROOT / "crds" / crd_file)
    kubernetes_validate.validate(crd, "1.30.0", strict=True)
    assert crd["spec"]["group"] == "shoal.io"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"]["categories"] == ["shoal"]
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1" and version["storage"] and version["served"]
    assert version["subresources"] == {"status": {}}
    columns = {c["name"] for c in version["additionalPrinterColumns"]}
    assert {"Ready", "Age"} <= columns
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert {"observedGeneration", "conditions", "kopf"} <= set(status)


@pytest.mark.parametrize("crd_file", CRD_FILES)
def test_cel_messages_are_the_ones_the_operator_repeats(crd_file: str) -> None:
    """Every CEL rule's message is in spec.CEL_MESSAGES (analysis.spec's for StoreAnalysis,
    stream.spec's for StreamAnalysis), so the Python checks say the same."""
    messages = {"storeanalysis.yaml": ANALYSIS_CEL_MESSAGES, "streamanalysis.yaml": STREAM_CEL_MESSAGES}.get(
        crd_file, CEL_MESSAGES
    )
    for rule in _cel_rules(crd_file):
        assert rule["message"] in messages.values(), rule


def test_owned_keys_and_reserved_topics_match_the_cel_rules() -> None:
    """The CEL lists of owned broker.conf keys and reserved topics equal the Python ones."""
    (owned_rule,) = [r["rule"] for r in _cel_rules("broker.yaml") if r["message"] == CEL_MESSAGES["owned_keys"]]
    for key in OPERATOR_OWNED_CONFIG_KEYS:
        assert f"'{key}'" in owned_rule
    assert f"!k.startsWith('{OPERATOR_OWNED_CONFIG_PREFIX}')" in owned_rule
    assert owned_rule.count("'") == 2 * (len(OPERATOR_OWNED_CONFIG_KEYS) + 1)
    (reserved_rule,) = [r["rule"] for r in _cel_rules("topic.yaml") if r["message"] == CEL_MESSAGES["reserved_topic"]]
    for name in RESERVED_TOPIC_NAMES:
        assert f"'{name}'" in reserved_rule


@pytest.mark.parametrize(
    ("example", "crd_file"),
    [
        ("cluster.yaml", "broker.yaml"),
        ("topic.yaml", "topic.yaml"),
        ("storeanalysis.yaml", "storeanalysis.yaml"),
        ("streamanalysis.yaml", "streamanalysis.yaml"),
    ],
)
def test_examples_are_valid(example: str, crd_file: str) -> None:
    """examples/*.yaml validate against their CRD's openAPIV3Schema."""
    jsonschema.validate(_load(REPO_ROOT / "examples" / example), _schema(crd_file))


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("spec", "groups"), 0),
        (("spec", "groups"), 17),
        (("spec", "replicasPerGroup"), 4),
        (("spec", "replication", "mode"), "Semi"),
        (("spec", "replication", "failover"), "Sometimes"),
        (("spec", "flush"), "Never"),
        (("spec", "storage", "type"), "NFS"),
        (("spec", "storage", "hostPath", "root"), "relative/dir"),
        (("spec", "storage", "hostPath", "reclaimPolicy"), "Recycle"),
        (("spec", "storage", "size"), "lots"),
        (("spec", "retention", "deleteWhen"), "25"),
        (("spec", "nameServer", "replicas"), 6),
        (("spec", "config", "someKey"), 5),
        (("spec", "image"), ""),
    ],
)
def test_bad_broker_specs_are_rejected_by_the_schema(path: tuple[str, ...], value: Any) -> None:
    """Enums, ranges, patterns and types reject bad Broker specs."""
    body = copy.deepcopy(_load(REPO_ROOT / "examples" / "cluster.yaml"))
    node = body
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(body, _schema("broker.yaml"))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("readQueueNums", 0),
        ("writeQueueNums", 1025),
        ("permission", "All"),
        ("messageType", "Batch"),
        ("topicName", "bad name"),
        ("topicName", "x" * 128),
        ("clusterRef", {}),
        ("groups", [16]),
    ],
)
def test_bad_topic_specs_are_rejected_by_the_schema(key: str, value: Any) -> None:
    """Enums, ranges and name patterns reject bad Topic specs."""
    body = copy.deepcopy(_load(REPO_ROOT / "examples" / "topic.yaml"))
    body["spec"][key] = value
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(body, _schema("topic.yaml"))


def test_owned_spark_conf_matches_the_cel_rule() -> None:
    """The CEL rule on spark.sparkConf names every key and prefix analysis.spec refuses."""
    (rule,) = [
        r["rule"] for r in _cel_rules("storeanalysis.yaml") if r["message"] == ANALYSIS_CEL_MESSAGES["owned_spark_conf"]
    ]
    for key in OPERATOR_OWNED_SPARK_CONF_PREFIXES:
        assert f"'{key}'" in rule


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("schedule", "*/5 * * *"),
        ("schedule", "0 0 * * * *"),
        ("schedule", "TZ=UTC 0 0 * * *"),
        ("timeZone", "Europe/../etc"),
        ("concurrencyPolicy", "Sometimes"),
        ("startingDeadlineSeconds", -1),
        ("activeDeadlineSeconds", 0),
        ("successfulRunsHistoryLimit", 21),
        ("target", {"replica": "Leader"}),
        ("target", {"groups": [16]}),
        ("analysis", {"kind": "IndexAudit"}),
        ("analysis", {"kind": "TopicStats", "window": {"since": "1w"}}),
        ("spark", {"runner": "SparkOperator"}),
        ("spark", {"executor": {"instances": 0}}),
        ("clusterRef", {}),
    ],
)
def test_bad_analysis_specs_are_rejected_by_the_schema(key: str, value: Any) -> None:
    """Enums, ranges and patterns reject bad StoreAnalysis specs."""
    body = copy.deepcopy(_load(REPO_ROOT / "examples" / "storeanalysis.yaml"))
    body["spec"][key] = value
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(body, _schema("storeanalysis.yaml"))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("job", "TopicCopy"),
        ("topics", ["has space"]),
        ("topics", ["A"] * 65),
        ("group", "a/b"),
        ("maxMessagesPerTrigger", 0),
        ("triggerSeconds", 3601),
        ("checkpoint", {}),
        ("checkpoint", {"persistentVolumeClaim": {"claimName": "c", "subPath": "/abs"}}),
        ("accountSecretRef", {}),
        ("clusterRef", {}),
    ],
)
def test_bad_stream_specs_are_rejected_by_the_schema(key: str, value: Any) -> None:
    """Enums, ranges and patterns reject bad StreamAnalysis specs."""
    body = copy.deepcopy(_load(REPO_ROOT / "examples" / "streamanalysis.yaml"))
    body["spec"][key] = value
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(body, _schema("streamanalysis.yaml"))
