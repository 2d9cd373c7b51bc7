#!/usr/bin/env python3
"""Run import-linter (`lint-imports`) on Shoal's contracts, whichever editable install is in place.

pyproject.toml maps each `shoal.X` to a top-level folder `X/` (`[tool.setuptools.package-dir]`).
The strict editable install (`make`) builds a real `shoal/` folder of links, which grimp (the
import graph behind import-linter) can walk. The default `pip install -e .` maps the folders with
an import hook instead, and grimp, which looks for `shoal`'s folders on disk, stops at
"Module 'shoal.formats' does not exist". So this script builds the same `shoal/` folder of links
in a temporary directory, from package-dir, and runs lint-imports in `python -S` with only that
folder and the interpreter's site-packages on the path: `-S` skips the `.pth` files of either
editable install, so the contracts see the source tree as it is now (new modules included).

    .venv/bin/python tools/lint_imports.py             # what `make imports` runs
    .venv/bin/python tools/lint_imports.py --verbose   # any lint-imports option
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
ROOT_PACKAGE = "shoal"
LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def link_packages(package_dirs: dict[str, str], tree: Path) -> None:
    """`tree/shoal/X` -> `REPO_ROOT/X` for each top-level part; nested parts must sit in their parent's folder."""
    root = tree / ROOT_PACKAGE
    root.mkdir()
    for name, folder in package_dirs.items():
        parent, _, part = name.rpartition(".")
        if parent == ROOT_PACKAGE:
            (root / part).symlink_to(REPO_ROOT / folder, target_is_directory=True)
        elif package_dirs.get(parent) is None or folder != f"{package_dirs[parent]}/{part}":
            raise SystemExit(f"package-dir: {name} = {folder!r} is not the folder {part!r} inside its parent's")


def main() -> int:
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    package_dirs: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    with tempfile.TemporaryDirectory(prefix="shoal-lint-imports-") as tree:
        link_packages(package_dirs, Path(tree))
        paths = dict.fromkeys([tree, sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        command = [sys.executable, "-S", "-c", LINT_IMPORTS, *sys.argv[1:]]
        return subprocess.run(command, cwd=REPO_ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
