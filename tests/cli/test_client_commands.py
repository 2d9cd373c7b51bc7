"""`shoal produce`, `shoal consume` and `shoal admin` against a real NameServer + Broker."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from shoal.cli.main import cli

pytestmark = pytest.mark.slow


def test_produce_consume_and_admin_round_trip(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: the quick-check commands work end to end. Method: produce 3, consume 3, then inspect
    the topic, the group's progress and a message by key and by id."""
    runner = CliRunner()
    namesrv = ["-n", cluster.namesrv_addr]
    created = runner.invoke(cli, ["admin", "topic-create", "CliTopic", "--queues", "2", *namesrv])
    assert created.exit_code == 0, created.output
    produced = runner.invoke(cli, ["produce", "CliTopic", "-c", "3", "--tags", "T1", "--keys", "key-{n}", *namesrv])
    assert produced.exit_code == 0, produced.output
    lines = [line for line in produced.output.splitlines() if line.startswith("SEND_OK")]
    assert len(lines) == 3
    offset_msg_id = lines[0].split("offsetMsgId=")[1].split()[0]
    consumed = runner.invoke(cli, ["consume", "CliTopic", "-c", "3", "--timeout", "15", "--group", "CID_cli", *namesrv])
    assert consumed.exit_code == 0, consumed.output
    messages = [json.loads(line) for line in consumed.output.splitlines() if line.startswith("{")]
    assert sorted(m["body"] for m in messages) == ["hello", "hello", "hello"]
    assert {m["tags"] for m in messages} == {"T1"}
    stats = runner.invoke(cli, ["admin", "topic-stats", "CliTopic", *namesrv])
    assert stats.exit_code == 0 and "q0" in stats.output and "q1" in stats.output
    progress = runner.invoke(cli, ["admin", "progress", "CID_cli", *namesrv])
    assert progress.exit_code == 0, progress.output
    assert "total lag 0" in progress.output
    by_key = runner.invoke(cli, ["admin", "msg-by-key", "CliTopic", "key-1", *namesrv])
    assert by_key.exit_code == 0, by_key.output
    assert json.loads(by_key.output.splitlines()[0])["keys"] == ["key-1"]
    by_id = runner.invoke(cli, ["admin", "msg-by-id", offset_msg_id, *namesrv])
    assert by_id.exit_code == 0, by_id.output
    assert json.loads(by_id.output)["offsetMsgId"] == offset_msg_id
    topics = runner.invoke(cli, ["admin", "topics", *namesrv])
    assert "CliTopic" in topics.output
    clusters = runner.invoke(cli, ["admin", "cluster", *namesrv])
    assert f"0={cluster.broker_addr}" in clusters.output
    missing = runner.invoke(cli, ["admin", "msg-by-key", "CliTopic", "nope", *namesrv])
    assert missing.exit_code == 1 and "no message with key" in missing.output


def test_mistakes_get_a_clear_error_and_a_non_zero_exit(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: the silent mistakes of issue 11 are reported. Method: against a real cluster, consume
    and progress on unknown topics and groups, delete a topic that never existed, pass a malformed
    tag expression; each exits non-zero and names the problem."""
    runner = CliRunner()
    namesrv = ["-n", cluster.namesrv_addr]
    consumed = runner.invoke(cli, ["consume", "NoSuchTopic", "--timeout", "1", *namesrv])
    assert consumed.exit_code == 1 and "topic 'NoSuchTopic' does not exist" in consumed.output
    progress = runner.invoke(cli, ["admin", "progress", "CID_nobody", *namesrv])
    assert progress.exit_code == 1 and "consumer group 'CID_nobody' has no consume progress" in progress.output
    on_topic = runner.invoke(cli, ["admin", "progress", "CID_nobody", "--topic", "NoSuchTopic", *namesrv])
    assert on_topic.exit_code == 1 and "does not exist" in on_topic.output
    deleted = runner.invoke(cli, ["admin", "topic-delete", "NeverCreated", *namesrv])
    assert deleted.exit_code == 1 and "deleted" not in deleted.output and "does not exist" in deleted.output
    for expression, complaint in (("TagA ||", "empty tag"), ("TagA | TagB", "not '|'"), ("* || TagA", "'*'")):
        bad = runner.invoke(cli, ["consume", "NoSuchTopic", "--expression", expression, *namesrv])
        assert bad.exit_code == 2 and complaint in bad.output, (expression, bad.output)


def test_produce_says_when_the_broker_creates_the_topic(cluster, wait_until) -> None:  # type: ignore[no-untyped-def]
    """Goal: a mistyped topic is not created without a word. Method: produce to a new topic (the
    embedded config auto-creates), then to it again; only the first run says so."""
    runner = CliRunner()
    namesrv = ["-n", cluster.namesrv_addr]
    first = runner.invoke(cli, ["produce", "OrdersTypo", *namesrv])
    assert first.exit_code == 0, first.output
    assert "topic 'OrdersTypo' does not exist" in first.output and "was created by the broker" in first.output
    wait_until(lambda: "OrdersTypo" in runner.invoke(cli, ["admin", "topics", *namesrv]).output)  # next registration
    second = runner.invoke(cli, ["produce", "OrdersTypo", *namesrv])
    assert second.exit_code == 0 and "does not exist" not in second.output, second.output


def test_ha_status_of_a_master_without_slaves_says_so(cluster) -> None:  # type: ignore[no-untyped-def]
    """Goal: no "lag -1 bytes" for a lone master. Method: ha-status of the fixture's broker."""
    result = CliRunner().invoke(cli, ["admin", "ha-status", cluster.broker_addr])
    assert result.exit_code == 0, result.output
    assert "no slave connected" in result.output and "-1" not in result.output
