"""What a user installs is what runs: the base install, the broker image and the Spark image.

Two layers. A fast check imports every module outside `shoal.spark` and `shoal.operator` with
every optional dependency hidden. Then fresh virtual environments are built from the wheel,
non-editable, with the extras that `make run` (none), `broker_image/Dockerfile` and
`broker_image/Dockerfile.spark` install (read from those files, so the test follows them), and
every command their entrypoints use is run for real.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import tomllib
import venv
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.ports import free_broker_port, free_port

ROOT = Path(__file__).resolve().parents[1]
BASE_DEPENDENCIES = (
    *("crc32c", "click", "prometheus_client", "uvloop", "_cffi_backend"),
    *("grpc", "typing_extensions", "google"),
    *("aiohttp", "aiohappyeyeballs", "aiosignal", "attr", "frozenlist", "idna", "multidict", "propcache", "yarl"),
    *("aiohttp_jinja2", "jinja2", "markupsafe", "charset_normalizer"),
)
"""Top-level modules every command imports with (pyproject's `dependencies`: grpcio is `grpc` and its
`typing_extensions`, protobuf `google`, aiohttp with the packages it imports, the dashboard's Jinja2
and charset-normalizer; less pyyaml: it is
imported only when a plain_acl.yml or credentials file is read, so the CLI starts even where it is
missing)."""
OPTIONAL_PARTS = ("shoal.spark", "shoal.operator")
"""The only parts allowed to import an extra at import time."""
INSTALL_TIMEOUT_S = 900.0
COMMAND_TIMEOUT_S = 120.0
SPARK_COMMAND_TIMEOUT_S = 300.0

_HIDE_EXTRAS = textwrap.dedent(
    """
    import sys
    ALLOWED = set(sys.stdlib_module_names) | {allowed!r}

    class HideExtras:
        # Wraps each finder: a hidden module is simply not found, as in an environment without it.
        def __init__(self, finder):
            self.finder = finder

        def find_spec(self, name, path=None, target=None):
            top = name.partition(".")[0]
            # mypyc-compiled wheels (charset-normalizer) ship a top-level `<hash>__mypyc` module
            if top not in ALLOWED and not top.endswith("__mypyc"):
                return None
            return self.finder.find_spec(name, path, target)

        def __getattr__(self, attribute):
            return getattr(self.finder, attribute)

    sys.meta_path[:] = [HideExtras(finder) for finder in sys.meta_path]
    """
)


def _base_modules() -> list[str]:
    """Every shoal module outside OPTIONAL_PARTS, from the package-dir mapping."""
    mapping: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    modules: list[str] = []
    for package, folder in mapping.items():
        if package.startswith(OPTIONAL_PARTS):
            continue
        for path in sorted((ROOT / folder).glob("*.py")):
            modules.append(package if path.stem == "__init__" else f"{package}.{path.stem}")
    return modules


def test_base_modules_import_without_any_extra() -> None:
    """Goal: nothing outside shoal.spark/shoal.operator imports an extra at import time. Method:
    a fresh interpreter where only the stdlib, shoal and the base dependencies can be imported
    imports every base module and builds the whole `shoal` command tree."""
    modules = _base_modules()
    assert "shoal.cli.main" in modules and "shoal.broker.broker" in modules
    script = _HIDE_EXTRAS.format(allowed={"shoal", *BASE_DEPENDENCIES}) + textwrap.dedent(
        f"""
        import importlib
        for name in {modules!r}:
            importlib.import_module(name)
        from shoal.cli.main import cli
        import click
        def walk(command, path):
            yield path
            if isinstance(command, click.Group):
                for name, child in command.commands.items():
                    yield from walk(child, path + [name])
        print(len(list(walk(cli, []))))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 20


