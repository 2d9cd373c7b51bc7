"""What a container runtime would do for one container, without images: pure builders the runner runs.

A container here is a local process in a mount namespace of its own (`unshare --mount`, private
propagation) whose root is an overlay of this machine's `/` with a tmpfs on top: the process sees
this machine's files (the venv's `shoal`, Java, pyspark) as its image, writes that leave no trace,
and the pod's volumes bind-mounted at exactly the pod's mountPaths. Nothing in the pod spec is
rewritten: `/store`, `/etc/shoal/config`, `/tmp` are what the process opens, as in the image.

Each container has a UTS namespace with the pod's hostname, which `/etc/hosts` resolves to the pod
IP as kubelet's hosts file does. `/etc/hosts` is a symlink to a file the runner rewrites by rename:
cluster DNS for pod names and headless Services, as CoreDNS would answer them. There are no network
namespaces: pods share this machine's network, each on its own pod IP in 127.0.0.0/8, so the runner
tells the Shoal entrypoint which address to bind (SHOAL_LISTEN_HOST, as for a hostNetwork pod).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOSTS_MOUNT = "/run/shoal-hosts"
HOSTS_FILE = "hosts"
SYMLINK_HOPS_MAX = 40
_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$")

Object = dict[str, Any]


@dataclass(frozen=True)
class Image:
    """The parts of an OCI image config a pod can see: ENTRYPOINT, CMD, ENV, WORKDIR, and files the
    image adds on top of this machine's (path in the container -> file here, bound read-only)."""

    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    env: Mapping[str, str]
    workdir: str
    files: Mapping[str, Path] = field(default_factory=dict)
    directories: tuple[str, ...] = ()
    """Empty folders the image has (under /tmp too, which each container gets fresh)."""


@dataclass(frozen=True)
class Mount:
    source: Path
    target: str
    read_only: bool


def argv(image: Image, container: Mapping[str, Any], env: Mapping[str, str]) -> list[str]:
    """Kubernetes' rule: `command` replaces ENTRYPOINT (and drops CMD), `args` replaces CMD; both
    with $(VAR) references expanded from the container's environment."""
    command = container.get("command")
    args = container.get("args")
    words = [*command, *(args or [])] if command else [*image.entrypoint, *(image.cmd if args is None else args)]
    return [expand(str(word), env) for word in words]


def expand(text: str, env: Mapping[str, str]) -> str:
    """$(VAR) -> its value when defined (else left as is); $$ -> $."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _REFERENCE.sub(one, text)


def field_value(pod: Mapping[str, Any], path: str, pod_ip: str, host_ip: str) -> str:
    """A downward-API fieldRef of `pod` (status fields from what the runner gave the pod)."""
    meta = pod["metadata"]
    spec = pod["spec"]
    simple = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta["namespace"],
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": host_ip,
        "status.hostIPs": host_ip,
    }
    if path in simple:
        return str(simple[path])
    keyed = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if keyed:
        return str((meta.get(keyed.group(1)) or {}).get(keyed.group(2), ""))
    raise ValueError(f"fieldRef {path!r} is not supported by the process runner")


def resource_value(container: Mapping[str, Any], resource: str) -> str:
    """A resourceFieldRef: the container's limit, else its request, else what a big node would give."""
    kind, _, name = resource.partition(".")
    resources = container.get("resources") or {}
    value = (resources.get(kind) or {}).get(name) or (resources.get("requests") or {}).get(name)
    if value is None:
        return "2" if name == "cpu" else str(8 * 1024**3)
    return str(value)


def container_env(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    base: Mapping[str, str],
    pod_ip: str,
    host_ip: str,
    source: Callable[[str, str, str], Mapping[str, str]],
) -> dict[str, str]:
    """The container's environment: `base` (image and runner), then envFrom, then env in order.

    `source(kind, name, key)` reads a ConfigMap's or Secret's data ("" key: all of it)."""
    env = dict(base)
    for entry in container.get("envFrom") or []:
        prefix = entry.get("prefix", "")
        for kind in ("configMapRef", "secretRef"):
            if kind in entry:
                data = source(kind, entry[kind]["name"], "")
                env.update({prefix + key: value for key, value in data.items()})
    for entry in container.get("env") or []:
        name = entry["name"]
        if "value" in entry:
            env[name] = expand(str(entry["value"]), env)
            continue
        value_from = entry.get("valueFrom") or {}
        if "fieldRef" in value_from:
            env[name] = field_value(pod, value_from["fieldRef"]["fieldPath"], pod_ip, host_ip)
        elif "resourceFieldRef" in value_from:
            env[name] = resource_value(container, value_from["resourceFieldRef"]["resource"])
        elif "configMapKeyRef" in value_from or "secretKeyRef" in value_from:
            kind = "configMapKeyRef" if "configMapKeyRef" in value_from else "secretKeyRef"
            ref = value_from[kind]
            data = source(kind, ref["name"], ref["key"])
            if ref["key"] in data:
                env[name] = data[ref["key"]]
            elif not ref.get("optional"):
                raise LookupError(f"{kind} {ref['name']}/{ref['key']} not found")
        else:
            env[name] = ""
    return env


