"""The check of one request: RocketMQ's order, permission table per request code, admin codes, remarks."""

from __future__ import annotations

import json

import pytest

from shoal.acl import NAMESRV_CHECKED_CODES, AccessValidator, parse_plain_acl
from shoal.acl.permission import ANY, DENY, PUB, SUB, has_permission, required_resources
from shoal.protocol import RemotingCommand, RequestCode, ResponseCode, make_request
from shoal.protocol.acl_signature import Credentials
from shoal.protocol.codes import ShoalRequestCode

RULES = parse_plain_acl("""
globalWhiteRemoteAddresses: ["10.9.9.*"]
accounts:
  - accessKey: userAAA
    secretKey: userSecret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [topicA=PUB, topicB=SUB, topicC=PUB|SUB]
    groupPerms: [groupX=DENY]
  - accessKey: adminAAA
    secretKey: adminSecret
    admin: true
  - accessKey: whiteAAA
    secretKey: whiteSecret
    whiteRemoteAddress: 10.1.1.1
""")
USER = Credentials("userAAA", "userSecret")
ADMIN = Credentials("adminAAA", "adminSecret")


def signed(
    code: int, fields: dict[str, str], body: bytes | None = None, credentials: Credentials = USER
) -> RemotingCommand:
    request = make_request(code, opaque=1, ext_fields=fields, body=body)
    credentials.sign(request.ext_fields, body)
    return request


def heartbeat(group: str, topic: str) -> bytes:
    return json.dumps(
        {"clientID": "c", "consumerDataSet": [{"groupName": group, "subscriptionDataSet": [{"topic": topic}]}]}
    ).encode()


@pytest.mark.parametrize(
    ("code", "fields", "body", "needed"),
    [
        (RequestCode.SEND_MESSAGE, {"topic": "T", "producerGroup": "P"}, None, {"T": PUB}),
        (RequestCode.SEND_MESSAGE, {"topic": "%RETRY%G", "producerGroup": "P"}, None, {"%RETRY%P": SUB}),
        (RequestCode.SEND_MESSAGE_V2, {"b": "T", "a": "P"}, None, {"T": PUB}),
        (RequestCode.SEND_MESSAGE_V2, {"b": "%RETRY%G", "a": "P"}, None, {"%RETRY%P": SUB}),
        (RequestCode.SEND_BATCH_MESSAGE, {"b": "T", "a": "P"}, None, {"T": PUB}),
        (RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "G"}, None, {"%RETRY%G": SUB}),
        (RequestCode.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G"}, None, {"T": SUB, "%RETRY%G": SUB}),
        (RequestCode.QUERY_MESSAGE, {"topic": "T"}, None, {"T": SUB}),
        (RequestCode.HEART_BEAT, {}, heartbeat("G", "T"), {"%RETRY%G": SUB, "T": SUB}),
        (RequestCode.UNREGISTER_CLIENT, {"consumerGroup": "G"}, None, {"%RETRY%G": SUB}),
        (RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"}, None, {"%RETRY%G": SUB}),
        (RequestCode.UPDATE_CONSUMER_OFFSET, {"topic": "T", "consumerGroup": "G"}, None, {"%RETRY%G": SUB, "T": SUB}),
        (RequestCode.GET_MAX_OFFSET, {"topic": "T"}, None, {}),
        (RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "T"}, None, {}),
    ],
)
def test_resources_per_request_code_follow_plain_access_validator(
    code: int, fields: dict[str, str], body: bytes | None, needed: dict[str, int]
) -> None:
    """PlainAccessValidator.parse's table (plus SEND_BATCH_MESSAGE, checked like SEND_MESSAGE_V2)."""
    assert dict(required_resources(make_request(code, opaque=1, ext_fields=fields, body=body))) == needed


def test_permission_bits_as_rocketmq() -> None:
    """Owned DENY never passes; ANY needs PUB or SUB; otherwise a shared bit."""
    assert not has_permission(PUB, DENY | PUB)
    assert has_permission(ANY, SUB) and not has_permission(ANY, DENY)
    assert has_permission(SUB, PUB | SUB) and not has_permission(PUB, SUB)


