"""broker.conf parsing: RocketMQ key names, embedded defaults, store keys, every key range-checked."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from shoal.broker import limits as broker_limits
from shoal.broker.config import (
    EMBEDDED_BROKER_CONF,
    STORE_KEY_ALLOWED,
    BrokerConfig,
    BrokerRole,
    load_broker_settings,
)
from shoal.broker.replication import limits as ha_limits
from shoal.broker.replication import settings as ha_settings
from shoal.namesrv.config import NamesrvConfig, load_namesrv_config
from shoal.remoting.settings import Allowed, ConfigError, parse_properties
from shoal.store import FlushDiskType
from shoal.store.settings import BROKER_CONF_KEYS as STORE_KEYS
from shoal.store.settings import RetentionSettings


def test_properties_format_with_comments_and_separators() -> None:
    """Goal: Java properties as broker.conf files use them. Method: parse a sample."""
    text = "# comment\n! also a comment\nbrokerName = broker-b\nlistenPort:10999\n\nflushDiskType=SYNC_FLUSH\n"
    assert parse_properties(text) == {"brokerName": "broker-b", "listenPort": "10999", "flushDiskType": "SYNC_FLUSH"}
    with pytest.raises(ValueError, match="line 1"):
        parse_properties("no separator here")


def test_broker_and_store_keys_land_in_their_settings(tmp_path: Path) -> None:
    """Goal: one broker.conf configures both. Method: load broker and store keys together."""
    settings = load_broker_settings(
        {
            "brokerName": "b1",
            "brokerRole": "SYNC_MASTER",
            "flushDiskType": "SYNC_FLUSH",
            "storePathRootDir": str(tmp_path),
        }
    )
    assert settings.broker.broker_name == "b1"
    assert settings.broker.broker_role is BrokerRole.SYNC_MASTER
    assert settings.store.flush.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert settings.store.root_dir == tmp_path
    assert settings.broker.listen_port == 10911  # the embedded default


def test_embedded_broker_conf_keeps_commitlog_files_72_hours_as_rocketmq_and_the_store_do() -> None:
    """Goal: a broker.conf without fileReservedTime keeps CommitLog segments 72 h (RocketMQ's
    MessageStoreConfig, the store's RetentionSettings, the operator's spec). Method: load no keys."""
    retention = load_broker_settings({}, root_dir=Path("/nonexistent-store")).store.retention
    assert retention.file_reserved_time_hours == 72 == RetentionSettings().file_reserved_time_hours
    assert parse_properties(EMBEDDED_BROKER_CONF)["fileReservedTime"] == "72"
    assert retention.delete_hours == frozenset({4})


def test_unknown_keys_are_reported_not_dropped() -> None:
    """Goal: a typo is visible. Method: an unknown key shows up in unknown_keys."""
    settings = load_broker_settings({"brokerNmae": "oops"})
    assert settings.unknown_keys == ("brokerNmae",)


def test_bad_values_name_the_key() -> None:
    """Goal: a bad value gives an error naming its key. Method: non-numeric port, bad role."""
    with pytest.raises(ValueError, match="listenPort"):
        load_broker_settings({"listenPort": "ten"})
    with pytest.raises(ValueError, match="brokerRole"):
        load_broker_settings({"brokerRole": "BOSS"})


# --- every key range-checked at load (issue 12 item 7) ---

BAD_BROKER_VALUES: list[tuple[str, str]] = [
    ("brokerClusterName", ""),
    ("brokerClusterName", "my cluster"),
    ("brokerName", "a" * 128),
    ("brokerName", "broker/a"),
    ("brokerId", "-1"),
    ("brokerRole", "BOSS"),
    ("brokerRole", "sync_master"),
    ("namesrvAddr", "not-an-addr;;;"),
    ("namesrvAddr", "127.0.0.1:9876;;127.0.0.1:9877"),
    ("namesrvAddr", "127.0.0.1:0"),
    ("namesrvAddr", "127.0.0.1:70000"),
    ("namesrvAddr", "127.0.0.1"),
    ("listenPort", "-5"),
    ("listenPort", "70000"),
    ("listenPort", "ten"),
    ("listenHost", ""),
    ("listenHost", "bad host"),
    ("brokerIP1", "1.2.3.4:10911"),
    ("autoCreateTopicEnable", "yes"),
    ("autoCreateSubscriptionGroup", "1"),
    ("defaultTopicQueueNums", "0"),
    ("defaultTopicQueueNums", "1025"),
    ("clusterTopicEnable", "maybe"),
    ("brokerTopicEnable", ""),
    ("brokerPermission", "8"),
    ("brokerPermission", "-1"),
    ("registerNameServerPeriod", "0"),
    ("registerNameServerPeriod", "86400001"),
    ("longPollingEnable", "on"),
    ("shortPollingTimeMills", "-1"),
    ("flushConsumerOffsetInterval", "0"),
    ("notifyConsumerIdsChangedEnable", "no"),
    ("enablePropertyFilter", "yes"),
    ("filterSupportRetry", "1"),
    ("regionId", ""),
    ("traceOn", "2"),
    ("slaveReadEnable", "t"),
    ("channelExpiredTimeout", "0"),
    ("serverChannelMaxIdleTimeSeconds", "0"),
    ("serverChannelPartialFrameTimeoutSeconds", "0"),
    ("metricsPort", "-2"),
    ("metricsPort", "65536"),
    ("grpcServerPort", "-2"),
    ("grpcServerPort", "65536"),
    ("enableMixedMessageType", "yes"),
    ("enableTopicMessageTypeCheck", "1"),
    ("metricsHost", "not a host"),
    ("metricsTokenFile", "token\x00file"),
    ("maxConnections", "0"),
    ("maxConnections", "1000001"),
    ("haListenPort", "-2"),
    ("fastListenPort", "-2"),
    ("storeReplyMessageEnable", "yes"),
    ("traceTopicEnable", "on"),
    ("msgTraceTopicName", "trace topic"),
    ("aclEnable", "yes"),
    ("plainAclFile", "conf/\x00acl.yml"),
    ("accessKey", "short"),
    ("secretKey", "has blanks in it"),
    ("fastListenPort", "65536"),
    ("haListenPort", "65536"),
    ("haMasterAddress", "master-without-port"),
    ("haSendHeartbeatInterval", "9"),
    ("haHousekeepingInterval", "0"),
    ("haTransferBatchSize", "0"),
    ("haTransferBatchSize", str(4 * 1024 * 1024 + 1)),
    ("haSlaveFallbehindMax", "0"),
    ("slaveTimeout", "5"),
    ("haReconnectInterval", "-1"),
    ("slaveSyncInterval", "1"),
    ("haShoalExtensionEnable", "False!"),
    ("messageDelayLevel", "1x"),
    ("flushDelayOffsetInterval", "0"),
    ("timerWheelEnable", "y"),
    ("timerMaxDelaySec", "0"),
    ("transactionTimeOut", "-1"),
    ("transactionCheckInterval", "0"),
    ("transactionCheckMax", "-1"),
    ("transactionCheckMax", "1001"),
    ("rejectTransactionMessage", "nope"),
]

BAD_STORE_VALUES: list[tuple[str, str]] = [
    ("storePathRootDir", ""),
    ("storePathCommitLog", " "),
    ("mappedFileSizeCommitLog", "65535"),
    ("mappedFileSizeCommitLog", str(2**31)),
    ("maxMessageSize", "0"),
    ("maxMessageSize", str(4 * 1024 * 1024 + 1)),
    ("checkCRCOnRecover", "perhaps"),
    ("warmMapedFileEnable", "2"),
    ("accessMessageInMemoryMaxRatio", "101"),
    ("accessMessageInMemoryMaxRatio", "-1"),
    ("maxTransferBytesOnMessageInMemory", "0"),
    ("maxTransferCountOnMessageInMemory", "0"),
    ("maxTransferBytesOnMessageInDisk", "-5"),
    ("maxTransferCountOnMessageInDisk", "many"),
    ("warmRateBytesPerSecond", "-1"),
    ("mappedFileSizeConsumeQueue", "19"),
    ("mappedFileSizeConsumeQueue", "-5"),
    ("messageIndexEnable", "x"),
    ("maxHashSlotNum", "0"),
    ("maxIndexNum", "1"),
    ("flushDiskType", "sync_flush"),
    ("flushDiskType", "SYNC"),
    ("flushIntervalCommitLog", "0"),
    ("flushCommitLogLeastPages", "-1"),
    ("flushCommitLogThoroughInterval", "-1"),
    ("syncFlushTimeout", "0"),
    ("syncFlushInline", "sometimes"),
    ("transientStorePoolEnable", "3"),
    ("transientStorePoolSize", "65"),
    ("commitIntervalCommitLog", "0"),
    ("commitCommitLogLeastPages", "-4"),
    ("commitCommitLogThoroughInterval", "-1"),
    ("flushIntervalConsumeQueue", "0"),
    ("flushConsumeQueueLeastPages", "-1"),
    ("flushConsumeQueueThoroughInterval", "-1"),
    ("fileReservedTime", "-1"),
    ("fileReservedTime", "nan"),
    ("fileReservedTime", "inf"),
    ("deleteWhen", "99"),
    ("deleteWhen", "24"),
    ("deleteWhen", "04;;05"),
    ("deleteWhen", "4am"),
    ("deleteWhen", ""),
    ("diskMaxUsedSpaceRatio", "101"),
    ("cleanResourceInterval", "0"),
    ("deleteCommitLogFilesInterval", "-1"),
    ("cleanFileForciblyEnable", "off"),
]

BAD_NAMESRV_VALUES: list[tuple[str, str]] = [
    ("listenPort", "-5"),
    ("listenPort", "70000"),
    ("listenHost", "no such host!"),
    ("brokerChannelExpiredTime", "0"),
    ("scanNotActiveBrokerInterval", "-1"),
    ("serverChannelMaxIdleTimeSeconds", "0"),
    ("serverChannelPartialFrameTimeoutSeconds", "86401"),
    ("maxConnections", "0"),
    ("aclEnable", "1"),
    ("plainAclFile", "\x07"),
]


def _assert_one_line_naming(error: ValueError, key: str, value: str) -> None:
    message = str(error)
    assert isinstance(error, ConfigError)
    assert "\n" not in message
    assert message.startswith(f"{key}=")
    assert value.strip() in message or repr(value) in message
    assert "takes" in message  # what the key allows


@pytest.mark.parametrize(("key", "value"), BAD_BROKER_VALUES + BAD_STORE_VALUES)
def test_every_bad_broker_conf_value_fails_in_one_line(key: str, value: str) -> None:
    """Goal: each out-of-range broker.conf value is refused at load, naming key, value and what is
    allowed. Method: one bad value per row, over the embedded defaults."""
    with pytest.raises(ConfigError) as caught:
        load_broker_settings({key: value}, root_dir=Path("/nonexistent-store"))
    _assert_one_line_naming(caught.value, key, value)


@pytest.mark.parametrize(("key", "value"), BAD_NAMESRV_VALUES)
def test_every_bad_namesrv_conf_value_fails_in_one_line(key: str, value: str) -> None:
    """Goal: namesrv.conf is checked as broker.conf is. Method: one bad value per row."""
    with pytest.raises(ConfigError) as caught:
        load_namesrv_config({key: value})
    _assert_one_line_naming(caught.value, key, value)


def test_the_bad_value_tables_cover_every_key() -> None:
    """Goal: a new key cannot skip its range check. Method: every BrokerConfig, NamesrvConfig and
    store key has an `Allowed`, and a row in the tables above."""
    broker_keys = {f.metadata["java"] for f in fields(BrokerConfig)}
    namesrv_keys = {f.metadata["java"] for f in fields(NamesrvConfig)} - {"kvConfigPath"}  # any text
    for spec in [*fields(BrokerConfig), *fields(NamesrvConfig)]:
        assert isinstance(spec.metadata["allowed"], Allowed), spec.name
    assert set(STORE_KEY_ALLOWED) == set(STORE_KEYS)
    assert {key for key, _ in BAD_BROKER_VALUES} == broker_keys
    assert {key for key, _ in BAD_STORE_VALUES} == set(STORE_KEYS)
    assert {key for key, _ in BAD_NAMESRV_VALUES} == namesrv_keys


def test_defaults_and_rocketmq_style_values_pass() -> None:
    """Goal: the checks refuse nothing RocketMQ accepts. Method: every default, and the forms
    RocketMQ 4.9.7 reads (deleteWhen hour lists, trailing ';' in namesrvAddr as String.split drops it)."""
    for spec in [*fields(BrokerConfig), *fields(NamesrvConfig)]:
        default = spec.default
        assert spec.metadata["allowed"].test(default), spec.name
    settings = load_broker_settings(
        {
            "deleteWhen": "01;02;23",
            "namesrvAddr": "127.0.0.1:9876;ns-1.example.com:9876;[::1]:9876;",
            "listenPort": "0",
            "haListenPort": "0",
            "haMasterAddress": "",
            "brokerIP1": "",
            "fileReservedTime": "0.5",
            "diskMaxUsedSpaceRatio": "99",
            "brokerRole": "SLAVE",
            "brokerId": "1",
        },
        root_dir=Path("/nonexistent-store"),
    )
    assert settings.store.retention.delete_hours == frozenset({1, 2, 23})
    assert load_broker_settings({"deleteWhen": "04"}).store.retention.delete_hours == frozenset({4})
    assert load_namesrv_config({"listenPort": "0", "listenHost": "::"})[0].listen_port == 0


@pytest.mark.parametrize(
    ("conf", "words"),
    [
        ({"listenPort": "10911", "haListenPort": "10911"}, "haListenPort=10911 is not allowed: it equals listenPort"),
        ({"listenPort": "65535"}, "listenPort=65535 leaves no port for HA"),
        ({"listenPort": "65500", "haListenPort": "0"}, "listenPort=65500 leaves no port for metrics"),
        ({"listenPort": "10911", "metricsPort": "10911"}, "metricsPort=10911 is not allowed: it equals listenPort"),
        ({"listenPort": "10911", "grpcServerPort": "10912"}, "grpcServerPort=10912 is not allowed: it equals haListen"),
        ({"haListenPort": "10950", "metricsPort": "10950"}, "metricsPort=10950 is not allowed: it equals haListenPort"),
        ({"listenPort": "10911", "fastListenPort": "10911"}, "fastListenPort=10911 is not allowed: it equals listen"),
        ({"listenPort": "10911", "haListenPort": "10909"}, "fastListenPort=10909 (listenPort - 2) is not allowed"),
        ({"listenPort": "10911", "metricsPort": "10909"}, "it equals metricsPort; give the VIP channel its own"),
        ({"listenPort": "2"}, "listenPort=2 leaves no port for the VIP channel (listenPort - 2)"),
        ({"brokerRole": "SLAVE"}, "brokerId=0 is not allowed with brokerRole=SLAVE"),
        ({"haSendHeartbeatInterval": "20000"}, "haSendHeartbeatInterval=20000 is not allowed"),
        ({"maxHashSlotNum": "500000000"}, "IndexFile: the most is 2147483647 bytes"),
        ({"mappedFileSizeCommitLog": "65536", "maxMessageSize": "65536"}, "maxMessageSize=65536 does not fit"),
    ],
)
def test_relations_between_keys_are_checked(conf: dict[str, str], words: str) -> None:
    """Goal: keys that are fine alone but clash together fail at load in one line. Method: pairs."""
    with pytest.raises(ConfigError, match=re.escape(words)) as caught:
        load_broker_settings(conf, root_dir=Path("/nonexistent-store"))
    assert "\n" not in str(caught.value)


def test_config_limits_match_the_replication_limits() -> None:
    """Goal: the copies in broker.limits (config cannot import replication) stay equal. Method: compare."""
    assert broker_limits.HA_INTERVAL_MIN_MS == ha_settings.MIN_INTERVAL_MS
    assert broker_limits.HA_TRANSFER_BATCH_MAX_BYTES == ha_limits.TRANSFER_BATCH_MAX_BYTES


def test_vip_port_is_listen_port_minus_two_unless_set_or_off() -> None:
    """Goal: fastListenPort -1 means listenPort - 2 (RocketMQ's VIP channel), 0 none, else itself;
    with listenPort 0 (any free port) no VIP channel, as clients could not derive it. Method: each."""
    assert BrokerConfig().fast_port_for(10911) == 10909
    assert BrokerConfig(fast_listen_port=0).fast_port_for(10911) == 0
    assert BrokerConfig(fast_listen_port=20000).fast_port_for(10911) == 20000
    assert BrokerConfig().fast_port_for(0) == 0
    assert BrokerConfig(fast_listen_port=20000).fast_port_for(0) == 20000
    assert load_broker_settings({"listenPort": "2", "fastListenPort": "0"}).broker.fast_port_for(2) == 0


def test_metrics_port_follows_listen_port_and_is_any_free_port_with_it() -> None:
    """Goal: metricsPort 0 means listenPort + 100, or any free port when listenPort is 0 (never
    port 100). Method: the effective port for both."""
    assert BrokerConfig(listen_port=10911).metrics_port_effective == 11011
    assert BrokerConfig(listen_port=0).metrics_port_effective == 0
    assert BrokerConfig(listen_port=0, metrics_port=9100).metrics_port_effective == 9100
