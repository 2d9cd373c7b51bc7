"""Tests of shoal.formats.json_compat: one tolerant (fastjson) JSON parser, its key styles, writers."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.formats.errors import JsonSyntaxError
from shoal.formats.json_compat import (
    JsonKey,
    JsonValue,
    ObjectKey,
    dumps_fastjson,
    loads,
    parse_decimal,
    parse_fastjson,
)
from shoal.formats.limits import JSON_NESTING_MAX_DEPTH

# --------------------------------------------------------------------------------------------
# parse_fastjson: keys as written (the broker's config files)
# --------------------------------------------------------------------------------------------


def test_parse_reads_unquoted_numeric_keys_including_negative() -> None:
    """Goal: Map<Integer,Long> as Java writes it parses to int keys. Method: parse a sample."""
    assert parse_fastjson('{"offsetTable":{0:5280,1:5312,-1:7}}') == {"offsetTable": {0: 5280, 1: 5312, -1: 7}}
    assert parse_fastjson('{0:"127.0.0.1:10911"}') == {0: "127.0.0.1:10911"}


def test_parse_reads_object_keys_as_order_independent_object_key() -> None:
    """Goal: Map<MessageQueue,..> keys become hashable ObjectKeys. Method: parse, compare, look up."""
    text = '{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"maxOffset":10,"minOffset":0}}}'
    table = parse_fastjson(text)["offsetTable"]
    key = ObjectKey.from_dict({"topic": "t", "queueId": 0, "brokerName": "b"})
    assert table[key] == {"maxOffset": 10, "minOffset": 0}
    (parsed_key,) = table
    assert parsed_key.get("queueId") == 0
    assert parsed_key.get("missing", "default") == "default"
    assert parsed_key.to_dict() == {"brokerName": "b", "queueId": 0, "topic": "t"}
    assert [name for name, _ in parsed_key.items] == ["brokerName", "queueId", "topic"]


def test_parse_freezes_nested_values_inside_object_keys() -> None:
    """Goal: object keys holding objects/arrays stay hashable. Method: parse nested key, hash it."""
    parsed = parse_fastjson('{{"a":{"b":[1,{"c":2}]}}:1, [1,2]:3}')
    inner = ObjectKey.from_dict({"c": 2})
    assert parsed[ObjectKey((("a", ObjectKey((("b", (1, inner)),))),))] == 1
    assert parsed[(1, 2)] == 3


def test_parse_reads_null_boolean_and_unquoted_name_keys() -> None:
    """Goal: `null:` keys and bare names are accepted. Method: parse literals in key position."""
    assert parse_fastjson("{null:1, true:2, false:3, name_1$:4}") == {
        None: 1,
        True: 2,
        False: 3,
        "name_1$": 4,
    }


def test_parse_reads_single_quoted_strings_with_escapes() -> None:
    """Goal: single-quoted strings as fastjson reads them. Method: parse keys and values in quotes."""
    assert parse_fastjson("{'a':'it\\'s \"x\"', \"b\":'\\u0041\\n'}") == {"a": 'it\'s "x"', "b": "A\n"}


def test_parse_accepts_tabs_and_whitespace_anywhere() -> None:
    """Goal: pretty printing and trailing whitespace are harmless. Method: parse padded text."""
    text = '\t{\r\n\t"a" \t:\n\t\t[ 1 ,\f2 ] ,\n\t0\t:\tnull\n}\n\t\n  '
    assert parse_fastjson(text) == {"a": [1, 2], 0: None}
    assert parse_fastjson("\ufeff[]") == []


def test_parse_decodes_escapes_and_surrogate_pairs() -> None:
    """Goal: every JSON escape decodes as Python's json does. Method: compare with json.loads."""
    text = '"\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\ud83d\\ude00 \\ud800 \\udc00x"'
    assert parse_fastjson(text) == json.loads(text)


