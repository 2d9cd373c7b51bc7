"""Tests of shoal.formats.store_layout: segment file names."""

from __future__ import annotations

import pytest

from shoal.formats.limits import SEGMENT_FILE_NAME_DIGITS
from shoal.formats.store_layout import is_segment_name, offset_to_file_name


@pytest.mark.parametrize(
    ("offset", "name"),
    [(0, "00000000000000000000"), (1073741824, "00000000001073741824"), (2147483648, "00000000002147483648")],
)
def test_segment_names_are_20_digit_offsets(offset: int, name: str) -> None:
    """UtilAll.offset2FileName: the start offset, zero-padded to 20 decimal digits."""
    assert offset_to_file_name(offset) == name
    assert len(name) == SEGMENT_FILE_NAME_DIGITS == 20
    assert is_segment_name(name)


@pytest.mark.parametrize("name", ["0", "0000000000000000000a", "000000000000000000000", "00000000000000000000.tmp"])
def test_other_names_are_not_segments(name: str) -> None:
    """Short, long, non-digit and temporary names are not segment names."""
    assert not is_segment_name(name)
