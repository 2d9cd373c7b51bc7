"""Tolerant JSON: fastjson quirks in, fastjson object keys out, extFields normalisation (gotcha 9, 10)."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.formats.json_compat import JsonKey, JsonValue, dumps_fastjson, parse_decimal
from shoal.formats.limits import JSON_NESTING_MAX_DEPTH
from shoal.protocol import BodyFormatError, MalformedFrameError, ObjectKey
from shoal.protocol.codes import ConsumeType
from shoal.protocol.json_compat import (
    ObjectReader,
    coerce_bool,
    coerce_enum,
    coerce_int,
    ext_value_to_str,
    loads,
    normalize_ext_fields,
)


def test_bare_numeric_keys_read_like_quoted_ones() -> None:
    """Goal: fastjson `{0:"a"}` works. Method: parse bare and quoted forms, compare."""
    fastjson = '{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"t@g":{-1:5}}'
    standard = '{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"t@g":{"-1":5}}'
    assert loads(fastjson) == loads(standard) == json.loads(standard)


def test_object_keys_become_hashable_object_keys() -> None:
    """Goal: fastjson `{{mq}:v}` works. Method: parse a MessageQueue-keyed map, inspect the key."""
    text = '{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"maxOffset":5}}}'
    parsed = loads(text)
    assert isinstance(parsed, dict)
    table = parsed["offsetTable"]
    assert isinstance(table, dict)
    ((key, value),) = table.items()
    assert isinstance(key, ObjectKey)
    assert key.to_dict() == {"brokerName": "b", "queueId": 0, "topic": "t"}
    assert key == ObjectKey.from_dict({"topic": "t", "queueId": 0, "brokerName": "b"})  # order-free
    assert value == {"maxOffset": 5}


def test_null_keys_are_dropped_and_trailing_commas_and_whitespace_accepted() -> None:
    """Goal: other fastjson leniencies. Method: parse `null:` keys, `,}` and odd whitespace."""
    assert loads('{ null : 1 , "a" : [1, 2,] , b: true, }\n') == {"a": [1, 2], "b": True}


def test_tolerant_parser_handles_escapes_nesting_and_numbers() -> None:
    """Goal: the fallback parser reads all JSON. Method: a fastjson text with escapes and floats."""
    text = '{0:{"s":"a\\"b\\u0001\\n中","f":-1.5e3,"n":null,"l":[[],{}],"big":9223372036854775807}}'
    assert loads(text) == {
        "0": {"s": 'a"b\x01\n中', "f": -1500.0, "n": None, "l": [[], {}], "big": 9223372036854775807}
    }


def test_bytes_and_memoryview_input_with_bom() -> None:
    """Goal: bodies parse straight from frames. Method: UTF-8 bytes with BOM, and a memoryview."""
    assert loads("\ufeff{1:2}".encode()) == {"1": 2}
    assert loads(memoryview(b'{"a":"\xc3\xa9"}')) == {"a": "é"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a":1', "line 1, column 7: expected ',' or '}' in an object, found end of input"),
        ('{"a" 1}', "expected ':'"),
        ("{[1]:2}", "expected an object key"),
        ("[1 2]", "expected ',' or ']'"),
        ('{"a":1} x', "expected end of input"),
        ("{a:undefined}", "expected a value"),
        ("{0:" + "1" * 30 + "}", "at most 20 digits"),
        ("1" * 5000, "at most 20 digits"),
        ('"\\q"', "expected an escape"),
        ("@", "expected a value"),
        ("", "expected a value, found end of input"),
    ],
)
def test_invalid_json_raises_body_format_error_with_position(text: str, message: str) -> None:
    """Goal: precise errors. Method: parse broken texts, match the message."""
    with pytest.raises(BodyFormatError, match=message):
        loads(text)


def test_invalid_utf8_raises_body_format_error() -> None:
    """Goal: encoding errors are protocol errors. Method: parse b'\\xff'."""
    with pytest.raises(BodyFormatError, match="UTF-8"):
        loads(b"\xff")


def test_deep_nesting_is_refused_not_a_recursion_error() -> None:
    """Goal: hostile nesting is bounded. Method: parse 10,000 nested arrays and bare-key maps."""
    with pytest.raises(BodyFormatError, match="nesting"):
        loads("[" * 10_000 + "]" * 10_000)
    with pytest.raises(BodyFormatError, match="nesting"):
        loads("{0:" * (JSON_NESTING_MAX_DEPTH + 5) + "1" + "}" * (JSON_NESTING_MAX_DEPTH + 5))


def test_dumps_fastjson_writes_object_keys_and_reads_back() -> None:
    """Goal: Java admin tools need `{{mq}:…}`. Method: write an ObjectKey-keyed map, parse it again."""
    key = ObjectKey.from_dict({"topic": "t", "brokerName": "b", "queueId": 0})
    value: dict[JsonKey, JsonValue] = {"offsetTable": {key: {"minOffset": 0}}, "consumeTps": 1.5, "s": "中\x01"}
    text = dumps_fastjson(value)
    assert text.startswith('{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"minOffset":0}}')
    assert "中" in text
    assert loads(text) == value


@pytest.mark.parametrize(
    ("value", "expected"),
    [("s", "s"), (True, "true"), (False, "false"), (0, "0"), (-12, "-12"), (1795300479356, "1795300479356"),
     (1.5, "1.5"), (None, None)],
)  # fmt: skip
def test_ext_values_take_java_to_string_form(value: object, expected: str | None) -> None:
    """Goal: extFields values become Java strings. Method: convert each JSON scalar."""
    assert ext_value_to_str(value) == expected


def test_normalize_ext_fields_refuses_containers_and_too_many_fields() -> None:
    """Goal: only scalars are header values. Method: lists/objects and 2000 fields are malformed."""
    assert normalize_ext_fields(None) == {}
    assert normalize_ext_fields({"a": 1, "b": None}) == {"a": "1"}
    with pytest.raises(MalformedFrameError, match="'a'"):
        normalize_ext_fields({"a": [1]})
    with pytest.raises(MalformedFrameError, match="not an object"):
        normalize_ext_fields("x")
    with pytest.raises(MalformedFrameError, match="limit"):
        normalize_ext_fields({str(index): "v" for index in range(2000)})


def test_parse_decimal_follows_java_parse_long() -> None:
    """Goal: Long.parseLong rules. Method: accepted and refused spellings."""
    assert [parse_decimal(text) for text in ("0", "-5", "+7", "9223372036854775807")] == [
        0, -5, 7, 9223372036854775807
    ]  # fmt: skip
    for text in ("", " 1", "1_000", "1.0", "٣", "0x10", "-", "1" * 25):
        assert parse_decimal(text) is None, text


def test_coercions_accept_c_plus_plus_spellings() -> None:
    """Goal: numbers as strings, bools as 0/1, enums as ordinals. Method: coerce samples."""
    assert coerce_int("1795300493320", "p") == 1795300493320
    assert coerce_int(4.0, "p") == 4
    assert coerce_bool("TRUE", "p") and coerce_bool(1, "p") and not coerce_bool("0", "p")
    assert coerce_enum(1, ConsumeType, "p") is ConsumeType.CONSUME_PASSIVELY
    assert coerce_enum("CONSUME_ACTIVELY", ConsumeType, "p") is ConsumeType.CONSUME_ACTIVELY
    assert coerce_enum("0", ConsumeType, "p") is ConsumeType.CONSUME_ACTIVELY
    for bad in (True, "x", 1.5, [1], 2**64):
        with pytest.raises(BodyFormatError, match="p: expected an integer"):
            coerce_int(bad, "p")
    with pytest.raises(BodyFormatError, match="not one of"):
        coerce_enum(7, ConsumeType, "p")


def test_object_reader_names_the_path_of_a_bad_field() -> None:
    """Goal: errors say where. Method: read a string where a number belongs."""
    reader = ObjectReader({"perm": "rw", "list": 3}, "TopicRouteData.queueDatas[0]")
    with pytest.raises(BodyFormatError, match=r"TopicRouteData\.queueDatas\[0\]\.perm"):
        reader.integer("perm")
    with pytest.raises(BodyFormatError, match="expected an array"):
        reader.array("list")
    assert reader.integer("absent", 6) == 6
    with pytest.raises(BodyFormatError, match="expected an object"):
        ObjectReader([1], "X")


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=500)
@given(_json_values)
def test_standard_json_reads_the_same_as_the_stdlib(value: object) -> None:
    """Goal: tolerance never changes standard JSON. Method: hypothesis values via json.dumps."""
    assert loads(json.dumps(value)) == json.loads(json.dumps(value))


@settings(max_examples=500)
@given(_json_values)
def test_tolerant_parser_agrees_with_the_stdlib_when_keys_are_bare(value: object) -> None:
    """Goal: the fallback parser is right. Method: add one bare key to force the fallback path."""
    text = "{0:" + json.dumps(value) + "}"
    parsed = loads(text)
    assert isinstance(parsed, dict)
    assert parsed == {"0": json.loads(json.dumps(value))}


@settings(max_examples=1000)
@given(st.text(alphabet='{}[]:,"0123456789-.eE aZtrufnl\\', max_size=60))
def test_random_text_gives_a_value_or_body_format_error(text: str) -> None:
    """Goal: no stray exceptions. Method: hypothesis JSON-ish text through loads."""
    with contextlib.suppress(BodyFormatError):
        loads(text)
