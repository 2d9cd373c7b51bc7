"""Java `.properties` text as `java.util.Properties.load` reads it: broker.conf, namesrv.conf,
tls.properties, SessionCredentials key files and UPDATE_*_CONFIG bodies.

    parse_java_properties(text)                            # {key: value}; a later key wins
    parse_java_properties(text, separator_required=True)   # a line without `=` or `:` is an error

Properties.load's rules, all of them honoured here:

- natural lines end at `\\n`, `\\r` or `\\r\\n`; their leading whitespace (space, tab, form feed)
  is skipped and blank lines are ignored;
- a line whose first other character is `#` or `!` is a comment (a trailing backslash does not
  continue it);
- a line ending in an odd number of backslashes continues on the next one, whose leading
  whitespace is skipped; the backslash is dropped (also at the end of the text);
- the key ends at its first unescaped `=`, `:` or whitespace; whitespace, at most one `=` or `:`
  and whitespace again separate it from the value; a key alone maps to "";
- in keys and values `\\t \\n \\r \\f` are those characters, `\\uXXXX` is one UTF-16 code unit
  (a surrogate pair joins into one character; fewer than four hex digits is an error), and a
  backslash before any other character stands for that character (`\\=`, `\\:`, `\\ `, `\\\\`).

Trailing whitespace of a value is kept, as Java keeps it. Turning bytes into text is the caller's
business: `Properties.load(InputStream)` reads ISO-8859-1.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from shoal.formats.errors import JavaPropertiesError

__all__ = ["parse_java_properties"]

_WHITESPACE = " \t\f"
"""What Properties.load skips around keys and separators (not \\v, not Unicode spaces)."""

_NATURAL_LINE_END = re.compile(r"\r\n|\r|\n")
_KEY_AND_SEPARATOR = re.compile(r"((?:[^\\=: \t\f]|\\.)*)[ \t\f]*([=:]?)[ \t\f]*", re.DOTALL)
"""group 1: the key as written; group 2: "=" or ":" when the line has one; the value follows."""
_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|(.)|$)", re.DOTALL)
_CONTROL_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_SURROGATES = re.compile("[\ud800-\udfff]")


def parse_java_properties(text: str, *, separator_required: bool = False) -> dict[str, str]:
    """The keys and values of `text`, as Properties.load would put them (a repeated key: the last
    one wins). JavaPropertiesError (a ValueError naming the line) for a malformed `\\uXXXX`, and
    with `separator_required` for a line whose key and value are not separated by `=` or `:`
    (a key alone, or a key and value separated by whitespace only, both of which Java accepts)."""
    result: dict[str, str] = {}
    for line_number, logical, written in _logical_lines(text):
        match = _KEY_AND_SEPARATOR.match(logical)
        assert match is not None  # every group may be empty
        if separator_required and not match.group(2):
            raise JavaPropertiesError(line_number=line_number, line=written, reason="is not key=value")
        key = _unescape(match.group(1), line_number, written)
        result[key] = _unescape(logical[match.end() :], line_number, written)
    return result


def _logical_lines(text: str) -> Iterator[tuple[int, str, str]]:
    """(1-based number of its first natural line, the logical line with continuations joined and
    leading whitespace skipped, its natural lines as written joined by \\n) for each key line."""
    lines = _NATURAL_LINE_END.split(text)
    index = 0
    while index < len(lines):
        first = index
        line = lines[index].lstrip(_WHITESPACE)
        index += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while _continues(line):
            parts.append(line[:-1])
            line = lines[index].lstrip(_WHITESPACE) if index < len(lines) else ""
            index += 1
        parts.append(line)
        yield first + 1, "".join(parts), "\n".join(lines[first:index])


def _continues(line: str) -> bool:
    """An odd number of trailing backslashes: the last one escapes the line end."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _unescape(text: str, line_number: int, written: str) -> str:
    if "\\" not in text:
        return text

    def replace(match: re.Match[str]) -> str:
        code_unit, escaped = match.group(1), match.group(2)
        if code_unit is not None:
            return chr(int(code_unit, 16))
        if escaped == "u":
            raise JavaPropertiesError(line_number=line_number, line=written, reason="has a malformed \\uxxxx escape")
        return _CONTROL_ESCAPES.get(escaped, escaped) if escaped is not None else ""

    result = _ESCAPE.sub(replace, text)
    if _SURROGATES.search(result):  # Java strings are UTF-16: \ud83d\ude00 is one character
        result = result.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return result
