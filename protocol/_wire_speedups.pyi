# The compiled JSON header reader (_wire_speedups.c); used through shoal.protocol.framing only.
def decode_json_header(
    header: bytes | memoryview, /
) -> tuple[int, str | None, int, int, int, str | None, dict[str, str]] | None: ...
