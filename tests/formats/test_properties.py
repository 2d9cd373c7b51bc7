"""Tests of shoal.formats.properties: the \\x01/\\x02 property string and Java's decoding quirks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.formats import properties
from shoal.formats.errors import PropertiesError, PropertiesTooLargeError
from shoal.formats.properties import (
    check_properties_length,
    decode_properties,
    encode_properties,
    find_properties,
    find_property,
    join_properties,
    message_keys,
    pop_property,
    set_property,
)

A1_PROPERTIES = b"TAGS\x01TagA\x02UNIQ_KEY\x017F0000010E1F18B4AAC2A4B0F2270000"

names = st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"), min_size=1, max_size=12)
values = st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"), min_size=1, max_size=24)


# --- encoding ---


def test_encoding_matches_the_appendix_a1_property_bytes() -> None:
    """TAGS then UNIQ_KEY encode to the 51 bytes stored in A.1 (no trailing \\x02)."""
    encoded = encode_properties({"TAGS": "TagA", "UNIQ_KEY": "7F0000010E1F18B4AAC2A4B0F2270000"})
    assert encoded == A1_PROPERTIES
    assert len(encoded) == 51


def test_empty_map_encodes_to_empty_bytes() -> None:
    """No properties: the empty string (PROPERTIESLENGTH 0)."""
    assert encode_properties({}) == b""


def test_none_values_are_skipped() -> None:
    """Java skips entries with a null value; encode a map holding None and compare."""
    assert encode_properties({"A": "1", "B": None, "C": "3"}) == b"A\x011\x02C\x013"


def test_encoding_is_utf8() -> None:
    """Non-ASCII names and values are UTF-8 bytes."""
    assert encode_properties({"KEYS": "中文"}) == b"KEYS\x01" + "中文".encode()


@pytest.mark.parametrize(
    "bad",
    [{"A\x01B": "v"}, {"A\x02": "v"}, {"A": "v\x01w"}, {"A": "\x02"}],
)
def test_separators_inside_names_or_values_are_refused(bad: dict[str, str]) -> None:
    """A \\x01 or \\x02 would corrupt the string: PropertiesError naming the separator."""
    with pytest.raises(PropertiesError, match="separator"):
        encode_properties(bad)


@pytest.mark.parametrize("bad", [{"": "v"}, {"A": ""}])
def test_empty_names_or_values_are_refused(bad: dict[str, str]) -> None:
    """Java would silently drop them on decode, so the encoder refuses them: PropertiesError."""
    with pytest.raises(PropertiesError, match="empty"):
        encode_properties(bad)


def test_properties_of_exactly_32767_bytes_are_accepted() -> None:
    """Short.MAX_VALUE bytes is the largest PROPERTIESLENGTH: encode a map of exactly that size."""
    encoded = encode_properties({"K": "v" * (32767 - 2)})
    assert len(encoded) == 32767


def test_properties_of_32768_bytes_raise_properties_too_large() -> None:
    """One byte more raises PropertiesTooLargeError, which is a PropertiesError."""
    with pytest.raises(PropertiesTooLargeError, match="32768"):
        encode_properties({"K": "v" * (32768 - 2)})
    assert issubclass(PropertiesTooLargeError, PropertiesError)


def test_the_limit_counts_utf8_bytes_not_characters() -> None:
    """10923 three-byte characters are 32769 bytes (with 'K\\x01'): refused although few characters."""
    with pytest.raises(PropertiesTooLargeError):
        encode_properties({"K": "中" * 10923})
    assert len(encode_properties({"K": "中" * 10921})) == 32765


def test_check_properties_length_accepts_up_to_short_max() -> None:
    """check_properties_length passes 0 and 32767 and raises for 32768."""
    check_properties_length(0)
    check_properties_length(32767)
    with pytest.raises(PropertiesTooLargeError):
        check_properties_length(32768)


# --- decoding and its Java quirks ---


def test_decoding_the_appendix_a1_properties() -> None:
    """A.1's property bytes decode to TAGS and UNIQ_KEY."""
    assert decode_properties(A1_PROPERTIES) == {
        "TAGS": "TagA",
        "UNIQ_KEY": "7F0000010E1F18B4AAC2A4B0F2270000",
    }


