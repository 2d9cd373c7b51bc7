"""Topic, route and registration bodies as Java nameservers/brokers send them (spec §7.3, §8.9, §8.10)."""

from __future__ import annotations

import json
import struct
import zlib

import pytest

from shoal.protocol import (
    BodyFormatError,
    BrokerData,
    ClusterInfo,
    DataVersion,
    KVTable,
    QueueData,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
    register_body_crc32,
)
from shoal.protocol.codes import TopicFilterType

OLD_JAVA_ROUTE = b"""{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},
                 "brokerName":"broker-a","cluster":"DefaultCluster"}],
 "filterServerTable":{},
 "orderTopicConf":"broker-a:4",
 "queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,
                "topicSysFlag":0,"writeQueueNums":4}]}"""

EXPECTED_ROUTE = TopicRouteData(
    queue_datas=(QueueData("broker-a", read_queue_nums=4, write_queue_nums=4, perm=6, topic_sys_flag=0),),
    broker_datas=(BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}),),
    order_topic_conf="broker-a:4",
)


def test_route_from_an_old_java_nameserver_with_bare_keys_parses() -> None:
    """Goal: fastjson `{0:"…"}` routes (clients < 4.9.4). Method: parse the spec sample."""
    assert TopicRouteData.from_json(OLD_JAVA_ROUTE) == EXPECTED_ROUTE


def test_route_is_written_as_standard_json_with_quoted_broker_ids() -> None:
    """Goal: what every client parses (real-clients §1.6.1). Method: write, check text and numbers."""
    text = EXPECTED_ROUTE.to_json()
    assert text == (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}],"filterServerTable":{},"orderTopicConf":"broker-a:4",'
        b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
    )
    queue = json.loads(text)["queueDatas"][0]
    assert all(type(queue[name]) is int for name in ("perm", "readQueueNums", "writeQueueNums"))
    assert TopicRouteData.from_json(text) == EXPECTED_ROUTE


def test_route_without_optional_parts_omits_them() -> None:
    """Goal: nulls omitted. Method: a route without orderTopicConf."""
    route = TopicRouteData(queue_datas=(QueueData("b", 1, 1),), broker_datas=(BrokerData("c", "b", {0: "h:1"}),))
    assert b"orderTopicConf" not in route.to_json()
    assert TopicRouteData.from_json(route.to_json()) == route


def test_route_with_bad_broker_id_names_the_path() -> None:
    """Goal: precise errors. Method: brokerAddrs keyed by a word."""
    with pytest.raises(BodyFormatError, match=r"brokerDatas\[0\]\.brokerAddrs"):
        TopicRouteData.from_json(b'{"brokerDatas":[{"brokerAddrs":{"master":"h:1"}}]}')


def test_cluster_info_from_fastjson_parses_and_round_trips() -> None:
    """Goal: GET_BROKER_CLUSTER_INFO body. Method: parse the spec sample (bare keys), write it back."""
    sample = (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
    )
    info = ClusterInfo.from_json(sample)
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: "10.0.0.1:10911"}
    assert info.cluster_addr_table == {"DefaultCluster": ("broker-a",)}
    assert ClusterInfo.from_json(info.to_json()) == info


def test_topic_list_and_kv_table_round_trip() -> None:
    """Goal: small nameserver bodies. Method: parse samples, write them back exactly."""
    topics = TopicList.from_json(b'{"topicList":["a","b"]}')
    assert topics.to_json() == b'{"topicList":["a","b"]}'
    with_addr = TopicList(("t",), broker_addr="10.0.0.1:10911")
    assert with_addr.to_json() == b'{"brokerAddr":"10.0.0.1:10911","topicList":["t"]}'
    table = KVTable.from_json(b'{"table":{"TopicTest":"broker-a:4;broker-b:4"}}')
    assert table.table == {"TopicTest": "broker-a:4;broker-b:4"}
    assert table.to_json() == b'{"table":{"TopicTest":"broker-a:4;broker-b:4"}}'