@pytest.mark.parametrize(
    ("request_", "host", "remark"),
    [
        (
            make_request(RequestCode.GET_MAX_OFFSET, opaque=1, ext_fields={"topic": "T"}),
            "127.0.0.1",
            "No accessKey is configured",
        ),
        (
            signed(RequestCode.GET_MAX_OFFSET, {}, credentials=Credentials("nobodyAA", "x")),
            "127.0.0.1",
            "No acl config for nobodyAA",
        ),
        (
            signed(RequestCode.GET_MAX_OFFSET, {}, credentials=Credentials("userAAA", "wrong")),
            "127.0.0.1",
            "Check signature failed for accessKey=userAAA",
        ),
        (
            signed(RequestCode.SEND_MESSAGE_V2, {"b": "topicB", "a": "P"}),
            "127.0.0.1",
            "No default permission for topic:topicB",
        ),
        (
            signed(RequestCode.SEND_MESSAGE_V2, {"b": "other", "a": "P"}),
            "127.0.0.1",
            "No default permission for topic:other",
        ),
        (
            signed(RequestCode.PULL_MESSAGE, {"topic": "topicC", "consumerGroup": "groupX"}),
            "127.0.0.1",
            "No default permission for group:groupX",
        ),
        (
            signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "T"}),
            "127.0.0.1",
            "Need admin permission for request code=17, but accessKey=userAAA is not",
        ),
        (
            signed(ShoalRequestCode.PROMOTE_TO_MASTER, {"epoch": "2"}),
            "127.0.0.1",
            "Need admin permission for request code=9001",
        ),
        (signed(RequestCode.HEART_BEAT, {}, b"{not json"), "127.0.0.1", "cannot read the resources of request code=34"),
    ],
)
def test_refusals_are_no_permission_with_rocketmqs_words(request_: RemotingCommand, host: str, remark: str) -> None:
    """Each missing piece refuses with NO_PERMISSION and an AclException remark naming it."""
    response = AccessValidator(RULES).refusal(host, request_)
    assert response is not None and response.code == ResponseCode.NO_PERMISSION
    assert response.remark is not None and response.remark.startswith("org.apache.rocketmq.acl.common.AclException: ")
    assert remark in response.remark


@pytest.mark.parametrize(
    ("request_", "host"),
    [
        (signed(RequestCode.SEND_MESSAGE_V2, {"b": "topicA", "a": "P"}), "127.0.0.1"),
        (signed(RequestCode.PULL_MESSAGE, {"topic": "topicC", "consumerGroup": "anyGroup"}), "127.0.0.1"),
        (signed(RequestCode.SEND_MESSAGE_V2, {"b": "RMQ_SYS_TRACE_TOPIC", "a": "P"}), "127.0.0.1"),
        (signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "T"}, credentials=ADMIN), "127.0.0.1"),
        (signed(RequestCode.SEND_MESSAGE_V2, {"b": "anything", "a": "P"}, credentials=ADMIN), "127.0.0.1"),
        (make_request(RequestCode.UPDATE_AND_CREATE_TOPIC, opaque=1), "10.9.9.4"),
        (make_request(RequestCode.UPDATE_AND_CREATE_TOPIC, opaque=1, ext_fields={"AccessKey": "whiteAAA"}), "10.1.1.1"),
        (make_request(RequestCode.GET_MAX_OFFSET, opaque=1, ext_fields={"AccessKey": "whiteAAA"}), "::ffff:10.1.1.1"),
    ],
)
def test_allowed_requests_pass(request_: RemotingCommand, host: str) -> None:
    """Permitted topics, the trace topic, admins, global and per-account white addresses pass."""
    assert AccessValidator(RULES).refusal(host, request_) is None


def test_oversized_fields_are_refused_before_hashing() -> None:
    """A 5000-character Signature is refused by length, naming the field."""
    request = signed(RequestCode.GET_MAX_OFFSET, {})
    request.ext_fields["Signature"] = "A" * 5000
    response = AccessValidator(RULES).refusal("127.0.0.1", request)
    assert response is not None and "Signature is 5000 characters" in (response.remark or "")


def test_namesrv_checks_only_route_changing_codes_and_wants_admin() -> None:
    """On a NameServer route queries stay open; REGISTER_BROKER needs a signed admin."""
    validator = AccessValidator(RULES, admin_codes=NAMESRV_CHECKED_CODES, checked_codes=NAMESRV_CHECKED_CODES)
    assert validator.refusal("127.0.0.1", make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=1)) is None
    refused = validator.refusal("127.0.0.1", signed(RequestCode.REGISTER_BROKER, {"brokerName": "b"}))
    assert refused is not None and "Need admin permission for request code=103" in (refused.remark or "")
    assert (
        validator.refusal("127.0.0.1", signed(RequestCode.REGISTER_BROKER, {"brokerName": "b"}, credentials=ADMIN))
        is None
    )


