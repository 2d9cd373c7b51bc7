"""RocketMQ 4.x plain-ACL request signatures (spec §14, gotcha 25), shared by clients and servers.

A signed request carries extFields `AccessKey`, `Signature` and, optionally, `SecurityToken`. The
signature is Base64(HmacSHA1(secretKey, content)) where content is the UTF-8 bytes of the values
(values only: no keys, no separators) of all extFields except `Signature`, in Java `TreeMap` key
order, followed by the raw body. The verifying side also leaves out `_UNIQUE_KEY_QUERY`
(PlainAccessValidator.parse), which the Java client adds before signing: `verify` accepts both.

Pure functions: the broker's check (`shoal.acl`) and the clients' signing hook use the same
code, so they cannot drift apart.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import operator
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from shoal.formats.compiled import compiled_module

__all__ = [
    "ACCESS_KEY",
    "COMPILED",
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
_VERIFY_EXCLUDED = (SIGNATURE, UNIQUE_KEY_QUERY)
SIGNING_KEYS_CACHED_MAX_COUNT = 1024
"""Secret keys whose keyed SHA-1 states are kept (one per account in use; a few hundred bytes each)."""
SHA1_BLOCK_BYTES = 64
"""SHA-1's block size: the HMAC key is padded (or first hashed) to it (RFC 2104)."""


SIGNED_KEY_ORDERS_CACHED_MAX_COUNT = 256
"""Distinct header shapes (key sequences) whose signing order is kept; a client sends a handful."""

_ValuesGetter = Callable[[Mapping[str, str]], Any]
_SigningOrder = tuple[tuple[str, ...], _ValuesGetter]
"""The keys to sign in signing order, and a getter of their values in that order."""
_key_orders: dict[tuple[str, ...], dict[tuple[str, ...], _SigningOrder]] = {}
"""excluded keys -> (keys in wire order -> their signing order). Sorting the keys was most of the
cost of a signature; a request's header has the same keys as the last thousand. Two levels, so a
lookup hashes the key sequence alone."""
_keyed_states: dict[str, tuple[Any, Any]] = {}
"""secret key -> its keyed SHA-1 states (`_keyed_sha1`); a dict, since a cached-function call costs
more than the lookup."""
_compiled_states: dict[str, bytes] = {}
"""secret key -> the compiled module's keyed SHA-1 states."""

# Built from _acl_speedups.c when a compiler and OpenSSL's headers were there at install time.
_compiled = compiled_module("shoal.protocol._acl_speedups")
COMPILED = _compiled is not None
"""Whether signatures are computed by the compiled module (else by the same steps in Python)."""
_b2a_base64 = binascii.b2a_base64
_compare_digest = hmac.compare_digest


def _utf16(key: str) -> bytes:
    """Big-endian UTF-16: its byte order is Java String.compareTo's order of UTF-16 code units."""
    return key.encode("utf-16-be", "surrogatepass")


def _signing_order(keys: tuple[str, ...], excluded: tuple[str, ...]) -> _SigningOrder:
    signed = [key for key in keys if key not in excluded]
    if "".join(signed).isascii():
        signed.sort()  # the usual case, and the same order
    else:
        signed.sort(key=_utf16)
    if not signed:
        return (), lambda _fields: ()
    # itemgetter of one key returns the value itself; "".join of a str is that str.
    return tuple(signed), operator.itemgetter(*signed)


def _order_of(ext_fields: Mapping[str, str], excluded: tuple[str, ...]) -> _SigningOrder:
    orders = _key_orders.get(excluded)
    if orders is None:
        orders = _key_orders[excluded] = {}
    keys = tuple(ext_fields)
    order = orders.get(keys)
    if order is None:
        if len(orders) >= SIGNED_KEY_ORDERS_CACHED_MAX_COUNT:
            orders.clear()  # many shapes: a peer making them up; sorting each is what it costs
        order = orders[keys] = _signing_order(keys, excluded)
    return order


def content_prefix(ext_fields: Mapping[str, str], excluded: tuple[str, ...] = (SIGNATURE,)) -> bytes:
    """The values of `ext_fields` (minus `excluded` keys) in Java TreeMap order, UTF-8 encoded.

    Unpaired surrogates (a JSON header may carry them) become '?', as Java's String.getBytes does.
    """
    joined = "".join(_order_of(ext_fields, excluded)[1](ext_fields))
    try:
        return joined.encode()
    except UnicodeEncodeError:
        return joined.encode("utf-8", "replace")


def _hmac_key(secret_key: str) -> bytes:
    """The secret as an HMAC-SHA1 key of at most one block (RFC 2104: longer keys are hashed)."""
    try:
        key = secret_key.encode("utf-8")
    except UnicodeEncodeError:
        key = secret_key.encode("utf-8", "replace")
    if len(key) > SHA1_BLOCK_BYTES:
        key = hashlib.sha1(key).digest()
    return key