JAVA_REGISTER_BODY = b"""{"filterServerList":[],
 "topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"timestamp":1700000000000},
  "topicConfigTable":{
   "TopicTest":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",
                "topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4},
   "TBW102":{"order":false,"perm":7,"readQueueNums":8,"topicFilterType":"SINGLE_TAG",
             "topicName":"TBW102","topicSysFlag":0,"writeQueueNums":8}}}}"""


def test_java_register_broker_body_parses() -> None:
    """Goal: REGISTER_BROKER uncompressed body. Method: parse a Java-shaped sample."""
    body = RegisterBrokerBody.decode(JAVA_REGISTER_BODY, compressed=False)
    wrapper = body.topic_config_serialize_wrapper
    assert wrapper.data_version == DataVersion(timestamp_ms=1700000000000, counter=3)
    assert wrapper.topic_config_table["TBW102"] == TopicConfig("TBW102", 8, 8, perm=7)
    assert wrapper.topic_config_table["TopicTest"].topic_filter_type is TopicFilterType.SINGLE_TAG
    assert RegisterBrokerBody.from_json(body.to_json()) == body


def test_compressed_register_body_matches_java_layout_and_round_trips() -> None:
    """Goal: the zlib form of compressedRegister. Method: inflate our output, parse its parts by hand."""
    wrapper = TopicConfigSerializeWrapper(
        {"TopicTest": TopicConfig("TopicTest", 4, 4, 6, TopicFilterType.MULTI_TAG)}, DataVersion(1700000000000, 3)
    )
    body = RegisterBrokerBody(wrapper, filter_server_list=("10.0.0.9:1",))
    compressed = body.encode(compressed=True)
    inflated = zlib.decompress(compressed)
    (version_size,) = struct.unpack_from(">i", inflated, 0)
    assert json.loads(inflated[4 : 4 + version_size]) == {"counter": 3, "timestamp": 1700000000000}
    position = 4 + version_size
    assert struct.unpack_from(">ii", inflated, position)[0] == 1
    line_size = struct.unpack_from(">i", inflated, position + 4)[0]
    assert inflated[position + 8 : position + 8 + line_size] == b"TopicTest 4 4 6 MULTI_TAG"
    assert RegisterBrokerBody.decode(compressed, compressed=True) == body


def test_compressed_register_body_that_is_cut_or_not_zlib_is_refused() -> None:
    """Goal: bad compressed bodies are BodyFormatErrors. Method: garbage, truncated stream, short parts."""
    with pytest.raises(BodyFormatError, match="zlib"):
        RegisterBrokerBody.decode(b"not zlib", compressed=True)
    compressed = RegisterBrokerBody().encode(compressed=True)
    with pytest.raises(BodyFormatError, match="truncated"):
        RegisterBrokerBody.decode(compressed[:-4], compressed=True)
    with pytest.raises(BodyFormatError, match="cut off"):
        RegisterBrokerBody.decode(zlib.compress(struct.pack(">i", 100) + b"{}"), compressed=True)
    bad_line = struct.pack(">i", 2) + b"{}" + struct.pack(">ii", 1, 3) + b"a b" + struct.pack(">i", 2) + b"[]"
    with pytest.raises(BodyFormatError, match="5"):
        RegisterBrokerBody.decode(zlib.compress(bad_line), compressed=True)


def test_register_body_crc32_is_masked_non_negative() -> None:
    """Goal: bodyCrc32 = crc32 & 0x7FFFFFFF (gotcha 3). Method: compare with zlib on a body."""
    body = JAVA_REGISTER_BODY
    assert register_body_crc32(body) == zlib.crc32(body) & 0x7FFFFFFF
    assert 0 <= register_body_crc32(b"\xff" * 100) < 2**31


def test_topic_config_defaults_are_javas() -> None:
    """Goal: missing fields read as Java's defaults (spec §7.3). Method: parse a name-only config."""
    assert TopicConfig.from_json(b'{"topicName":"t"}') == TopicConfig(
        "t", read_queue_nums=16, write_queue_nums=16, perm=6, topic_filter_type=TopicFilterType.SINGLE_TAG
    )
