"""Tests of shoal.formats.java_hash: Java's String.hashCode, tagsCode and the index key hash."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.formats.java_hash import index_key_hash, java_string_hash, tags_code

INT_MIN = -(2**31)


def reference_hash(text: str) -> int:
    """String.hashCode written out independently: UTF-16 code units, surrogate pairs by hand."""
    units: list[int] = []
    for char in text:
        code = ord(char)
        if code >= 0x10000:
            code -= 0x10000
            units += [0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)]
        else:
            units.append(code)
    h = 0
    for unit in units:
        h = (31 * h + unit) % 2**32
    return int(struct.unpack(">i", struct.pack(">I", h))[0])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("TagA", 2598919),
        ("*", 42),
        ("", 0),
        ("TopicTest#KEY1", -1656969516),
        ("中文", 646394),
        ("😀", 1772899),
        ("polygenelubricants", INT_MIN),
    ],
)
def test_java_string_hash_matches_jvm_vectors(text: str, expected: int) -> None:
    """Spec §16 gotchas 1-2 values (verified on a JVM) come out exactly."""
    assert java_string_hash(text) == expected


def test_a_non_bmp_character_counts_as_two_utf16_units() -> None:
    """'😀' hashes as its surrogate pair 0xD83D 0xDE00, i.e. 31*0xD83D + 0xDE00."""
    assert java_string_hash("😀") == 31 * 0xD83D + 0xDE00


def test_index_key_hash_is_the_absolute_value() -> None:
    """Math.abs of a negative hash: 'TopicTest#KEY1' -> 1656969516."""
    assert index_key_hash("TopicTest#KEY1") == 1656969516
    assert index_key_hash("TagA") == 2598919


def test_index_key_hash_maps_integer_min_value_to_zero() -> None:
    """'polygenelubricants' hashes to Integer.MIN_VALUE; Java's abs stays negative and RocketMQ uses 0."""
    assert index_key_hash("polygenelubricants") == 0


def test_tags_code_is_the_signed_hash_and_zero_without_tags() -> None:
    """tagsCode = hashCode widened to a long; None and '' give 0."""
    assert tags_code("TagA") == 2598919
    assert tags_code("TopicTest#KEY1") == -1656969516
    assert tags_code(None) == 0
    assert tags_code("") == 0


def test_a_negative_tags_code_packs_sign_extended() -> None:
    """A negative int widened to long fills the high word with ones (spec gotcha 4)."""
    assert struct.pack(">q", tags_code("TopicTest#KEY1")) == bytes.fromhex("ffffffff9d3ca6d4")


@settings(deadline=None, max_examples=300)
@given(st.text(max_size=40))
def test_java_string_hash_equals_an_independent_reference(text: str) -> None:
    """Random Unicode text, astral characters included: the same hash as the reference."""
    expected = reference_hash(text)
    assert java_string_hash(text) == expected
    assert INT_MIN <= expected < 2**31


@settings(deadline=None, max_examples=300)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=300))
def test_ascii_text_hashed_two_characters_per_step_equals_the_reference(text: str) -> None:
    """The pair-table path: odd and even lengths, and past the unmasked limit (128 characters)."""
    assert java_string_hash(text) == reference_hash(text)


@settings(deadline=None, max_examples=300)
@given(st.text(max_size=40))
def test_index_key_hash_is_never_negative(text: str) -> None:
    """abs with MIN_VALUE -> 0 always gives 0 <= hash <= Integer.MAX_VALUE."""
    assert 0 <= index_key_hash(text) <= 2**31 - 1
