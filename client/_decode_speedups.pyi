# The compiled record decoder (_decode_speedups.c); used through shoal.client.message.decode_messages.
from collections.abc import Mapping
from typing import Any, TypeVar

_T = TypeVar("_T")

def decode_records(
    data: bytes | bytearray | memoryview,
    cls: type[_T],
    slots: tuple[Any, ...],
    hosts: Mapping[bytes, tuple[str, str]],
    broker_name: str,
    extra_properties: dict[str, str] | None,
    /,
) -> list[_T] | None: ...