@pytest.mark.parametrize("data", [b"", "", memoryview(b"")])
def test_empty_input_decodes_to_an_empty_map(data: bytes | str | memoryview) -> None:
    """Empty bytes, str or memoryview give {}."""
    assert decode_properties(data) == {}


def test_str_and_memoryview_inputs_decode_like_bytes() -> None:
    """decode_properties accepts str and memoryview as well as bytes."""
    expected = decode_properties(A1_PROPERTIES)
    assert decode_properties(A1_PROPERTIES.decode()) == expected
    assert decode_properties(memoryview(A1_PROPERTIES)) == expected


def test_later_duplicate_keys_win() -> None:
    """Java's HashMap.put keeps the last value of a repeated key."""
    assert decode_properties(b"K\x01first\x02K\x01second") == {"K": "second"}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"AB", {}),  # shorter than 3 characters
        (b"A\x01", {}),  # empty value, too short
        (b"AB\x01", {}),  # empty value
        (b"\x01AB", {}),  # empty key
        (b"ABC", {}),  # no name/value separator
        (b"A\x01B\x02\x02C\x01D", {"A": "B", "C": "D"}),  # empty segment
        (b"A\x01B\x02", {"A": "B"}),  # trailing separator
        (b"A\x01B\x02xy\x02C\x01D", {"A": "B", "C": "D"}),  # short segment in the middle
        (b"\x01\x01\x01", {}),  # first separator at index 0
        (b"A\x01B\x01C", {"A": "B\x01C"}),  # the first \x01 splits; the value keeps the rest
    ],
)
def test_invalid_segments_are_dropped_like_java(data: bytes, expected: dict[str, str]) -> None:
    """string2messageProperties drops short segments, empty keys and empty values silently."""
    assert decode_properties(data) == expected


def test_invalid_utf8_is_replaced_not_raised() -> None:
    """A stray 0xFF byte decodes to U+FFFD instead of raising."""
    assert decode_properties(b"K\x01\xffv") == {"K": "\ufffdv"}


@settings(deadline=None)
@given(st.dictionaries(names, values, max_size=8))
def test_encode_then_decode_round_trips(mapping: dict[str, str]) -> None:
    """Any map of non-empty, separator-free names and values survives encode/decode."""
    assert decode_properties(encode_properties(mapping)) == mapping


@settings(deadline=None)
@given(st.binary(max_size=200))
def test_decoding_arbitrary_bytes_never_raises(data: bytes) -> None:
    """Garbage decodes to some map of non-empty names and values, never an exception."""
    decoded = decode_properties(data)
    assert all(name and value for name, value in decoded.items())
    assert all("\x02" not in name + value and "\x01" not in name for name, value in decoded.items())


# --- find_property (the Dispatcher's shortcut) ---


def test_find_property_reads_one_value_without_decoding() -> None:
    """find_property returns TAGS and UNIQ_KEY from A.1, None for a missing name."""
    assert find_property(A1_PROPERTIES, b"TAGS") == "TagA"
    assert find_property(A1_PROPERTIES, b"UNIQ_KEY") == "7F0000010E1F18B4AAC2A4B0F2270000"
    assert find_property(memoryview(A1_PROPERTIES), b"TAGS") == "TagA"
    assert find_property(A1_PROPERTIES, b"KEYS") is None
    assert find_property(b"", b"KEYS") is None


def test_find_property_ignores_names_that_merely_end_with_the_name() -> None:
    """'XTAGS' is not 'TAGS': the match must start a segment."""
    assert find_property(b"XTAGS\x01x\x02TAGS\x01real", b"TAGS") == "real"
    assert find_property(b"XTAGS\x01x", b"TAGS") is None


def test_find_property_ignores_the_name_inside_a_value() -> None:
    """A value containing 'TAGS\\x01' is not a TAGS property."""
    assert find_property(b"A\x01TAGS\x01v", b"TAGS") is None


def test_find_property_treats_an_empty_value_as_absent() -> None:
    """Java drops 'TAGS\\x01' (empty value), so find_property returns None."""
    assert find_property(b"TAGS\x01\x02A\x01B", b"TAGS") is None


