#!/usr/bin/env python3
"""Build the Kubernetes control plane the tests run (tests/kube/) from Go modules, into a cache folder.

Two builds, both with `go build -trimpath -ldflags="-s -w"` under `nice`:

- tools/k8s/: our small module importing k8s.io/kubernetes v1.37.2 (every k8s.io/* staging module
  pinned to v0.37.2 with `replace`) and go.etcd.io/etcd/server/v3, linked into one multi-call
  binary `shoal-k8s`; the folder gets the symlinks kube-apiserver, kube-controller-manager,
  kube-scheduler and etcd pointing at it.
- `kwok` from sigs.k8s.io/kwok (`go install sigs.k8s.io/kwok/cmd/kwok@v0.8.0`): simulated nodes and
  pod lifecycles.

The binaries land in `$SHOAL_CACHE_DIR/k8s-1.37.2/bin` (default `~/.cache/shoal`), next to a stamp
holding the SHA-256 of tools/k8s/ and the versions; the next run does nothing while the stamp
matches and every binary is there (--force rebuilds). Go's module and build caches live under
`$SHOAL_CACHE_DIR/go/` so that a fresh clone on the same machine rebuilds from cache in seconds.
A cold build costs about 15 CPU-minutes: 12 minutes on the 2 cores here when they were quiet, 27 while
other work ran; it leaves 5 GB of Go caches. With the caches, a rebuild (say after a clone) takes 30 s.
Uses the standard library and the `go` tool only (Go >= 1.26).

    python3 tools/get_k8s.py              # build if needed; prints the bin folder
    python3 tools/get_k8s.py --print-bin  # only the bin folder on stdout (for scripts)

tests/kube/conftest.py imports `ensure_binaries` and `cached_bin` from this file.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

KUBERNETES_VERSION = "1.37.2"
KUBERNETES_MAJOR, KUBERNETES_MINOR, _ = KUBERNETES_VERSION.split(".")
KWOK_MODULE = "sigs.k8s.io/kwok"
KWOK_VERSION = "v0.8.0"
REPO_ROOT = Path(__file__).resolve().parent.parent
MODULE_DIR = REPO_ROOT / "tools" / "k8s"
MODULE_FILES = ("go.mod", "go.sum", "main.go")
KWOK_STAGES = (
    "node/fast/node-initialize",
    "node/heartbeat/node-heartbeat",
    "pod/fast/pod-ready",
    "pod/fast/pod-complete",
    "pod/fast/pod-delete",
)
"""KWOK's own stage definitions (kustomize/stage/ in its module), the set kwokctl uses by default: nodes
become Ready and keep a heartbeat; pods become Running and Ready, finish, and go when deleted."""
KWOK_STAGES_FILE = "kwok-stages.yaml"
MULTI_CALL_BINARY = "shoal-k8s"
PROGRAMS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd")
"""Names shoal-k8s answers to (tools/k8s/main.go); each becomes a symlink to it."""
VERSION_PACKAGE = "k8s.io/component-base/version"
BUILD_TIMEOUT_S = 3600
"""A cold build takes 12-27 minutes on 2 cores; an hour means it is stuck."""
PROGRESS_EVERY_PACKAGES = 200
NICENESS = 15
"""The build shares 2 cores with whatever else runs; keep it from starving tests and servers."""
LOG_TAIL_LINES = 40


class GetK8sError(Exception):
    """Anything that stops the build; main() prints it and exits 1."""


def cache_root() -> Path:
    """`$SHOAL_CACHE_DIR`, else `~/.cache/shoal`."""
    configured = os.environ.get("SHOAL_CACHE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "shoal"


def k8s_dir(root: Path | None = None) -> Path:
    return (root or cache_root()) / f"k8s-{KUBERNETES_VERSION}"


def binary_names() -> tuple[str, ...]:
    return (MULTI_CALL_BINARY, *PROGRAMS, "kwok")


def sources_sha256() -> str:
    """Hash of what the build depends on: our module's files and the pinned versions."""
    digest = hashlib.sha256(f"{KUBERNETES_VERSION} {KWOK_MODULE}@{KWOK_VERSION} {KWOK_STAGES}\n".encode())
    for name in MODULE_FILES:
        digest.update(name.encode() + b"\0" + (MODULE_DIR / name).read_bytes())
    return digest.hexdigest()


