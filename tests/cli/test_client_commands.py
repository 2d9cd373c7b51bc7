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
