"""tools/gen_proto.py: protocol/v2/ is exactly what the pinned rocketmq-proto jar generates."""

from __future__ import annotations

import pytest

from tests.conftest import load_tool

gen_proto = load_tool("gen_proto")


def test_the_committed_protocol_modules_match_a_fresh_generation(capsys: pytest.CaptureFixture[str]) -> None:
    assert gen_proto.main(["--check"]) == 0, capsys.readouterr().out


def test_the_generated_service_is_rocketmqs_messaging_service() -> None:
    from shoal.protocol.v2 import definition_pb2, service_pb2

    service = service_pb2.DESCRIPTOR.services_by_name["MessagingService"]
    assert service.full_name == "apache.rocketmq.v2.MessagingService"
    assert {"QueryRoute", "SendMessage", "ReceiveMessage", "AckMessage", "Telemetry"} <= set(service.methods_by_name)
    assert definition_pb2.Code.OK == 20000
