"""Wire enumerations against the spec's tables (§8.2, §8.6, §8.7) and the C++ client's ordinals."""

from __future__ import annotations

from shoal.protocol import (
    CURRENT_VERSION,
    CommandFlag,
    ConsumeFromWhere,
    ConsumeType,
    LanguageCode,
    MessageModel,
    MQVersion,
    PermName,
    PullSysFlag,
    RequestCode,
    ResponseCode,
    SerializeType,
)

SPEC_RESPONSE_CODES = {
    0: "SUCCESS", 1: "SYSTEM_ERROR", 2: "SYSTEM_BUSY", 3: "REQUEST_CODE_NOT_SUPPORTED",
    4: "TRANSACTION_FAILED", 10: "FLUSH_DISK_TIMEOUT", 11: "SLAVE_NOT_AVAILABLE",
    12: "FLUSH_SLAVE_TIMEOUT", 13: "MESSAGE_ILLEGAL", 14: "SERVICE_NOT_AVAILABLE",
    15: "VERSION_NOT_SUPPORTED", 16: "NO_PERMISSION", 17: "TOPIC_NOT_EXIST",
    18: "TOPIC_EXIST_ALREADY", 19: "PULL_NOT_FOUND", 20: "PULL_RETRY_IMMEDIATELY",
    21: "PULL_OFFSET_MOVED", 22: "QUERY_NOT_FOUND", 23: "SUBSCRIPTION_PARSE_FAILED",
    24: "SUBSCRIPTION_NOT_EXIST", 25: "SUBSCRIPTION_NOT_LATEST", 26: "SUBSCRIPTION_GROUP_NOT_EXIST",
    27: "FILTER_DATA_NOT_EXIST", 28: "FILTER_DATA_NOT_LATEST", 200: "TRANSACTION_SHOULD_COMMIT",
    201: "TRANSACTION_SHOULD_ROLLBACK", 202: "TRANSACTION_STATE_UNKNOW",
    203: "TRANSACTION_STATE_GROUP_WRONG", 204: "NO_BUYER_ID", 205: "NOT_IN_CURRENT_UNIT",
    206: "CONSUMER_NOT_ONLINE", 207: "CONSUME_MSG_TIMEOUT", 208: "NO_MESSAGE",
    209: "UPDATE_AND_CREATE_ACL_CONFIG_FAILED", 210: "DELETE_ACL_CONFIG_FAILED",
    211: "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED", 215: "FLOW_CONTROL",
}  # fmt: skip


ROCKETMQ_5_RESPONSE_CODES = {29: "INVALID_PARAMETER"}
"""5.x's codes POP consumption answers with; 5.x also names 210 POLLING_TIMEOUT (an alias here)."""


def test_response_codes_are_exactly_the_spec_table() -> None:
    """Goal: §8.7 complete and exact, plus the 5.x codes POP uses. Method: compare value -> name
    for every member."""
    assert {code.value: code.name for code in ResponseCode} == {**SPEC_RESPONSE_CODES, **ROCKETMQ_5_RESPONSE_CODES}
    assert ResponseCode.POLLING_TIMEOUT.value == 210


