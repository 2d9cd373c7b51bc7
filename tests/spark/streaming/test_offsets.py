"""The offset arithmetic of a topic stream: the checkpoint's JSON, advancing, admission control."""

from __future__ import annotations

import pytest

from shoal.spark.errors import ReadOptionError
from shoal.spark.streaming.offsets import (
    EARLIEST,
    LATEST,
    QueueRange,
    admit,
    advance,
    from_json,
    parse_offsets_option,
    ranges,
    to_json,
)

A0, A1, B0 = ("T", "broker-a", 0), ("T", "broker-a", 1), ("T", "broker-b", 0)


def test_the_checkpoint_form_is_nested_json_and_round_trips() -> None:
    offsets = {A0: 5, A1: 7, B0: 0, ("U", "broker-a", 3): 11}
    nested = to_json(offsets)
    assert nested == {"T": {"broker-a": {"0": 5, "1": 7}, "broker-b": {"0": 0}}, "U": {"broker-a": {"3": 11}}}
    assert from_json(nested) == offsets


@pytest.mark.parametrize(
    "bad",
    [
        [1, 2],
        {"T": 3},
        {"T": {"broker-a": 3}},
        {"T": {"broker-a": {"x": 1}}},
        {"T": {"broker-a": {"0": -1}}},
        {"T": {"broker-a": {"0": "5"}}},
        {"T": {"broker-a": {"0": True}}},
    ],
)
def test_a_malformed_offset_map_is_refused_with_the_entry_named(bad: object) -> None:
    with pytest.raises(ReadOptionError):
        from_json(bad)  # type: ignore[arg-type]


def test_starting_offsets_take_earliest_and_latest_markers() -> None:
    assert parse_offsets_option('{"T": {"broker-a": {"0": -2, "1": -1, "2": 9}}}') == {
        A0: EARLIEST,
        A1: LATEST,
        ("T", "broker-a", 2): 9,
    }
    with pytest.raises(ReadOptionError, match="neither earliest, latest nor JSON"):
        parse_offsets_option("{oops")
    with pytest.raises(ReadOptionError):
        parse_offsets_option('{"T": {"broker-a": {"0": -3}}}')


def test_advance_never_goes_back_keeps_vanished_queues_and_starts_new_ones_at_zero() -> None:
    start = {A0: 10, A1: 4}
    latest = {A0: 8, B0: 3}  # A0's answer is behind (a slave), A1 left the routes, B0 is new
    assert advance(start, latest) == {A0: 10, A1: 4, B0: 3}
    assert ranges(start, advance(start, latest)) == [QueueRange("T", "broker-b", 0, 0, 3)]


def test_admission_shares_the_cap_by_backlog_and_starves_no_queue() -> None:
    start = {A0: 0, A1: 0, B0: 0}
    latest = {A0: 900, A1: 99, B0: 1}
    end = admit(start, latest, 100)
    assert end == {A0: 90, A1: 9, B0: 1}
    assert sum(end.values()) <= 100 + len(end)
    assert admit(start, latest, 10_000) == latest
    with pytest.raises(ValueError):
        admit(start, latest, 0)


def test_admission_reaches_the_end_in_bounded_steps() -> None:
    """Batch after batch, the capped ends converge on the latest offsets with every message read once."""
    latest = {A0: 1000, A1: 17, B0: 0}
    position: dict[tuple[str, str, int], int] = {A0: 0, A1: 0, B0: 0}
    read = 0
    for _ in range(100):
        end = admit(position, latest, 64)
        read += sum(qrange.end - qrange.start for qrange in ranges(position, end))
        position = end
        if position == latest:
            break
    assert position == latest and read == 1017


def test_ranges_are_the_queues_with_messages_in_a_stable_order() -> None:
    assert ranges({A0: 5, A1: 3}, {A0: 5, A1: 9, B0: 2}) == [
        QueueRange("T", "broker-a", 1, 3, 9),
        QueueRange("T", "broker-b", 0, 0, 2),
    ]
