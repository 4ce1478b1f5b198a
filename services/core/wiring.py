"""Adapters built from settings, shared by the services' composition roots: each takes the groups it reads."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from services.core.adapters.dead_letters import DeadLetterQueue
from services.core.adapters.edge_index import EdgeVectorIndex
from services.core.adapters.embedders import LocalMiniLMEmbedder, PlaceholderEmbedder, embedder_from
from services.core.adapters.falkor import EntityBounds, FalkorGraph, ScratchSpec
from services.core.adapters.falkor.migration import GraphCopy
from services.core.adapters.nats_bus import NatsEventBus, dead_letter_subject, kind_filters
from services.core.adapters.nats_consumer import ConsumerSpec, Handler, JetStreamConsumer
from services.core.adapters.nats_gap_watch import GapRepair
from services.core.adapters.nats_watch import JetStreamEventWatch, WatchTuning
from services.core.adapters.openai_llm import OpenAILanguageModel, language_model_from
from services.core.adapters.qdrant_index import QdrantClientIndex
from services.core.adapters.spacy_entities import ProcessEntityExtractor, SpacyEntityExtractor
from services.core.domain.event_consumers import EventConsumer
from services.core.domain.graph_layout import GraphLayout
from services.core.ports.events import EventPublisher
from services.core.ports.models import Embedder, EntityExtractor
from services.core.ports.outbox import Outbox
from services.core.ports.vector import VectorIndex
from services.core.relay import OutboxRelay
from services.core.replica import index_path
from services.core.settings import (
    BackupSettings,
    BusSettings,
    ConsumerSettings,
    EnrichmentSettings,
    GraphSettings,
    ModelSettings,
    ProcessSettings,
    RecallSettings,
    VectorSettings,
)


def graph_layout(graph: GraphSettings) -> GraphLayout:
    """Which graph holds each tenant (FALKORDB_GRAPH_LAYOUT)."""
    return GraphLayout(graph.falkordb_graph, graph.falkordb_graph_layout, graph.falkordb_graph_buckets)


def graph_store(
    graph: GraphSettings,
    process: ProcessSettings,
    *,
    recall: RecallSettings | None = None,
    backup: BackupSettings | None = None,
) -> FalkorGraph:
    """The graph on FalkorDB: one connection, one part per port (graph.writer,
    graph.reader, ...); each bootstrap hands its consumers the parts they use.
    `recall` tunes the text arms' and entity reads (recall's), `backup` the
    backups' scratch replica (consolidate's); without them, the adapter's defaults."""
    tuning: dict = {}
    if recall is not None:
        tuning["df_cache_seconds"] = recall.recall_df_cache_seconds
        tuning["entity_bounds"] = EntityBounds(
            per_seed=recall.recall_entity_per_seed,
            max_mentions=recall.recall_entity_max_mentions,
            max_reads=recall.recall_entity_max_reads,
            cache_seconds=recall.recall_df_cache_seconds,
        )
    if backup is not None:
        tuning["backup_scratch"] = ScratchSpec(
            root=backup.backup_scratch_root(process.memgrid_data_dir),
            sync_timeout_seconds=backup.backup_snapshot_timeout_seconds,
        )
    return FalkorGraph(
        host=graph.falkordb_host,
        port=graph.falkordb_port,
        password=graph.falkordb_password,
        graph=graph.falkordb_graph,
        layout=graph_layout(graph),
        write_replicas=graph.falkordb_write_replicas,
        write_replicas_timeout_ms=graph.falkordb_write_replicas_timeout_ms,
        wait_seconds=process.dependency_wait_seconds,
        retry_initial_seconds=process.retry_initial_seconds,
        retry_max_seconds=process.retry_max_seconds,
        query_timeout_ms=graph.falkordb_query_timeout_ms,
        socket_margin_seconds=graph.falkordb_socket_margin_seconds,
        request_retry_seconds=graph.falkordb_retry_seconds,
        max_in_flight=graph.falkordb_max_in_flight,
        audit_log=graph.audit_log_enabled,
        appendfsync=graph.falkordb_appendfsync,
        **tuning,
    )


