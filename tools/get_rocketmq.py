#!/usr/bin/env python3
"""Fetch Apache RocketMQ 4.9.7's jars from Maven Central into a cache folder outside the clone.

The artifacts are pinned in tests/interop/java/pom.xml (client, acl, tools, namesrv, broker, store
and everything they depend on). This script runs

    mvn -B dependency:copy-dependencies -DoutputDirectory=<cache>/rocketmq-4.9.7/lib.partial

on that pom, then renames the folder to `lib` and writes a stamp holding the pom's SHA-256 and the
jar names. The next run does nothing while the stamp matches the pom and every jar is there
(--force re-fetches). The cache folder is `$SHOAL_CACHE_DIR/rocketmq-4.9.7`, default
`~/.cache/shoal/rocketmq-4.9.7`. Maven keeps its own download cache (~/.m2/repository, or
--maven-repo-local). Uses the standard library and Maven only.

    python3 tools/get_rocketmq.py            # fetch if needed; prints the lib folder
    python3 tools/get_rocketmq.py --print-lib  # only the lib folder on stdout (for scripts)

The cache folder also serves as ROCKETMQ_HOME for mqadmin (conf/logback_tools.xml is written there).

The interop tests (tests/interop/java/conftest.py) import `ensure_jars` from this file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path

ROCKETMQ_VERSION = "4.9.7"
REPO_ROOT = Path(__file__).resolve().parent.parent
POM_PATH = REPO_ROOT / "tests" / "interop" / "java" / "pom.xml"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
REQUIRED_JARS = tuple(
    f"rocketmq-{name}-{ROCKETMQ_VERSION}.jar" for name in ("client", "acl", "tools", "namesrv", "broker", "store")
)
FETCH_TIMEOUT_S = 1200
"""A cold fetch took about 10 s here (about 53 MB from Maven Central); 20 minutes means it is stuck."""
PROGRESS_EVERY_DOWNLOADS = 25
LOGBACK_TOOLS_XML = """<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by tools/get_rocketmq.py: mqadmin (MQAdminStartup) reads $ROCKETMQ_HOME/conf/logback_tools.xml
     and prints a stack trace without it. Warnings only, to stderr. -->