def resolve_in_root(path: str, root: Path = Path("/")) -> str:
    """`path` with the symlinks of the root's lower layer (this machine's `/`) followed inside that root:
    /var/run/secrets is /run/secrets on Debian, and a mkdir through `$R/var/run` (-> /run) would leave
    the sandbox and create folders on this machine."""
    parts = [part for part in path.split("/") if part]
    resolved: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == ".":
            continue
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        candidate = root.joinpath(*resolved, part)
        if candidate.is_symlink():
            hops += 1
            assert hops < SYMLINK_HOPS_MAX, f"too many symlinks under {path}"
            target = os.readlink(candidate)
            if target.startswith("/"):
                resolved = []
            parts = [p for p in target.split("/") if p] + parts
            continue
        resolved.append(part)
    return "/" + "/".join(resolved)


def sandbox_script(
    layer: Path,
    image: Image,
    mounts: Sequence[Mount],
    hosts_dir: Path,
    env: Mapping[str, str],
    words: Sequence[str],
    workdir: str,
    termination_log: tuple[Path, str] | None = None,
    hostname: str = "",
) -> str:
    """A POSIX sh script for `unshare --mount --uts --propagation private sh SCRIPT`: set the pod's
    hostname, build the root, mount the volumes, then `exec chroot` into the container's command (same
    PID all the way)."""
    q = shlex.quote
    lines = [
        "set -eu",
        *([f"hostname {q(hostname)}"] if hostname else []),
        f"L={q(str(layer))}",
        'mkdir -p "$L"',
        'mount -t tmpfs -o mode=0755 shoal-layer "$L"',
        'mkdir "$L/upper" "$L/work" "$L/root"',
        'mount -t overlay shoal-root -o "lowerdir=/,upperdir=$L/upper,workdir=$L/work" "$L/root"',
        'R="$L/root"',
        'for d in proc sys; do mount --rbind "/$d" "$R/$d"; done',
        # A /dev of its own (files made there, such as /dev/termination-log, stay in the sandbox)
        # with the device nodes a runtime gives every container.
        'mount -t tmpfs -o mode=0755 shoal-dev "$R/dev"',
        'for n in null zero full random urandom tty; do touch "$R/dev/$n"; mount --bind "/dev/$n" "$R/dev/$n"; done',
        'mkdir "$R/dev/pts" "$R/dev/shm" && mount --rbind /dev/pts "$R/dev/pts"',
        'mount -t tmpfs -o mode=1777 shoal-shm "$R/dev/shm"',
        'ln -s /proc/self/fd "$R/dev/fd" && ln -s /proc/self/fd/0 "$R/dev/stdin"',
        'ln -s /proc/self/fd/1 "$R/dev/stdout" && ln -s /proc/self/fd/2 "$R/dev/stderr"',
        # The image's own /tmp is empty; this machine's must not show through.
        'mount -t tmpfs -o mode=1777 shoal-tmp "$R/tmp"',
        *(f'mkdir -p "$R"{q(resolve_in_root(d))}' for d in image.directories),
    ]
    binds = [Mount(source, target, True) for target, source in image.files.items()]
    binds += sorted(mounts, key=lambda m: m.target.count("/"))
    if REPO_ROOT.is_relative_to("/tmp"):
        # The "image" runs this checkout and its venv. A checkout under /tmp (CI's clean clone) would be
        # hidden by the sandbox's /tmp and by a pod's emptyDir there; an image's files are never under
        # either, so it goes back at its path last (read-only, as image files are).
        binds.append(Mount(REPO_ROOT, str(REPO_ROOT), True))
    if termination_log is not None:
        # kubelet's terminationMessagePath: a file of the runner's over whatever the path holds.
        binds.append(Mount(termination_log[0], termination_log[1], False))
    binds.append(Mount(hosts_dir, HOSTS_MOUNT, True))
    for bind in binds:
        target = f'"$R"{q(resolve_in_root(bind.target))}'
        if bind.source.is_dir():
            lines.append(f"mkdir -p {target}")
        else:
            lines.append(f'mkdir -p "$(dirname {target})" && touch {target}')
        lines.append(f"mount --bind {q(str(bind.source))} {target}")
        if bind.read_only:
            lines.append(f"mount -o remount,bind,ro {target}")
    lines += [
        f'rm -f "$R"{q(resolve_in_root("/etc/hosts"))} && ln -s {q(HOSTS_MOUNT + "/" + HOSTS_FILE)} "$R/etc/hosts"',
        f'mkdir -p "$R"{q(resolve_in_root(workdir))}',
        'exec chroot "$R" /usr/bin/env -i '
        + " ".join(q(f"{key}={value}") for key, value in env.items())
        + ' /bin/sh -c \'cd "$0" && exec "$@"\' '
        + " ".join(q(word) for word in [workdir, *words]),
    ]
    return "\n".join(lines) + "\n"


