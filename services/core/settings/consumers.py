"""How the durable consumers of the event stream retry, acknowledge and are named."""

from __future__ import annotations

from pydantic import Field

from services.core.settings.base import Group


class ConsumerSettings(Group):
    """Event consumers: how the durable consumers of the stream (enrich's two stages, recall's projector)
    retry, acknowledge and are named."""

    enrichment_max_attempts: int = 3  # deliveries of an event before it goes to the dead-letter stream
    enrichment_backoff_seconds: list[float] = [1.0, 5.0, 15.0]  # the wait before each redelivery
    consumer_ack_wait_seconds: float = 60.0  # JetStream redelivers a message not acknowledged in this time
    consumer_fetch_timeout_seconds: float = 1.0  # also how long a stop may wait for the fetch in hand
    # While a batch is being handled, the consumer tells JetStream every this many seconds that it is still
    # at work (an in-progress ack), so a long batch is not redelivered meanwhile; at most half the
    # consumer's effective ack wait (JetStream's is the first backoff when one is set).
    consumer_heartbeat_seconds: float = Field(default=10.0, gt=0)
    # Deliveries JetStream may make past ENRICHMENT_MAX_ATTEMPTS: such a delivery is dead-lettered without
    # being handled again, so a dead-letter publish that failed (or a process that died mid-batch) is
    # tried again instead of the message being dropped. When these run out too, JetStream's max-deliveries
    # advisory is what dead-letters it.
    consumer_dead_letter_attempts: int = Field(default=10, ge=1)
    projector_batch_size: int = 256  # events recall's projector takes at once
    projector_durable: str = "recall-projector"  # recall's projection consumer, shared by its replicas
    enrich_durable: str = "enrich"  # the enrichment stage's consumer
    # Enrich's first stage, embedding: its own durable consumer of created and
    # content-changing updated events; it records an `embedded` event, which
    # makes the memory searchable by vector and starts the second stage.
    embed_durable: str = "embed"
