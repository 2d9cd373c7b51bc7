"""Property strings -> a map column, in bulk (`MessageDecoder.string2messageProperties` semantics).

The rules are shoal.formats.properties.decode_properties': segments split on \\x02; a segment
counts when it has a non-empty name before its first \\x01 and a non-empty value after it; the
value may itself hold \\x01. Here they run as Arrow kernels over a whole batch. A name repeated in
one string stays repeated in the map (Shoal never writes that); the `tags`, `keys` and `uniq_key`
columns take the last one, as Java's HashMap.put does.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from shoal.formats.properties import (
    KEYS,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    TAGS,
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)


def as_strings(raw: Any) -> Any:
    """UTF-8 strings from a BinaryArray; invalid bytes become U+FFFD, as decode_properties does."""
    try:
        return raw.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array([bytes(value).decode("utf-8", errors="replace") for value in raw.to_pylist()], type=pa.string())


def properties_map(raw: Any, map_type: Any | None = None) -> Any:
    """A MapArray (of `map_type`, default map<string, string>) from encoded property strings."""
    strings = as_strings(raw)
    segments = pc.split_pattern(strings, PROPERTY_SEPARATOR)
    flat = pc.list_flatten(segments)
    pairs = pc.split_pattern(flat, NAME_VALUE_SEPARATOR, max_splits=1)
    has_two = pc.equal(pc.list_value_length(pairs), 2)
    names = pc.list_element(pc.filter(pairs, has_two), 0)
    values = pc.list_element(pc.filter(pairs, has_two), 1)
    nonempty = pc.and_(pc.greater(pc.binary_length(names), 0), pc.greater(pc.binary_length(values), 0))
    valid = pc.replace_with_mask(has_two, has_two, nonempty)
    names = pc.filter(names, nonempty)
    values = pc.filter(values, nonempty)
    # Map offsets: the running count of valid pairs at each row's list boundary.
    running = pc.cumulative_sum(pc.cast(valid, pa.int32()))
    running = pa.concat_arrays([pa.array([0], pa.int32()), running])
    offsets = pc.take(running, segments.offsets)
    return pa.MapArray.from_arrays(offsets, names, values, type=map_type or pa.map_(pa.string(), pa.string()))


def property_value(properties: Any, name: str) -> Any:
    """One property of every row (null when absent; the last one when repeated)."""
    return pc.map_lookup(properties, pa.scalar(name, pa.string()), "last")


TAGS_NAME = TAGS
KEYS_NAME = KEYS
UNIQ_KEY_NAME = UNIQ_CLIENT_MESSAGE_ID_KEYIDX
