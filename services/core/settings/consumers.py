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
    # recall's projection consumer: shared by its replicas with a Qdrant server (QDRANT_URL); with the embedded
    # index each replica keeps a full index of its own, fed by its own durable, <this>-<RECALL_REPLICA_ID>.
    projector_durable: str = "recall-projector"
    # This recall replica's name in its durable's; unset: the host name and a digest of the index's path (two
    # replicas on one host, each with its own MEMGRID_DATA_DIR, differ). Set it where host names change with
    # each start (a Deployment's pods): a StatefulSet's stable names keep a replica's durable and its index.
    recall_replica_id: str | None = None
    # JetStream removes a replica's own durable nobody read for this long (a replica gone for good: it would
    # otherwise stay, a raft group on every node of a cluster); one that comes back later gets a new durable,
    # replays the stream, and what retention dropped is refilled from the graph. The stream's age by default:
    # a durable idle for longer has lost events anyway. 0: never removed. Not for a Qdrant server's shared one.
    recall_projector_inactive_seconds: float = Field(default=7 * 86400.0, ge=0)
    enrich_durable: str = "enrich"  # the enrichment stage's consumer
    # Enrich's first stage, embedding: its own durable consumer of created and
    # content-changing updated events; it records an `embedded` event, which
    # makes the memory searchable by vector and starts the second stage.
    embed_durable: str = "embed"
