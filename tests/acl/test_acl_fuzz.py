"""Fuzz of the ACL fields against a live broker with aclEnable: 10,000 requests with generated
AccessKey / Signature / SecurityToken values (empty, oversized, non-ASCII, control characters, many
or huge extra fields, valid keys with wrong bodies). Every answer is NO_PERMISSION or a proper
error code, never an internal error; the broker keeps serving and stores nothing."""

from __future__ import annotations

import asyncio
import random
import string
from collections.abc import Callable

import pytest

from shoal.client import Admin, ClientSettings
from shoal.protocol import RequestCode, ResponseCode, make_request
from shoal.protocol.acl_signature import Credentials
from shoal.remoting import RemotingClient
from tests.acl.conftest import ADMIN, USER
from tests.conftest import Cluster

pytestmark = pytest.mark.asyncio

CASES = 10_000
CONCURRENCY = 200
SEED = 17

CODES = [
    RequestCode.GET_MAX_OFFSET,
    RequestCode.SEND_MESSAGE_V2,
    RequestCode.SEND_MESSAGE,
    RequestCode.PULL_MESSAGE,
    RequestCode.HEART_BEAT,
    RequestCode.UPDATE_AND_CREATE_TOPIC,
    RequestCode.UPDATE_CONSUMER_OFFSET,
    RequestCode.DELETE_TOPIC_IN_BROKER,
]
ALPHABETS = [
    string.ascii_letters + string.digits,
    "".join(chr(c) for c in range(0x20)),  # control characters
    "äöü中文字符🙂\u200b\ufeff",
    "+/=" + string.ascii_letters,  # Base64-looking
]


def _text(rng: random.Random) -> str:
    kind = rng.randrange(8)
    if kind == 0:
        return ""
    if kind == 1:
        return "A" * rng.choice([4097, 20_000, 100_000])  # oversized
    if kind == 2:
        return rng.choice([USER.access_key, ADMIN.access_key])
    alphabet = rng.choice(ALPHABETS)
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 64)))


def fuzz_request(rng: random.Random, opaque: int) -> tuple[int, dict[str, str], bytes | None]:
    code = rng.choice(CODES)
    fields: dict[str, str] = {"topic": "AclTopic", "b": "AclTopic", "a": "G", "consumerGroup": "G", "queueId": "0"}
    for _ in range(rng.choice([0, 0, 1, 5, 200])):  # extra fields, sometimes many
        fields[_text(rng)[:200] or "k"] = _text(rng)[:5000]
    body = rng.choice([None, b"", b"{not json", bytes(rng.randrange(256) for _ in range(rng.randrange(64)))])
    shape = rng.randrange(6)
    if shape == 0:  # fields only, no AccessKey
        fields.pop("AccessKey", None)
    elif shape == 1:  # a real account signed with a wrong secret
        Credentials(rng.choice([USER, ADMIN]).access_key, _text(rng) or "x").sign(fields, body)
    elif shape == 2:  # a real user, right secret: signature passes, permissions and bodies decide
        USER.sign(fields, body)
        if rng.random() < 0.5:
            fields["Signature"] = _text(rng)  # then tampered with
    else:  # arbitrary AccessKey / Signature / SecurityToken
        fields["AccessKey"] = _text(rng)
        if rng.random() < 0.8:
            fields["Signature"] = _text(rng)
        if rng.random() < 0.3:
            fields["SecurityToken"] = _text(rng)
    return code, fields, body


async def test_ten_thousand_generated_signature_fields_get_proper_answers(
    acl_cluster_factory: Callable[..., Cluster],
) -> None:
    """Every answer is a known response code without an internal error; nothing is stored."""
    cluster = acl_cluster_factory()
    rng = random.Random(SEED)
    client = RemotingClient()
    answers: dict[int, int] = {}
    bad: list[str] = []

    async def one(opaque: int) -> None:
        code, fields, body = fuzz_request(rng, opaque)
        connection = await client.connection(cluster.broker_addr)
        request = make_request(code, opaque=client.next_opaque(), ext_fields=fields, body=body)
        response = await connection.request(request, 10.0)
        answers[response.code] = answers.get(response.code, 0) + 1
        remark = response.remark or ""
        if "internal error" in remark or response.code not in {int(c) for c in ResponseCode}:
            bad.append(f"code {code} -> {response.code} {remark[:200]}")

    try:
        for start in range(0, CASES, CONCURRENCY):
            await asyncio.gather(*(one(opaque) for opaque in range(start, start + CONCURRENCY)))
        async with Admin(cluster.namesrv_addr, client_settings=ClientSettings(credentials=ADMIN)) as admin:
            stored_end = (await admin.runtime_info(cluster.broker_addr))["commitLogMaxOffset"]
    finally:
        await client.close()
    assert not bad, bad[:10]
    assert sum(answers.values()) == CASES
    assert answers.get(ResponseCode.NO_PERMISSION, 0) > CASES // 2, answers
    assert ResponseCode.SUCCESS not in answers or answers[ResponseCode.SUCCESS] < CASES // 10, answers
    assert stored_end == "0", "nothing was stored"
    assert cluster.alive("broker")
    assert "Traceback" not in cluster.log("broker")
