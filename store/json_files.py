"""Crash-safe JSON files: the safe write and the tolerant read of the broker's config files.

Safe write (`write_json_file_safely`), RocketMQ's `MixAll.string2File` made crash-safe:

    1. write `<file>.tmp`, flush, fsync
    2. copy the current `<file>` to `<file>.bak`, fsync
    3. os.replace(`<file>.tmp`, `<file>`) (atomic: there is always a complete `<file>`)
    4. fsync the directory, so the rename itself survives a power loss

Load (`read_json_file_tolerantly`, `load_first_usable`), as `ConfigManager.load`: read `<file>`;
when it is missing, empty or unparseable, read `<file>.bak`; when neither is usable, start empty.
A `<file>.tmp` is never read: it is a write that did not finish.

fastjson tolerance (spec §7.1, §16 gotcha 9): documents are read by `parse_fastjson`, which is
`shoal.formats.json_compat.parse_fastjson` within the store's size and nesting bounds, its syntax
errors as MetadataFormatError. The tables that use these files are in `shoal.store.metadata`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from shoal.formats.errors import JsonSyntaxError
from shoal.formats.json_compat import parse_fastjson as parse_json_text
from shoal.store import durability, limits
from shoal.store.errors import StoreError

# RocketMQ's deepest metadata document (a 5.x subscription group with its subscription data)
# nests about 6 levels; 64 leaves room for any admin body while keeping the recursive reader far
# below Python's recursion limit (1000 frames) whatever the input.
METADATA_NESTING_MAX_DEPTH = 64

_log = logging.getLogger("shoal.store.metadata")  # the files' log lines keep their logger name
_T = TypeVar("_T")


class MetadataFormatError(StoreError, JsonSyntaxError):
    """A metadata document cannot be read (syntax, shape, size or depth) or written (size).

    `line` and `column` (1-based) locate a syntax error; they are None for whole-document
    problems (too large, wrong shape). `expected` says what the reader wanted there.
    """


# --- The tolerant reader ---


def _utf8_size_bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def parse_fastjson(text: str) -> Any:
    """`shoal.formats.json_compat.parse_fastjson` for metadata documents: MetadataFormatError
    (with the 1-based line/column of the first error) when the text is not fastjson, is above
    `limits.METADATA_FILE_SIZE_MAX_BYTES` or nests deeper than METADATA_NESTING_MAX_DEPTH.
    """
    size_max_bytes = limits.METADATA_FILE_SIZE_MAX_BYTES
    if len(text) > size_max_bytes // 4 and _utf8_size_bytes(text) > size_max_bytes:
        raise MetadataFormatError(f"document of {_utf8_size_bytes(text)} bytes is above {size_max_bytes}")
    try:
        return parse_json_text(text, nesting_max_depth=METADATA_NESTING_MAX_DEPTH)
    except JsonSyntaxError as error:
        raise MetadataFormatError(str(error), line=error.line, column=error.column, expected=error.expected) from None


# --- Files: safe write, tolerant read ---


def sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _write_and_sync(path: Path, data: bytes) -> None:
    descriptor = durability.create_file(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with memoryview(data) as view:
            written = 0
            while written < len(view):
                written += os.write(descriptor, view[written:])
        durability.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_json_file_safely(path: Path, text: str, *, keep_backup: bool = True) -> None:
    """Replace `path` with `text` so that a crash at any point leaves a complete file.

    `.tmp` is written and synced, the current file copied to `.bak` (unless `keep_backup` is
    False: the current file is known to be unusable and `.bak` is the good copy), then `.tmp`
    is renamed over the file and the directory synced. An OSError propagates: the caller must
    not believe the data is on disk.
    """
    data = text.encode("utf-8")
    size_max_bytes = limits.METADATA_FILE_SIZE_MAX_BYTES
    if len(data) > size_max_bytes:
        raise MetadataFormatError(f"{path}: refusing to write {len(data)} bytes, above {size_max_bytes}")
    durability.make_directories(path.parent)
    temporary = sibling(path, ".tmp")
    _write_and_sync(temporary, data)
    if keep_backup and path.exists():
        _write_and_sync(sibling(path, ".bak"), path.read_bytes())
    durability.replace(temporary, path)
    durability.fsync_directory(path.parent)


def _read_bounded_text(path: Path) -> str:
    """The file's text; FileNotFoundError when missing, MetadataFormatError when too big or not UTF-8."""
    size_max_bytes = limits.METADATA_FILE_SIZE_MAX_BYTES
    with path.open("rb") as file:
        data = file.read(size_max_bytes + 1)
    if len(data) > size_max_bytes:
        raise MetadataFormatError(f"file is above {size_max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise MetadataFormatError(f"not UTF-8 at byte {error.start}") from error


def load_first_usable(path: Path, decode: Callable[[Any], _T]) -> tuple[_T, Path] | None:
    """Decode `path`, else its `.bak` (ConfigManager.load); None when neither is usable.

    `decode` checks the document's shape; a MetadataFormatError from it counts as unusable, as
    an exception in Java's `decode` does. Other OSErrors than a missing file propagate.
    """
    backup = sibling(path, ".bak")
    found_data = False
    for candidate in (path, backup):
        try:
            text = _read_bounded_text(candidate)
            if not text.strip():
                _log.warning("metadata file %s is empty", candidate)
                continue
            found_data = True
            return decode(parse_fastjson(text)), candidate
        except FileNotFoundError:
            continue
        except MetadataFormatError as error:
            found_data = True
            _log.warning("metadata file %s is unusable: %s", candidate, error)
    if found_data:
        _log.error("neither %s nor %s is usable; starting without them", path, backup)
    return None


def read_json_file_tolerantly(path: Path) -> Any | None:
    """The parsed document of `path`, else of `path.bak`; None when neither is usable."""
    loaded = load_first_usable(path, lambda document: document)
    return None if loaded is None else loaded[0]
