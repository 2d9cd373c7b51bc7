#!/usr/bin/env python3
"""Build the container images Shoal's Kubernetes tests and `make kind` need, with no container registry.

Only package registries are used: Debian's mirror, PyPI (inside builds) and the Go module proxy.
Each stage is keyed by the SHA-256 of its inputs and skipped while its result exists, so a warm run
takes seconds; docs/images.md has cold times. Stages, in order:

1. kind            `go install sigs.k8s.io/kind@KIND_VERSION` into $SHOAL_CACHE_DIR/kind-<version>/bin
2. Debian base     `debootstrap --variant=minbase bookworm` from this machine's Debian mirror, imported
                   as shoal-build/debian:<key>
3. Python base     tools/images/python.Dockerfile on it, tagged `python:3.11-slim`: the project's
                   Dockerfiles build unmodified on it (the legacy builder uses a local image as is)
4. node programs   kubelet, kubeadm, kubectl, kube-proxy (tools/k8s-node, one multi-call binary),
                   CoreDNS (`go install`), pause (tools/images/pause.c, static); the control plane
                   comes from tools/get_k8s.py
5. components      tools/images/components.Dockerfile, tagged with every name
                   `kubeadm config images list` prints, plus CoreDNS's and pause's own images
6. kind node       tools/images/kind-node.Dockerfile: kind's base recipe with Debian's containerd,
                   runc and CNI plugins, tools/images/node-files, tools/images/pod-network.yaml as
                   kind's default CNI, and the component images preloaded at boot

    python3 tools/get_images.py                 # all stages; prints what it built and where
    python3 tools/get_images.py --python-base   # stages 2-3 only (enough for `docker build`)
    python3 tools/get_images.py --print-env     # all stages, then KIND=... KIND_NODE_IMAGE=... on stdout

Needs root for debootstrap (installed with apt-get when missing), docker answering
(tools/container_engine.py), go and gcc. Standard library only.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

TOOLS_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS_DIR))
import get_k8s  # noqa: E402 - tools/ is a folder of scripts, not a package

REPO_ROOT = TOOLS_DIR.parent
IMAGES_DIR = TOOLS_DIR / "images"
NODE_MODULE_DIR = TOOLS_DIR / "k8s-node"
NODE_MODULE_FILES = ("go.mod", "go.sum", "main.go")

KIND_MODULE = "sigs.k8s.io/kind"
KIND_VERSION = "v0.33.0"
COREDNS_MODULE = "github.com/coredns/coredns"
COREDNS_VERSION = "v1.14.6"
"""kubeadm 1.37's constants.CoreDNSVersion: the tag kubeadm's CoreDNS Deployment asks for."""
ETCD_IMAGE_TAG = "3.7.0-0"
"""kubeadm 1.37's constants.DefaultEtcdVersion; the etcd inside is tools/k8s's go.etcd.io/etcd v3.7.0."""
PAUSE_TAGS = ("3.10.2", "3.10")
"""kubeadm 1.37 names pause 3.10.2; kind's containerd config names 3.10 (both are the same image)."""
DEBIAN_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
PYTHON_BASE_TAG = "python:3.11-slim"
"""The FROM of broker_image/Dockerfile and Dockerfile.spark."""
REGISTRY = "registry.k8s.io"
BUILD_PREFIX = "shoal-build"
DOCKER_TIMEOUT_S = 1800
DEBOOTSTRAP_TIMEOUT_S = 900


class GetImagesError(Exception):
    """Anything that stops a stage; main() prints it and exits 1."""


def say(message: str) -> None:
    print(f"get_images: {message}", file=sys.stderr, flush=True)


def digest_of(*parts: str | bytes | Path | Iterable[Path]) -> str:
    """SHA-256 over strings, bytes and files (path and content), in order; 16 hex digits."""
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, Path):
            paths: Iterable[Path] = [part]
        elif isinstance(part, (str, bytes)):
            digest.update(part.encode() if isinstance(part, str) else part)
            digest.update(b"\0")
            continue
        else:
            paths = part
        for path in paths:
            files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            for file in files:
                digest.update(str(file.relative_to(REPO_ROOT) if file.is_relative_to(REPO_ROOT) else file).encode())
                digest.update(b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def run(command: list[str], *, what: str, timeout_s: float = DOCKER_TIMEOUT_S, **kwargs: object) -> str:
    """Run a command, returning its stdout; on failure raise with the tail of its output."""
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            **kwargs,  # type: ignore[call-overload]
        )
    except subprocess.TimeoutExpired as error:
        raise GetImagesError(f"{what}: did not finish within {timeout_s:.0f} s") from error
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-30:])
        raise GetImagesError(f"{what}: `{' '.join(command[:4])} ...` failed (exit {done.returncode}):\n{tail}")
    return str(done.stdout)