def cached_bin(directory: Path | None = None) -> Path | None:
    """The bin folder when the stamp matches the sources and every binary is present, else None."""
    directory = directory or k8s_dir()
    try:
        recorded = json.loads((directory / "stamp.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict) or recorded.get("sources_sha256") != sources_sha256():
        return None
    bin_dir = directory / "bin"
    if all(os.access(bin_dir / name, os.X_OK) for name in binary_names()) and (bin_dir / KWOK_STAGES_FILE).is_file():
        return bin_dir
    return None


def find_go() -> str:
    go = shutil.which("go")
    if go is None:
        raise GetK8sError(
            "go (Go >= 1.26) is not on PATH: install it to build kube-apiserver, etcd and kwok from the "
            "Go module proxy, or set SHOAL_CACHE_DIR to a folder that already holds them"
        )
    return go


def go_environment(root: Path) -> dict[str, str]:
    """The caller's environment with Go's caches moved under the cache root (kept across clones)."""
    return {
        **os.environ,
        "GOMODCACHE": str(root / "go" / "mod"),
        "GOCACHE": str(root / "go" / "build"),
        # Read-only module folders would make the cache undeletable without chmod.
        "GOFLAGS": "-modcacherw",
    }


def run_go(command: list[str], *, cwd: Path, env: dict[str, str], log_path: Path, what: str) -> None:
    """Run one go command under nice, printing progress (packages built, from -v) and keeping its output."""
    command = ["nice", "-n", str(NICENESS), *command]
    started = time.monotonic()
    packages = 0
    tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
    with log_path.open("a") as log:
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        with subprocess.Popen(
            command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as process:
            assert process.stdout is not None
            for line in process.stdout:
                log.write(line)
                tail.append(line.rstrip())
                if not line.startswith(("go: ", "#")):
                    packages += 1
                    if packages % PROGRESS_EVERY_PACKAGES == 0:
                        elapsed_s = time.monotonic() - started
                        print(f"  {what}: {packages} packages compiled ({elapsed_s:.0f} s)", file=sys.stderr)
                if time.monotonic() - started > BUILD_TIMEOUT_S:
                    process.kill()
                    break
            returncode = process.wait()
    elapsed_s = time.monotonic() - started
    if elapsed_s > BUILD_TIMEOUT_S:
        raise GetK8sError(f"{what}: go did not finish within {BUILD_TIMEOUT_S} s; its output is in {log_path}")
    if returncode != 0:
        last = "\n".join(tail)
        raise GetK8sError(
            f"{what}: go failed (exit {returncode}); is the Go module proxy reachable?\nfull output: {log_path}\n{last}"
        )
    print(f"  {what}: built in {elapsed_s:.0f} s ({packages} packages compiled)", file=sys.stderr)


def write_kwok_stages(go: str, env: dict[str, str], cwd: Path, destination: Path) -> None:
    """One multi-document YAML of KWOK_STAGES, read from the kwok module that `go install` fetched;
    kwok runs nothing without stages (`kwok -c` this file)."""
    listing = subprocess.run(
        [go, "mod", "download", "-json", f"{KWOK_MODULE}@{KWOK_VERSION}"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if listing.returncode != 0:
        raise GetK8sError(f"go mod download {KWOK_MODULE}@{KWOK_VERSION} failed:\n{listing.stdout}{listing.stderr}")
    stage_root = Path(json.loads(listing.stdout)["Dir"]) / "kustomize" / "stage"
    documents = [(stage_root / f"{stage}.yaml").read_text() for stage in KWOK_STAGES]
    header = f"# KWOK {KWOK_VERSION}'s stages {', '.join(KWOK_STAGES)}; written by tools/get_k8s.py.\n"
    destination.write_text(header + "---\n".join(documents))


def version_ldflags() -> str:
    """`-X` flags that make a Kubernetes binary built from the module proxy report KUBERNETES_VERSION
    (kubeadm picks its image tags from it); tools/get_images.py builds the node programs with them too."""
    return " ".join(
        f"-X {VERSION_PACKAGE}.{name}={value}"
        for name, value in (
            ("gitVersion", f"v{KUBERNETES_VERSION}"),
            ("gitMajor", KUBERNETES_MAJOR),
            ("gitMinor", KUBERNETES_MINOR),
            ("gitTreeState", "clean"),
        )
    )


def build(directory: Path, root: Path) -> Path:
    go = find_go()
    env = go_environment(root)
    partial = directory / "bin.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    log_path = directory / "build.log"
    log_path.unlink(missing_ok=True)
    print(
        f"building Kubernetes {KUBERNETES_VERSION}, etcd and kwok from Go modules into {directory} ...", file=sys.stderr
    )
    run_go(
        [
            go,
            "build",
            "-v",
            "-trimpath",
            f"-ldflags=-s -w {version_ldflags()}",
            "-o",
            str(partial / MULTI_CALL_BINARY),
            ".",
        ],
        cwd=MODULE_DIR,
        env=env,
        log_path=log_path,
        what=f"{MULTI_CALL_BINARY} (kube-apiserver, kube-controller-manager, kube-scheduler, etcd)",
    )
    run_go(
        [go, "install", "-v", "-trimpath", "-ldflags=-s -w", f"{KWOK_MODULE}/cmd/kwok@{KWOK_VERSION}"],
        cwd=directory,
        env={**env, "GOBIN": str(partial)},
        log_path=log_path,
        what=f"kwok {KWOK_VERSION}",
    )
    write_kwok_stages(go, env, directory, partial / KWOK_STAGES_FILE)
    for program in PROGRAMS:
        (partial / program).symlink_to(MULTI_CALL_BINARY)
    bin_dir = directory / "bin"
    shutil.rmtree(bin_dir, ignore_errors=True)
    partial.rename(bin_dir)
    sizes = {name: (bin_dir / name).stat().st_size for name in (MULTI_CALL_BINARY, "kwok")}
    stamp = {
        "sources_sha256": sources_sha256(),
        "kubernetes_version": KUBERNETES_VERSION,
        "kwok_version": KWOK_VERSION,
        "binaries": list(binary_names()),
        "sizes_bytes": sizes,
    }
    (directory / "stamp.json").write_text(json.dumps(stamp, indent=1) + "\n")
    return bin_dir


def ensure_binaries(*, force: bool = False, root: Path | None = None) -> Path:
    """The bin folder holding kube-apiserver, kube-controller-manager, kube-scheduler, etcd and kwok,
    built first unless the cached build matches tools/k8s/."""
    root = root or cache_root()
    directory = k8s_dir(root)
    if not force:
        bin_dir = cached_bin(directory)
        if bin_dir is not None:
            return bin_dir
    directory.mkdir(parents=True, exist_ok=True)
    # Two test runs (or checkouts) sharing the cache must not build into one bin.partial at once.
    with (directory / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force:
            bin_dir = cached_bin(directory)
            if bin_dir is not None:
                return bin_dir
        return build(directory, root)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="build again even when the cache matches")
    parser.add_argument("--print-bin", action="store_true", help="print only the bin folder on stdout")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        bin_dir = ensure_binaries(force=args.force)
    except GetK8sError as error:
        print(f"get_k8s: {error}", file=sys.stderr)
        return 1
    if args.print_bin:
        print(bin_dir)
    else:
        sizes = ", ".join(
            f"{name} {(bin_dir / name).stat().st_size / 2**20:.0f} MiB" for name in (MULTI_CALL_BINARY, "kwok")
        )
        print(
            f"Kubernetes {KUBERNETES_VERSION} + etcd + kwok {KWOK_VERSION} in {bin_dir} "
            f"({sizes}; {time.monotonic() - started:.1f} s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
