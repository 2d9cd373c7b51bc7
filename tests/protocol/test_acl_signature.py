"""ACL request signatures: content order and encoding as Java's AclClientRPCHook, HMAC-SHA1 + Base64."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.protocol import acl_signature
from shoal.protocol.acl_signature import (
    ACCESS_KEY,
    SECURITY_TOKEN,
    SIGNATURE,
    UNIQUE_KEY_QUERY,
    Credentials,
    content_prefix,
    signature_of,
    verify,
)

RFC2202_CASE2_DIGEST = bytes.fromhex("effcdf6ae5eb2fa2d27416d5f184df9c259a7c79")
try:  # directly, not through compiled_module: these tests hold even under SHOAL_PURE_PYTHON
    from shoal.protocol import _acl_speedups as COMPILED_MODULE  # noqa: N812
except ImportError:
    COMPILED_MODULE = None  # type: ignore[assignment]


NOT_BUILT = pytest.mark.skipif(
    COMPILED_MODULE is None,
    reason="shoal.protocol._acl_speedups was not built in this install (no compiler or OpenSSL headers); "
    "tests/test_install.py fails where they are present and it is missing",
)


@pytest.fixture(autouse=True, params=[pytest.param("compiled", marks=NOT_BUILT), "python"])
def implementation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs on both paths: the compiled module (_acl_speedups.c) and the Python steps
    it stands in for (taken when the install had no compiler, or for fields it cannot take)."""
    monkeypatch.setattr(acl_signature, "_compiled", None if request.param == "python" else COMPILED_MODULE)
    return str(request.param)