def image_exists(name: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", name], capture_output=True, check=False).returncode == 0


def docker_build(context: Path, dockerfile: Path, tag: str, *, what: str, build_args: dict[str, str]) -> None:
    started = time.monotonic()
    say(f"{what}: docker build -t {tag} ...")
    arguments = [f"--build-arg={key}={value}" for key, value in build_args.items()]
    run(["docker", "build", "-q", "-f", str(dockerfile), "-t", tag, *arguments, str(context)], what=what)
    say(f"{what}: built in {time.monotonic() - started:.0f} s")


def tag(source: str, *targets: str) -> None:
    for target in targets:
        run(["docker", "tag", source, target], what=f"docker tag {target}")


# ---------------------------------------------------------------- 1. kind
def ensure_kind(root: Path) -> Path:
    binary = root / f"kind-{KIND_VERSION}" / "bin" / "kind"
    if os.access(binary, os.X_OK):
        return binary
    go = get_k8s.find_go()
    binary.parent.mkdir(parents=True, exist_ok=True)
    get_k8s.run_go(
        [go, "install", "-v", "-trimpath", "-ldflags=-s -w", f"{KIND_MODULE}@{KIND_VERSION}"],
        cwd=binary.parent,
        env={**get_k8s.go_environment(root), "GOBIN": str(binary.parent)},
        log_path=binary.parent.parent / "build.log",
        what=f"kind {KIND_VERSION}",
    )
    return binary


def kind_module_dir(root: Path) -> Path:
    """The kind module's source in Go's module cache (its images/base recipe is read from there)."""
    listing = run(
        [get_k8s.find_go(), "mod", "download", "-json", f"{KIND_MODULE}@{KIND_VERSION}"],
        what="go mod download kind",
        env=get_k8s.go_environment(root),
        cwd=str(root),
    )
    return Path(json.loads(listing)["Dir"])


# ---------------------------------------------------------------- 2. Debian base
def mirror_in(sources: str) -> str | None:
    """The Debian archive URI an apt sources file names (deb822 `URIs:` or a one-line `deb` entry), if any."""
    match = re.search(r"^URIs:\s*(\S+/debian)/?\s*$", sources, re.MULTILINE) or re.search(
        r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+/debian)/?\s", sources, re.MULTILINE
    )
    return match.group(1) if match else None


def debian_mirror() -> str:
    """The first Debian mirror this machine's apt uses, else deb.debian.org."""
    candidates = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in candidates:
        try:
            mirror = mirror_in(path.read_text())
        except OSError:
            continue
        if mirror:
            return mirror
    return DEFAULT_MIRROR


def ensure_debian_base() -> str:
    mirror = debian_mirror()
    name = f"{BUILD_PREFIX}/debian:{DEBIAN_SUITE}-{digest_of('minbase', DEBIAN_SUITE, mirror)}"
    if image_exists(name):
        return name
    if os.geteuid() != 0:
        raise GetImagesError("debootstrap needs root: run tools/get_images.py as root (CI does)")
    if shutil.which("debootstrap") is None:
        say("installing debootstrap with apt-get ...")
        run(
            ["apt-get", "install", "-y", "-qq", "debootstrap"],
            what="apt-get install debootstrap",
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="shoal-debootstrap.") as scratch:
        rootfs = Path(scratch) / "rootfs"
        say(f"Debian base: debootstrap --variant=minbase {DEBIAN_SUITE} from {mirror} (about a minute) ...")
        run(
            ["debootstrap", "--variant=minbase", DEBIAN_SUITE, str(rootfs), mirror],
            what="debootstrap",
            timeout_s=DEBOOTSTRAP_TIMEOUT_S,
        )
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for path in (rootfs / leftover).glob("*"):
                if path.is_file():
                    path.unlink()
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            ["docker", "import", "-", name], stdin=tar.stdout, capture_output=True, text=True, check=False
        )
        tar.wait()
        if imported.returncode != 0 or tar.returncode != 0:
            raise GetImagesError(f"docker import of the Debian base failed: {imported.stderr.strip()}")
    say(f"Debian base: {name} in {time.monotonic() - started:.0f} s")
    return name


# ---------------------------------------------------------------- 3. Python base
def host_ca_certificates() -> list[Path]:
    return sorted(Path("/usr/local/share/ca-certificates").rglob("*.crt"))