def test_request_codes_match_the_spec_table() -> None:
    """Goal: §8.6 numbers. Method: spot-check every broker/nameserver code and range endpoints."""
    expected = {
        "SEND_MESSAGE": 10, "PULL_MESSAGE": 11, "QUERY_MESSAGE": 12, "QUERY_CONSUMER_OFFSET": 14,
        "UPDATE_CONSUMER_OFFSET": 15, "UPDATE_AND_CREATE_TOPIC": 17, "GET_ALL_TOPIC_CONFIG": 21,
        "SEARCH_OFFSET_BY_TIMESTAMP": 29, "GET_MAX_OFFSET": 30, "GET_MIN_OFFSET": 31,
        "GET_EARLIEST_MSG_STORETIME": 32, "VIEW_MESSAGE_BY_ID": 33, "HEART_BEAT": 34,
        "UNREGISTER_CLIENT": 35, "CONSUMER_SEND_MSG_BACK": 36, "END_TRANSACTION": 37,
        "GET_CONSUMER_LIST_BY_GROUP": 38, "CHECK_TRANSACTION_STATE": 39,
        "NOTIFY_CONSUMER_IDS_CHANGED": 40, "LOCK_BATCH_MQ": 41, "UNLOCK_BATCH_MQ": 42,
        "GET_ALL_CONSUMER_OFFSET": 43, "GET_ALL_DELAY_OFFSET": 45, "CHECK_CLIENT_CONFIG": 46,
        "UPDATE_AND_CREATE_ACL_CONFIG": 50, "GET_BROKER_CLUSTER_ACL_CONFIG": 54,
        "PUT_KV_CONFIG": 100, "REGISTER_BROKER": 103, "UNREGISTER_BROKER": 104,
        "GET_ROUTEINFO_BY_TOPIC": 105, "GET_BROKER_CLUSTER_INFO": 106,
        "GET_ALL_SUBSCRIPTIONGROUP_CONFIG": 201, "GET_TOPIC_STATS_INFO": 202,
        "WIPE_WRITE_PERM_OF_BROKER": 205, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER": 206,
        "GET_CONSUME_STATS": 208, "RESUME_CONSUMER": 210, "RESET_CONSUMER_OFFSET_IN_BROKER": 212,
        "DELETE_TOPIC_IN_NAMESRV": 216, "GET_TOPICS_BY_CLUSTER": 224, "GET_CONSUMER_RUNNING_INFO": 307,
        "CONSUME_MESSAGE_DIRECTLY": 309, "SEND_MESSAGE_V2": 310, "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST": 313,
        "GET_NAMESRV_CONFIG": 319, "SEND_BATCH_MESSAGE": 320, "QUERY_DATA_VERSION": 322,
        "SEND_REPLY_MESSAGE_V2": 325, "PUSH_REPLY_MESSAGE_TO_CLIENT": 326,
        "ADD_WRITE_PERM_OF_BROKER": 327, "DELETE_EXPIRED_COMMITLOG": 329,
    }  # fmt: skip
    for name, value in expected.items():
        assert RequestCode[name] == value, name


def test_request_codes_are_unique() -> None:
    """Goal: no alias hides a code. Method: IntEnum members equal the distinct values."""
    assert len({code.value for code in RequestCode}) == len(RequestCode.__members__)


def test_language_codes_follow_java_ordinals() -> None:
    """Goal: §8.2 ordinals (binary byte). Method: compare names in value order."""
    assert [code.name for code in sorted(LanguageCode)] == [
        "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP",
        "OMS", "RUST",
    ]  # fmt: skip
    assert [code.value for code in sorted(LanguageCode)] == list(range(13))


def test_flags_serialize_types_and_versions() -> None:
    """Goal: bit values and ordinals of §8.1/§8.2. Method: compare to the spec's numbers."""
    assert (CommandFlag.RESPONSE, CommandFlag.ONEWAY) == (1, 2)
    assert (SerializeType.JSON, SerializeType.ROCKETMQ) == (0, 1)
    assert (MQVersion.V3_0_11, MQVersion.V3_4_9, MQVersion.V4_9_4, MQVersion.V4_9_7) == (37, 121, 401, 407)
    assert CURRENT_VERSION >= MQVersion.V4_9_4  # so a Java nameserver answers standard JSON
    assert [int(flag) for flag in PullSysFlag] == [1, 2, 4, 8, 16]
    assert PermName.READ | PermName.WRITE == 6


def test_heartbeat_enums_are_declared_in_cpp_ordinal_order() -> None:
    """Goal: C++ sends ordinals (real-clients §1.7). Method: list position equals the C++ value."""
    assert list(ConsumeType).index(ConsumeType.CONSUME_PASSIVELY) == 1
    assert list(MessageModel).index(MessageModel.CLUSTERING) == 1
    assert list(ConsumeFromWhere).index(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET) == 0
    assert list(ConsumeFromWhere).index(ConsumeFromWhere.CONSUME_FROM_TIMESTAMP) == 5