@pytest.mark.parametrize("data", [b"TAGS\x01a\x02TAGS\x01b", b"TAGS\x01\x02TAGS\x01b"])
def test_find_property_agrees_with_decode_for_repeated_names(data: bytes) -> None:
    """A repeated name (batch-level properties appended to a message's): the last value wins."""
    assert find_property(data, b"TAGS") == decode_properties(data)["TAGS"] == "b"


@settings(deadline=None)
@given(st.dictionaries(names, values, min_size=1, max_size=8), st.data())
def test_find_property_agrees_with_decode_for_unique_names(mapping: dict[str, str], data: st.DataObject) -> None:
    """For every encoded map, find_property(name) equals the decoded value."""
    encoded = encode_properties(mapping)
    name = data.draw(st.sampled_from(sorted(mapping)))
    assert find_property(encoded, name.encode()) == mapping[name]


# --- find_properties (the Dispatcher's read of TAGS, KEYS and UNIQ_KEY) ---

DISPATCHED = (b"TAGS", b"KEYS", b"UNIQ_KEY")


def test_find_properties_reads_several_values_in_the_order_asked() -> None:
    """Goal: one pass gives each asked name its value, None when absent. Method: A.1 and the empty string."""
    assert find_properties(A1_PROPERTIES, DISPATCHED) == ["TagA", None, "7F0000010E1F18B4AAC2A4B0F2270000"]
    assert find_properties(b"", DISPATCHED) == [None, None, None]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"TAGS\x01a\x02TAGS\x01b", ["b", None, None]),  # a repeated name: the last wins
        (b"TAGS\x01a\x02TAGS\x01", ["a", None, None]),  # an empty value is no value
        (b"XTAGS\x01x\x02KEYS\x01k1 k2", [None, "k1 k2", None]),  # a name must start its segment
        (b"A\x01TAGS\x01v", [None, None, None]),  # the name inside a value
        (b"\x02\x02TAGS\x01t\x02", ["t", None, None]),  # empty segments
        (b"UNIQ_KEY\x01\xffu", [None, None, "\ufffdu"]),  # invalid UTF-8 replaced
    ],
)
def test_find_properties_reads_as_java_decodes(data: bytes, expected: list[str | None]) -> None:
    """Goal: Java's decoding quirks, as decode_properties has them. Method: one quirk per string."""
    assert find_properties(data, DISPATCHED) == expected


@settings(deadline=None)
@given(st.binary(max_size=120))
def test_find_properties_agrees_with_decode_on_any_bytes(data: bytes) -> None:
    """Goal: no divergence from the full decode. Method: arbitrary bytes with and without asked names."""
    data = data.replace(b"T", b"TAGS\x01", 1).replace(b"K", b"\x02KEYS\x01", 1)
    decoded = decode_properties(data)
    assert find_properties(data, DISPATCHED) == [decoded.get(name.decode()) for name in DISPATCHED]


# --- editing an encoded string: pop_property, set_property, join_properties ---


def test_pop_property_removes_every_segment_of_the_name_and_returns_its_value() -> None:
    """Goal: WAIT leaves the stored string, its value read as Java reads it. Method: pop from several shapes."""
    assert pop_property("WAIT\x01false\x02TAGS\x01a", "WAIT") == ("TAGS\x01a", "false")
    assert pop_property("TAGS\x01a\x02WAIT\x01true", "WAIT") == ("TAGS\x01a", "true")
    assert pop_property("WAIT\x01true\x02TAGS\x01a\x02WAIT\x01false", "WAIT") == ("TAGS\x01a", "false")
    assert pop_property("WAIT\x01false\x02WAIT\x01", "WAIT") == ("", "false")  # Java drops the empty one
    assert pop_property("WAIT\x01", "WAIT") == ("", None)


def test_pop_property_leaves_a_string_without_the_name_as_it_is() -> None:
    """Goal: the common send is one substring test, no split. Method: absent names, look-alikes included."""
    for text in ("", "TAGS\x01a\x02", "\x02TAGS\x01a", "XWAIT\x01v", "A\x01WAIT"):
        assert pop_property(text, "WAIT") == (text, None)