def test_parse_reads_numbers_as_java_writes_them() -> None:
    """Goal: ints stay ints, doubles become floats. Method: parse longs, doubles, exponents."""
    parsed = parse_fastjson("[0, -12, 9223372036854775807, 1.5, -0.25, 1.0E10, 2e-3, 3E+2]")
    assert parsed == [0, -12, 9223372036854775807, 1.5, -0.25, 1.0e10, 2e-3, 300.0]
    assert [type(value) for value in parsed[:3]] == [int, int, int]


def test_parse_accepts_trailing_commas_as_fastjson_does() -> None:
    """Goal: `[1,]` and `{'a':1,}` read as fastjson reads them. Method: parse both."""
    assert parse_fastjson("[1,]") == [1]
    assert parse_fastjson("{'a':1,}") == {"a": 1}


def test_parse_keeps_the_last_of_duplicate_keys() -> None:
    """Goal: duplicates behave like json.loads (last wins). Method: parse a repeated key."""
    assert parse_fastjson('{"a":1,"a":2}') == {"a": 2}


@pytest.mark.parametrize(
    ("text", "line", "column", "expected"),
    [
        ('{"a":1,\n  "b" 2}', 2, 7, "':' after an object key"),
        ("[1 2]", 1, 4, "',' or ']' in an array"),
        ('{"a":1 "b":2}', 1, 8, "',' or '}' in an object"),
        ('{"a":1', 1, 7, "',' or '}' in an object"),
        ('{\n\t"a": tru}', 2, 7, "a value"),
        ('{"a":1} x', 1, 9, "end of input"),
        ("", 1, 1, "a value"),
        ("   \n  ", 2, 3, "a value"),
        ('{"a":"\\q"}', 1, 8, "an escape"),
        ('"\\u12G4"', 1, 4, "4 hex digits"),
        ("{,}", 1, 2, "an object key"),
        ("[-x]", 1, 2, "a number"),
        ('{"a":01}', 1, 7, "',' or '}' in an object"),
        ("[1,,]", 1, 4, "a value"),
        ("{'a':1,,}", 1, 8, "an object key"),
    ],
)
def test_parse_reports_line_column_and_expectation_of_malformed_input(
    text: str, line: int, column: int, expected: str
) -> None:
    """Goal: syntax errors are located precisely. Method: parse broken samples, check the error."""
    with pytest.raises(JsonSyntaxError) as caught:
        parse_fastjson(text)
    assert (caught.value.line, caught.value.column) == (line, column)
    assert caught.value.expected is not None
    assert caught.value.expected.startswith(expected)
    assert str(caught.value).startswith(f"line {line}, column {column}: expected {expected}")


def test_parse_reports_where_an_unterminated_string_opened() -> None:
    """Goal: a missing quote names the string's start. Method: parse an unterminated string."""
    with pytest.raises(JsonSyntaxError, match=r"opened at line 2, column 8") as caught:
        parse_fastjson('{\n\t"a":1,"b\n')
    assert (caught.value.line, caught.value.column) == (3, 1)


@pytest.mark.parametrize("depth", [1, 64, JSON_NESTING_MAX_DEPTH])
def test_parse_refuses_nesting_deeper_than_the_callers_depth(depth: int) -> None:
    """Goal: nesting is bounded by the caller's depth, object keys included. Method: parse at it and one past."""
    assert parse_fastjson("[" * depth + "]" * depth, nesting_max_depth=depth) is not None
    with pytest.raises(JsonSyntaxError, match="levels of nesting"):
        parse_fastjson("[" * (depth + 1) + "]" * (depth + 1), nesting_max_depth=depth)
    key_one_too_deep = '{"a":' * (depth - 1) + "{{}:1}" + "}" * (depth - 1)
    with pytest.raises(JsonSyntaxError, match="levels of nesting"):
        parse_fastjson(key_one_too_deep, nesting_max_depth=depth)


def test_parse_rejects_integers_beyond_pythons_digit_limit() -> None:
    """Goal: a huge integer is a format error, not a ValueError. Method: parse 5000 digits."""
    with pytest.raises(JsonSyntaxError, match="digits"):
        parse_fastjson("1" * 5000)


_JSON_SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20)
)
_JSON_VALUES = st.recursive(
    _JSON_SCALARS,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=40,
)