def graph_migration_stores(
    graph: GraphSettings, process: ProcessSettings, buckets: int, page_size: int = 500
) -> tuple[FalkorGraph, FalkorGraph, GraphCopy]:
    """For `python -m services.core.graph_migration`: the shared graph, the bucket layout of
    `buckets` graphs it moves into, and the copier between the two."""
    source = graph_store(graph.model_copy(update={"falkordb_graph_layout": "shared"}), process)
    target = graph_store(
        graph.model_copy(update={"falkordb_graph_layout": "bucket", "falkordb_graph_buckets": buckets}), process
    )
    return source, target, GraphCopy(source.connection, target.connection, page_size=page_size)


def event_bus(bus: BusSettings, process: ProcessSettings, *, durables: tuple[str, ...] = ()) -> NatsEventBus:
    """The NATS connection; `durables`: the consumers whose retention lag its status reports
    (recall's /health figures: ConsumerSettings.durables)."""
    return NatsEventBus(
        url=bus.nats_url,
        user=bus.nats_user,
        password=bus.nats_password.get_secret_value() if bus.nats_password else None,
        stream=bus.nats_stream,
        subject_prefix=bus.nats_subject_prefix,
        wait_seconds=process.dependency_wait_seconds,
        retry_initial_seconds=process.retry_initial_seconds,
        retry_max_seconds=process.retry_max_seconds,
        stream_replicas=bus.nats_stream_replicas,
        stream_max_age_seconds=bus.nats_stream_max_age_seconds,
        stream_max_bytes=bus.nats_stream_max_bytes,
        durables=durables,
    )


def dead_letter_queue(bus: BusSettings, process: ProcessSettings) -> DeadLetterQueue:
    """The dead-letter stream, for `python -m services.core.dlq` (async with: connects, then closes)."""
    return DeadLetterQueue(event_bus(bus, process))


def event_watch(
    bus_settings: BusSettings, recall: RecallSettings, process: ProcessSettings, bus: NatsEventBus
) -> JetStreamEventWatch:
    """Recall's watches of a tenant's events (WatchMemoryEvents), on its own bus connection."""
    return JetStreamEventWatch(
        bus,
        stream=bus_settings.nats_stream,
        subject_prefix=bus_settings.nats_subject_prefix,
        tuning=WatchTuning(
            batch_size=recall.recall_watch_batch_size,
            fetch_seconds=recall.recall_watch_fetch_seconds,
            inactive_seconds=recall.recall_watch_inactive_seconds,
            retry_initial_seconds=process.retry_initial_seconds,
            retry_max_seconds=process.retry_max_seconds,
        ),
    )


def vector_index(vectors: VectorSettings, process: ProcessSettings) -> VectorIndex:
    """A Qdrant server's collection when QDRANT_URL is set, else the embedded
    qdrant-edge shard under the data directory."""
    if vectors.qdrant_url:
        return QdrantClientIndex(
            url=vectors.qdrant_url,
            api_key=vectors.qdrant_api_key,
            collection=vectors.qdrant_collection,
            vector_size=vectors.vector_size,
            autodetect=vectors.vector_size_autodetect,
            wait_seconds=process.dependency_wait_seconds,
            retry_initial_seconds=process.retry_initial_seconds,
            retry_max_seconds=process.retry_max_seconds,
            quantization=vectors.vector_quantization,
        )
    return EdgeVectorIndex(
        path=index_path(vectors, process),
        collection=vectors.qdrant_collection,
        vector_size=vectors.vector_size,
        autodetect=vectors.vector_size_autodetect,
        optimize_every=vectors.vector_optimize_every,
        quantization=vectors.vector_quantization,
        flush_seconds=vectors.vector_flush_seconds,
        reopen_every=vectors.vector_reopen_every,
        payload_links=vectors.vector_payload_links,
        acorn=vectors.vector_search_acorn,
        resident_mb=vectors.vector_resident_mb,
        oversampling=vectors.vector_oversampling,
        exact_below=vectors.vector_exact_below,
    )


def language_model(models: ModelSettings) -> OpenAILanguageModel | None:
    """The LLM for classification and summaries, or None without a key."""
    return language_model_from(models)


def outbox_relay(bus: BusSettings, outbox: Outbox, events: EventPublisher, *, sweeps: bool = True) -> OutboxRelay:
    """The relay that publishes what writes recorded in the outbox. One
    sweeping relay (ingest's) is enough: it re-drives every leftover entry,
    whichever service wrote it."""
    return OutboxRelay(
        outbox=outbox,
        events=events,
        sweep_seconds=bus.outbox_sweep_seconds,
        grace_seconds=bus.outbox_grace_seconds,
        batch_size=bus.outbox_batch_size,
        concurrency=bus.publish_concurrency,
        sweeps=sweeps,
    )


