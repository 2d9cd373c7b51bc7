"""tools/get_images.py's pure parts: which Debian mirror it bootstraps from, and that its cache keys follow the
inputs. The stages themselves run in the kind suite (`make kind-e2e`), which checks every image they build."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tests.conftest import load_tool


def _tool() -> ModuleType:
    return load_tool("get_images")


def test_the_mirror_comes_from_deb822_or_one_line_sources() -> None:
    tool = _tool()
    deb822 = "Types: deb\n# a comment\nURIs: http://deb.example.org/debian\nSuites: bookworm\n"
    assert tool.mirror_in(deb822) == "http://deb.example.org/debian"
    assert tool.mirror_in("deb [arch=amd64] http://mirror.example/debian/ bookworm main\n") == (
        "http://mirror.example/debian"
    )
    assert tool.mirror_in("URIs: http://deb.debian.org/debian-security\n") is None
    assert tool.mirror_in("") is None


def test_cache_keys_change_with_any_input(tmp_path: Path) -> None:
    tool = _tool()
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    (recipe / "a").write_text("one")
    first = tool.digest_of("bookworm", recipe)
    assert tool.digest_of("bookworm", recipe) == first
    (recipe / "a").write_text("two")
    assert tool.digest_of("bookworm", recipe) != first
    assert tool.digest_of("trixie", recipe) != tool.digest_of("bookworm", recipe)
