"""tools/get_images.py's pure parts: which Debian mirror it bootstraps from, and that its cache keys follow the
inputs. The stages themselves run in the kind suite (`make kind-e2e`), which checks every image they build."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    sys.path.insert(0, str(REPO_ROOT / "tools"))  # get_images imports get_k8s beside it
    spec = importlib.util.spec_from_file_location("shoal_tools_get_images", REPO_ROOT / "tools" / "get_images.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