@given(value=_JSON_VALUES, indent=st.sampled_from([None, "\t", 2]), ensure_ascii=st.booleans())
def test_parse_reads_standard_json_as_json_dumps_writes_it(value: Any, indent: Any, ensure_ascii: bool) -> None:
    """Goal: parse_fastjson accepts all standard JSON. Method: json.dumps random values, parse back."""
    assert parse_fastjson(json.dumps(value, indent=indent, ensure_ascii=ensure_ascii)) == value


# --------------------------------------------------------------------------------------------
# loads: keys as strings or ObjectKeys (remoting bodies); dumps_fastjson; parse_decimal
# --------------------------------------------------------------------------------------------


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
def test_invalid_json_raises_json_syntax_error_with_position(text: str, message: str) -> None:
    """Goal: precise errors. Method: parse broken texts, match the message."""
    with pytest.raises(JsonSyntaxError, match=message):
        loads(text)


def test_invalid_utf8_raises_json_syntax_error() -> None:
    """Goal: encoding errors are syntax errors. Method: parse b'\\xff'."""
    with pytest.raises(JsonSyntaxError, match="UTF-8"):
        loads(b"\xff")


def test_deep_nesting_is_refused_not_a_recursion_error() -> None:
    """Goal: hostile nesting is bounded. Method: parse 10,000 nested arrays and bare-key maps."""
    with pytest.raises(JsonSyntaxError, match="nesting"):
        loads("[" * 10_000 + "]" * 10_000)
    with pytest.raises(JsonSyntaxError, match="nesting"):
        loads("{0:" * (JSON_NESTING_MAX_DEPTH + 5) + "1" + "}" * (JSON_NESTING_MAX_DEPTH + 5))


def test_dumps_fastjson_writes_object_keys_and_reads_back() -> None:
    """Goal: Java admin tools need `{{mq}:…}`. Method: write an ObjectKey-keyed map, parse it again."""
    key = ObjectKey.from_dict({"topic": "t", "brokerName": "b", "queueId": 0})
    value: dict[JsonKey, JsonValue] = {"offsetTable": {key: {"minOffset": 0}}, "consumeTps": 1.5, "s": "中\x01"}
    text = dumps_fastjson(value)
    assert text.startswith('{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"minOffset":0}}')
    assert "中" in text
    assert loads(text) == value


def test_parse_decimal_follows_java_parse_long() -> None:
    """Goal: Long.parseLong rules. Method: accepted and refused spellings."""
    assert [parse_decimal(text) for text in ("0", "-5", "+7", "9223372036854775807")] == [
        0, -5, 7, 9223372036854775807
    ]  # fmt: skip
    for text in ("", " 1", "1_000", "1.0", "٣", "0x10", "-", "1" * 25):
        assert parse_decimal(text) is None, text


_JAVA_JSON_VALUES = st.recursive(  # integers within a Java long: `loads`' reader refuses longer ones
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=500)
@given(_JAVA_JSON_VALUES)
def test_standard_json_reads_the_same_as_the_stdlib(value: object) -> None:
    """Goal: tolerance never changes standard JSON. Method: hypothesis values via json.dumps."""
    assert loads(json.dumps(value)) == json.loads(json.dumps(value))


@settings(max_examples=500)
@given(_JAVA_JSON_VALUES)
def test_tolerant_parser_agrees_with_the_stdlib_when_keys_are_bare(value: object) -> None:
    """Goal: the fallback parser is right. Method: add one bare key to force the fallback path."""
    text = "{0:" + json.dumps(value) + "}"
    parsed = loads(text)
    assert isinstance(parsed, dict)
    assert parsed == {"0": json.loads(json.dumps(value))}


@settings(max_examples=1000)
@given(st.text(alphabet='{}[]:,"0123456789-.eE aZtrufnl\\', max_size=60))
def test_random_text_gives_a_value_or_json_syntax_error(text: str) -> None:
    """Goal: no stray exceptions. Method: hypothesis JSON-ish text through loads."""
    with contextlib.suppress(JsonSyntaxError):
        loads(text)
