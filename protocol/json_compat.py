"""Tolerant JSON bodies: the shoal.formats parser behind the protocol's errors, and field readers.

The parser itself (fastjson quirks in, standard or fastjson-style JSON out) is
`shoal.formats.json_compat`; `loads` here is its `loads` with syntax errors as BodyFormatError.
Clients are loose in the other direction too: the C++ client sends JSON numbers where Java sends
strings (extFields, spec §8.3 and real-clients.md §1.3) and enum ordinals where Java sends names.

* `ext_value_to_str` / `normalize_ext_fields` turn any JSON scalar into Java's `toString()` form.
* `ObjectReader` reads body fields tolerantly (numbers from decimal strings, booleans from
  "true"/"1", enums from ordinals) and names the path of whatever does not fit.
"""

from __future__ import annotations

import enum
from typing import TypeVar

from shoal.formats import json_compat
from shoal.formats.errors import JsonSyntaxError
from shoal.formats.json_compat import JsonKey, JsonValue, ObjectKey, parse_decimal
from shoal.formats.limits import LONG_MAX, LONG_MIN
from shoal.protocol.errors import BodyFormatError, MalformedFrameError
from shoal.protocol.limits import EXT_FIELDS_MAX_COUNT

_E = TypeVar("_E", bound=enum.Enum)


def loads(data: bytes | bytearray | memoryview | str) -> JsonValue:
    """`shoal.formats.json_compat.loads`; BodyFormatError says where the body is not JSON."""
    try:
        return json_compat.loads(data)
    except JsonSyntaxError as error:
        raise BodyFormatError(f"invalid JSON: {error}") from None


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
