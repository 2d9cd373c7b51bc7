"""The image recipes build with the classic Docker builder as well as with BuildKit.

Debian's docker.io (20.10) builds with the classic builder, which refuses BuildKit-only syntax:
a `# syntax=` parser directive it cannot fetch without a registry, heredocs (`COPY <<EOF`), and
the `--chmod`, `--link`, `--mount`, `--parents`, `--exclude` flags (its error: "unknown
instruction" or "unknown flag"). Every line of every Dockerfile here is held to what both accept,
and what the recipes COPY exists.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = sorted((ROOT / "broker_image").glob("Dockerfile*"))
BUILDKIT_ONLY_FLAGS = ("--chmod", "--link", "--mount", "--parents", "--exclude", "--checksum", "--keep-git-dir")
HEREDOC = re.compile(r"(?<!<)<<-?\s*['\"]?[A-Za-z_]\w*")
"""`<<EOF`, `<<-'EOF'`... (a shell here-string, `<<<`, is not one)."""
INSTRUCTIONS = frozenset(
    [
        "FROM",
        "RUN",
        "CMD",
        "LABEL",
        "EXPOSE",
        "ENV",
        "ADD",
        "COPY",
        "ENTRYPOINT",
        "VOLUME",
        "USER",
        "WORKDIR",
        "ARG",
        "ONBUILD",
        "STOPSIGNAL",
        "HEALTHCHECK",
        "SHELL",
    ]
)


def _instructions(dockerfile: Path) -> list[tuple[int, str]]:
    """(line number, instruction with its continuation lines joined), comments and blanks left out."""
    result: list[tuple[int, str]] = []
    pending = ""
    start = 0
    for number, line in enumerate(dockerfile.read_text().splitlines(), start=1):
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if not pending:
            start = number
        if stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        result.append((start, pending + stripped))
        pending = ""
    assert not pending, f"{dockerfile.name}: the last instruction ends in a line continuation"
    return result


def test_there_are_recipes_to_check() -> None:
    assert {path.name for path in DOCKERFILES} >= {"Dockerfile", "Dockerfile.spark"}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_no_buildkit_only_syntax(dockerfile: Path) -> None:
    """Goal: `docker build` works with the classic builder (Debian's docker.io) and with BuildKit.
    Method: no parser directive naming a frontend, every instruction one the classic builder knows,
    no heredoc, no BuildKit-only flag."""
    text = dockerfile.read_text()
    assert not re.search(r"(?im)\A(\s*#\s*\w+\s*=.*\n)*\s*#\s*syntax\s*=", text), "a `# syntax=` directive"
    for number, instruction in _instructions(dockerfile):
        keyword = instruction.split(None, 1)[0].upper()
        assert keyword in INSTRUCTIONS, f"{dockerfile.name}:{number}: {keyword!r} is not an instruction"
        assert not HEREDOC.search(instruction), f"{dockerfile.name}:{number}: a heredoc, which only BuildKit reads"
        flags = [word for word in instruction.split()[1:] if word.startswith("--")]
        for flag in flags:
            assert not flag.startswith(BUILDKIT_ONLY_FLAGS), f"{dockerfile.name}:{number}: {flag} is BuildKit's"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_what_the_recipes_copy_exists(dockerfile: Path) -> None:
    """Goal: no COPY of a file that is not in the repository (a build error only seen in a build).
    Method: every COPY source of the build context, relative to the repository root."""
    for number, instruction in _instructions(dockerfile):
        words = instruction.split()
        if words[0].upper() != "COPY" or any(word.startswith("--from") for word in words):
            continue
        sources = [word for word in words[1:-1] if not word.startswith("--")]
        for source in sources:
            assert (ROOT / source).exists(), f"{dockerfile.name}:{number}: COPY {source}: no such file"


def test_the_spark_entrypoint_is_an_executable_file() -> None:
    """The Spark image's entrypoint is a file in the repository (it was a heredoc), executable."""
    script = ROOT / "broker_image" / "spark-entrypoint.sh"
    assert script.read_text().startswith("#!/bin/bash\n")
    assert script.stat().st_mode & 0o111


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_every_package_folder_is_copied(dockerfile: Path) -> None:
    """Goal: `pip install .` in the image finds every folder pyproject maps a package to (a missing
    one fails the image build with "package directory ... does not exist"). Method: each top-level
    folder of [tool.setuptools.package-dir] has its own COPY."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    folders = {folder.split("/", 1)[0] for folder in mapping.values()}
    copied = {
        words[1]
        for _number, instruction in _instructions(dockerfile)
        if (words := instruction.split())[0].upper() == "COPY" and len(words) == 3
    }
    assert folders <= copied, f"{dockerfile.name} does not copy {sorted(folders - copied)}"