def consumer_spec(
    consumers: ConsumerSettings,
    bus: BusSettings,
    durable: str,
    filter_subjects: list[str],
    batch_size: int,
    *,
    fresh_start_if: str | None = None,
    inactive_seconds: float | None = None,
) -> ConsumerSpec:
    """A durable consumer of memory events on these subjects, with the retry policy from settings."""
    return ConsumerSpec(
        durable=durable,
        filter_subjects=filter_subjects,
        max_attempts=consumers.enrichment_max_attempts,
        backoff_seconds=consumers.enrichment_backoff_seconds,
        ack_wait_seconds=consumers.consumer_ack_wait_seconds,
        batch_size=batch_size,
        dead_letter_subject=dead_letter_subject(bus.nats_subject_prefix, durable),
        dead_letter_attempts=consumers.consumer_dead_letter_attempts,
        heartbeat_seconds=consumers.consumer_heartbeat_seconds,
        fetch_timeout_seconds=consumers.consumer_fetch_timeout_seconds,
        fresh_start_if=fresh_start_if,
        inactive_seconds=inactive_seconds,
    )


def subscription_spec(
    consumers: ConsumerSettings,
    bus: BusSettings,
    durable: str,
    consumer: EventConsumer,
    batch_size: int,
    *,
    fresh_start_if: str | None = None,
    inactive_seconds: float | None = None,
) -> ConsumerSpec:
    """A service's consumer as the events table declares it (domain/event_consumers.py):
    consumer_spec subscribed to exactly the kinds its entry names."""
    subjects = kind_filters(bus.nats_subject_prefix, consumer.kinds)
    return consumer_spec(
        consumers, bus, durable, subjects, batch_size, fresh_start_if=fresh_start_if, inactive_seconds=inactive_seconds
    )


def embedder(models: ModelSettings, vector_size: int, *, parallel: int = 1, part_size: int | None = None) -> Embedder:
    """The embedder EMBEDDING_PROVIDER names (`parallel` parts of a call side by
    side, one core each, of at least `part_size` texts: None, a batch's worth)."""
    return embedder_from(models, vector_size, parallel=parallel, part_size=part_size)


def word_embedder(query_embedder: Embedder, models: ModelSettings) -> Embedder:
    """What embeds single words for recall's related-words component: the
    query embedder when it runs here (local MiniLM, or the tests'
    placeholder), else the local MiniLM built as the EMBEDDING_* settings
    say (threads, quantised, memory release), so a recall never sends
    hundreds of words to a remote provider (the words' vectors are only
    compared with each other, never with the memories')."""
    if isinstance(query_embedder, (LocalMiniLMEmbedder, PlaceholderEmbedder)):
        return query_embedder
    local = models.model_copy(update={"embedding_provider": "local"})
    return embedder_from(local, LocalMiniLMEmbedder.dimension)


def entity_extractor(enrichment: EnrichmentSettings) -> EntityExtractor:
    """spaCy in its own process (or in this one), with the model or the rules alone."""
    if enrichment.enrichment_entity_process:
        return ProcessEntityExtractor(
            enrichment.enrichment_spacy_model,
            blank=enrichment.enrichment_spacy_blank,
            nice=enrichment.enrichment_entity_nice,
        )
    if enrichment.enrichment_spacy_blank:
        return SpacyEntityExtractor.blank_english()
    return SpacyEntityExtractor(enrichment.enrichment_spacy_model)


def event_consumer(
    bus_settings: BusSettings,
    bus: NatsEventBus,
    spec: ConsumerSpec,
    handler: Handler,
    *,
    before_fetch: Callable[[], Awaitable[None]] | None = None,
    on_gap: GapRepair | None = None,
) -> JetStreamConsumer:
    """A durable JetStream consumer of the memory-event stream feeding `handler`;
    `on_gap` repairs from the graph after events were lost to retention."""
    return JetStreamConsumer(bus, bus_settings.nats_stream, spec, handler, before_fetch=before_fetch, on_gap=on_gap)
