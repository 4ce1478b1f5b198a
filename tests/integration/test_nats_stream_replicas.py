"""NATS_STREAM_REPLICAS reaches JetStream: the stream is made (and kept)
with that many copies; a single server, as in dev, takes only 1."""

from __future__ import annotations

import pytest

from services.core.replica import stream_durables
from services.core.wiring import event_bus

pytestmark = pytest.mark.integration


async def test_the_stream_is_made_with_the_configured_copies(settings):
    bus = event_bus(settings.bus, settings.process, durables=stream_durables(settings))
    await bus.connect()
    try:
        info = await bus.jetstream.stream_info(settings.bus.nats_stream)
        assert info.config.num_replicas == settings.bus.nats_stream_replicas == 1
    finally:
        await bus.close()


async def test_three_copies_are_asked_of_the_server(settings):
    """A single server refuses a replicated stream: proof the setting is sent (prod's cluster takes it)."""
    replicated = settings.override({"nats_stream_replicas": 3, "dependency_wait_seconds": 2.0})
    bus = event_bus(replicated.bus, replicated.process)
    with pytest.raises(Exception, match="(?i)replicas|clustered|cluster"):
        await bus.connect()
    await bus.close()
