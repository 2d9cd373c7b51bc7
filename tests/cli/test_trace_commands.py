"""`shoal trace`: its JSON lines and its help."""

from __future__ import annotations

import json

from click.testing import CliRunner

from shoal.cli.main import cli
from shoal.cli.trace_commands import record_json
from shoal.formats.trace import decode_trace_data


def test_record_json_names_fields_as_rocketmq_and_omits_what_the_type_lacks() -> None:
    """Goal: one JSON object per record with RocketMQ's field names, None fields left out, and the
    carrying trace message's id. Method: a SubAfter record of the CLOUD layout (no timestamp, group)."""
    (record,) = decode_trace_data("SubAfter\x01req\x01MSGID\x014\x01true\x01k1\x010\x02")
    line = json.loads(record_json(record, "TRACEMSG"))
    assert line == {
        "traceType": "SubAfter",
        "msgId": "MSGID",
        "keys": "k1",
        "costTime": 4,
        "success": True,
        "requestId": "req",
        "contextCode": 0,
        "traceMessageId": "TRACEMSG",
    }


def test_help_names_the_default_trace_topic_and_filters() -> None:
    """Goal: `shoal trace --help` says what it reads and how to filter. Method: click's runner."""
    result = CliRunner().invoke(cli, ["trace", "--help"])
    assert result.exit_code == 0
    for words in ("RMQ_SYS_TRACE_TOPIC", "--msg-id", "--key", "--topic"):
        assert words in result.output