def ensure_python_base(debian: str) -> str:
    dockerfile = IMAGES_DIR / "python.Dockerfile"
    certificates = host_ca_certificates()
    name = f"{BUILD_PREFIX}/python:3.11-{digest_of(debian, dockerfile, certificates)}"
    if not image_exists(name):
        with tempfile.TemporaryDirectory(prefix="shoal-python-base.") as scratch:
            context = Path(scratch)
            (context / "ca-certificates").mkdir()
            for certificate in certificates:
                shutil.copy(certificate, context / "ca-certificates" / certificate.name)
            docker_build(context, dockerfile, name, what="Python base", build_args={"DEBIAN_IMAGE": debian})
    tag(name, PYTHON_BASE_TAG)
    return name


# ---------------------------------------------------------------- 4. node programs
def node_programs_dir(root: Path) -> Path:
    key = digest_of(
        get_k8s.KUBERNETES_VERSION,
        COREDNS_VERSION,
        [NODE_MODULE_DIR / n for n in NODE_MODULE_FILES],
        IMAGES_DIR / "pause.c",
    )
    return root / f"kind-node-programs-{key}"


def ensure_node_programs(root: Path) -> Path:
    directory = node_programs_dir(root)
    bin_dir = directory / "bin"
    wanted = ("shoal-node", "coredns", "pause")
    if all(os.access(bin_dir / name, os.X_OK) for name in wanted):
        return bin_dir
    go = get_k8s.find_go()
    env = get_k8s.go_environment(root)
    partial = directory / "bin.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    log_path = directory / "build.log"
    get_k8s.run_go(
        [
            go,
            "build",
            "-v",
            "-trimpath",
            f"-ldflags=-s -w {get_k8s.version_ldflags()}",
            "-o",
            str(partial / "shoal-node"),
            ".",
        ],
        cwd=NODE_MODULE_DIR,
        env=env,
        log_path=log_path,
        what="shoal-node (kubelet, kubeadm, kubectl, kube-proxy)",
    )
    get_k8s.run_go(
        [go, "install", "-v", "-trimpath", "-ldflags=-s -w", f"{COREDNS_MODULE}@{COREDNS_VERSION}"],
        cwd=directory,
        env={**env, "GOBIN": str(partial), "CGO_ENABLED": "0"},
        log_path=log_path,
        what=f"CoreDNS {COREDNS_VERSION}",
    )
    run(["gcc", "-static", "-Os", "-s", "-o", str(partial / "pause"), str(IMAGES_DIR / "pause.c")], what="pause")
    shutil.rmtree(bin_dir, ignore_errors=True)
    partial.rename(bin_dir)
    return bin_dir


# ---------------------------------------------------------------- 5. component images
def component_names() -> dict[str, str]:
    """Program → the image name kubeadm (and kind's containerd config) asks for."""
    version = f"v{get_k8s.KUBERNETES_VERSION}"
    return {
        "kube-apiserver": f"{REGISTRY}/kube-apiserver:{version}",
        "kube-controller-manager": f"{REGISTRY}/kube-controller-manager:{version}",
        "kube-scheduler": f"{REGISTRY}/kube-scheduler:{version}",
        "kube-proxy": f"{REGISTRY}/kube-proxy:{version}",
        "etcd": f"{REGISTRY}/etcd:{ETCD_IMAGE_TAG}",
    }


def coredns_name() -> str:
    return f"{REGISTRY}/coredns/coredns:{COREDNS_VERSION}"


def pause_names() -> list[str]:
    return [f"{REGISTRY}/pause:{tag_}" for tag_ in PAUSE_TAGS]


def check_kubeadm_names(node_bin: Path) -> None:
    """The names tagged here must be the ones this kubeadm asks for, or kubelet would try a registry."""
    listed = run(
        [
            str(node_bin / "shoal-node"),
            "kubeadm",
            "config",
            "images",
            "list",
            "--kubernetes-version",
            f"v{get_k8s.KUBERNETES_VERSION}",
        ],
        what="kubeadm config images list",
    ).split()
    ours = {*component_names().values(), coredns_name(), *pause_names()}
    missing = sorted(set(listed) - ours)
    if missing:
        raise GetImagesError(f"kubeadm asks for images this tool does not tag: {', '.join(missing)}")


