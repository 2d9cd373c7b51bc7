"""Wire enumerations of the remoting protocol: request/response codes, languages, flags.

Numbers and names are RocketMQ 4.9.x's (`rocketmq-spec.md` §8.2, §8.6, §8.7, §8.8, §8.9). Codes
are `IntEnum`s, but a `RemotingCommand` keeps a plain `int` code: peers may send codes this table
does not know (5.x, vendor extensions) and the broker must still answer them (code 3).
"""

from __future__ import annotations

import enum


class RequestCode(enum.IntEnum):
    """`common/protocol/RequestCode.java` (4.9.x)."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_BROKER_OFFSET = 13
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    GET_TOPIC_CONFIG_LIST = 22
    GET_TOPIC_NAME_LIST = 23
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    TRIGGER_DELETE_FILES = 27
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    CHECK_CLIENT_CONFIG = 46
    UPDATE_AND_CREATE_ACL_CONFIG = 50
    DELETE_ACL_CONFIG = 51
    GET_BROKER_CLUSTER_ACL_INFO = 52
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53
    GET_BROKER_CLUSTER_ACL_CONFIG = 54
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    SUSPEND_CONSUMER = 209
    RESUME_CONSUMER = 210
    RESET_CONSUMER_OFFSET_IN_CONSUMER = 211
    RESET_CONSUMER_OFFSET_IN_BROKER = 212
    ADJUST_CONSUMER_THREAD_POOL = 213
    WHO_CONSUME_THE_MESSAGE = 214
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    REGISTER_FILTER_SERVER = 301
    REGISTER_MESSAGE_FILTER_CLASS = 302
    QUERY_CONSUME_TIME_SPAN = 303
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305
    CLEAN_EXPIRED_CONSUMEQUEUE = 306
    GET_CONSUMER_RUNNING_INFO = 307
    QUERY_CORRECTION_OFFSET = 308
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    CLONE_GROUP_OFFSET = 314
    VIEW_BROKER_STATS_DATA = 315
    CLEAN_UNUSED_TOPIC = 316
    GET_BROKER_CONSUME_STATS = 317
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    SEND_BATCH_MESSAGE = 320
    QUERY_CONSUME_QUEUE = 321
    QUERY_DATA_VERSION = 322
    RESUME_CHECK_HALF_MESSAGE = 323
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_ALL_PRODUCER_INFO = 328
    DELETE_EXPIRED_COMMITLOG = 329
    # RocketMQ 5.x's reads of one topic's or group's config (its admin tools and proxy use them)
    GET_TOPIC_CONFIG = 351
    GET_SUBSCRIPTIONGROUP_CONFIG = 352
    # RocketMQ 5.x's POP consumption (`RequestCode.java` 5.x), served for Shoal's gRPC proxy.
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    CHANGE_MESSAGE_INVISIBLETIME = 200053


class ShoalRequestCode(enum.IntEnum):
    """Shoal's own requests, in 9000-9999 (RocketMQ 4.x and 5.x use none of these numbers).

    PROMOTE_TO_MASTER (9001): make an in-sync slave the master of its group. Request extFields
    `epoch` (long, required: the new epoch, above the broker's), `brokerRole` (ASYNC_MASTER or
    SYNC_MASTER, default ASYNC_MASTER), `force` ("true": even while a master still feeds this slave).
    SUCCESS carries `epoch` and `startOffset` (where the new epoch begins); a refusal is
    SYSTEM_ERROR with the reason in the remark. See docs/replication.md.
    """

    PROMOTE_TO_MASTER = 9001


class ResponseCode(enum.IntEnum):
    """`RemotingSysResponseCode` (0-4) and `common/protocol/ResponseCode.java`."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    INVALID_PARAMETER = 29  # 5.x
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    TRANSACTION_STATE_UNKNOW = 202
    TRANSACTION_STATE_GROUP_WRONG = 203
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
    DELETE_ACL_CONFIG_FAILED = 210
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
    # 5.x reuses 209-211 for POP: POLLING_FULL 209, POLLING_TIMEOUT 210 (a pop that found nothing)
    POLLING_TIMEOUT = 210
    FLOW_CONTROL = 215


class LanguageCode(enum.IntEnum):
    """`remoting/protocol/LanguageCode.java`: a name in JSON headers, a byte in binary ones."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12


class SerializeType(enum.IntEnum):
    """The header encoding, carried in the top byte of the header-length int (spec §8.1)."""

    JSON = 0
    ROCKETMQ = 1


class CommandFlag(enum.IntFlag):
    """Bits of the `flag` header field (spec §8.2)."""

    RESPONSE = 1  # RPC_TYPE: set on responses
    ONEWAY = 2  # RPC_ONEWAY: the request expects no response


class MQVersion(enum.IntEnum):
    """`MQVersion` ordinals that change behaviour on the other side (spec §8.2, gotcha 14)."""

    V3_0_11 = 37  # REGISTER_BROKER bodies below this are a bare TopicConfigSerializeWrapper
    V3_1_8 = 63  # what rocketmq-client-cpp 1.2.3 (PyPI rocketmq 0.4.4) sends
    V3_4_9 = 121  # send-back / retry headers honour maxReconsumeTimes from here on
    V4_9_4 = 401  # the Java nameserver returns standard JSON routes from here on
    V4_9_7 = 407


CURRENT_VERSION = MQVersion.V4_9_7
"""The version Shoal puts in its own headers: a 4.9.7 peer, so Java gives it standard JSON."""


class PullSysFlag(enum.IntFlag):
    """`common/sysflag/PullSysFlag.java`: the `sysFlag` of PULL_MESSAGE (spec §8.8)."""

    COMMIT_OFFSET = 0x1
    SUSPEND = 0x2
    SUBSCRIPTION = 0x4
    CLASS_FILTER = 0x8
    LITE_PULL_MESSAGE = 0x10


class ConsumeType(enum.StrEnum):
    """HeartbeatData `consumeType`; Java sends the name, the C++ client the ordinal (0/1)."""

    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"  # pull
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"  # push


class MessageModel(enum.StrEnum):
    """HeartbeatData `messageModel`; the C++ client sends 0 = BROADCASTING, 1 = CLUSTERING."""

    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeFromWhere(enum.StrEnum):
    """HeartbeatData `consumeFromWhere`; the C++ client sends the ordinal (declaration order)."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST"
    CONSUME_FROM_MIN_OFFSET = "CONSUME_FROM_MIN_OFFSET"
    CONSUME_FROM_MAX_OFFSET = "CONSUME_FROM_MAX_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class PermName(enum.IntFlag):
    """Topic / broker permission bits (spec §7.3)."""

    INHERIT = 1
    WRITE = 2
    READ = 4
    PRIORITY = 8


class TopicFilterType(enum.StrEnum):
    """TopicConfig `topicFilterType`."""

    SINGLE_TAG = "SINGLE_TAG"
    MULTI_TAG = "MULTI_TAG"
