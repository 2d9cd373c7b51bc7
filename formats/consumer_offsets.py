"""config/consumerOffset.json's table, `{"offsetTable":{"<topic>@<group>":{queueId: offset}}}` (spec §7.4).

`decode_offset_table` reads the table of a document parsed by `parse_fastjson` (queue ids are bare
numbers as Java writes them, or quoted as standard JSON writes them); FormatError when it is not
that shape. `shoal.store.metadata.ConsumerOffsetTable` owns the file; Spark reads it with this.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from shoal.formats.errors import FormatError

OFFSET_TABLE_FIELD = "offsetTable"
KEY_SEPARATOR = "@"
_DECIMAL = re.compile(r"-?[0-9]{1,19}")  # a Java long as fastjson reads one from a string


def offset_table_key(topic: str, group: str) -> str:
    """`<topic>@<group>`; ValueError when either holds '@'."""
    if KEY_SEPARATOR in topic or KEY_SEPARATOR in group:
        raise ValueError(f"'@' is not allowed in a topic or group: {topic!r}, {group!r}")
    return f"{topic}{KEY_SEPARATOR}{group}"


def _shape_error(where: str, expected: str, value: Any) -> FormatError:
    found = repr(value)
    found = found if len(found) <= 80 else found[:77] + "..."  # a log line, not a dump
    return FormatError(f"{where}: expected {expected}, found {found}")


def _integer(value: Any, where: str) -> int:
    """A Java int/long; fastjson also reads one from a decimal string."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        return int(value)
    raise _shape_error(where, "an integer", value)


def _map(value: Any, where: str) -> Mapping[Any, Any]:
    """A JSON object used as a Java Map (absent or null means empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _shape_error(where, "an object", value)
    return value


def decode_offset_table(document: Mapping[str, Any]) -> dict[str, dict[int, int]]:
    """{"<topic>@<group>": {queueId: offset}} of a consumerOffset.json document."""
    offsets: dict[str, dict[int, int]] = {}
    for key, value in _map(document.get(OFFSET_TABLE_FIELD), OFFSET_TABLE_FIELD).items():
        if not isinstance(key, str):
            raise _shape_error(f"{OFFSET_TABLE_FIELD} key", "'<topic>@<group>'", key)
        where = f"{OFFSET_TABLE_FIELD}[{key!r}]"
        queues: dict[int, int] = {}
        for queue_id, offset in _map(value, where).items():
            queues[_integer(queue_id, f"{where} key")] = _integer(offset, f"{where}[{queue_id!r}]")
        offsets[key] = queues
    return offsets
