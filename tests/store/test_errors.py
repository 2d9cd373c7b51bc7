"""Tests of shoal.store.errors: the exception tree and how errors map to put statuses."""

from __future__ import annotations

import pytest

from shoal.store import errors
from shoal.store.errors import (
    STATUS_OF_ERROR,
    MessageIllegalError,
    PropertiesTooLargeError,
    PutStatus,
    StoreCorruptionError,
    StoreError,
    StoreLockedError,
    StoreUnavailableError,
    status_of_error,
)


@pytest.mark.parametrize(
    "error",
    [StoreLockedError, StoreCorruptionError, MessageIllegalError, PropertiesTooLargeError, StoreUnavailableError],
)
def test_every_store_error_derives_from_store_error(error: type[StoreError]) -> None:
    """One root: catching StoreError catches them all, and nothing else is a StoreError."""
    assert issubclass(error, StoreError)
    assert issubclass(StoreError, Exception)
    assert not issubclass(OSError, StoreError)


def test_properties_too_large_is_a_message_illegal_error() -> None:
    """The tree drawn in the module docstring: PropertiesTooLargeError under MessageIllegalError."""
    assert issubclass(PropertiesTooLargeError, MessageIllegalError)
    assert errors.__doc__ is not None
    assert "PropertiesTooLargeError" in errors.__doc__


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (PropertiesTooLargeError("p"), PutStatus.PROPERTIES_SIZE_EXCEEDED),
        (MessageIllegalError("m"), PutStatus.MESSAGE_ILLEGAL),
        (StoreUnavailableError("u"), PutStatus.SERVICE_NOT_AVAILABLE),
        (StoreCorruptionError("c"), PutStatus.UNKNOWN_ERROR),
        (StoreLockedError("l"), PutStatus.UNKNOWN_ERROR),
        (StoreError("s"), PutStatus.UNKNOWN_ERROR),
    ],
)
def test_status_of_error_maps_each_expected_failure(error: StoreError, status: PutStatus) -> None:
    """The most specific class wins; errors without a mapping are UNKNOWN_ERROR."""
    assert status_of_error(error) is status


def test_status_of_error_follows_subclasses() -> None:
    """A subclass of a mapped error (defined here) gets its parent's status."""

    class TopicTooLongError(MessageIllegalError):
        pass

    assert status_of_error(TopicTooLongError("t")) is PutStatus.MESSAGE_ILLEGAL


def test_status_table_only_maps_store_errors_to_failure_statuses() -> None:
    """No expected failure maps to a status that claims the message was stored."""
    assert all(issubclass(cls, StoreError) for cls in STATUS_OF_ERROR)
    assert not any(status.stored for status in STATUS_OF_ERROR.values())


def test_put_status_values_are_rocketmq_names() -> None:
    """PutMessageStatus names, including RocketMQ's spelling CREATE_MAPEDFILE_FAILED."""
    assert {status.value for status in PutStatus} == {
        "PUT_OK",
        "FLUSH_DISK_TIMEOUT",
        "FLUSH_SLAVE_TIMEOUT",
        "SLAVE_NOT_AVAILABLE",
        "SERVICE_NOT_AVAILABLE",
        "CREATE_MAPEDFILE_FAILED",
        "MESSAGE_ILLEGAL",
        "PROPERTIES_SIZE_EXCEEDED",
        "OS_PAGECACHE_BUSY",
        "UNKNOWN_ERROR",
    }


@pytest.mark.parametrize("status", list(PutStatus))
def test_stored_is_true_exactly_for_send_ok_statuses(status: PutStatus) -> None:
    """Spec §5.4: PUT_OK and the three timeout/slave statuses mean the bytes are in the CommitLog."""
    stored = {
        PutStatus.PUT_OK,
        PutStatus.FLUSH_DISK_TIMEOUT,
        PutStatus.FLUSH_SLAVE_TIMEOUT,
        PutStatus.SLAVE_NOT_AVAILABLE,
    }
    assert status.stored is (status in stored)
