"""Adapters built from settings, shared by the services' composition roots."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from services.core.adapters.dead_letters import DeadLetterQueue
from services.core.adapters.edge_index import EdgeVectorIndex
from services.core.adapters.embedders import embedder_from
from services.core.adapters.falkor import EntityBounds, FalkorGraph, ScratchSpec
from services.core.adapters.falkor.migration import GraphCopy
from services.core.adapters.nats_bus import NatsEventBus, dead_letter_subject
from services.core.adapters.nats_consumer import ConsumerSpec, GapRepair, Handler, JetStreamConsumer
from services.core.adapters.nats_watch import JetStreamEventWatch, WatchTuning
from services.core.adapters.openai_llm import OpenAILanguageModel, language_model_from
from services.core.adapters.qdrant_index import QdrantClientIndex
from services.core.adapters.spacy_entities import ProcessEntityExtractor, SpacyEntityExtractor
from services.core.domain.graph_layout import GraphLayout
from services.core.ports.events import EventPublisher
from services.core.ports.models import Embedder, EntityExtractor
from services.core.ports.outbox import Outbox
from services.core.ports.vector import VectorIndex
from services.core.relay import OutboxRelay
from services.core.replica import index_path, projector_durable
from services.core.settings import Settings


def graph_layout(settings: Settings) -> GraphLayout:
    """Which graph holds each tenant (FALKORDB_GRAPH_LAYOUT)."""
    return GraphLayout(settings.falkordb_graph, settings.falkordb_graph_layout, settings.falkordb_graph_buckets)


def graph_store(settings: Settings) -> FalkorGraph:
    """The graph on FalkorDB: one connection, one part per port (graph.writer,
    graph.reader, ...); each bootstrap hands its consumers the parts they use."""
    return FalkorGraph(
        host=settings.falkordb_host,
        port=settings.falkordb_port,
        password=settings.falkordb_password,
        graph=settings.falkordb_graph,
        layout=graph_layout(settings),
        write_replicas=settings.falkordb_write_replicas,
        write_replicas_timeout_ms=settings.falkordb_write_replicas_timeout_ms,
        wait_seconds=settings.dependency_wait_seconds,
        retry_initial_seconds=settings.retry_initial_seconds,
        retry_max_seconds=settings.retry_max_seconds,
        df_cache_seconds=settings.recall_df_cache_seconds,
        query_timeout_ms=settings.falkordb_query_timeout_ms,
        socket_margin_seconds=settings.falkordb_socket_margin_seconds,
        request_retry_seconds=settings.falkordb_retry_seconds,
        audit_log=settings.audit_log_enabled,
        backup_scratch=ScratchSpec(
            root=settings.backup_scratch_root,
            sync_timeout_seconds=settings.backup_snapshot_timeout_seconds,
        ),
        appendfsync=settings.falkordb_appendfsync,
        entity_bounds=EntityBounds(
            per_seed=settings.recall_entity_per_seed,
            max_mentions=settings.recall_entity_max_mentions,
            max_reads=settings.recall_entity_max_reads,
        ),
    )


def graph_migration_stores(
    settings: Settings, buckets: int, page_size: int = 500
) -> tuple[FalkorGraph, FalkorGraph, GraphCopy]:
    """For `python -m services.core.graph_migration`: the shared graph, the bucket layout of
    `buckets` graphs it moves into, and the copier between the two."""
    source = graph_store(settings.model_copy(update={"falkordb_graph_layout": "shared"}))
    target = graph_store(
        settings.model_copy(update={"falkordb_graph_layout": "bucket", "falkordb_graph_buckets": buckets})
    )
    return source, target, GraphCopy(source.connection, target.connection, page_size=page_size)


def event_bus(settings: Settings) -> NatsEventBus:
    return NatsEventBus(
        url=settings.nats_url,
        user=settings.nats_user,
        password=settings.nats_password.get_secret_value() if settings.nats_password else None,
        stream=settings.nats_stream,
        subject_prefix=settings.nats_subject_prefix,
        wait_seconds=settings.dependency_wait_seconds,
        retry_initial_seconds=settings.retry_initial_seconds,
        retry_max_seconds=settings.retry_max_seconds,
        stream_replicas=settings.nats_stream_replicas,
        stream_max_age_seconds=settings.nats_stream_max_age_seconds,
        stream_max_bytes=settings.nats_stream_max_bytes,
        # The durables /health reports the retention lag of (docs/operations.md, Retention).
        durables=(projector_durable(settings), settings.embed_durable, settings.enrich_durable),
    )


def dead_letter_queue(settings: Settings) -> DeadLetterQueue:
    """The dead-letter stream, for `python -m services.core.dlq` (async with: connects, then closes)."""
    return DeadLetterQueue(event_bus(settings))


def event_watch(settings: Settings, bus: NatsEventBus) -> JetStreamEventWatch:
    """Recall's watches of a tenant's events (WatchMemoryEvents), on its own bus connection."""
    return JetStreamEventWatch(
        bus,
        stream=settings.nats_stream,
        subject_prefix=settings.nats_subject_prefix,
        tuning=WatchTuning(
            batch_size=settings.recall_watch_batch_size,
            fetch_seconds=settings.recall_watch_fetch_seconds,
            inactive_seconds=settings.recall_watch_inactive_seconds,
            retry_initial_seconds=settings.retry_initial_seconds,
            retry_max_seconds=settings.retry_max_seconds,
        ),
    )


def vector_index(settings: Settings) -> VectorIndex:
    """A Qdrant server's collection when QDRANT_URL is set, else the embedded
    qdrant-edge shard under the data directory."""
    if settings.qdrant_url:
        return QdrantClientIndex(
            url=settings.qdrant_url,
            api_key=settings.qdrant_api_key,
            collection=settings.qdrant_collection,
            vector_size=settings.vector_size,
            autodetect=settings.vector_size_autodetect,
            wait_seconds=settings.dependency_wait_seconds,
            retry_initial_seconds=settings.retry_initial_seconds,
            retry_max_seconds=settings.retry_max_seconds,
            quantization=settings.vector_quantization,
        )
    return EdgeVectorIndex(
        path=index_path(settings),
        collection=settings.qdrant_collection,
        vector_size=settings.vector_size,
        autodetect=settings.vector_size_autodetect,
        optimize_every=settings.vector_optimize_every,
        quantization=settings.vector_quantization,
        flush_seconds=settings.vector_flush_seconds,
        reopen_every=settings.vector_reopen_every,
    )


def language_model(settings: Settings) -> OpenAILanguageModel | None:
    """The LLM for classification and summaries, or None without a key."""
    return language_model_from(settings)


def outbox_relay(settings: Settings, outbox: Outbox, events: EventPublisher, *, sweeps: bool = True) -> OutboxRelay:
    """The relay that publishes what writes recorded in the outbox. One
    sweeping relay (ingest's) is enough: it re-drives every leftover entry,
    whichever service wrote it."""
    return OutboxRelay(
        outbox=outbox,
        events=events,
        sweep_seconds=settings.outbox_sweep_seconds,
        grace_seconds=settings.outbox_grace_seconds,
        batch_size=settings.outbox_batch_size,
        concurrency=settings.publish_concurrency,
        sweeps=sweeps,
    )


def consumer_spec(
    settings: Settings,
    durable: str,
    filter_subjects: list[str],
    batch_size: int,
    *,
    fresh_start_if: str | None = None,
    inactive_seconds: float | None = None,
) -> ConsumerSpec:
    """A durable consumer of memory events, with the retry policy from settings."""
    return ConsumerSpec(
        durable=durable,
        filter_subjects=filter_subjects,
        max_attempts=settings.enrichment_max_attempts,
        backoff_seconds=settings.enrichment_backoff_seconds,
        ack_wait_seconds=settings.consumer_ack_wait_seconds,
        batch_size=batch_size,
        dead_letter_subject=dead_letter_subject(settings.nats_subject_prefix, durable),
        dead_letter_attempts=settings.consumer_dead_letter_attempts,
        heartbeat_seconds=settings.consumer_heartbeat_seconds,
        fetch_timeout_seconds=settings.consumer_fetch_timeout_seconds,
        fresh_start_if=fresh_start_if,
        inactive_seconds=inactive_seconds,
    )


def embedder(settings: Settings, *, parallel: int = 1) -> Embedder:
    """The embedder EMBEDDING_PROVIDER names (`parallel` parts of a call side by side, one core each)."""
    return embedder_from(settings, parallel=parallel)


def entity_extractor(settings: Settings) -> EntityExtractor:
    """spaCy in its own process (or in this one), with the model or the rules alone."""
    if settings.enrichment_entity_process:
        return ProcessEntityExtractor(
            settings.enrichment_spacy_model, blank=settings.enrichment_spacy_blank, nice=settings.enrichment_entity_nice
        )
    if settings.enrichment_spacy_blank:
        return SpacyEntityExtractor.blank_english()
    return SpacyEntityExtractor(settings.enrichment_spacy_model)


def event_consumer(
    settings: Settings,
    bus: NatsEventBus,
    spec: ConsumerSpec,
    handler: Handler,
    *,
    before_fetch: Callable[[], Awaitable[None]] | None = None,
    on_gap: GapRepair | None = None,
) -> JetStreamConsumer:
    """A durable JetStream consumer of the memory-event stream feeding `handler`;
    `on_gap` repairs from the graph after events were lost to retention."""
    return JetStreamConsumer(bus, settings.nats_stream, spec, handler, before_fetch=before_fetch, on_gap=on_gap)
