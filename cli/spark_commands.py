"""`shoal spark run JOB ...`: the Spark jobs of shoal.spark.jobs, in local mode by default.

Each job parses its own options (`shoal spark run JOB --help`); this command only finds the job
and hands it the rest of the command line, so spark-submit and the CLI take the same arguments.
Spark is imported when a job runs, never when `shoal` starts.
"""

from __future__ import annotations

import importlib
import sys

import click

from shoal.spark.jobs import JOBS

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


def _job_command(name: str, summary: str) -> click.Command:
    @click.command(name=name, help=f"{summary}. Options: shoal spark run {name} --help", context_settings=_PASS_THROUGH)
    @click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
    def command(arguments: tuple[str, ...]) -> None:
        module = importlib.import_module(f"shoal.spark.jobs.{name}")
        sys.exit(module.main(list(arguments)))

    return command


for _name, _summary in JOBS.items():
    run_group.add_command(_job_command(_name, _summary))
