"""An empty fetch is not a lost bus, whichever TimeoutError nats-py raises."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import StreamConfig

from services.core.adapters.nats_consumer import ConsumerSpec, JetStreamConsumer


class JetStream:
    """A stream that lost nothing: the retention check before each fetch finds no gap."""

    async def stream_info(self, stream: str):
        return SimpleNamespace(state=SimpleNamespace(first_seq=1, last_seq=0), config=StreamConfig())

    async def consumer_info(self, stream: str, durable: str):
        return SimpleNamespace(
            num_pending=0, delivered=SimpleNamespace(stream_seq=0), config=SimpleNamespace(metadata=None)
        )


class Bus:
    def __init__(self, connected: bool):
        self.connected = connected
        self.jetstream = JetStream()


class Subscription:
    def __init__(self, error: Exception):
        self.error = error

    async def fetch(self, batch: int, timeout: float):  # noqa: ASYNC109 - nats-py's signature
        raise self.error


def consumer(connected: bool, error: Exception) -> JetStreamConsumer:
    spec = ConsumerSpec("d", ["s.>"], 3, [1.0], 30.0, 10, "dead")

    async def handler(deliveries):
        raise AssertionError("nothing to handle")

    made = JetStreamConsumer(Bus(connected), "stream", spec, handler)
    made._sub = Subscription(error)
    return made


@pytest.mark.parametrize("error", [NatsTimeout(), TimeoutError()])
async def test_a_timed_out_fetch_on_a_live_connection_is_empty(error):
    assert await consumer(True, error).run_once() == 0


async def test_a_builtin_timeout_without_a_connection_goes_to_the_loop_to_subscribe_again():
    with pytest.raises(TimeoutError):
        await consumer(False, TimeoutError()).run_once()
