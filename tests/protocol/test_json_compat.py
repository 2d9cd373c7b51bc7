"""Tests of shoal.protocol.json_compat: the parser's errors as BodyFormatError, extFields normalisation and
field readers (gotcha 9, 10). The parser itself is tested in tests/formats/test_json_compat.py."""

from __future__ import annotations

import pytest

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


def test_loads_raises_body_format_error_where_the_body_is_not_json() -> None:
    """Goal: the parser's syntax errors are protocol errors. Method: broken, non-UTF-8 and deep bodies."""
    with pytest.raises(BodyFormatError, match="invalid JSON: line 1, column 7: expected ',' or '}' in an object"):
        loads('{"a":1')
    with pytest.raises(BodyFormatError, match="UTF-8"):
        loads(b"\xff")
    with pytest.raises(BodyFormatError, match="nesting"):
        loads("[" * 10_000 + "]" * 10_000)
    assert loads('{0:{{"queueId":0}:1}}') == {"0": {ObjectKey.from_dict({"queueId": 0}): 1}}


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
