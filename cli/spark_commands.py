"""`shoal spark run JOB ...` and `shoal spark stream JOB ...`: the Spark jobs of shoal.spark.jobs
(over a store directory, and over live topics), in local mode by default.

Each job parses its own options (`shoal spark run JOB --help`); this command only finds the job
and hands it the rest of the command line, so spark-submit and the CLI take the same arguments.
Spark is imported when a job runs, never when `shoal` starts.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import sys

import click

from shoal.spark.jobs import JOBS, STREAM_JOBS  # stdlib-only tables: pyspark is not imported here

SPARK_EXTRA_MODULES = ("pyspark", "pyarrow")
EXTRA_HINT = "pip install 'shoal[spark]' (pyspark, pyarrow) and a Java 17+ runtime"


def check_spark_extra() -> None:
    """One line naming what is missing, instead of a traceback from deep inside a job."""
    for module in SPARK_EXTRA_MODULES:
        if importlib.util.find_spec(module) is None:
            raise click.ClickException(f"shoal spark needs the [spark] extra (no module {module!r}): {EXTRA_HINT}")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise click.ClickException(f"shoal spark needs a Java runtime (no java on PATH, no JAVA_HOME): {EXTRA_HINT}")


_PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


@click.group(name="spark")
def spark_group() -> None:
    """Analyse a store directory with Spark (needs the [spark] extra: pyspark, pyarrow and a JRE)."""


@spark_group.group(name="run")
def run_group() -> None:
    """Run a job on a store directory; every job writes summary.json (and Parquet) to --output.

    \b
    shoal spark run topic_stats STORE_DIR --output out/
    shoal spark run JOB --help      the job's own options
    Local mode (--master local[2]) unless --master says otherwise. The store may be live: jobs
    read its files without taking its lock.
    """


@spark_group.group(name="stream")
def stream_group() -> None:
    """Run a streaming job on live topics (through a NameServer) until stopped, or --once.

    \b
    shoal spark stream topic_archive -n ns:9876 -t Orders --checkpoint ck/ --output out/
    shoal spark stream JOB --help   the job's own options
    Restarted on the same --checkpoint, a job goes on where it stopped. Ctrl-C (or SIGTERM)
    finishes the running micro-batch and stops. Progress: one line per micro-batch, and
    <output>/progress.json.
    """


def _job_command(name: str, summary: str, group: str = "run") -> click.Command:
    @click.command(
        name=name, help=f"{summary}. Options: shoal spark {group} {name} --help", context_settings=_PASS_THROUGH
    )
    @click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
    def command(arguments: tuple[str, ...]) -> None:
        check_spark_extra()
        module = importlib.import_module(f"shoal.spark.jobs.{name}")
        sys.exit(module.main(list(arguments)))

    return command


for _name, _summary in JOBS.items():
    run_group.add_command(_job_command(_name, _summary))
for _name, _summary in STREAM_JOBS.items():
    stream_group.add_command(_job_command(_name, _summary, "stream"))


@spark_group.command(name="submit", context_settings=_PASS_THROUGH)
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
def submit(arguments: tuple[str, ...]) -> None:
    """spark-submit a job with this installation's Python (no virtualenv activation needed).

    \b
    shoal spark submit [SPARK-SUBMIT OPTIONS] JOB STORE_DIR --output DIR [JOB OPTIONS]
    shoal spark submit --master 'local[2]' topic_stats data/store --output out/
    Options before the job name go to spark-submit, the rest to the job. A bare spark-submit runs
    the driver with `python3` from PATH, which has no shoal unless the virtualenv is active; this
    sets PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON to the interpreter shoal runs in (unless set).
    """
    if not arguments or arguments[0] in {"-h", "--help"}:
        click.echo(click.get_current_context().get_help())
        return
    check_spark_extra()
    every_job = {**JOBS, **STREAM_JOBS}
    position = next((index for index, word in enumerate(arguments) if word in every_job), None)
    if position is None:
        raise click.ClickException(f"no job named in {' '.join(arguments)!r}; jobs: {', '.join(every_job)}")
    job_file = importlib.util.find_spec(f"shoal.spark.jobs.{arguments[position]}")
    if job_file is None or job_file.origin is None:
        raise click.ClickException(f"job {arguments[position]} is not installed")
    spark_submit = _spark_submit_path()
    environment = dict(os.environ)
    environment.setdefault("PYSPARK_PYTHON", sys.executable)
    environment.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    command = [spark_submit, *arguments[:position], job_file.origin, *arguments[position + 1 :]]
    click.echo(f"starting spark-submit (a JVM: 10-30 s): {' '.join(command)}", err=True)
    os.execve(spark_submit, command, environment)


def _spark_submit_path() -> str:
    """PySpark's spark-submit: beside this interpreter, else inside the pyspark package."""
    beside = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    if os.access(beside, os.X_OK):
        return beside
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise click.ClickException(f"pyspark is not installed: {EXTRA_HINT}")
    return os.path.join(next(iter(spec.submodule_search_locations)), "bin", "spark-submit")
