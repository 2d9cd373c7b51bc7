"""What a message page shows of a body: text in the encoding it most likely has, pretty JSON, or a
hex dump, cut at `BODY_PREVIEW_BYTES` (pure)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from charset_normalizer import from_bytes

from shoal.dashboard.limits import BODY_PREVIEW_BYTES

HEX_ROW_BYTES = 16


@dataclass(frozen=True, slots=True)
class BodyPreview:
    kind: str
    """"json", "text" or "binary"."""
    encoding: str
    """The encoding the text was read in ("" for binary)."""
    text: str
    size_bytes: int
    truncated: bool


def hex_dump(data: bytes) -> str:
    """`offset  hex bytes  |printable|` rows of HEX_ROW_BYTES, as `hexdump -C` prints them."""
    rows = []
    for start in range(0, len(data), HEX_ROW_BYTES):
        chunk = data[start : start + HEX_ROW_BYTES]
        printable = "".join(chr(byte) if 32 <= byte < 127 else "." for byte in chunk)
        rows.append(f"{start:08x}  {chunk.hex(' '):<{HEX_ROW_BYTES * 3 - 1}}  |{printable}|")
    return "\n".join(rows)


def _looks_textual(text: str) -> bool:
    controls = sum(1 for char in text if ord(char) < 32 and char not in "\t\r\n")
    return controls * 20 <= len(text)  # a few stray controls are text; many are not


def preview_body(body: bytes) -> BodyPreview:
    """UTF-8 first (what RocketMQ clients send), then what charset-normalizer finds; JSON pretty-
    printed; anything else as a hex dump."""
    shown = body[:BODY_PREVIEW_BYTES]
    truncated = len(body) > len(shown)
    if not body:
        return BodyPreview("text", "utf-8", "", 0, False)
    try:
        text, encoding = shown.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as error:
        # A cut in the middle of a character is still UTF-8.
        if truncated and error.start >= len(shown) - 3:
            text, encoding = shown[: error.start].decode("utf-8", "replace"), "utf-8"
        else:
            best = from_bytes(shown).best()
            text, encoding = (str(best), best.encoding) if best is not None else ("", "")
    if encoding and _looks_textual(text):
        if not truncated:
            try:
                return BodyPreview("json", encoding, json.dumps(json.loads(text), indent=2), len(body), False)
            except ValueError:
                pass
        return BodyPreview("text", encoding, text, len(body), truncated)
    return BodyPreview("binary", "", hex_dump(shown), len(body), truncated)