def ensure_components(debian: str, control_plane_bin: Path, node_bin: Path) -> list[str]:
    """Build the component images; the list of every name to preload into kind nodes."""
    check_kubeadm_names(node_bin)
    dockerfile = IMAGES_DIR / "components.Dockerfile"
    binaries = [control_plane_bin / "shoal-k8s", node_bin / "shoal-node", node_bin / "coredns"]
    key = digest_of(debian, dockerfile, binaries)
    name = f"{BUILD_PREFIX}/k8s-components:{key}"
    coredns = f"{BUILD_PREFIX}/coredns:{key}"
    pause = f"{BUILD_PREFIX}/pause:{digest_of(node_bin / 'pause')}"
    with tempfile.TemporaryDirectory(prefix="shoal-components.") as scratch:
        context = Path(scratch)
        if not image_exists(name):
            (context / "bin").mkdir()
            for binary in binaries:
                shutil.copy(binary, context / "bin" / binary.name)
            docker_build(context, dockerfile, name, what="component images", build_args={"DEBIAN_IMAGE": debian})
        if not image_exists(coredns):
            (context / "coredns.Dockerfile").write_text(f'FROM {name}\nENTRYPOINT ["/coredns"]\n')
            docker_build(context, context / "coredns.Dockerfile", coredns, what="CoreDNS image", build_args={})
        if not image_exists(pause):
            shutil.copy(node_bin / "pause", context / "pause")
            (context / "pause.Dockerfile").write_text(
                'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n'
            )
            docker_build(context, context / "pause.Dockerfile", pause, what="pause image", build_args={})
    tag(name, *component_names().values())
    tag(coredns, coredns_name())
    tag(pause, *pause_names())
    return [*component_names().values(), coredns_name(), *pause_names()]


# ---------------------------------------------------------------- 6. kind node image
def ensure_node_image(root: Path, debian: str, node_bin: Path, preload: list[str]) -> str:
    kind_base = kind_module_dir(root) / "images" / "base" / "files"
    dockerfile = IMAGES_DIR / "kind-node.Dockerfile"
    image_ids = run(["docker", "image", "inspect", "--format", "{{.Id}}", *preload], what="image ids")
    key = digest_of(
        debian,
        dockerfile,
        IMAGES_DIR / "node-files",
        IMAGES_DIR / "pod-network.yaml",
        kind_base,
        node_bin / "shoal-node",
        image_ids,
        get_k8s.KUBERNETES_VERSION,
    )
    name = f"{BUILD_PREFIX}/kind-node:v{get_k8s.KUBERNETES_VERSION}-{key}"
    if image_exists(name):
        return name
    with tempfile.TemporaryDirectory(prefix="shoal-kind-node.") as scratch:
        context = Path(scratch)
        shutil.copytree(kind_base, context / "kind-base", copy_function=shutil.copy)
        for path in (context / "kind-base").rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        overlay = context / "node"
        shutil.copytree(IMAGES_DIR / "node-files", overlay)
        (overlay / "usr" / "local" / "bin").mkdir(parents=True)
        shutil.copy(node_bin / "shoal-node", overlay / "usr" / "local" / "bin" / "shoal-node")
        kind_dir = overlay / "kind"
        (kind_dir / "manifests").mkdir(parents=True)
        (kind_dir / "images").mkdir()
        (kind_dir / "version").write_text(f"v{get_k8s.KUBERNETES_VERSION}\n")
        (kind_dir / "pause-image").write_text(pause_names()[-1])
        shutil.copy(IMAGES_DIR / "pod-network.yaml", kind_dir / "manifests" / "default-cni.yaml")
        say(f"kind node: docker save of {len(preload)} component images ...")
        run(["docker", "save", "-o", str(kind_dir / "images" / "components.tar"), *preload], what="docker save")
        docker_build(context, dockerfile, name, what="kind node image", build_args={"DEBIAN_IMAGE": debian})
    return name


# ---------------------------------------------------------------- all
def ensure_all(root: Path) -> dict[str, str]:
    kind = ensure_kind(root)
    debian = ensure_debian_base()
    python = ensure_python_base(debian)
    control_plane_bin = get_k8s.ensure_binaries(root=root)
    node_bin = ensure_node_programs(root)
    preload = ensure_components(debian, control_plane_bin, node_bin)
    node_image = ensure_node_image(root, debian, node_bin, preload)
    return {"KIND": str(kind), "KIND_NODE_IMAGE": node_image, "PYTHON_BASE": python, "DEBIAN_BASE": debian}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    parser.add_argument("--python-base", action="store_true", help="only the Debian and Python bases")
    parser.add_argument("--print-env", action="store_true", help="print KIND=... KIND_NODE_IMAGE=... lines on stdout")
    args = parser.parse_args(argv)
    started = time.monotonic()
    root = get_k8s.cache_root()
    root.mkdir(parents=True, exist_ok=True)
    try:
        with (root / "images.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if args.python_base:
                debian = ensure_debian_base()
                results = {"PYTHON_BASE": ensure_python_base(debian), "DEBIAN_BASE": debian}
            else:
                results = ensure_all(root)
    except (GetImagesError, get_k8s.GetK8sError) as error:
        print(f"get_images: {error}", file=sys.stderr)
        return 1
    say(f"ready in {time.monotonic() - started:.0f} s")
    for key, value in results.items():
        print(f"{key}={value}" if args.print_env else f"{key.lower().replace('_', ' ')}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
