"""Settings validation, limits relations and the package's public surface."""

from __future__ import annotations

import pytest

import shoal.client
from shoal.client import limits
from shoal.client.errors import (
    MessageDecodeError,
    MQBrokerError,
    MQClientError,
    RemotingError,
    RemotingTimeoutError,
    UnsupportedCompressionError,
)
from shoal.client.push_consumer import PushConsumer
from shoal.client.settings import ClientSettings, ConsumerSettings, ProducerSettings


def test_defaults_are_the_java_clients() -> None:
    """Goal: spec §15 defaults. Method: read the dataclass defaults."""
    client = ClientSettings()
    assert (client.heartbeat_interval_s, client.route_refresh_interval_s, client.request_timeout_s) == (30, 30, 3)
    consumer = ConsumerSettings()
    assert (consumer.rebalance_interval_s, consumer.offset_persist_interval_s) == (20, 5)
    assert (consumer.pull_suspend_timeout_ms, consumer.pull_rpc_timeout_s) == (15000, 30)
    assert (consumer.lock_interval_s, consumer.lock_max_live_s) == (20, 30)
    producer = ProducerSettings()
    assert (producer.retries_when_send_failed, producer.compress_body_over_bytes) == (2, 4096)
    assert producer.body_size_max_bytes == 4 * 1024 * 1024


@pytest.mark.parametrize(
    "build",
    [
        lambda: ClientSettings(request_timeout_s=0),
        lambda: ProducerSettings(retries_when_send_failed=limits.SEND_RETRIES_MAX_COUNT + 1),
        lambda: ProducerSettings(body_size_max_bytes=limits.MESSAGE_BODY_SIZE_MAX_BYTES + 1),
        lambda: ConsumerSettings(consume_concurrency=0),
        lambda: ConsumerSettings(lock_interval_s=30, lock_max_live_s=30),
        lambda: ConsumerSettings(pull_rpc_timeout_s=15),
    ],
)
def test_settings_outside_their_limits_are_refused(build: object) -> None:
    """Goal: every bounded resource is checked at construction. Method: one bad value each."""
    with pytest.raises(ValueError):
        build()  # type: ignore[operator]


@pytest.mark.parametrize(
    "options", [{"pull_batch": 0}, {"pull_batch": 1025}, {"consume_batch_max": 0}, {"max_reconsume_times": -2}]
)
def test_push_consumer_arguments_are_checked(options: dict[str, int]) -> None:
    """Goal: Java's checkConfig ranges. Method: out-of-range constructor arguments."""
    with pytest.raises(ValueError):
        PushConsumer("cg", "127.0.0.1:1", **options)  # type: ignore[arg-type]


def test_one_exception_tree() -> None:
    """Goal: every client error is an MQClientError. Method: check the subclass relations."""
    assert issubclass(MQBrokerError, MQClientError)
    assert issubclass(RemotingTimeoutError, RemotingError)
    assert issubclass(RemotingError, MQClientError)
    assert issubclass(UnsupportedCompressionError, MessageDecodeError)
    error = MQBrokerError(17, "topic not exist", "10.0.0.1:10911")
    assert (error.code, error.remark, error.address) == (17, "topic not exist", "10.0.0.1:10911")
    assert "17" in str(error) and "10.0.0.1:10911" in str(error)


def test_public_surface_is_exported() -> None:
    """Goal: `from shoal.client import X` works for every name in __all__. Method: getattr each."""
    for name in shoal.client.__all__:
        assert getattr(shoal.client, name) is not None
    assert {"Producer", "PushConsumer", "PullConsumer", "Admin", "BlockingProducer"} <= set(shoal.client.__all__)