<configuration>
  <appender name="STDERR" class="ch.qos.logback.core.ConsoleAppender">
    <target>System.err</target>
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{36} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="STDERR"/></root>
</configuration>
"""
LOG_TAIL_LINES = 40


class GetRocketMQError(Exception):
    """Anything that stops the fetch; main() prints it and exits 1."""


def cache_root() -> Path:
    """`$SHOAL_CACHE_DIR`, else `~/.cache/shoal`."""
    configured = os.environ.get("SHOAL_CACHE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "shoal"


def rocketmq_dir(root: Path | None = None) -> Path:
    return (root or cache_root()) / f"rocketmq-{ROCKETMQ_VERSION}"


def pom_sha256(pom: Path = POM_PATH) -> str:
    return hashlib.sha256(pom.read_bytes()).hexdigest()


def cached_lib(directory: Path, pom: Path = POM_PATH) -> Path | None:
    """The lib folder when the stamp matches the pom and every jar it lists is present, else None."""
    stamp = directory / "stamp.json"
    lib = directory / "lib"
    try:
        recorded = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict) or recorded.get("pom_sha256") != pom_sha256(pom):
        return None
    jars = recorded.get("jars")
    if not isinstance(jars, list) or not jars:
        return None
    if all((lib / name).is_file() for name in jars):
        return lib
    return None


def find_mvn() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise GetRocketMQError(
            "mvn (Apache Maven 3.x) is not on PATH: install it (Debian: apt-get install maven) "
            f"to fetch RocketMQ {ROCKETMQ_VERSION}'s jars from Maven Central, or set SHOAL_CACHE_DIR "
            "to a folder that already holds them"
        )
    return mvn


def run_maven(mvn: str, pom: Path, output: Path, log_path: Path, maven_repo_local: Path | None) -> None:
    """copy-dependencies into `output`, printing progress to stderr and keeping Maven's output in `log_path`."""
    command = [
        mvn,
        "-B",
        "-f",
        str(pom),
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        f"-DoutputDirectory={output}",
        "-DincludeScope=runtime",
    ]
    if maven_repo_local is not None:
        command.append(f"-Dmaven.repo.local={maven_repo_local}")
    downloads = 0
    tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
    started = time.monotonic()
    with (
        log_path.open("w") as log,
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as process,
    ):  # closes the pipe however this ends
        assert process.stdout is not None
        for line in process.stdout:
            log.write(line)
            tail.append(line.rstrip())
            if "] Downloaded from " in line or line.startswith("Downloaded from "):
                downloads += 1
                if downloads % PROGRESS_EVERY_DOWNLOADS == 0:
                    elapsed_s = time.monotonic() - started
                    print(f"  {downloads} files downloaded from Maven Central ({elapsed_s:.0f} s)", file=sys.stderr)
            if time.monotonic() - started > FETCH_TIMEOUT_S:
                process.kill()
                break
        try:
            returncode = process.wait(timeout=FETCH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            returncode = process.wait()
    if time.monotonic() - started > FETCH_TIMEOUT_S:
        raise GetRocketMQError(f"mvn did not finish within {FETCH_TIMEOUT_S} s; its output is in {log_path}")
    if returncode != 0:
        last = "\n".join(tail)
        raise GetRocketMQError(
            f"mvn copy-dependencies failed (exit {returncode}); is Maven Central reachable?\n"
            f"full output: {log_path}\n{last}"
        )
    print(f"  {downloads} files downloaded, jars copied in {time.monotonic() - started:.1f} s", file=sys.stderr)


def ensure_jars(*, force: bool = False, root: Path | None = None, maven_repo_local: Path | None = None) -> Path:
    """The folder holding RocketMQ's jars, fetched with Maven first unless the cached copy matches the pom."""
    directory = rocketmq_dir(root)
    lib = ensure_pom_jars(
        POM_PATH,
        directory,
        REQUIRED_JARS,
        f"Apache RocketMQ {ROCKETMQ_VERSION}",
        force=force,
        maven_repo_local=maven_repo_local,
    )
    write_rocketmq_home(directory)
    return lib


def ensure_pom_jars(
    pom: Path,
    directory: Path,
    required: Sequence[str],
    what: str,
    *,
    force: bool = False,
    maven_repo_local: Path | None = None,
) -> Path:
    """`directory`/lib holding every runtime jar of `pom` (fetched with Maven unless the stamp there
    matches the pom); GetRocketMQError when Maven fails or a `required` jar is missing. Also used for
    the RocketMQ 5 Java client's jars (tests/interop/v5)."""
    if not force:
        lib = cached_lib(directory, pom)
        if lib is not None:
            return lib
    mvn = find_mvn()
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / "lib.partial"
    shutil.rmtree(partial, ignore_errors=True)
    print(f"fetching {what} jars with Maven into {directory} ...", file=sys.stderr)
    run_maven(mvn, pom, partial, directory / "mvn.log", maven_repo_local)
    jars = sorted(path.name for path in partial.glob("*.jar"))
    missing = [name for name in required if name not in jars]
    if missing:
        raise GetRocketMQError(f"mvn finished but {', '.join(missing)} are missing from {partial}")
    lib = directory / "lib"
    shutil.rmtree(lib, ignore_errors=True)
    partial.rename(lib)
    stamp = {"pom_sha256": pom_sha256(pom), "what": what, "jars": jars}
    (directory / "stamp.json").write_text(json.dumps(stamp, indent=1) + "\n")
    return lib


def write_rocketmq_home(directory: Path) -> None:
    """Make `directory` usable as ROCKETMQ_HOME for mqadmin: conf/logback_tools.xml."""
    conf = directory / "conf" / "logback_tools.xml"
    if not conf.is_file() or conf.read_text() != LOGBACK_TOOLS_XML:
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text(LOGBACK_TOOLS_XML)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="fetch again even when the cache matches the pom")
    parser.add_argument("--print-lib", action="store_true", help="print only the lib folder on stdout")
    parser.add_argument("--maven-repo-local", type=Path, help="Maven's download cache (default: Maven's own)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        lib = ensure_jars(force=args.force, maven_repo_local=args.maven_repo_local)
    except GetRocketMQError as error:
        print(f"get_rocketmq: {error}", file=sys.stderr)
        return 1
    if args.print_lib:
        print(lib)
    else:
        count = len(list(lib.glob("*.jar")))
        print(f"Apache RocketMQ {ROCKETMQ_VERSION}: {count} jars in {lib} ({time.monotonic() - started:.1f} s)")
        print(
            f"  mqadmin: ROCKETMQ_HOME={lib.parent} java -cp '{lib}/*' "
            "org.apache.rocketmq.tools.command.MQAdminStartup <command> -n host:port"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
