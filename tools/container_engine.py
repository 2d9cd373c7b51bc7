#!/usr/bin/env python3
"""Make a docker engine answer on this machine: install it if missing, start it if stopped.

What a fresh Debian machine of ours needs before `kind` or `docker build` work (measured in
../shared/docs/tooling.md, "Containers and kind"):

1. `docker.io` from Debian (`apt-get install`, as root), when `dockerd` is not on PATH.
2. A runc wrapper as docker's default runtime. These VMs' capability bounding set lacks
   CAP_SYS_RESOURCE, so runc fails to start a container that asks for it (every `--privileged`
   container, hence every kind node), that lowers its OOM score below 0, or that raises an rlimit
   above our own hard limit. The wrapper edits the OCI bundle's config.json (`create`/`run`) or
   the `--process` file (`exec`) so that none of that is asked for, then execs runc. On a machine
   that has the capability the edits change nothing.
3. `dockerd` started in the background (PID 1 is not systemd here), logging to
   /var/log/shoal-dockerd.log, and waited for until `docker info` answers.

Every step is skipped when already done, so a second run takes well under a second.

    python3 tools/container_engine.py           # ensure; prints the engine's version
    python3 tools/container_engine.py --check   # exit 0 if docker answers, else 1 with the reason
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

WRAPPER_PATH = Path("/usr/local/libexec/shoal-runc")
DAEMON_JSON = Path("/etc/docker/daemon.json")
DOCKERD_LOG = Path("/var/log/shoal-dockerd.log")
RUNTIME_NAME = "shoal-runc"
DAEMON_START_TIMEOUT_S = 90.0
"""dockerd answers within 2-5 s here; a minute and a half means it failed (see its log)."""
APT_TIMEOUT_S = 900.0
PACKAGES = ("docker.io",)

# The wrapper runs for every container start and exec, so it is a plain python3 script with no
# imports beyond the standard library; python3 is the host's own interpreter.
WRAPPER_SOURCE = r'''#!/usr/bin/python3
"""Written by Shoal's tools/container_engine.py: docker's default runtime on machines whose capability
bounding set lacks CAP_SYS_RESOURCE. Edits what runc is asked for, then execs runc."""
import json, os, resource, sys

RUNC = "/usr/sbin/runc" if os.path.exists("/usr/sbin/runc") else "/usr/bin/runc"
DROPPED = "CAP_SYS_RESOURCE"


def bounded():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("CapBnd:"):
                return bool(int(line.split()[1], 16) & (1 << 24))
    return True


def fix_process(process):
    caps = process.get("capabilities") or {}
    for key, names in caps.items():
        if isinstance(names, list) and DROPPED in names:
            caps[key] = [name for name in names if name != DROPPED]
    for limit in process.get("rlimits") or []:
        number = getattr(resource, limit.get("type", ""), None)
        if number is None:
            continue
        _, hard = resource.getrlimit(number)
        if hard != resource.RLIM_INFINITY:
            limit["hard"] = min(limit.get("hard", hard), hard)
            limit["soft"] = min(limit.get("soft", hard), limit["hard"])
    if process.get("oomScoreAdj", 0) < 0:
        process["oomScoreAdj"] = 0


def edit(path, whole_config):
    with open(path) as handle:
        document = json.load(handle)
    if whole_config:
        fix_process(document.get("process") or {})
    else:
        fix_process(document)
    with open(path, "w") as handle:
        json.dump(document, handle)


def option(args, names, default=None):
    for index, arg in enumerate(args):
        for name in names:
            if arg == name and index + 1 < len(args):
                return args[index + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return default


def main():
    args = sys.argv[1:]
    if not bounded():
        commands = [arg for arg in args if not arg.startswith("-")]
        command = next((arg for arg in commands if arg in ("create", "run", "exec")), None)
        if command in ("create", "run"):
            bundle = option(args, ("--bundle", "-b"), os.getcwd())
            config = os.path.join(bundle, "config.json")
            if os.path.exists(config):
                edit(config, True)
        elif command == "exec":
            process = option(args, ("--process", "-p"))
            if process and os.path.exists(process):
                edit(process, False)
    os.execv(RUNC, [RUNC, *args])


main()
'''


class EngineError(Exception):
    """Why docker cannot be made to answer; main() prints it and exits 1."""


def docker_answers() -> tuple[bool, str]:
    """(True, server version) when `docker info` reaches a daemon, else (False, why)."""
    if shutil.which("docker") is None:
        return False, "the docker command is not installed"
    try:
        answer = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False, "docker info did not answer within 20 s"
    if answer.returncode != 0:
        return False, (answer.stderr.strip().splitlines() or ["docker info failed"])[-1]
    return True, answer.stdout.strip()


def install_packages() -> None:
    if os.geteuid() != 0:
        raise EngineError("dockerd is not installed and this is not root: run `apt-get install docker.io` as root")
    if shutil.which("apt-get") is None:
        raise EngineError("dockerd is not installed and there is no apt-get: install docker with your package manager")
    print(f"container_engine: apt-get install {' '.join(PACKAGES)} ...", file=sys.stderr)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *PACKAGES]):
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=APT_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise EngineError(
                f"{' '.join(command)} failed (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )


def daemon_settings(current: dict[str, object]) -> dict[str, object]:
    """daemon.json with the wrapper registered as the default runtime; other settings kept."""
    runtimes = dict(current.get("runtimes") or {})  # type: ignore[call-overload]
    runtimes[RUNTIME_NAME] = {"path": str(WRAPPER_PATH)}
    return {**current, "runtimes": runtimes, "default-runtime": RUNTIME_NAME}


def configure() -> bool:
    """Write the wrapper and daemon.json; True when anything changed (a running daemon must restart)."""
    changed = False
    if not WRAPPER_PATH.exists() or WRAPPER_PATH.read_text() != WRAPPER_SOURCE:
        WRAPPER_PATH.parent.mkdir(parents=True, exist_ok=True)
        WRAPPER_PATH.write_text(WRAPPER_SOURCE)
        WRAPPER_PATH.chmod(0o755)
        changed = True
    try:
        current = json.loads(DAEMON_JSON.read_text())
    except FileNotFoundError:
        current = {}
    except ValueError as error:
        raise EngineError(f"{DAEMON_JSON} is not valid JSON ({error}); fix or remove it") from error
    wanted = daemon_settings(current)
    if wanted != current:
        DAEMON_JSON.parent.mkdir(parents=True, exist_ok=True)
        DAEMON_JSON.write_text(json.dumps(wanted, indent=2) + "\n")
        changed = True
    return changed


def dockerd_pids() -> list[int]:
    found = subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True, text=True, check=False)
    return [int(pid) for pid in found.stdout.split()]


def stop_dockerd(pids: list[int]) -> None:
    for pid in pids:
        os.kill(pid, 15)
    deadline = time.monotonic() + 30
    while dockerd_pids() and time.monotonic() < deadline:
        time.sleep(0.5)


def start_dockerd() -> None:
    print(f"container_engine: starting dockerd (log: {DOCKERD_LOG}) ...", file=sys.stderr)
    with DOCKERD_LOG.open("ab") as log:
        # dockerd outlives this script by design: its own session, its output in the log.
        subprocess.Popen(["dockerd"], stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + DAEMON_START_TIMEOUT_S
    why = ""
    while time.monotonic() < deadline:
        answers, why = docker_answers()
        if answers:
            return
        time.sleep(1)
    tail = DOCKERD_LOG.read_text(errors="replace").splitlines()[-20:]
    raise EngineError(
        f"dockerd did not answer within {DAEMON_START_TIMEOUT_S:.0f} s ({why}); its log ends:\n" + "\n".join(tail)
    )


def ensure_engine() -> str:
    """Install, configure and start docker as needed; the server version once it answers."""
    if shutil.which("dockerd") is None:
        install_packages()
    if os.geteuid() == 0:
        changed = configure()
        running = dockerd_pids()
        if running and changed:
            print("container_engine: restarting dockerd for the runc wrapper", file=sys.stderr)
            stop_dockerd(running)
            running = []
        if not running:
            start_dockerd()
    answers, why = docker_answers()
    if not answers:
        raise EngineError(f"docker does not answer: {why}")
    return why


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say whether docker answers (exit 0) or why not (1)")
    args = parser.parse_args(argv)
    if args.check:
        answers, what = docker_answers()
        print(f"docker {what}" if answers else f"docker unavailable: {what}")
        return 0 if answers else 1
    try:
        version = ensure_engine()
    except EngineError as error:
        print(f"container_engine: {error}", file=sys.stderr)
        return 1
    print(f"docker {version} answers (runtime {RUNTIME_NAME})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