def _keyed_sha1(secret_key: str) -> tuple[Any, Any]:
    """HMAC-SHA1 (RFC 2104) with the key mixed in: SHA-1 states after the inner and the outer pad.

    Copying a keyed SHA-1 state is the cheapest HMAC CPython offers: OpenSSL 3's one-shot HMAC
    and HMAC_CTX look the digest up on every call, which cost more than hashing a 1 KB body."""
    states = _keyed_states.get(secret_key)
    if states is not None:
        return states
    key = _hmac_key(secret_key).ljust(SHA1_BLOCK_BYTES, b"\0")
    if len(_keyed_states) >= SIGNING_KEYS_CACHED_MAX_COUNT:
        _keyed_states.clear()
    states = _keyed_states[secret_key] = (
        hashlib.sha1(key.translate(hmac.trans_36)),
        hashlib.sha1(key.translate(hmac.trans_5C)),
    )
    return states


def _compiled_states_of(secret_key: str) -> bytes:
    """The compiled module's keyed SHA-1 states of `secret_key` (kept per key)."""
    assert _compiled is not None
    states = _compiled_states.get(secret_key)
    if states is None:
        if len(_compiled_states) >= SIGNING_KEYS_CACHED_MAX_COUNT:
            _compiled_states.clear()
        states = _compiled_states[secret_key] = _compiled.keyed_states(_hmac_key(secret_key))
    return states


def _compiled_signature(
    ext_fields: Mapping[str, str], body: bytes | memoryview | None, secret_key: str, excluded: tuple[str, ...]
) -> str | None:
    """The signature by the compiled module; None when it cannot take these fields (not a dict, or
    a value with a lone surrogate): the Python path then decides."""
    if _compiled is None or type(ext_fields) is not dict:
        return None
    states = _compiled_states_of(secret_key)
    if excluded == (SIGNATURE,):
        signed: str | None = _compiled.sign(states, ext_fields, body)  # sorts the keys itself
        if signed is not None:
            return signed
    result: str | None = _compiled.signature(states, _order_of(ext_fields, excluded)[0], ext_fields, body)
    return result


def _hmac(secret_key: str, prefix: bytes, body: bytes | memoryview | None) -> str:
    inner_pad, outer_pad = _keyed_sha1(secret_key)
    inner = inner_pad.copy()
    inner.update(prefix)
    if body is not None:
        inner.update(body)
    outer = outer_pad.copy()
    outer.update(inner.digest())
    return _b2a_base64(outer.digest(), newline=False).decode("ascii")


def signature_of(ext_fields: Mapping[str, str], body: bytes | memoryview | None, secret_key: str) -> str:
    """The `Signature` a Java AclClientRPCHook puts on a request with these fields and body."""
    return _signature(ext_fields, body, secret_key, (SIGNATURE,))


def _signature(
    ext_fields: Mapping[str, str], body: bytes | memoryview | None, secret_key: str, excluded: tuple[str, ...]
) -> str:
    compiled = _compiled_signature(ext_fields, body, secret_key, excluded)
    if compiled is not None:
        return compiled
    return _hmac(secret_key, content_prefix(ext_fields, excluded), body)


def verify(ext_fields: Mapping[str, str], body: bytes | memoryview | None, secret_key: str) -> bool:
    """True when the request's `Signature` was made with `secret_key` over its fields and body.

    The comparison takes constant time. RocketMQ's rule leaves `_UNIQUE_KEY_QUERY` out; the Java
    client signs it in (it is added before the hook runs), so a request carrying it is accepted
    either way: both contents are computed with the secret, nothing weaker is accepted.
    """
    if _compiled is not None and type(ext_fields) is dict:
        # The whole check in one call (the broker's hot path); None where Python decides.
        verdict: bool | None = _compiled.verify(_compiled_states_of(secret_key), ext_fields, body)
        if verdict is not None:
            return verdict
    claimed = ext_fields.get(SIGNATURE)
    if claimed is None:
        return False
    if not claimed.isascii():
        return False  # a Base64 text is ASCII; compare_digest takes only ASCII str
    if _compare_digest(_signature(ext_fields, body, secret_key, _VERIFY_EXCLUDED), claimed):
        return True
    if UNIQUE_KEY_QUERY not in ext_fields:
        return False
    return _compare_digest(_signature(ext_fields, body, secret_key, (SIGNATURE,)), claimed)


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
    signature = None
    if _compiled is not None and type(ext_fields) is dict:  # every client request: one call
        signature = _compiled.sign(_compiled_states_of(credentials.secret_key), ext_fields, body)
    ext_fields[SIGNATURE] = signature_of(ext_fields, body, credentials.secret_key) if signature is None else signature