def test_spark_and_operator_say_which_extra_is_missing(tmp_path: Path) -> None:
    """Goal: a missing extra is one line naming it. Method: run `shoal spark run` and
    `python -m shoal.operator` with the extras hidden; check the exit code and the one line."""
    hide = tmp_path / "sitecustomize.py"
    hide.write_text(_HIDE_EXTRAS.format(allowed={"shoal", *BASE_DEPENDENCIES}))
    environment = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    for command, extra in (
        ([sys.executable, "-m", "shoal.cli.main", "spark", "run", "topic_stats", str(tmp_path), "-o", "x"], "[spark]"),
        ([sys.executable, "-m", "shoal.operator"], "[operator]"),
    ):
        result = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
        assert result.returncode != 0, result.stdout
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert extra in lines[0] and "pip install" in lines[0] and "Traceback" not in result.stderr


# --- fresh virtual environments, exactly as the README and the images install ---


def _image_extras(dockerfile: str) -> str:
    """The extras of the image's `pip install '.[...]'` line."""
    text = (ROOT / "broker_image" / dockerfile).read_text()
    match = re.search(r"pip install '\.\[([\w,]+)\]'", text)
    assert match, f"no `pip install '.[extra]'` line in broker_image/{dockerfile}"
    return match.group(1)


def test_make_run_installs_the_base_package_only() -> None:
    """Goal: the base environment below is what `make run` builds. Method: read the Makefile's
    install line for the run target."""
    makefile = (ROOT / "Makefile").read_text()
    match = re.search(r"^\$\(VENV\)/\.installed:.*\n\t\$\(PIP\) install (.*)$", makefile, re.MULTILINE)
    assert match, "Makefile: no $(VENV)/.installed recipe"
    assert "[" not in match.group(1), f"make run must install no extras: {match.group(1)}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    (built,) = out.glob("shoal-*.whl")
    return built


