"""Tolerant JSON for RocketMQ peers: fastjson quirks in, standard (or fastjson-style) JSON out.

fastjson is not RFC 8259 JSON (spec §7.1, gotcha 9): map keys of a number type are written bare
(`{0:"127.0.0.1:10911"}`), map keys of an object type are written as JSON objects
(`{{"brokerName":"b","queueId":0,"topic":"t"}:{…}}`) and a null key as `null:`. Clients are loose
in the other direction: the C++ client sends JSON numbers where Java sends strings (extFields,
spec §8.3 and real-clients.md §1.3) and enum ordinals where Java sends names.

* `loads` parses with the C `json` module and falls back to a small tolerant parser only when
  that fails, so standard JSON stays fast. Bare numeric keys become their decimal string (as if
  quoted), object keys become hashable `ObjectKey`s, entries with a `null` key are dropped.
* `dumps_fastjson` writes compact JSON whose dicts may be keyed by `ObjectKey` (written as a JSON
  object, which Java needs for TopicStatsTable / ConsumeStats) or by int (written quoted, which
  every Java reader accepts).
* `ext_value_to_str` / `normalize_ext_fields` turn any JSON scalar into Java's `toString()` form.
* `ObjectReader` reads body fields tolerantly (numbers from decimal strings, booleans from
  "true"/"1", enums from ordinals) and names the path of whatever does not fit.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass
from typing import NoReturn, TypeAlias, TypeVar

from shoal.protocol.errors import BodyFormatError, MalformedFrameError
from shoal.protocol.limits import (
    DECIMAL_DIGITS_MAX_COUNT,
    EXT_FIELDS_MAX_COUNT,
    JSON_NESTING_MAX_DEPTH,
    LONG_MAX,
    LONG_MIN,
)

FrozenJson: TypeAlias = "bool | int | float | str | tuple[FrozenJson, ...] | ObjectKey | None"
JsonKey: TypeAlias = "str | ObjectKey"
JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[JsonKey, JsonValue] | None"

_E = TypeVar("_E", bound=enum.Enum)


@dataclass(frozen=True, slots=True)
class ObjectKey:
    """A JSON object used as a map key, e.g. a MessageQueue in fastjson's `{{…}:…}`.

    `items` are sorted by name, so two keys with the same fields in another order are equal.
    """

    items: tuple[tuple[str, FrozenJson], ...]

    @classmethod
    def from_dict(cls, value: dict[JsonKey, JsonValue]) -> ObjectKey:
        """The hashable form of a parsed JSON object (nested lists/objects frozen too)."""
        items: list[tuple[str, FrozenJson]] = []
        for name, member in value.items():
            if not isinstance(name, str):
                raise BodyFormatError("an object used as a map key has an object key itself")
            items.append((name, _freeze(member)))
        items.sort(key=lambda item: item[0])
        return cls(tuple(items))

    def to_dict(self) -> dict[JsonKey, JsonValue]:
        """The plain JSON object again."""
        return {name: _thaw(member) for name, member in self.items}


def _freeze(value: JsonValue) -> FrozenJson:
    if isinstance(value, list):
        return tuple(_freeze(member) for member in value)
    if isinstance(value, dict):
        return ObjectKey.from_dict(value)
    return value


def _thaw(value: FrozenJson) -> JsonValue:
    if isinstance(value, tuple):
        return [_thaw(member) for member in value]
    if isinstance(value, ObjectKey):
        return value.to_dict()
    return value


# --- reading ---

_TOKEN = re.compile(
    r"""[ \t\n\r]*(?:
        (?P<string>"[^"\\]*(?:\\.[^"\\]*)*")
      | (?P<number>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
      | (?P<word>[A-Za-z_$][A-Za-z0-9_$]*)
      | (?P<punct>[{}\[\]:,])
    )""",
    re.VERBOSE | re.DOTALL,
)
_TRAILING_SPACE = re.compile(r"[ \t\n\r]*")
_WORDS: dict[str, JsonValue] = {"true": True, "false": False, "null": None}
_SKIP = object()  # the key of an entry to drop (`null:`)


def loads(data: bytes | bytearray | memoryview | str) -> JsonValue:
    """Parse standard or fastjson-flavoured JSON; BodyFormatError says where it fails."""
    if isinstance(data, str):
        text = data
    else:
        try:
            text = str(data, "utf-8")
        except UnicodeDecodeError as error:
            raise BodyFormatError(f"JSON is not valid UTF-8: {error}") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        value: JsonValue = json.loads(text)
    except (ValueError, RecursionError):
        return _TolerantParser(text).parse()
    return value


class _TolerantParser:
    """Recursive descent over regex tokens; nesting is bounded by JSON_NESTING_MAX_DEPTH."""

    __slots__ = ("_pos", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0

    def parse(self) -> JsonValue:
        kind, token = self._token()
        value = self._value(kind, token, 0)
        end = _TRAILING_SPACE.match(self._text, self._pos)
        if end is not None and end.end() != len(self._text):
            self._fail("unexpected data after the JSON value", end.end())
        return value

    def _fail(self, what: str, pos: int | None = None) -> NoReturn:
        at = self._pos if pos is None else pos
        snippet = self._text[at : at + 20]
        raise BodyFormatError(f"invalid JSON at character {at}: {what} (near {snippet!r})")

    def _token(self) -> tuple[str, str]:
        match = _TOKEN.match(self._text, self._pos)
        if match is None or match.lastgroup is None:
            end = _TRAILING_SPACE.match(self._text, self._pos)
            at = end.end() if end is not None else self._pos
            self._fail("end of input" if at >= len(self._text) else "unexpected character", at)
        self._pos = match.end()
        return match.lastgroup, match.group(match.lastgroup)

    def _value(self, kind: str, token: str, depth: int) -> JsonValue:
        if kind == "string":
            return self._string(token)
        if kind == "number":
            return self._number(token)
        if kind == "word":
            if token in _WORDS:
                return _WORDS[token]
            self._fail(f"bare word {token!r} is not a value")
        if token == "{":
            return self._object(depth + 1)
        if token == "[":
            return self._array(depth + 1)
        self._fail(f"expected a value, found {token!r}")

    def _string(self, token: str) -> str:
        if "\\" not in token:
            return token[1:-1]
        try:
            decoded: str = json.loads(token, strict=False)
        except ValueError as error:
            self._fail(f"bad string escape: {error}")
        return decoded

    def _number(self, token: str) -> int | float:
        if "." in token or "e" in token or "E" in token:
            return float(token)
        if len(token) > DECIMAL_DIGITS_MAX_COUNT:
            self._fail(f"integer {token[:24]}... has too many digits")
        return int(token)

    def _check_depth(self, depth: int) -> None:
        if depth > JSON_NESTING_MAX_DEPTH:
            self._fail(f"nesting deeper than {JSON_NESTING_MAX_DEPTH}")

    def _array(self, depth: int) -> list[JsonValue]:
        self._check_depth(depth)
        result: list[JsonValue] = []
        while True:
            kind, token = self._token()
            if token == "]":
                return result
            result.append(self._value(kind, token, depth))
            kind, token = self._token()
            if token == "]":
                return result
            if token != ",":
                self._fail(f"expected ',' or ']' in an array, found {token!r}")

    def _object(self, depth: int) -> dict[JsonKey, JsonValue]:
        self._check_depth(depth)
        result: dict[JsonKey, JsonValue] = {}
        while True:
            kind, token = self._token()
            if token == "}":
                return result  # also accepts a trailing comma, as fastjson does
            key = self._key(kind, token, depth)
            kind, token = self._token()
            if token != ":":
                self._fail(f"expected ':' after an object key, found {token!r}")
            kind, token = self._token()
            value = self._value(kind, token, depth)
            if key is not _SKIP:
                assert isinstance(key, str | ObjectKey)
                result[key] = value
            kind, token = self._token()
            if token == "}":
                return result
            if token != ",":
                self._fail(f"expected ',' or '}}' in an object, found {token!r}")

    def _key(self, kind: str, token: str, depth: int) -> object:
        if kind == "string":
            return self._string(token)
        if kind == "number":
            return str(self._number(token))  # {0:…} reads like {"0":…}
        if kind == "word":
            return _SKIP if token == "null" else token  # unquoted field names are fine too
        if token == "{":
            return ObjectKey.from_dict(self._object(depth + 1))
        self._fail(f"expected an object key, found {token!r}")


# --- writing ---


def dumps(value: object) -> str:
    """Compact standard JSON (non-ASCII kept as UTF-8, as fastjson writes it)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def dumps_fastjson(value: JsonValue | ObjectKey) -> str:
    """Compact JSON whose `ObjectKey` map keys are written as objects, fastjson style."""
    out: list[str] = []
    _write(value, out, 0)
    return "".join(out)


def _write(value: JsonValue | ObjectKey | tuple[FrozenJson, ...], out: list[str], depth: int) -> None:
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


# --- extFields (spec §8.3, gotcha 10) ---


def ext_value_to_str(value: object) -> str | None:
    """Java's `toString()` of a JSON scalar: 'true'/'false', decimal numbers; None for null.

    Raises TypeError for arrays and objects, which no header field can hold.
    """
    if type(value) is str:
        return value
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    raise TypeError(f"a {type(value).__name__} cannot be a header value")


def normalize_ext_fields(value: object) -> dict[str, str]:
    """The extFields of a JSON header as strings; null entries dropped, arrays/objects refused."""
    if type(value) is dict and len(value) <= EXT_FIELDS_MAX_COUNT:
        for key, member in value.items():
            if type(member) is not str or type(key) is not str:
                break
        else:
            return value  # the common case: already all strings
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MalformedFrameError(f"bad JSON header: extFields is a {type(value).__name__}, not an object")
    if len(value) > EXT_FIELDS_MAX_COUNT:
        raise MalformedFrameError(
            f"bad JSON header: {len(value)} extFields, more than the limit of {EXT_FIELDS_MAX_COUNT}"
        )
    result: dict[str, str] = {}
    for key, member in value.items():
        if not isinstance(key, str):
            raise MalformedFrameError("bad JSON header: an extFields key is an object")
        if type(member) is str:
            result[key] = member
            continue
        try:
            text = ext_value_to_str(member)
        except TypeError as error:
            raise MalformedFrameError(f"bad JSON header: extFields[{key!r}]: {error}") from None
        if text is not None:
            result[key] = text
    return result


# --- tolerant scalars for bodies ---


_DECIMAL = re.compile(r"[+-]?[0-9]+")


def parse_decimal(text: str) -> int | None:
    """`text` as Java's `Long.parseLong` reads it (ASCII digits, optional sign), else None.

    Longer texts than any Java long are refused before `int()` sees them.
    """
    if len(text) > DECIMAL_DIGITS_MAX_COUNT or _DECIMAL.fullmatch(text) is None:
        return None
    return int(text)


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def coerce_int(value: object, path: str) -> int:
    """A JSON number or decimal string as a Java int/long; BodyFormatError otherwise."""
    if type(value) is int:
        if LONG_MIN <= value <= LONG_MAX:
            return value
    elif isinstance(value, str):
        number = parse_decimal(value.strip())
        if number is not None and LONG_MIN <= number <= LONG_MAX:
            return number
    elif isinstance(value, float) and value.is_integer() and LONG_MIN <= value <= LONG_MAX:
        return int(value)
    raise BodyFormatError(f"{path}: expected an integer, got {_type_name(value)} {value!r:.40}")


def coerce_float(value: object, path: str) -> float:
    """A JSON number or numeric string as a Java double."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise BodyFormatError(f"{path}: expected a number, got {_type_name(value)} {value!r:.40}")


def coerce_bool(value: object, path: str) -> bool:
    """A JSON boolean, 0/1, or 'true'/'false'/'1'/'0' string (case-insensitive)."""
    if isinstance(value, bool):
        return value
    if type(value) is int and value in (0, 1):
        return value == 1
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    raise BodyFormatError(f"{path}: expected a boolean, got {_type_name(value)} {value!r:.40}")


def coerce_str(value: object, path: str) -> str:
    """A JSON string; numbers and booleans are accepted in their Java text form."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        text = ext_value_to_str(value)
        assert text is not None
        return text
    raise BodyFormatError(f"{path}: expected a string, got {_type_name(value)}")


def coerce_enum(value: object, enum_type: type[_E], path: str) -> _E:
    """An enum from its Java name (as Java sends it) or its ordinal (as the C++ client does)."""
    members = list(enum_type)
    if isinstance(value, str):
        for member in members:
            if member.name == value:
                return member
        if value.isdigit():
            value = int(value)
    if type(value) is int and 0 <= value < len(members):
        return members[value]
    names = ", ".join(member.name for member in members)
    raise BodyFormatError(f"{path}: {value!r:.40} is not one of {names} or their ordinals")


class ObjectReader:
    """Typed access to one JSON object of a body; absent or null fields take the default."""

    __slots__ = ("_object", "path")

    def __init__(self, value: object, path: str) -> None:
        if not isinstance(value, dict):
            raise BodyFormatError(f"{path}: expected an object, got {_type_name(value)}")
        self._object: dict[JsonKey, JsonValue] = value
        self.path = path

    def get(self, name: str) -> JsonValue:
        """The raw value of `name` (None when absent)."""
        return self._object.get(name)

    def at(self, name: str) -> str:
        """The path of field `name`, for error messages."""
        return f"{self.path}.{name}"

    def text(self, name: str, default: str = "") -> str:
        value = self._object.get(name)
        return default if value is None else coerce_str(value, self.at(name))

    def optional_text(self, name: str) -> str | None:
        value = self._object.get(name)
        return None if value is None else coerce_str(value, self.at(name))

    def integer(self, name: str, default: int = 0) -> int:
        value = self._object.get(name)
        return default if value is None else coerce_int(value, self.at(name))

    def optional_integer(self, name: str) -> int | None:
        value = self._object.get(name)
        return None if value is None else coerce_int(value, self.at(name))

    def number(self, name: str, default: float = 0.0) -> float:
        value = self._object.get(name)
        return default if value is None else coerce_float(value, self.at(name))

    def boolean(self, name: str, default: bool = False) -> bool:
        value = self._object.get(name)
        return default if value is None else coerce_bool(value, self.at(name))

    def enumeration(self, name: str, enum_type: type[_E], default: _E) -> _E:
        value = self._object.get(name)
        return default if value is None else coerce_enum(value, enum_type, self.at(name))

    def array(self, name: str) -> list[JsonValue]:
        """A JSON array (a Java List or Set); absent or null is empty."""
        value = self._object.get(name)
        if value is None:
            return []
        if not isinstance(value, list):
            raise BodyFormatError(f"{self.at(name)}: expected an array, got {_type_name(value)}")
        return value

    def mapping(self, name: str) -> dict[JsonKey, JsonValue]:
        """A JSON object used as a Java Map; absent or null is empty."""
        value = self._object.get(name)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise BodyFormatError(f"{self.at(name)}: expected an object, got {_type_name(value)}")
        return value

    def texts(self, name: str) -> tuple[str, ...]:
        """An array of strings."""
        path = self.at(name)
        return tuple(coerce_str(member, f"{path}[{index}]") for index, member in enumerate(self.array(name)))

    def integers(self, name: str) -> tuple[int, ...]:
        """An array of integers."""
        path = self.at(name)
        return tuple(coerce_int(member, f"{path}[{index}]") for index, member in enumerate(self.array(name)))


def map_key_to_int(key: JsonKey, path: str) -> int:
    """A numeric map key (`{0:…}` or `{"0":…}`) as an int."""
    if isinstance(key, ObjectKey):
        raise BodyFormatError(f"{path}: expected a numeric key, got an object")
    return coerce_int(key, f"{path} key")


def map_key_to_str(key: JsonKey, path: str) -> str:
    """A string map key; object keys are refused."""
    if isinstance(key, ObjectKey):
        raise BodyFormatError(f"{path}: expected a string key, got an object")
    return key
