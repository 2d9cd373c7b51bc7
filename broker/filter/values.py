"""Java's values as RocketMQ's SQL92 filter sees them, and its conversions between them.

A property is a Java String; a constant is an Integer (`int`), a Long (`Long`), a Double (`float`),
a String (`str`) or a Boolean (`bool`); null is None. `compare_values` is ComparisonExpression's
`__compare` with string conversion on (as SelectorParser always sets it): when the two classes
differ, the String side is parsed as the other side's class (Integer.valueOf, Long.valueOf,
Double.valueOf, Boolean.valueOf), an Integer widens to Long or Double, a Long to Double; a Boolean
and a number are simply unequal (-1). None means Java throws there: a String that is no number of
the wanted class (NumberFormatException), or a Boolean on the left of a String (a ClassCastException
in RocketMQ's code, which converts the wrong operand).
"""

from __future__ import annotations

import math
import re
import struct

__all__ = [
    "Long",
    "Value",
    "compare_numbers",
    "compare_values",
    "java_parse_boolean",
    "java_parse_double",
    "java_parse_integer",
]

INTEGER_MIN, INTEGER_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
CANONICAL_NAN_BITS = 0x7FF8000000000000
DOUBLE_BITS = struct.Struct(">q")
DOUBLE = struct.Struct(">d")
assert DOUBLE_BITS.size == DOUBLE.size == 8

# FloatingDecimal.readJavaFormatString, after String.trim(): decimal, hexadecimal with a binary exponent.
JAVA_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?")
JAVA_HEX = re.compile(r"[+-]?0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+[fFdD]?")
JAVA_SPECIAL = re.compile(r"([+-]?)(NaN|Infinity)")


class Long(int):
    """A java.lang.Long constant (an integer literal beyond 32 bits); a plain int is an Integer."""

    __slots__ = ()


Value = None | bool | int | float | str


def java_parse_integer(text: str, minimum: int, maximum: int) -> int | None:
    """Integer.valueOf / Long.valueOf: an optional sign and decimal digits (any script), in range."""
    digits = text[1:] if text.startswith(("+", "-")) else text
    if not digits or not all(char.isdecimal() for char in digits):
        return None
    value = int(digits) * (-1 if text.startswith("-") else 1)
    return value if minimum <= value <= maximum else None


def java_parse_double(text: str) -> float | None:
    """Double.valueOf: trims characters up to U+0020, then Java's decimal, hex, NaN or Infinity forms."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    trimmed = text[start:end]
    special = JAVA_SPECIAL.fullmatch(trimmed)
    if special is not None:
        if special.group(2) == "NaN":
            return math.nan
        return -math.inf if special.group(1) == "-" else math.inf
    if JAVA_HEX.fullmatch(trimmed) is not None:
        number = trimmed.rstrip("fFdD")
        try:
            return float.fromhex(number)
        except OverflowError:
            return -math.inf if number.startswith("-") else math.inf
    if JAVA_DECIMAL.fullmatch(trimmed) is not None:
        return float(trimmed.rstrip("fFdD"))
    return None


def java_parse_boolean(text: str) -> bool:
    """Boolean.valueOf: "true" in any case is TRUE, anything else FALSE."""
    return len(text) == 4 and text.isascii() and text.lower() == "true"


def _double_bits(number: float) -> int:
    if math.isnan(number):
        return CANONICAL_NAN_BITS
    bits: int = DOUBLE_BITS.unpack(DOUBLE.pack(number))[0]
    return bits


def compare_numbers(left: float, right: float) -> int:
    """Double.compare: -0.0 < 0.0 and NaN above everything, equal to itself."""
    if left < right:
        return -1
    if left > right:
        return 1
    left_bits, right_bits = _double_bits(left), _double_bits(right)
    return (left_bits > right_bits) - (left_bits < right_bits)


def _compare_same(left: Value, right: Value) -> int:
    if type(left) is float:
        assert type(right) is float
        return compare_numbers(left, right)
    if type(left) is str:
        assert type(right) is str
        if left == right:
            return 0
        # String.compareTo orders UTF-16 code units.
        return -1 if left.encode("utf-16-be", "surrogatepass") < right.encode("utf-16-be", "surrogatepass") else 1
    assert isinstance(left, int) and isinstance(right, int), (left, right)
    return (left > right) - (left < right)


def _from_string(text: str, target: type) -> Value:
    """The String parsed as the class of the other operand (None: NumberFormatException)."""
    if target is bool:
        return java_parse_boolean(text)
    if target is int:
        return java_parse_integer(text, INTEGER_MIN, INTEGER_MAX)
    if target is Long:
        value = java_parse_integer(text, LONG_MIN, LONG_MAX)
        return None if value is None else Long(value)
    assert target is float
    return java_parse_double(text)


def compare_values(left: Value, right: Value) -> int | None:
    """ComparisonExpression.__compare(left, right, true) for two non-null values; None where Java throws."""
    assert left is not None and right is not None
    left_type, right_type = type(left), type(right)
    if left_type is not right_type:
        if left_type is bool:
            return None if right_type is str else -1
        if left_type is str:
            assert isinstance(left, str)
            left = _from_string(left, right_type)
            if left is None:
                return None
        elif right_type is str:
            assert isinstance(right, str)
            right = _from_string(right, left_type)
            if right is None:
                return None
        elif right_type is bool:
            return -1
        elif float in (left_type, right_type):
            assert isinstance(left, int | float) and isinstance(right, int | float)
            left, right = float(left), float(right)
        # else Integer and Long: both are Python ints
    return _compare_same(left, right)