def test_pop_property_drops_empty_segments_and_keeps_look_alikes_when_it_splits() -> None:
    """Goal: a rebuilt string has no doubled or trailing \\x02; XWAIT is another name. Method: messy input."""
    assert pop_property("\x02XWAIT\x01v\x02\x02WAIT\x01true\x02", "WAIT") == ("XWAIT\x01v", "true")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "CLUSTER\x01c"),
        ("TAGS\x01a", "TAGS\x01a\x02CLUSTER\x01c"),
        ("TAGS\x01a\x02", "TAGS\x01a\x02CLUSTER\x01c"),  # a trailing separator is reused
        ("CLUSTER\x01old\x02TAGS\x01a", "TAGS\x01a\x02CLUSTER\x01c"),  # the earlier value goes
        ("CLUSTER\x01old", "CLUSTER\x01c"),
        ("XCLUSTER\x01x", "XCLUSTER\x01x\x02CLUSTER\x01c"),
    ],
)
def test_set_property_appends_the_value_once(text: str, expected: str) -> None:
    """Goal: one CLUSTER, appended, whatever the string held. Method: set CLUSTER on several shapes."""
    assert set_property(text, "CLUSTER", "c") == expected
    assert decode_properties(expected)["CLUSTER"] == "c"


@pytest.mark.parametrize(
    ("head", "tail", "expected"),
    [
        (b"A\x01a", b"B\x01b", b"A\x01a\x02B\x01b"),
        (b"A\x01a\x02", b"B\x01b", b"A\x01a\x02B\x01b"),
        (b"", b"B\x01b", b"B\x01b"),
        (b"A\x01a", b"", b"A\x01a"),
        (b"", b"", b""),
    ],
)
def test_join_properties_puts_one_separator_between_two_strings(head: bytes, tail: bytes, expected: bytes) -> None:
    """Goal: a batch item's properties then the batch's shared ones, as bytes or str. Method: each edge."""
    assert join_properties(head, tail) == expected
    assert join_properties(head.decode(), tail.decode()) == expected.decode()


@settings(deadline=None)
@given(st.dictionaries(names, values, max_size=5), st.dictionaries(names, values, max_size=5))
def test_join_properties_decodes_as_the_merged_maps(head: dict[str, str], tail: dict[str, str]) -> None:
    """Goal: joining strings merges maps, the tail winning. Method: two encoded maps, joined then decoded."""
    joined = join_properties(encode_properties(head), encode_properties(tail))
    assert decode_properties(joined) == {**head, **tail}


# --- keys and names ---


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, []), ("", []), ("k1", ["k1"]), ("k1 k2", ["k1", "k2"]), (" k1  k2 ", ["k1", "k2"])],
)
def test_message_keys_split_on_single_spaces_and_skip_empty_tokens(value: str | None, expected: list[str]) -> None:
    """KEYS holds space-separated keys; empty tokens (double spaces) are skipped."""
    assert message_keys(value) == expected


def test_property_names_are_rocketmq_strings() -> None:
    """The MessageConst names and separators are the exact strings of spec §1.6-§1.7."""
    assert properties.NAME_VALUE_SEPARATOR == "\x01"
    assert properties.PROPERTY_SEPARATOR == "\x02"
    assert properties.KEY_SEPARATOR == " "
    assert properties.KEYS == "KEYS"
    assert properties.TAGS == "TAGS"
    assert properties.WAIT_STORE_MSG_OK == "WAIT"
    assert properties.DELAY_TIME_LEVEL == "DELAY"
    assert properties.REAL_TOPIC == "REAL_TOPIC"
    assert properties.REAL_QUEUE_ID == "REAL_QID"
    assert properties.TRANSACTION_PREPARED == "TRAN_MSG"
    assert properties.PRODUCER_GROUP == "PGROUP"
    assert properties.UNIQ_CLIENT_MESSAGE_ID_KEYIDX == "UNIQ_KEY"
    assert properties.MSG_REGION == "MSG_REGION"
    assert properties.TRACE_SWITCH == "TRACE_ON"
    assert properties.TRANSACTION_PREPARED_QUEUE_OFFSET == "TRAN_PREPARED_QUEUE_OFFSET"
    assert properties.CHECK_IMMUNITY_TIME_IN_SECONDS == "CHECK_IMMUNITY_TIME_IN_SECONDS"
    assert properties.CLUSTER == "CLUSTER"