def _fresh_env(directory: Path, wheel: Path, extras: str) -> Path:
    """A new virtualenv with the wheel (+ extras) installed as pip would from PyPI; its bin/."""
    venv.EnvBuilder(with_pip=True, clear=True).create(directory)
    requirement = f"shoal[{extras}] @ {wheel.as_uri()}" if extras else str(wheel)
    subprocess.run(
        [str(directory / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", requirement],
        check=True,
        timeout=INSTALL_TIMEOUT_S,
        capture_output=True,
    )
    return directory / "bin"


def _env_for(bin_dir: Path) -> dict[str, str]:
    """PATH with the venv first (as the image's /usr/local/bin is); nothing of the dev venv."""
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environment["PATH"] = f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"
    return environment


def _run(bin_dir: Path, *args: str, timeout_s: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args),
        capture_output=True,
        text=True,
        env=_env_for(bin_dir),
        timeout=timeout_s,
        check=False,
    )


def _every_command(bin_dir: Path) -> list[list[str]]:
    """Every `shoal` command path, from the installed CLI itself."""
    script = textwrap.dedent(
        """
        import json, click
        from shoal.cli.main import cli
        def walk(command, path):
            yield path
            if isinstance(command, click.Group):
                for name, child in command.commands.items():
                    yield from walk(child, path + [name])
        print(json.dumps(list(walk(cli, []))))
        """
    )
    result = _run(bin_dir, str(bin_dir / "python"), "-c", script)
    assert result.returncode == 0, result.stderr
    return list(json.loads(result.stdout))


@pytest.fixture(scope="module")
def base_env(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    return _fresh_env(tmp_path_factory.mktemp("base") / "venv", wheel, "")


@pytest.mark.slow
def test_base_install_runs_every_command_help(base_env: Path) -> None:
    """Goal: `pip install shoal` starts every command it offers. Method: `--help` of every
    command path of the installed CLI, in a fresh non-editable venv with no extras."""
    commands = _every_command(base_env)
    assert ["local"] in commands and ["broker"] in commands and ["spark", "run", "topic_stats"] in commands
    for path in commands:
        if path[:2] in (["spark", "run"], ["spark", "stream"]) and len(path) == 3:
            continue  # a job takes its own --help, which needs the extra: checked below
        result = _run(base_env, str(base_env / "shoal"), *path, "--help")
        assert result.returncode == 0, f"shoal {' '.join(path)} --help: {result.stderr}"
        assert "Usage:" in result.stdout
    for job in (["run", "topic_stats"], ["stream", "topic_archive"]):
        missing = _run(base_env, str(base_env / "shoal"), "spark", *job, "--help")
        assert missing.returncode == 1 and "[spark]" in missing.stderr and "Traceback" not in missing.stderr


_SIGNATURE_PROBE = (
    "from shoal.protocol.acl_signature import COMPILED, Credentials, verify\n"
    "fields = {'topic': 'T'}\n"
    "Credentials('ak', 'sk').sign(fields, b'x')\n"
    "print(COMPILED, verify(fields, b'x', 'sk'), verify(fields, b'y', 'sk'))"
)


def _can_compile_the_signature() -> bool:
    """A C compiler, Python's headers and OpenSSL's: what building _acl_speedups.c needs."""
    openssl = any(Path(root, "openssl", "sha.h").exists() for root in ("/usr/include", "/usr/local/include"))
    python_h = Path(sysconfig.get_paths()["include"], "Python.h").exists()
    return bool(shutil.which("cc") or shutil.which("gcc")) and python_h and openssl


def _has_compiled_signature(wheel: Path) -> bool:
    return _has_compiled(wheel, "_acl_speedups")


def _has_compiled(wheel: Path, module: str) -> bool:
    with zipfile.ZipFile(wheel) as archive:
        return any(module in name and name.endswith(".so") for name in archive.namelist())


HOT_PATH_MODULES = ("_record_speedups", "_wire_speedups", "_decode_speedups")
_HOT_PATH_PROBE = (
    "from shoal.formats import record\n"
    "from shoal.client import message\n"
    "from shoal.protocol import framing\n"
    'header = framing.decode_json_header(b\'{"code":310,"extFields":{"b":"T"},"opaque":5}\')\n'
    "buffer = bytearray(200)\n"
    "host = bytes(8)\n"
    "size = record.encode_record_into(buffer, 0, b'body', b'T', b'', 0, 0, 0, 0, 0, 1, host, 2, host, 0, 0, 0)\n"
    "print(record.COMPILED, framing.COMPILED, message.COMPILED, header.opaque, header.ext_fields['b'], "
    "record.dispatch_fields(buffer, 0, size, 0)[0] == size, message.decode_messages(buffer[:size])[0].body)"
)


@pytest.mark.slow
def test_the_compiled_modules_are_built_where_they_can_be_and_optional_where_not(
    base_env: Path, wheel: Path, tmp_path: Path
) -> None:
    """Goal: the C modules (the ACL signature, the record helpers, the JSON header reader) are built
    where a compiler (and for the signature OpenSSL's headers) is, and an install without them
    still works. Method: the wheel built here carries them and the base install uses them; a wheel
    built from a copy of the source with `false` as the C compiler carries none, installs, starts,
    signs and verifies, reads a header and writes and reads a record, in Python."""
    compiled = _has_compiled_signature(wheel)
    if _can_compile_the_signature():
        assert compiled, "a compiler and OpenSSL's headers are here, yet the wheel has no _acl_speedups"
    result = _run(base_env, str(base_env / "python"), "-c", _SIGNATURE_PROBE)
    assert result.stdout.split() == [str(compiled), "True", "False"], result.stderr
    hot_path = all(_has_compiled(wheel, module) for module in HOT_PATH_MODULES)
    if shutil.which("cc") or shutil.which("gcc"):
        assert hot_path, f"a compiler is here, yet the wheel lacks one of {HOT_PATH_MODULES}"
        if Path("/usr/include/zlib.h").exists():
            assert _has_compiled(wheel, "_batch_speedups"), "a compiler and zlib.h are here, yet no _batch_speedups"
    result = _run(base_env, str(base_env / "python"), "-c", _HOT_PATH_PROBE)
    assert result.stdout.split() == [str(hot_path)] * 3 + ["5", "T", "True", "b'body'"], result.stderr

    source = tmp_path / "source"
    skipped = shutil.ignore_patterns(".git", ".venv", "build", "data", "*.so", "__pycache__", "*.egg-info")
    shutil.copytree(ROOT, source, ignore=skipped)
    out = tmp_path / "wheel"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=INSTALL_TIMEOUT_S,
        env={**os.environ, "CC": "false"},
    )
    (pure,) = out.glob("shoal-*.whl")
    assert not _has_compiled_signature(pure)
    assert not any(_has_compiled(pure, module) for module in HOT_PATH_MODULES)
    pure_env = _fresh_env(tmp_path / "venv", pure, "")
    result = _run(pure_env, str(pure_env / "python"), "-c", _SIGNATURE_PROBE)
    assert result.stdout.split() == ["False", "True", "False"], result.stderr
    result = _run(pure_env, str(pure_env / "python"), "-c", _HOT_PATH_PROBE)
    assert result.stdout.split() == ["False", "False", "False", "5", "T", "True", "b'body'"], result.stderr
    started = _run(pure_env, str(pure_env / "shoal"), "broker", "--help")
    assert started.returncode == 0 and "Usage:" in started.stdout, started.stderr


@pytest.mark.slow
def test_base_install_runs_the_quick_start_demo(base_env: Path, tmp_path: Path) -> None:
    """Goal: the README's first command works from the base install. Method: `shoal local --demo
    --exit-after-demo` (what `make run` runs) on free ports; the demo consumes all ten messages,
    the store stays small, and the store verifies clean afterwards."""
    namesrv_port, broker_port = free_port(), free_broker_port()
    result = _run(
        base_env,
        str(base_env / "shoal"),
        "local",
        "--data-dir",
        str(tmp_path / "data"),
        "--namesrv-port",
        str(namesrv_port),
        "--broker-port",
        str(broker_port),
        "--grpc-port",
        str(free_port()),
        "--demo",
        "--exit-after-demo",
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "round trip of 10 messages" in result.stderr
    assert "query by key order-3: ['hello from shoal #3']" in result.stderr
    assert "MiB to start" in result.stderr and "local cluster stopped" in result.stderr
    used_bytes = sum(path.stat().st_blocks * 512 for path in (tmp_path / "data").rglob("*") if path.is_file())
    assert used_bytes < 100 * 1024 * 1024, used_bytes
    verified = _run(base_env, str(base_env / "shoal"), "store", "verify", str(tmp_path / "data" / "store"))
    assert verified.returncode == 0 and "store OK" in verified.stdout, verified.stderr


@pytest.fixture(scope="module")
def image_env(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    return _fresh_env(tmp_path_factory.mktemp("image") / "venv", wheel, _image_extras("Dockerfile"))


@pytest.mark.slow
def test_broker_image_install_runs_its_entrypoint_commands(image_env: Path, tmp_path: Path) -> None:
    """Goal: the broker image's processes start from what its Dockerfile installs. Method: in a
    venv built with the Dockerfile's extras, run the entrypoint's namesrv and broker (with the
    ConfigMap files it reads), produce and consume through them with the installed CLI, and
    start the operator far enough to see it parse its arguments."""
    entrypoint = ROOT / "broker_image" / "entrypoint.sh"
    namesrv_port, broker_port = free_port(), free_broker_port()
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "broker.conf").write_text(
        f"brokerClusterName=DefaultCluster\nbrokerName=g0\nlistenPort={broker_port}\nhaListenPort={free_port()}\n"
        f"metricsPort={free_port()}\nnamesrvAddr=127.0.0.1:{namesrv_port}\nstorePathRootDir={tmp_path / 'store'}\n"
        "listenHost=127.0.0.1\nmetricsHost=127.0.0.1\nmappedFileSizeCommitLog=16777216\n"
    )
    (config_dir / "broker-0.conf").write_text("brokerId=0\nbrokerRole=ASYNC_MASTER\n")
    environment = {
        **_env_for(image_env),
        "SHOAL_CONFIG_DIR": str(config_dir),
        "SHOAL_RENDERED_DIR": str(tmp_path / "rendered"),
        "POD_NAME": "shoal-g0-0",
        "POD_IP": "127.0.0.1",
    }
    with (
        _background(
            ["sh", str(entrypoint), "namesrv", "--host", "127.0.0.1", "--port", str(namesrv_port)], environment
        ),
        _background(["sh", str(entrypoint), "broker"], environment) as broker_log,
    ):
        # Both start at once: the broker's first registration may find no NameServer yet and retry.
        _wait_for(lambda: f"registered with NameServer 127.0.0.1:{namesrv_port}" in broker_log.read_text(), broker_log)
        namesrv = ["-n", f"127.0.0.1:{namesrv_port}"]
        shoal = str(image_env / "shoal")
        created = _run(image_env, shoal, "admin", "topic-create", "ImageTopic", "--queues", "2", *namesrv)
        assert created.returncode == 0, created.stderr
        produced = _run(image_env, shoal, "produce", "ImageTopic", "-c", "5", *namesrv)
        assert produced.returncode == 0 and produced.stdout.count("SEND_OK") == 5, produced.stderr
        consumed = _run(image_env, shoal, "consume", "ImageTopic", "-c", "5", "--timeout", "20", *namesrv)
        assert consumed.returncode == 0 and consumed.stdout.count('"body": "hello"') == 5, consumed.stderr
    operator = _run(image_env, "sh", str(entrypoint), "operator", "--help")
    assert operator.returncode == 0 and "--metrics-port" in operator.stdout, operator.stderr
    imported = _run(image_env, str(image_env / "python"), "-c", "import kopf, kubernetes, shoal.operator.handlers")
    assert imported.returncode == 0, imported.stderr


@pytest.mark.slow
def test_spark_image_install_runs_a_job(tmp_path_factory: pytest.TempPathFactory, wheel: Path, tmp_path: Path) -> None:
    """Goal: the Spark image's job commands run from what Dockerfile.spark installs. Method: a
    venv with its extras writes a store through `shoal local`, then `shoal spark run topic_stats`
    and `python -m shoal.spark.jobs.topic_stats` (the image's two ways) count its messages."""
    spark_env = _fresh_env(tmp_path_factory.mktemp("spark") / "venv", wheel, _image_extras("Dockerfile.spark"))
    data = tmp_path / "data"
    demo = _run(
        spark_env,
        str(spark_env / "shoal"),
        "local",
        "--data-dir",
        str(data),
        "--namesrv-port",
        str(free_port()),
        "--broker-port",
        str(free_broker_port()),
        "--grpc-port",
        str(free_port()),
        "--demo",
        "--exit-after-demo",
    )
    assert demo.returncode == 0, demo.stderr[-4000:]
    for command in (
        [str(spark_env / "shoal"), "spark", "run", "topic_stats"],
        [str(spark_env / "python"), "-m", "shoal.spark.jobs.topic_stats"],
    ):
        output = tmp_path / f"out-{len(command)}"
        result = _run(
            spark_env, *command, str(data / "store"), "--output", str(output), timeout_s=SPARK_COMMAND_TIMEOUT_S
        )
        assert result.returncode == 0, result.stderr[-4000:]
        summary = json.loads((output / "summary.json").read_text())
        assert summary["ok"] is True, summary
        assert summary["messages"] == 10 and summary["topics"] == 1, summary  # the demo's ten on DemoTopic
    assert "starting Spark" in result.stderr or "Spark ready" in result.stderr


# --- process helpers ---


@contextmanager
def _background(command: list[str], environment: dict[str, str]) -> Iterator[Path]:
    """A background process logging to a file (yielded); SIGTERM, then SIGKILL, at the end."""
    handle, name = tempfile.mkstemp(suffix=".log")
    log = Path(name)
    process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=environment)
    os.close(handle)
    try:
        yield log
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(COMMAND_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.unlink(missing_ok=True)


def _wait_for(predicate: Callable[[], bool], log: Path) -> None:
    try:
        wait_until(predicate, timeout_s=COMMAND_TIMEOUT_S, interval_s=0.05)
    except AssertionError:
        raise AssertionError(log.read_text()[-4000:]) from None
