"""Small Arrow helpers for columnar decoding without a Python object per record.

pyarrow alone (no numpy): big-endian integers go through `array.array.byteswap`, and bytes at
per-row positions are gathered with one `take` over an interleaved offsets array.
"""

from __future__ import annotations

import array
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

_EVEN_INDEX_CACHE_MAX = 64
_even_index_cache: dict[int, Any] = {}


def int32_array(values: array.array[int]) -> Any:
    """A zero-copy Int32Array over an `array('i')`."""
    assert values.typecode == "i" and values.itemsize == 4
    return pa.Array.from_buffers(pa.int32(), len(values), [None, pa.py_buffer(values)])


def int64_array(values: array.array[int]) -> Any:
    assert values.typecode == "q" and values.itemsize == 8
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def to_int32(values: Any) -> array.array[int]:
    """An Int32Array (no nulls) copied into an `array('i')`."""
    assert values.type == pa.int32() and values.null_count == 0
    result: array.array[int] = array.array("i")
    if len(values):
        data = memoryview(values.buffers()[1])
        result.frombytes(data[values.offset * 4 : (values.offset + len(values)) * 4])
    return result


def values_bytes(binary: Any) -> memoryview:
    """The contiguous value bytes of a BinaryArray (what `take` and `binary_slice` produce)."""
    if len(binary) == 0:
        return memoryview(b"")
    offsets = to_int32(pa.Array.from_buffers(pa.int32(), len(binary) + 1, [None, binary.buffers()[1]], binary.offset))
    data = binary.buffers()[2]
    return memoryview(data)[offsets[0] : offsets[-1]] if data is not None else memoryview(b"")


def big_endian_words(block: memoryview | bytes) -> array.array[int]:
    """Big-endian int32 words of `block` as native ints."""
    words: array.array[int] = array.array("i")
    words.frombytes(block)
    words.byteswap()
    return words


def big_endian_shorts(block: memoryview | bytes) -> array.array[int]:
    shorts: array.array[int] = array.array("h")
    shorts.frombytes(block)
    shorts.byteswap()
    return shorts


def combine_int64(high: Any, low: Any) -> Any:
    """int64 from its big-endian halves (two Int32Arrays): high * 2**32 + unsigned(low)."""
    high64 = pc.multiply(pc.cast(high, pa.int64()), pa.scalar(2**32, pa.int64()))
    low64 = pc.bit_wise_and(pc.cast(low, pa.int64()), pa.scalar(0xFFFFFFFF, pa.int64()))
    return pc.add(high64, low64)


def spans_array(data: Any, starts: array.array[int], ends: array.array[int]) -> Any:
    """A zero-copy BinaryArray over `data` whose values are [starts[i], ends[i]), interleaved with
    the gaps between them. Requires starts[i] <= ends[i] <= starts[i+1] (checked by the caller:
    Arrow trusts offsets)."""
    count = len(starts)
    interleaved: array.array[int] = array.array("i", bytes(8 * count))
    interleaved[0::2] = starts
    interleaved[1::2] = ends
    return pa.Array.from_buffers(pa.binary(), 2 * count - 1, [None, pa.py_buffer(interleaved), data])


def gather(data: Any, starts: array.array[int], ends: array.array[int]) -> Any:
    """A contiguous BinaryArray of `data[starts[i]:ends[i]]` (one C++ copy)."""
    count = len(starts)
    if count == 0:
        return pa.array([], pa.binary())
    return spans_array(data, starts, ends).take(_even_indices(count))


def _even_indices(count: int) -> Any:
    cached = _even_index_cache.get(count)
    if cached is None:
        if len(_even_index_cache) >= _EVEN_INDEX_CACHE_MAX:
            _even_index_cache.clear()
        cached = pa.array(range(0, 2 * count, 2), pa.int32())
        _even_index_cache[count] = cached
    return cached


def first_false(mask: Any) -> int:
    """Index of the first False in a BooleanArray (no nulls), or its length."""
    found = pc.index(mask, False).as_py()
    return len(mask) if found is None or found < 0 else int(found)


def fixed_width_strings(text: bytes, width: int, count: int) -> Any:
    """A StringArray of `count` ASCII strings of `width` characters laid end to end in `text`."""
    assert len(text) == width * count
    offsets: array.array[int] = array.array("i", range(0, width * count + 1, width))
    return pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(text)])
