"""Which resources a request touches and whether an account may touch them (RocketMQ's Permission
and PlainAccessValidator.parse), pure.

Permission bits as RocketMQ: DENY 1, ANY 2, PUB 4, SUB 8. Groups are stored and checked under their
retry topic (`%RETRY%<group>`), as RocketMQ does, so a resource name alone says which default
(defaultTopicPerm or defaultGroupPerm) applies.

Differs from 4.9.7 on purpose (each closes a hole; real clients are unaffected):
* SEND_BATCH_MESSAGE is checked like SEND_MESSAGE_V2 (4.9.7 checks no resource for it, so any
  account could batch-send to any topic);
* SEND_MESSAGE (v1) to a retry topic checks the `producerGroup` header (4.9.7 reads a `group`
  field the v1 header does not have, so it checked nothing);
* admin-only codes add offset reset, promotion and consume-queue cleaning to RocketMQ's five.
"""

from __future__ import annotations

from collections.abc import Mapping

from shoal.formats.topics import RETRY_GROUP_TOPIC_PREFIX
from shoal.protocol import HeartbeatData, RemotingCommand, RequestCode
from shoal.protocol.codes import ShoalRequestCode

__all__ = [
    "ADMIN_CODES",
    "ANY",
    "DENY",
    "PUB",
    "SUB",
    "has_permission",
    "is_group_resource",
    "parse_perm",
    "perm_text",
    "required_resources",
    "resource_text",
]

DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3

_PERM_WORDS = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}

ADMIN_CODES: frozenset[int] = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        # Shoal: state changes 4.9.7 left to any signed account
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        RequestCode.RESET_CONSUMER_OFFSET_IN_BROKER,
        RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
        RequestCode.CLEAN_UNUSED_TOPIC,
        RequestCode.DELETE_EXPIRED_COMMITLOG,
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
        RequestCode.DELETE_ACL_CONFIG,
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
        ShoalRequestCode.PROMOTE_TO_MASTER,
    }
)
"""Codes only an account with `admin: true` may send to a broker."""


def parse_perm(text: str) -> int:
    """DENY, PUB, SUB, PUB|SUB or SUB|PUB (blanks around allowed); anything else is a ValueError."""
    perm = _PERM_WORDS.get(text.strip())
    if perm is None:
        raise ValueError(f"{text!r} is not one of DENY, PUB, SUB, PUB|SUB")
    return perm


def perm_text(perm: int) -> str:
    return {DENY: "DENY", PUB: "PUB", SUB: "SUB", PUB | SUB: "PUB|SUB", ANY: "ANY"}.get(perm, str(perm))


def has_permission(needed: int, owned: int) -> bool:
    """Permission.checkPermission: owned DENY never passes; ANY needs PUB or SUB; else a shared bit."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def is_group_resource(resource: str) -> bool:
    return resource.startswith(RETRY_GROUP_TOPIC_PREFIX)


def resource_text(resource: str) -> str:
    """How a refusal names the resource: `topic:T` or `group:G` (PlainAccessResource.printStr)."""
    if is_group_resource(resource):
        return f"group:{resource[len(RETRY_GROUP_TOPIC_PREFIX) :]}"
    return f"topic:{resource}"


def _group(group: str | None) -> str | None:
    return None if group is None else RETRY_GROUP_TOPIC_PREFIX + group


def _send(topic: str | None, group: str | None) -> dict[str, int]:
    if topic is not None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        retry = _group(group)
        return {} if retry is None else {retry: SUB}
    return {} if topic is None else {topic: PUB}


def required_resources(command: RemotingCommand) -> Mapping[str, int]:
    """resource -> needed permission for `command` (empty: the signature alone decides).

    A HEART_BEAT whose body cannot be read raises ProtocolError (the caller refuses it)."""
    code = command.code
    ext = command.ext_fields
    if code == RequestCode.SEND_MESSAGE:
        return _send(ext.get("topic"), ext.get("group") or ext.get("producerGroup"))
    if code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        return _send(ext.get("b"), ext.get("a"))
    needed: dict[str, int] = {}
    if code == RequestCode.CONSUMER_SEND_MSG_BACK:
        group = _group(ext.get("group"))
        if group is not None:
            needed[group] = SUB
    elif code == RequestCode.PULL_MESSAGE:
        topic, group = ext.get("topic"), _group(ext.get("consumerGroup"))
        if topic is not None:
            needed[topic] = SUB
        if group is not None:
            needed[group] = SUB
    elif code == RequestCode.QUERY_MESSAGE:
        topic = ext.get("topic")
        if topic is not None:
            needed[topic] = SUB
    elif code == RequestCode.HEART_BEAT:
        heartbeat = HeartbeatData.from_json(command.body or b"{}")
        for consumer in heartbeat.consumer_data_set:
            needed[RETRY_GROUP_TOPIC_PREFIX + consumer.group_name] = SUB
            for subscription in consumer.subscription_data_set:
                needed[subscription.topic] = SUB
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        group = _group(ext.get("consumerGroup"))
        if group is not None:
            needed[group] = SUB
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        topic, group = ext.get("topic"), _group(ext.get("consumerGroup"))
        if group is not None:
            needed[group] = SUB
        if topic is not None:
            needed[topic] = SUB
    return needed
