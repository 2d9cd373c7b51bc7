"""RocketMQ 4.x plain-ACL request signatures (spec §14, gotcha 25), shared by clients and servers.

A signed request carries extFields `AccessKey`, `Signature` and, optionally, `SecurityToken`. The
signature is Base64(HmacSHA1(secretKey, content)) where content is the UTF-8 bytes of the values
(values only: no keys, no separators) of all extFields except `Signature`, in Java `TreeMap` key
order, followed by the raw body. The verifying side also leaves out `_UNIQUE_KEY_QUERY`
(PlainAccessValidator.parse), which the Java client adds before signing: `verify` accepts both.

Pure functions: the broker's check (`shoal.broker.acl`) and the clients' signing hook use the same
code, so they cannot drift apart.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field

__all__ = [
    "ACCESS_KEY",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "UNIQUE_KEY_QUERY",
    "Credentials",
    "content_prefix",
    "sign",
    "signature_of",
    "verify",
]

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
"""MixAll.UNIQUE_MSG_QUERY_FLAG: the verifying side leaves it out of the content."""
SIGNING_KEYS_CACHED_MAX_COUNT = 1024
"""Secret keys whose keyed HMAC state is kept (one per account in use; a few hundred bytes each)."""


def _utf16(key: str) -> bytes:
    """Big-endian UTF-16: its byte order is Java String.compareTo's order of UTF-16 code units."""
    return key.encode("utf-16-be", "surrogatepass")


def content_prefix(ext_fields: Mapping[str, str], excluded: Iterable[str] = (SIGNATURE,)) -> bytes:
    """The values of `ext_fields` (minus `excluded` keys) in Java TreeMap order, UTF-8 encoded.

    Unpaired surrogates (a JSON header may carry them) become '?', as Java's String.getBytes does.
    """
    keys = [key for key in ext_fields if key not in excluded]
    if "".join(keys).isascii():
        keys.sort()  # the usual case, and the same order
    else:
        keys.sort(key=_utf16)
    joined = "".join([ext_fields[key] for key in keys])
    try:
        return joined.encode("utf-8")
    except UnicodeEncodeError:
        return joined.encode("utf-8", "replace")


@functools.lru_cache(maxsize=SIGNING_KEYS_CACHED_MAX_COUNT)
def _keyed_mac(secret_key: str) -> hmac.HMAC:
    """An HMAC-SHA1 with the key already mixed in; `copy()` skips the key setup on every request."""
    try:
        key = secret_key.encode("utf-8")
    except UnicodeEncodeError:
        key = secret_key.encode("utf-8", "replace")
    return hmac.new(key, digestmod=hashlib.sha1)


def _hmac(secret_key: str, prefix: bytes, body: bytes | memoryview | None) -> str:
    mac = _keyed_mac(secret_key).copy()
    mac.update(prefix)
    if body is not None:
        mac.update(body)
    return base64.b64encode(mac.digest()).decode("ascii")


def signature_of(ext_fields: Mapping[str, str], body: bytes | memoryview | None, secret_key: str) -> str:
    """The `Signature` a Java AclClientRPCHook puts on a request with these fields and body."""
    return _hmac(secret_key, content_prefix(ext_fields), body)


def verify(ext_fields: Mapping[str, str], body: bytes | memoryview | None, secret_key: str) -> bool:
    """True when the request's `Signature` was made with `secret_key` over its fields and body.

    The comparison takes constant time. RocketMQ's rule leaves `_UNIQUE_KEY_QUERY` out; the Java
    client signs it in (it is added before the hook runs), so a request carrying it is accepted
    either way: both contents are computed with the secret, nothing weaker is accepted.
    """
    claimed = ext_fields.get(SIGNATURE)
    if claimed is None:
        return False
    expected = _hmac(secret_key, content_prefix(ext_fields, (SIGNATURE, UNIQUE_KEY_QUERY)), body)
    if hmac.compare_digest(expected.encode("ascii"), claimed.encode("utf-8", "replace")):
        return True
    if UNIQUE_KEY_QUERY not in ext_fields:
        return False
    expected = _hmac(secret_key, content_prefix(ext_fields), body)
    return hmac.compare_digest(expected.encode("ascii"), claimed.encode("utf-8", "replace"))


@dataclass(frozen=True, slots=True)
class Credentials:
    """An ACL account's keys (Java SessionCredentials); `secret_key` never shows in repr."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("access_key and secret_key must both be non-empty")

    def sign(self, ext_fields: MutableMapping[str, str], body: bytes | memoryview | None) -> None:
        """Add AccessKey, SecurityToken (when set) and Signature, as AclClientRPCHook does."""
        sign(ext_fields, body, self)


def sign(ext_fields: MutableMapping[str, str], body: bytes | memoryview | None, credentials: Credentials) -> None:
    """Add `AccessKey`, `SecurityToken` (when set) and `Signature` to `ext_fields` in place."""
    ext_fields[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        ext_fields[SECURITY_TOKEN] = credentials.security_token
    ext_fields.pop(SIGNATURE, None)
    ext_fields[SIGNATURE] = signature_of(ext_fields, body, credentials.secret_key)
