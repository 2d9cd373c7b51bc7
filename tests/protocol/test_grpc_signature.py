"""RocketMQ 5's gRPC signature: the vector captured from rocketmq-python-client, and parsing."""

from __future__ import annotations

from shoal.protocol.grpc_signature import AUTHORIZATION_LENGTH_MAX, parse_authorization, signature_v5


def test_the_signature_of_a_captured_request_matches() -> None:
    """docs real-clients.md §2.1: hmac(b"", b"20261121T223903Z") starts e81939d5."""
    assert signature_v5("", "20261121T223903Z").startswith("E81939D5")


def test_an_authorization_value_parses_into_its_parts() -> None:
    parsed = parse_authorization("MQv2-HMAC-SHA1 Credential=ak1, SignedHeaders=x-mq-date-time, Signature=0A1B")
    assert parsed is not None
    assert (parsed.access_key, parsed.signed_headers, parsed.signature) == ("ak1", "x-mq-date-time", "0A1B")


def test_other_schemes_and_oversized_values_are_not_parsed() -> None:
    assert parse_authorization("Bearer abc") is None
    assert parse_authorization("MQv2-HMAC-SHA1 Credential=ak") is None
    assert parse_authorization("MQv2-HMAC-SHA1 Credential=a, Signature=" + "0" * AUTHORIZATION_LENGTH_MAX) is None


def test_the_go_clients_credential_scope_gives_its_access_key() -> None:
    """rocketmq-clients golang v5.1.3 writes `Credential=<ak>/<region>/Rocketmq` with an empty region
    and a lower-case signature; RocketMQ 5's proxy reads the access key before the first "/"."""
    parsed = parse_authorization(
        "MQv2-HMAC-SHA1 Credential=shoalUser1//Rocketmq, SignedHeaders=x-mq-date-time, Signature=0a1b"
    )
    assert parsed is not None
    assert (parsed.access_key, parsed.signature) == ("shoalUser1", "0a1b")