def _reference(fields: dict[str, str], body: bytes | None, key: str) -> str:
    """Java's rule spelled out: values sorted by key in UTF-16 order, '?' for what UTF-8 cannot
    encode, then the body, HMAC-SHA1 with the UTF-8 key, Base64."""
    ordered = sorted(fields, key=lambda name: name.encode("utf-16-be", "surrogatepass"))
    content = "".join(fields[name] for name in ordered).encode("utf-8", "replace") + (body or b"")
    digest = hmac.new(key.encode("utf-8", "replace"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def test_signature_is_base64_hmac_sha1_of_values_then_body() -> None:
    """RFC 2202 test case 2 (key "Jefe"), its data split between one field value and the body."""
    signature = signature_of({"x": "what do ya want "}, b"for nothing?", "Jefe")
    assert signature == base64.b64encode(RFC2202_CASE2_DIGEST).decode()


@pytest.mark.parametrize("key", ["Jefe", "k" * 64, "k" * 65, "\u00e4\u79d8\u5bc6" * 30])
@pytest.mark.parametrize("body", [None, b"", b"b" * 3000, memoryview(b"view body")])
def test_signature_equals_the_standard_hmac_for_any_key_length(key: str, body: bytes | memoryview | None) -> None:
    """The keyed SHA-1 states stand in for hmac.new: keys shorter than, equal to and longer than the
    64-byte block (RFC 2104 hashes those first), non-ASCII keys, no body, an empty body, a view."""
    expected = hmac.new(key.encode(), b"v" + bytes(body or b""), hashlib.sha1).digest()
    assert signature_of({"x": "v"}, body, key) == base64.b64encode(expected).decode()


def test_key_order_is_cached_per_shape_and_stays_right_for_new_shapes() -> None:
    """A second header with the same keys in another wire order, and one with a key more, sign as
    their own sorted order says (the cache is keyed by the key sequence, not reused blindly)."""
    assert content_prefix({"b": "2", "a": "1"}) == b"12"
    assert content_prefix({"a": "1", "b": "2"}) == b"12"
    assert content_prefix({"b": "2", "a": "1", "A": "0"}) == b"012"
    assert content_prefix({}) == b""
    assert content_prefix({"only": "x"}) == b"x"


def test_content_is_values_only_sorted_by_key_without_signature() -> None:
    """Keys never appear; values follow Java TreeMap order; Signature is left out."""
    fields = {"topic": "T", "AccessKey": "ak", "a": "1", "Signature": "zzz", "B": "2"}
    assert content_prefix(fields) == b"ak" + b"2" + b"1" + b"T"  # AccessKey < B < a < topic


def test_key_order_is_java_utf16_order_outside_the_bmp() -> None:
    """U+FFFD sorts after a supplementary character in Java (surrogates are 0xD800..), unlike str order."""
    fields = {"\ufffd": "bmp", "\U0001f600": "astral"}
    assert content_prefix(fields) == b"astralbmp"


def test_unpaired_surrogates_encode_as_question_marks_like_java() -> None:
    """A JSON header may carry a lone surrogate; Java's getBytes(UTF-8) writes '?' for it."""
    assert content_prefix({"k": "a\ud800b"}) == b"a?b"


def test_sign_then_verify_round_trip_and_any_change_fails() -> None:
    """The signed request verifies; a changed value, body or secret does not."""
    credentials = Credentials("RocketMQ", "12345678", security_token="tok")
    fields = {"topic": "TopicTest", "queueId": "1"}
    credentials.sign(fields, b"body")
    assert fields[ACCESS_KEY] == "RocketMQ" and fields[SECURITY_TOKEN] == "tok" and SIGNATURE in fields
    assert verify(fields, b"body", "12345678")
    assert not verify(fields, b"bodx", "12345678")
    assert not verify(fields, b"body", "12345679")
    assert not verify({**fields, "queueId": "2"}, b"body", "12345678")
    assert not verify({k: v for k, v in fields.items() if k != SIGNATURE}, b"body", "12345678")


def test_unique_key_query_is_accepted_whether_signed_in_or_left_out() -> None:
    """Java signs _UNIQUE_KEY_QUERY in (it is added before the hook); RocketMQ's check leaves it out."""
    credentials = Credentials("RocketMQ", "12345678")
    signed_in = {"topic": "T", UNIQUE_KEY_QUERY: "true"}
    credentials.sign(signed_in, None)
    assert verify(signed_in, None, "12345678")
    left_out = {"topic": "T"}
    credentials.sign(left_out, None)
    assert verify({**left_out, UNIQUE_KEY_QUERY: "true"}, None, "12345678")


def test_credentials_hide_the_secret_and_refuse_empty_keys() -> None:
    """repr shows the access key only; empty keys are refused at construction."""
    text = repr(Credentials("ak", "very-secret", "token-x"))
    assert "ak" in text and "very-secret" not in text and "token-x" not in text
    with pytest.raises(ValueError):
        Credentials("", "s")
    with pytest.raises(ValueError):
        Credentials("a", "")


def test_a_resent_signature_replaces_the_old_one() -> None:
    """Signing a dict that already holds a Signature signs over the other fields only."""
    credentials = Credentials("ak", "sk")
    fields = {"x": "1", SIGNATURE: "stale"}
    credentials.sign(fields, None)
    assert verify(fields, None, "sk")


def test_the_cpp_clients_captured_route_query_signature() -> None:
    """real-clients.md §1.4: the C++ client's unsigned route query (empty keys) as captured on the wire."""
    fields = {"AccessKey": "", "OnsChannel": "ALIYUN", "topic": "TopicTest"}
    assert signature_of(fields, None, "") == "N/YT7X6tJe5UfutmW+uNwTTJ7Fc="


def test_mixed_ascii_and_non_ascii_keys_sort_without_error() -> None:
    """Found by the fuzz test: ASCII and non-ASCII keys together sort in UTF-16 order."""
    fields = {"b": "2", "ä": "3", "a": "1", "\U0001f600": "4"}
    assert content_prefix(fields) == b"1234"  # a < b < U+00E4 < U+D83D (a surrogate)


# The fixture only picks the path; nothing in it needs resetting between inputs.
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fields=st.dictionaries(st.text(min_size=1, max_size=12), st.text(max_size=40), max_size=14),
    body=st.one_of(st.none(), st.binary(max_size=3000)),
    key=st.text(max_size=80),
)
def test_signature_equals_javas_rule_for_any_fields_body_and_key(
    implementation: str, fields: dict[str, str], body: bytes | None, key: str
) -> None:
    """Any keys and values (non-ASCII, astral, lone surrogates), any body, any key: both paths
    give exactly the reference signature, and what one signs the other verifies."""
    fields.pop(SIGNATURE, None)
    assert signature_of(fields, body, key) == _reference(fields, body, key)


def test_the_compiled_path_takes_over_only_what_it_computes_exactly(implementation: str) -> None:
    """A value with a lone surrogate, or a mapping that is not a dict, goes the Python way (the
    compiled module answers None, or is not asked) and still signs as Java does."""
    surrogate = {"k": "a\ud800b", "topic": "T"}
    assert signature_of(surrogate, b"x", "sk") == _reference(surrogate, b"x", "sk")
    credentials = Credentials("ak", "sk")
    signed = dict(surrogate)
    credentials.sign(signed, b"x")
    assert verify(signed, b"x", "sk") and not verify(signed, b"y", "sk")

    class Fields(dict[str, str]):
        pass

    assert signature_of(Fields(topic="T"), None, "sk") == _reference({"topic": "T"}, None, "sk")
    if implementation == "compiled":
        assert COMPILED_MODULE is not None
        with pytest.raises(ValueError, match="block size"):
            COMPILED_MODULE.keyed_states(b"k" * 65)
        with pytest.raises(TypeError, match="keyed_states"):
            COMPILED_MODULE.signature(b"short", (), {}, None)


_ASCII_KEYS = st.text(st.characters(min_codepoint=0, max_codepoint=127), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fields=st.dictionaries(_ASCII_KEYS, st.text(max_size=40), max_size=20),
    body=st.one_of(st.none(), st.binary(max_size=3000)),
    key=st.text(max_size=80),
    unique=st.one_of(st.none(), st.text(max_size=20)),
    signed_in=st.booleans(),
)
def test_verify_accepts_exactly_javas_signature_with_or_without_the_unique_key_query(
    implementation: str, fields: dict[str, str], body: bytes | None, key: str, unique: str | None, signed_in: bool
) -> None:
    """ASCII keys (the compiled verify's own case: it sorts them itself): a signature made by
    Java's rule verifies, over the fields with `_UNIQUE_KEY_QUERY` signed in or left out; a changed
    body, a changed value or another key's signature does not."""
    fields.pop(SIGNATURE, None)
    fields.pop(UNIQUE_KEY_QUERY, None)
    if unique is not None:
        fields[UNIQUE_KEY_QUERY] = unique
    signed_fields = (
        dict(fields) if signed_in or unique is None else {k: v for k, v in fields.items() if k != UNIQUE_KEY_QUERY}
    )
    assert signature_of(fields, body, key) == _reference(fields, body, key)
    request = {**fields, SIGNATURE: _reference(signed_fields, body, key)}
    assert verify(request, body, key)
    assert not verify(request, (body or b"") + b"!", key)
    assert not verify(request, body, key + "x")
    for name in [name for name in signed_fields if name != UNIQUE_KEY_QUERY][:1]:  # a left-out key may change
        assert not verify({**request, name: fields[name] + "x"}, body, key)


def test_the_compiled_verify_leaves_to_python_what_it_does_not_compute(implementation: str) -> None:
    """Non-ASCII keys, more keys than it sorts, a non-str value, a missing or non-ASCII
    Signature: the compiled functions answer None and `verify` still decides as Java's rule does;
    a claimed signature shorter or longer than 28 characters never verifies."""
    many = {f"k{i:03}": str(i) for i in range(70)}
    for fields in ({"ä": "1", "a": "2"}, many, {"a": "1"}):
        signed = {**fields, SIGNATURE: _reference(fields, b"b", "sk")}
        assert verify(signed, b"b", "sk")
        good = signed[SIGNATURE]
        for claimed in (good[:-1], good + "=", "", "\u00e4" * 28):
            assert not verify({**signed, SIGNATURE: claimed}, b"b", "sk")
    if implementation == "compiled":
        assert COMPILED_MODULE is not None
        states = COMPILED_MODULE.keyed_states(b"sk")
        assert COMPILED_MODULE.verify(states, {"\u00e4": "1", SIGNATURE: "x"}, None) is None
        assert COMPILED_MODULE.verify(states, {**many, SIGNATURE: "x"}, None) is None
        assert COMPILED_MODULE.verify(states, {"a": "1"}, None) is None
        assert COMPILED_MODULE.verify(states, {"a": 1, SIGNATURE: "x"}, None) is None  # type: ignore[dict-item]
        assert COMPILED_MODULE.sign(states, {"a": "x\ud800"}, None) is None
        assert COMPILED_MODULE.sign(states, {"b": "2", "a": "1", SIGNATURE: "old"}, b"z") == _reference(
            {"a": "1", "b": "2"}, b"z", "sk"
        )
        with pytest.raises(TypeError, match="keyed_states"):
            COMPILED_MODULE.verify(b"short", {}, None)
