"""Tolerant JSON, one parser for every peer: fastjson quirks in, standard or fastjson-style JSON out.

fastjson 1.2.69 is not RFC 8259 JSON (spec §7.1, §16 gotcha 9): map keys of a number type are
written bare (`{0:5280}`, `{-1:"x"}`), a null key as `null:`, map keys of an object type as JSON
objects (`{{"brokerName":"b","queueId":0,"topic":"t"}:{..}}`); it also reads single-quoted
strings, unquoted identifier keys, trailing commas and form feeds as whitespace. One recursive
reader (`_Reader`) accepts all of that, reports the 1-based line and column of the first error
(`JsonSyntaxError`) and bounds nesting and integer digits. It has two key styles:

* `parse_fastjson` (the broker's config files, `shoal.store.metadata`): keys are what the text
  says: str, int, float, bool, None, `ObjectKey`, or a tuple for an array key.
* `loads` (remoting bodies, `shoal.protocol`): parses with the C `json` module and falls back to
  the reader only when that fails, so standard JSON stays fast. Keys are strings as if quoted
  (`{0:..}` reads like `{"0":..}`), `ObjectKey`s, and entries with a `null` key are dropped.

An object used as a key becomes an `ObjectKey` (hashable: its members sorted by name, nested
objects as `ObjectKey`, arrays as tuples). `dumps_fastjson` writes `ObjectKey` map keys back as
JSON objects (what Java needs for TopicStatsTable / ConsumeStats); `dumps` writes compact standard
JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn, TypeAlias

from shoal.formats.errors import JsonSyntaxError
from shoal.formats.limits import (
    DECIMAL_DIGITS_MAX_COUNT,
    JSON_INTEGER_DIGITS_MAX_COUNT,
    JSON_NESTING_MAX_DEPTH,
)

FrozenJson: TypeAlias = "bool | int | float | str | tuple[FrozenJson, ...] | ObjectKey | None"
JsonKey: TypeAlias = "str | ObjectKey"
JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[JsonKey, JsonValue] | None"


def _member_order(member: tuple[Hashable, Hashable]) -> tuple[int, str]:
    """Sort string names by themselves and anything else after them by its repr (a total order)."""
    name = member[0]
    return (0, name) if isinstance(name, str) else (1, repr(name))


@dataclass(frozen=True, slots=True)
class ObjectKey:
    """A JSON object used as a map key (e.g. a MessageQueue in fastjson's `{{..}:..}`), made hashable.

    `items` holds the members sorted by name; nested objects are ObjectKeys and arrays tuples,
    so two keys with the same members in any order are equal.
    """

    items: tuple[tuple[Hashable, Hashable], ...]

    @classmethod
    def from_dict(cls, members: Mapping[Any, Any]) -> ObjectKey:
        """The hashable form of a parsed JSON object (nested lists/objects frozen too)."""
        frozen = [(name, _freeze(value)) for name, value in members.items()]
        return cls(tuple(sorted(frozen, key=_member_order)))

    def to_dict(self) -> dict[Any, Any]:
        """The plain JSON object again (nested ObjectKeys and tuples thawed)."""
        return {name: _thaw(value) for name, value in self.items}

    def get(self, name: Hashable, default: Any = None) -> Any:
        for member_name, value in self.items:
            if member_name == name:
                return value
        return default


def _freeze(value: Any) -> Hashable:
    if isinstance(value, dict):
        return ObjectKey.from_dict(value)
    if isinstance(value, list):
        return tuple(_freeze(item) for item in value)
    assert isinstance(value, Hashable)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_thaw(member) for member in value]
    if isinstance(value, ObjectKey):
        return value.to_dict()
    return value


# --- reading ---

_WHITESPACE = re.compile(r"[ \t\n\r\f\b]*")  # fastjson also skips form feed and backspace
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_STRING_CHUNK = {'"': re.compile(r'[^"\\]*'), "'": re.compile(r"[^'\\]*")}
_ESCAPES = dict(zip("\"'\\/bfnrt", "\"'\\/\b\f\n\r\t", strict=True))
_LITERALS: dict[str, bool | None] = {"true": True, "false": False, "null": None}
_SKIP = object()  # the key of an entry `loads` drops (`null:`)


class _Reader:
    """Recursive descent over one document; `pos` is the index of the next unread character.

    `string_keys` selects `loads`' key style (see the module docstring); `digits_max` bounds the
    decimal digits of an integer, `depth_max` the nesting of arrays and objects.
    """

    __slots__ = ("depth_max", "digits_max", "pos", "string_keys", "text")

    def __init__(self, text: str, *, depth_max: int, digits_max: int, string_keys: bool) -> None:
        self.text = text
        self.pos = 0
        self.depth_max = depth_max
        self.digits_max = digits_max
        self.string_keys = string_keys

    def position(self, at: int) -> tuple[int, int]:
        """The 1-based (line, column) of index `at`."""
        line = self.text.count("\n", 0, at) + 1
        column = at - (self.text.rfind("\n", 0, at) + 1) + 1
        return line, column

    def fail(self, expected: str, pos: int | None = None) -> NoReturn:
        at = self.pos if pos is None else pos
        line, column = self.position(at)
        found = repr(self.text[at]) if at < len(self.text) else "end of input"
        raise JsonSyntaxError(
            f"line {line}, column {column}: expected {expected}, found {found}",
            line=line,
            column=column,
            expected=expected,
        )

    def peek(self) -> str:
        """The next character after whitespace, or "" at the end of the input."""
        match = _WHITESPACE.match(self.text, self.pos)
        assert match is not None  # the pattern matches the empty string
        self.pos = match.end()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def document(self) -> Any:
        if self.text.startswith("\ufeff"):
            self.pos = 1
        value = self.value(0)
        if self.peek():
            self.fail("end of input")
        return value

    def value(self, depth: int) -> Any:
        char = self.peek()
        if char == "{":
            return self.object(depth + 1)
        if char == "[":
            return self.array(depth + 1)
        if char in _STRING_CHUNK:
            return self.string()
        if char == "-" or char.isdigit():
            return self.number()
        match = _IDENTIFIER.match(self.text, self.pos)
        if match is None or match.group() not in _LITERALS:
            self.fail("a value")
        self.pos = match.end()
        return _LITERALS[match.group()]

    def key(self, depth: int) -> Any:
        char = self.peek()
        if char in _STRING_CHUNK:
            return self.string()
        if char == "-" or char.isdigit():
            number = self.number()  # fastjson's Map<Integer,..>/Map<Long,..> keys: {0:5280}
            return str(number) if self.string_keys else number
        if char == "{":
            return ObjectKey.from_dict(self.object(depth + 1))  # Map<MessageQueue,..>
        if char == "[" and not self.string_keys:
            return _freeze(self.array(depth + 1))
        match = _IDENTIFIER.match(self.text, self.pos) if char != "[" else None
        if match is None:
            self.fail("an object key")
        self.pos = match.end()
        word = match.group()
        if self.string_keys:
            return _SKIP if word == "null" else word
        return _LITERALS.get(word, word)  # {null:1}; fastjson also reads unquoted names

    def enter(self, depth: int) -> None:
        if depth > self.depth_max:
            self.fail(f"at most {self.depth_max} levels of nesting")
        self.pos += 1  # the opening bracket

    def object(self, depth: int) -> dict[Any, Any]:
        self.enter(depth)
        members: dict[Any, Any] = {}
        if self.peek() == "}":
            self.pos += 1
            return members
        while True:
            name = self.key(depth)
            if self.peek() != ":":
                self.fail("':' after an object key")
            self.pos += 1
            value = self.value(depth)
            if name is not _SKIP:
                members[name] = value
            char = self.peek()
            self.pos += 1
            if char == "," and self.peek() == "}":  # fastjson accepts a trailing comma
                self.pos += 1
                return members
            if char == "}":
                return members
            if char != ",":
                self.fail("',' or '}' in an object", self.pos - 1)

    def array(self, depth: int) -> list[Any]:
        self.enter(depth)
        items: list[Any] = []
        if self.peek() == "]":
            self.pos += 1
            return items
        while True:
            items.append(self.value(depth))
            char = self.peek()
            self.pos += 1
            if char == "," and self.peek() == "]":  # fastjson accepts a trailing comma
                self.pos += 1
                return items
            if char == "]":
                return items
            if char != ",":
                self.fail("',' or ']' in an array", self.pos - 1)

    def number(self) -> int | float:
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            self.fail("a number")
        self.pos = match.end()
        if match.group(1) is None and match.group(2) is None:
            text = match.group()
            if len(text.lstrip("-")) > self.digits_max:
                self.fail(f"a number of at most {self.digits_max} digits", match.start())
            return int(text)
        return float(match.group())

    def string(self) -> str:
        start = self.pos
        quote = self.text[start]
        chunk = _STRING_CHUNK[quote]
        self.pos += 1
        parts: list[str] = []
        while True:
            match = chunk.match(self.text, self.pos)
            assert match is not None  # the pattern matches the empty string
            parts.append(match.group())
            self.pos = match.end()
            if self.pos >= len(self.text):
                line, column = self.position(start)
                self.fail(f"the closing {quote} of the string opened at line {line}, column {column}")
            char = self.text[self.pos]
            self.pos += 1
            if char == quote:
                return "".join(parts)
            parts.append(self.escape())

    def escape(self) -> str:
        """Decode the escape after a backslash; a surrogate pair becomes one character."""
        char = self.text[self.pos] if self.pos < len(self.text) else ""
        if char in _ESCAPES:
            self.pos += 1
            return _ESCAPES[char]
        if char != "u":
            self.fail("an escape (one of \"'\\/bfnrtu)")
        code = self.hex4(self.pos + 1)
        self.pos += 5
        if 0xD800 <= code < 0xDC00 and self.text.startswith("\\u", self.pos):
            low = self.hex4(self.pos + 2)
            if 0xDC00 <= low < 0xE000:
                self.pos += 6
                return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00))
        return chr(code)

    def hex4(self, at: int) -> int:
        match = _HEX4.match(self.text, at)
        if match is None:
            self.fail("4 hex digits after \\u", at)
        return int(match.group(), 16)


def parse_fastjson(text: str, *, nesting_max_depth: int = JSON_NESTING_MAX_DEPTH) -> Any:
    """Parse a document as fastjson 1.2.69 writes it (a superset of standard JSON), keys as written.

    Objects become dicts (keys: str, int, float, bool, None, ObjectKey or tuple), arrays lists.
    Raises JsonSyntaxError with the 1-based line/column of the first error, or when the text
    nests deeper than `nesting_max_depth` or holds an integer of more digits than CPython reads.
    """
    reader = _Reader(text, depth_max=nesting_max_depth, digits_max=JSON_INTEGER_DIGITS_MAX_COUNT, string_keys=False)
    return reader.document()


def loads(data: bytes | bytearray | memoryview | str) -> JsonValue:
    """Parse standard or fastjson-flavoured JSON, keys as strings or ObjectKeys (see the module
    docstring); JsonSyntaxError says where it fails (also for text that is not UTF-8)."""
    if isinstance(data, str):
        text = data
    else:
        try:
            text = str(data, "utf-8")
        except UnicodeDecodeError as error:
            raise JsonSyntaxError(f"JSON is not valid UTF-8: {error}") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        value: JsonValue = json.loads(text)
    except (ValueError, RecursionError):
        reader = _Reader(text, depth_max=JSON_NESTING_MAX_DEPTH, digits_max=DECIMAL_DIGITS_MAX_COUNT, string_keys=True)
        parsed: JsonValue = reader.document()
        return parsed
    return value


# --- writing ---


def dumps(value: object) -> str:
    """Compact standard JSON (non-ASCII kept as UTF-8, as fastjson writes it)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def dumps_fastjson(value: JsonValue | ObjectKey) -> str:
    """Compact JSON whose `ObjectKey` map keys are written as objects, fastjson style."""
    out: list[str] = []
    _write(value, out, 0)
    return "".join(out)


def _write(value: Any, out: list[str], depth: int) -> None:
    if depth > JSON_NESTING_MAX_DEPTH:
        raise ValueError(f"JSON nesting deeper than {JSON_NESTING_MAX_DEPTH}")
    if isinstance(value, dict):
        out.append("{")
        for index, (key, member) in enumerate(value.items()):
            if index:
                out.append(",")
            if isinstance(key, ObjectKey):
                _write(key.to_dict(), out, depth + 1)
            else:
                out.append(json.dumps(str(key), ensure_ascii=False))
            out.append(":")
            _write(member, out, depth + 1)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out, depth + 1)
        out.append("]")
    elif isinstance(value, ObjectKey):
        _write(value.to_dict(), out, depth + 1)
    else:
        out.append(json.dumps(value, ensure_ascii=False))


def standard_json_value(value: Any) -> Any:
    """A parsed value made writable as standard JSON: keys that are not strings become their
    compact JSON text (0 -> "0", None -> "null", an ObjectKey -> its sorted object)."""
    if isinstance(value, ObjectKey):
        value = value.to_dict()
    if isinstance(value, dict):
        return {_standard_key(key): standard_json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [standard_json_value(item) for item in value]
    return value


def _standard_key(key: Hashable) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, ObjectKey | tuple):
        return json.dumps(standard_json_value(key), sort_keys=True, separators=(",", ":"))
    return json.dumps(key)  # 0 -> "0", None -> "null", True -> "true"


# --- Java's Long.parseLong ---

_DECIMAL = re.compile(r"[+-]?[0-9]+")


def parse_decimal(text: str) -> int | None:
    """`text` as Java's `Long.parseLong` reads it (ASCII digits, optional sign), else None.

    Longer texts than any Java long are refused before `int()` sees them.
    """
    if len(text) > DECIMAL_DIGITS_MAX_COUNT or _DECIMAL.fullmatch(text) is None:
        return None
    return int(text)