def hosts_text(records: Mapping[str, Sequence[str]]) -> str:
    """/etc/hosts for every pod: loopback, then IP -> names."""
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    lines += [f"{ip}\t{' '.join(names)}" for ip, names in sorted(records.items())]
    return "\n".join(lines) + "\n"


def dns_names(pod: Mapping[str, Any], cluster_domain: str = "cluster.local") -> list[str]:
    """The names CoreDNS gives a pod with hostname and subdomain (a StatefulSet's pods under their
    headless Service): <hostname>.<subdomain>.<ns>.svc[.<domain>], and the bare hostname."""
    spec = pod["spec"]
    namespace = pod["metadata"]["namespace"]
    hostname = spec.get("hostname") or pod["metadata"]["name"]
    names = []
    if spec.get("subdomain"):
        fqdn = f"{hostname}.{spec['subdomain']}.{namespace}.svc"
        names += [f"{fqdn}.{cluster_domain}", fqdn]
    names.append(hostname)
    return names


def shoal_image() -> Image:
    """broker_image/Dockerfile: the entrypoint script, `shoal` and python from this venv."""
    venv_bin = REPO_ROOT / ".venv" / "bin"
    return Image(
        entrypoint=("/usr/local/bin/shoal-entrypoint",),
        cmd=("broker",),
        env={
            "PATH": f"{venv_bin}:{SYSTEM_PATH}",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "HOME": "/home/shoal",
        },
        workdir="/home/shoal",
        files={"/usr/local/bin/shoal-entrypoint": REPO_ROOT / "broker_image" / "entrypoint.sh"},
    )


SPARK_ENTRYPOINT = "/opt/shoal/spark-entrypoint.sh"
SPARK_JOBS = "/opt/shoal/spark/jobs"


def spark_image() -> Image:
    """broker_image/Dockerfile.spark: its entrypoint (without tini, which only reaps), the job modules at
    /opt/shoal/spark/jobs, SPARK_HOME in this venv's pyspark, Java from this machine."""
    venv_bin = REPO_ROOT / ".venv" / "bin"
    site = next((REPO_ROOT / ".venv" / "lib").glob("python3*/site-packages"))
    return Image(
        entrypoint=(SPARK_ENTRYPOINT,),
        cmd=("shoal", "spark", "run", "--help"),
        env={
            "PATH": f"{venv_bin}:{SYSTEM_PATH}",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "HOME": "/home/shoal",
            "SPARK_HOME": str(site / "pyspark"),
            "PYSPARK_PYTHON": str(venv_bin / "python"),
            "PYSPARK_DRIVER_PYTHON": str(venv_bin / "python"),
        },
        workdir="/home/shoal",
        files={
            SPARK_ENTRYPOINT: REPO_ROOT / "broker_image" / "spark-entrypoint.sh",
            SPARK_JOBS: REPO_ROOT / "spark" / "jobs",
        },
    )


def e2e_tests_image() -> Image:
    """tests/e2e/Dockerfile: the Shoal image plus pytest, the C++ client and the e2e tests under /e2e."""
    base = shoal_image()
    tests = REPO_ROOT / "tests"
    return Image(
        entrypoint=(),
        cmd=("python", "-m", "pytest", "-p", "no:cacheprovider", "-ra", "-m", "e2e", "tests/e2e/test_kind.py"),
        # The image has pytest alone; this venv's plugins (pytest-asyncio, ...) must not load there.
        env={**base.env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        workdir="/e2e",
        directories=("/tmp/home",),
        files={
            **base.files,
            "/e2e/tests/conftest.py": tests / "conftest.py",
            "/e2e/tests/ports.py": tests / "ports.py",
            "/e2e/tests/e2e": tests / "e2e",
            "/e2e/tests/scenarios/cpp_client_scenarios.py": tests / "scenarios" / "cpp_client_scenarios.py",
            "/e2e/examples": REPO_ROOT / "examples",
        },
    )
