"""RocketMQ 5's gRPC request signature (the `authorization` metadata), pure.

Every v5 client call carries

    x-mq-date-time: 20261121T223903Z
    authorization:  MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time, Signature=<hex>

where the signature is the hex HMAC-SHA1 of the `x-mq-date-time` value under the account's secret
key (docs real-clients.md §2.1). The Go client writes the credential as a scope,
`<accessKey>/<region>/Rocketmq` (region empty), and its signature in lower case; RocketMQ 5's proxy
takes what comes before the first "/" as the access key. It is sent even without credentials (an
empty access key).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

__all__ = ["ALGORITHM", "AUTHORIZATION", "DATE_TIME", "GrpcAuthorization", "parse_authorization", "signature_v5"]

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
ALGORITHM = "MQv2-HMAC-SHA1"
AUTHORIZATION_LENGTH_MAX = 1024
"""Longer `authorization` values are not parsed (a client sends about 120 characters)."""


@dataclass(frozen=True, slots=True)
class GrpcAuthorization:
    access_key: str
    signed_headers: str
    signature: str


def parse_authorization(text: str) -> GrpcAuthorization | None:
    """The parts of an `authorization` value; None when it is not an MQv2-HMAC-SHA1 one."""
    if len(text) > AUTHORIZATION_LENGTH_MAX:
        return None
    algorithm, _, rest = text.strip().partition(" ")
    if algorithm != ALGORITHM:
        return None
    parts: dict[str, str] = {}
    for item in rest.split(","):
        name, separator, value = item.strip().partition("=")
        if separator:
            parts[name] = value
    if "Credential" not in parts or "Signature" not in parts:
        return None
    access_key = parts["Credential"].split("/", 1)[0]
    return GrpcAuthorization(access_key, parts.get("SignedHeaders", ""), parts["Signature"])


def signature_v5(secret_key: str, date_time: str) -> str:
    """hex(HMAC-SHA1(secret_key, date_time)), upper case as the Java client writes it."""
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest().upper()
