"""The wheel ships every package folder, and the `operator` folder never shadows the stdlib."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _package_dirs() -> dict[str, Path]:
    """Every folder under a mapped part that holds Python files, as its dotted package name."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    found: dict[str, Path] = {}
    for package, folder in mapping.items():
        base = ROOT / folder
        for directory in [base, *sorted(p for p in base.rglob("*") if p.is_dir())]:
            if "__pycache__" in directory.parts or not any(directory.glob("*.py")):
                continue
            relative = directory.relative_to(base).parts
            found[".".join([package, *relative])] = directory
    return found


def test_every_package_folder_is_listed_in_pyproject() -> None:
    """Goal: no package silently drops out of the wheel. Method: compare folders with `packages`."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    missing = sorted(set(_package_dirs()) - listed)
    assert not missing, f"add these to [tool.setuptools] packages in pyproject.toml: {missing}"


def test_operator_folder_has_no_init() -> None:
    """Goal: `operator/` never shadows the stdlib module. Method: look for operator/__init__.py."""
    assert not (ROOT / "operator" / "__init__.py").exists()


@pytest.mark.slow
def test_wheel_contains_every_module(tmp_path: Path) -> None:
    """Goal: the built wheel holds every .py and py.typed file. Method: build it and list its members."""
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    subprocess.run(
        [*command, "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("shoal-*.whl")
    members = set(zipfile.ZipFile(wheel).namelist())
    expected: set[str] = set()
    for package, directory in _package_dirs().items():
        prefix = package.replace(".", "/")
        expected.update(f"{prefix}/{path.name}" for path in directory.glob("*.py"))
        if (directory / "py.typed").exists():
            expected.add(f"{prefix}/py.typed")
    missing = sorted(expected - members)
    assert not missing, f"missing from the wheel: {missing}"
    assert "shoal/operator/__init__.py" not in members
