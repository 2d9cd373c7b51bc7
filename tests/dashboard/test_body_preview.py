"""shoal.dashboard.body_preview: how a message page shows a body."""

from __future__ import annotations

import json

from shoal.dashboard.body_preview import hex_dump, preview_body
from shoal.dashboard.limits import BODY_PREVIEW_BYTES


def test_json_is_pretty_printed() -> None:
    preview = preview_body(b'{"order":7,"items":["a","b"]}')
    assert preview.kind == "json" and preview.encoding == "utf-8" and not preview.truncated
    assert json.loads(preview.text) == {"order": 7, "items": ["a", "b"]}
    assert "\n" in preview.text  # indented


def test_utf8_text_is_shown_as_is() -> None:
    preview = preview_body("héllo wörld, 你好".encode())
    assert (preview.kind, preview.encoding, preview.text) == ("text", "utf-8", "héllo wörld, 你好")
    assert preview.size_bytes == len("héllo wörld, 你好".encode())


def test_a_legacy_encoding_is_detected() -> None:
    text = "Привет, это сообщение в старой кодировке, которую клиент отправил без UTF-8."
    preview = preview_body(text.encode("cp1251"))
    assert preview.kind == "text" and preview.encoding != "utf-8"
    assert preview.text == text


def test_binary_becomes_a_hex_dump() -> None:
    body = bytes(range(256))
    preview = preview_body(body)
    assert preview.kind == "binary" and preview.encoding == ""
    assert preview.text.splitlines()[0] == (
        "00000000  00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f  |................|"
    )
    assert len(preview.text.splitlines()) == 16


def test_a_long_body_is_cut_and_says_so_even_inside_a_character() -> None:
    body = "é".encode() * BODY_PREVIEW_BYTES  # 2 bytes each: the cut falls inside a character or not
    preview = preview_body(body)
    assert preview.truncated and preview.kind == "text" and preview.encoding == "utf-8"
    assert set(preview.text) == {"é"} and preview.size_bytes == len(body)


def test_empty_body() -> None:
    preview = preview_body(b"")
    assert (preview.kind, preview.text, preview.size_bytes, preview.truncated) == ("text", "", 0, False)


def test_hex_dump_pads_the_last_row() -> None:
    assert hex_dump(b"AB\x00") == "00000000  41 42 00" + " " * 39 + "  |AB.|"