def test_send_and_pull_verdicts_are_kept_per_resource_but_every_signature_is_checked() -> None:
    """The second send of a kind reuses the permission verdict, yet a forged signature on it is
    still refused; another topic gets its own verdict; new rules drop the kept verdicts."""
    validator = AccessValidator(RULES)
    send = {"a": "groupP", "b": "topicA"}
    assert validator.refusal("127.0.0.1", signed(RequestCode.SEND_MESSAGE_V2, send, b"one")) is None
    assert validator.refusal("127.0.0.1", signed(RequestCode.SEND_MESSAGE_V2, send, b"two")) is None
    forged = signed(RequestCode.SEND_MESSAGE_V2, send, b"three")
    forged.body = b"tampered"
    refused = validator.refusal("127.0.0.1", forged)
    assert refused is not None and "Check signature failed" in (refused.remark or "")
    refused = validator.refusal("127.0.0.1", signed(RequestCode.SEND_MESSAGE_V2, {"a": "groupP", "b": "topicB"}))
    assert refused is not None and "topic:topicB" in (refused.remark or "")
    pull = {"topic": "topicC", "consumerGroup": "groupX"}
    refused = validator.refusal("127.0.0.1", signed(RequestCode.PULL_MESSAGE, pull))
    assert refused is not None and "group:groupX" in (refused.remark or "")
    validator.rules = parse_plain_acl("""
accounts:
  - accessKey: userAAA
    secretKey: userSecret
    defaultTopicPerm: DENY
""")
    refused = validator.refusal("127.0.0.1", signed(RequestCode.SEND_MESSAGE_V2, send, b"four"))
    assert refused is not None and "topic:topicA" in (refused.remark or "")


def test_an_accounts_white_address_is_kept_per_host_until_the_rules_change() -> None:
    """whiteAAA's white address admits an unsigned request from 10.1.1.1 (every time, from the kept
    answer), not from 10.1.1.2; once new rules drop the address, 10.1.1.1 must sign again."""
    validator = AccessValidator(RULES)
    unsigned = make_request(RequestCode.GET_MAX_OFFSET, opaque=1, ext_fields={"topic": "T", "AccessKey": "whiteAAA"})
    for _ in range(2):
        assert validator.refusal("10.1.1.1", unsigned) is None
        refused = validator.refusal("10.1.1.2", unsigned)
        assert refused is not None and "Check signature failed for accessKey=whiteAAA" in (refused.remark or "")
    validator.rules = parse_plain_acl("accounts:\n  - {accessKey: whiteAAA, secretKey: whiteSecret}\n")
    refused = validator.refusal("10.1.1.1", unsigned)
    assert refused is not None and "Check signature failed" in (refused.remark or "")
    signed_by_white = signed(
        RequestCode.GET_MAX_OFFSET, {"topic": "T"}, credentials=Credentials("whiteAAA", "whiteSecret")
    )
    assert validator.refusal("10.1.1.1", signed_by_white) is None


def test_v5_calls_authenticate_by_their_date_time_signature_then_need_their_permissions() -> None:
    """RocketMQ 5's gRPC check: who calls (MQv2-HMAC-SHA1 over x-mq-date-time), then what it may do."""
    from shoal.acl.permission import PUB, SUB
    from shoal.acl.plain_acl import parse_plain_acl
    from shoal.protocol.grpc_signature import signature_v5

    rules = parse_plain_acl(
        "accounts:\n"
        "  - {accessKey: v5user1, secretKey: secret1234, defaultTopicPerm: DENY, topicPerms: ['T=PUB']}\n"
        "globalWhiteRemoteAddresses: ['10.9.*.*']\n"
    )
    validator = AccessValidator(rules)
    stamp = "20261129T101010Z"

    def header(access_key: str, secret: str) -> str:
        signature = signature_v5(secret, stamp).lower()  # the Python client writes lower case
        return f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, Signature={signature}"

    account, reason = validator.authenticate_v5("127.0.0.1", header("v5user1", "secret1234"), stamp)
    assert reason is None and account is not None and account.access_key == "v5user1"
    assert validator.permitted(account, {"T": PUB}) is None
    assert "No default permission for topic:U" in (validator.permitted(account, {"U": SUB}) or "")
    assert validator.authenticate_v5("127.0.0.1", header("v5user1", "wrong"), stamp)[1] == (
        "Check signature failed for accessKey=v5user1"
    )
    assert validator.authenticate_v5("127.0.0.1", header("nobody", "x"), stamp)[1] == "No acl config for nobody"
    assert validator.authenticate_v5("127.0.0.1", "", stamp)[1] == "No accessKey is configured"
    assert validator.authenticate_v5("10.9.0.1", "", stamp) == (None, None)  # globally white
