"""Errors of shoal.spark.

    ShoalSparkError                 anything this package raises on purpose
     +-- ReadOptionError (ValueError)   an option of spark.read.format("shoal") is invalid
     +-- JobError                       a job could not produce its result (bad input directory...)

Damage in the store is not an error here: readers stop at a torn tail and skip vanished
segments with a log line, as `shoal store inspect` does.
"""

from __future__ import annotations


class ShoalSparkError(Exception):
    """Base of every error this package raises."""


class ReadOptionError(ShoalSparkError, ValueError):
    """An option of the data source is missing, malformed or contradicts another."""


class JobError(ShoalSparkError):
    """A job cannot run on its input."""
