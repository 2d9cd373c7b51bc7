"""Tests of shoal.formats.java_properties: `.properties` text read as java.util.Properties.load does."""

from __future__ import annotations

import pytest

from shoal.formats.errors import FormatError, JavaPropertiesError
from shoal.formats.java_properties import parse_java_properties


def test_hash_and_bang_lines_are_comments() -> None:
    """Goal: `#` and `!` open comments, also after leading whitespace. Method: parse commented text."""
    text = "# one\n! two\n   # three\n\t! four\na=1\n"
    assert parse_java_properties(text) == {"a": "1"}


def test_a_comment_ending_in_a_backslash_does_not_continue() -> None:
    """Goal: Java never continues a comment line. Method: a comment with a trailing backslash."""
    assert parse_java_properties("# note \\\na=1") == {"a": "1"}


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("key=value", {"key": "value"}),
        ("key:value", {"key": "value"}),
        ("key value", {"key": "value"}),
        ("key\tvalue", {"key": "value"}),
        ("key\fvalue", {"key": "value"}),
        ("key = value", {"key": "value"}),
        ("key   :   value", {"key": "value"}),
        ("key==value", {"key": "=value"}),
        ("key := value", {"key": "= value"}),
        ("key value = more", {"key": "value = more"}),
        ("a:b=c", {"a": "b=c"}),
        ("url=host:9876", {"url": "host:9876"}),
        ("key", {"key": ""}),
        ("key=", {"key": ""}),
        ("=value", {"": "value"}),
    ],
)
def test_key_and_value_are_separated_as_java_separates_them(line: str, expected: dict[str, str]) -> None:
    """Goal: the first unescaped `=`, `:` or whitespace ends the key; whitespace, one `=`/`:` and
    whitespace separate it from the value. Method: one line per separator shape."""
    assert parse_java_properties(line) == expected


def test_leading_whitespace_is_skipped_and_trailing_whitespace_kept() -> None:
    """Goal: Java skips whitespace before the key and the value, never after the value. Method: padded lines."""
    assert parse_java_properties("   key =   value  \n\t\fother=x") == {"key": "value  ", "other": "x"}


def test_blank_lines_and_all_line_ends_are_accepted() -> None:
    """Goal: `\\n`, `\\r` and `\\r\\n` end lines; blank lines are skipped. Method: mixed line ends."""
    assert parse_java_properties("a=1\r\nb=2\rc=3\n\n  \n\td=4") == {"a": "1", "b": "2", "c": "3", "d": "4"}


def test_a_trailing_backslash_continues_the_line_without_its_leading_whitespace() -> None:
    """Goal: Java's line continuation. Method: a value over three lines, the later ones indented."""
    text = "fruits = apple, \\\n         banana, \\\r\n\t pear\nnext=1"
    assert parse_java_properties(text) == {"fruits": "apple, banana, pear", "next": "1"}


def test_a_continued_key_and_a_continuation_that_looks_like_a_comment() -> None:
    """Goal: a continuation line is never a comment, and keys continue too. Method: parse both."""
    assert parse_java_properties("ke\\\n  y=\\\n  # not a comment") == {"key": "# not a comment"}


def test_an_even_number_of_trailing_backslashes_does_not_continue() -> None:
    """Goal: `\\\\` at the end is an escaped backslash. Method: two and three trailing backslashes."""
    assert parse_java_properties("a=x\\\\\nb=y") == {"a": "x\\", "b": "y"}
    assert parse_java_properties("a=x\\\\\\\ny") == {"a": "x\\y"}


def test_a_blank_continuation_line_ends_the_value_and_a_final_backslash_is_dropped() -> None:
    """Goal: Java ends a logical line at a blank continuation and drops a backslash at the end of
    the text. Method: both shapes."""
    assert parse_java_properties("a=1\\\n\nb=2") == {"a": "1", "b": "2"}
    assert parse_java_properties("a=1\\") == {"a": "1"}
    assert parse_java_properties("a=1\\\n") == {"a": "1"}


@pytest.mark.parametrize(
    ("escaped", "value"),
    [
        ("\\t", "\t"),
        ("\\n", "\n"),
        ("\\r", "\r"),
        ("\\f", "\f"),
        ("\\\\", "\\"),
        ("\\=\\:\\ \\#\\!", "=: #!"),
        ("\\q", "q"),
        ("C:\\store", "C:store"),
        ("\\u0041\\u00e9\\u4E2D", "Aé中"),
        ("\\ud83d\\ude00", "\U0001f600"),
        ("\\ud83d", "\ud83d"),
    ],
)
def test_escapes_in_values_are_decoded(escaped: str, value: str) -> None:
    """Goal: Java's escapes: control characters, \\uXXXX (surrogate pairs joined), any other
    character stands for itself. Method: one escape per value."""
    assert parse_java_properties(f"key={escaped}") == {"key": value}


def test_escapes_in_keys_keep_separators_inside_the_key() -> None:
    """Goal: `\\=`, `\\:` and `\\ ` belong to the key; escapes decode there too. Method: an escaped key."""
    assert parse_java_properties("my\\ key\\=x\\:y\\u0021 = v") == {"my key=x:y!": "v"}


@pytest.mark.parametrize("escape", ["\\u12g4", "\\u12", "\\u"])
def test_a_malformed_unicode_escape_names_its_line(escape: str) -> None:
    """Goal: Java refuses a \\u without four hex digits; so do we, naming the line. Method: parse three."""
    with pytest.raises(JavaPropertiesError, match=r"line 2: .* malformed \\uxxxx") as raised:
        parse_java_properties(f"ok=1\nkey={escape}")
    assert raised.value.line_number == 2
    assert isinstance(raised.value, FormatError) and isinstance(raised.value, ValueError)


def test_a_later_key_wins() -> None:
    """Goal: Properties.put replaces. Method: a key given twice."""
    assert parse_java_properties("a=1\nb=2\na=3") == {"a": "3", "b": "2"}


def test_empty_and_comment_only_text_has_no_keys() -> None:
    """Goal: nothing to read is no error. Method: empty, blank and comment-only texts."""
    assert parse_java_properties("") == {}
    assert parse_java_properties(" \n\t\n# only\n") == {}


@pytest.mark.parametrize("line", ["no separator here", "bare", "key\tvalue"])
def test_separator_required_refuses_what_java_would_read_without_one(line: str) -> None:
    """Goal: callers that want `=` or `:` on every line get an error naming the line as written.
    Method: whitespace-only separators and a bare key, on line 3 after a comment."""
    with pytest.raises(JavaPropertiesError) as raised:
        parse_java_properties(f"# c\na=1\n{line}", separator_required=True)
    assert str(raised.value) == f"line 3: {line!r} is not key=value"
    assert (raised.value.line_number, raised.value.line) == (3, line)


def test_separator_required_reports_a_continued_line_as_written() -> None:
    """Goal: the error shows every natural line of the entry. Method: a separator-less continued key."""
    with pytest.raises(JavaPropertiesError) as raised:
        parse_java_properties("abc\\\n  def", separator_required=True)
    assert raised.value.line == "abc\\\n  def"


def test_separator_required_accepts_every_equals_or_colon_shape() -> None:
    """Goal: the strict mode changes nothing else. Method: separators with and without whitespace."""
    text = "a=1\nb : 2\nc =3\nd= \ne:"
    assert parse_java_properties(text, separator_required=True) == {"a": "1", "b": "2", "c": "3", "d": "", "e": ""}
