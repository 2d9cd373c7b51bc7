# The compiled remoting helpers (_wire_speedups.c): the JSON header reader and the whole-frame
# reader (used through shoal.protocol.framing), the header writer, and the plain send's reader and
# answer (through shoal.protocol.send_frames).
from collections.abc import Callable
from typing import Any

def decode_json_header(
    header: bytes | memoryview, /
) -> tuple[int, str | None, int, int, int, str | None, dict[str, str]] | None: ...
def decode_frames(
    data: bytes,
    view: memoryview,
    position: int,
    commands: list[Any],
    make: Callable[..., Any],
    languages: dict[str, Any],
    java: Any,
    other: Any,
    json: Any,
    frame_max: int,
    header_max: int,
    remark_chars_max: int,
    /,
) -> int: ...
def plain_send(
    ext_fields: dict[str, str], cluster: str, refused: tuple[str, ...], /
) -> tuple[str, int, int, int, int, int, bytes | None, bool] | None: ...
def send_ok_frame(
    host_hex: str,
    commitlog_offset: int,
    queue_id: int,
    queue_offset: int,
    quoted_region: str,
    trace_on: bool,
    opaque: int,
    language: str,
    version: int,
    /,
) -> bytes: ...
def encode_json_header(
    code: int,
    ext_fields: dict[str, str],
    flag: int,
    language: str,
    opaque: int,
    remark: str | None,
    version: int,
    /,
) -> bytes | None: ...
