"""The enrich service's composition root: settings -> adapters -> the two
stages (embedding, then enrichment), each with its own durable consumer."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

import structlog

from memgrid.v1 import enrich_service_pb2, enrich_service_pb2_grpc
from services.core.adapters.falkor import FalkorGraph
from services.core.adapters.nats_bus import NatsEventBus
from services.core.domain.event_consumers import EMBEDDING, ENRICHMENT
from services.core.domain.retention import ConsumerGap
from services.core.grpc.app import ServiceApp, full_service_name
from services.core.grpc.plane import ServicePlane
from services.core.ports.models import Embedder, EntityExtractor, LanguageModel
from services.core.ports.vector import NeighbourFinder
from services.core.settings import Settings
from services.core.wiring import embedder as embedder_of
from services.core.wiring import (
    entity_extractor,
    event_bus,
    event_consumer,
    graph_store,
    language_model,
    outbox_relay,
    subscription_spec,
)
from services.enrich.embedding import EmbeddingStage, yield_to_embedding
from services.enrich.embedding_texts import EmbeddingContext
from services.enrich.neighbours import RecallNeighbours
from services.enrich.pipeline import EnrichmentPipeline, EnrichmentPolicy
from services.enrich.reconciler import Reconciler
from services.enrich.reembed import Reembedder
from services.enrich.servicer import EnrichServicer

log = structlog.get_logger()


#: The settings groups this service reads (its main loads only these, with process and plane).
GROUPS = ("process", "plane", "graph", "bus", "vectors", "consumers", "memory", "models", "enrichment")


def build_app(
    settings: Settings,
    *,
    graph: FalkorGraph | None = None,
    events: NatsEventBus | None = None,
    embedder: Embedder | None = None,
    extractor: EntityExtractor | None = None,
    neighbours: NeighbourFinder | None = None,
    llm: LanguageModel | None = None,
) -> ServiceApp:
    """The service from settings; tests may pass any adapter instead (None:
    built from settings, the LLM only when OPENAI_API_KEY is set)."""
    graph = graph or graph_store(settings.graph, settings.process)
    events = events or event_bus(settings.bus, settings.process)
    embedder = embedder or embedder_of(
        settings.models, settings.vectors.vector_size, parallel=settings.enrichment.enrichment_embedding_parallel
    )
    extractor = extractor or entity_extractor(settings.enrichment)
    neighbours = neighbours or RecallNeighbours(
        settings.plane.grpc_target("recall"),
        settings.plane.grpc_timeout_seconds,
        ServicePlane.from_settings(settings.plane, settings.process.memgrid_data_dir),
    )
    relay = outbox_relay(settings.bus, graph.outbox, events, sweeps=False)
    context = EmbeddingContext(
        settings.enrichment.embedding_context_seconds,
        settings.enrichment.embedding_context_chars,
        settings.enrichment.embedding_context_following,
    )
    policy = EnrichmentPolicy(
        temporal_window=timedelta(hours=settings.enrichment.enrichment_temporal_window_hours),
        temporal_limit=settings.enrichment.enrichment_temporal_limit,
        similarity_limit=settings.enrichment.enrichment_similarity_limit,
        similarity_threshold=settings.enrichment.enrichment_similarity_threshold,
        supports_threshold=settings.enrichment.enrichment_supports_threshold,
        pattern_min_members=settings.enrichment.enrichment_pattern_min_members,
        pattern_max_members=settings.enrichment.enrichment_pattern_max_members,
        conflict_retries=settings.memory.write_conflict_retries,
        batch_size=settings.enrichment.enrichment_batch_size,
        max_tags=settings.memory.memory_max_tags,
        embedding_context=context,
    )
    llm = llm or language_model(settings.models)
    pipeline = EnrichmentPipeline(
        store=graph.enrichment,
        embedder=embedder,
        extractor=extractor,
        neighbours=neighbours,
        relay=relay,
        llm=llm,
        policy=policy,
    )
    embedding = EmbeddingStage(
        store=graph.enrichment,
        embedder=embedder,
        relay=relay,
        batch_size=settings.enrichment.embedding_write_batch,
        conflict_retries=settings.memory.write_conflict_retries,
        context=context,
    )

    async def repair(gap: ConsumerGap) -> None:
        """Events lost to retention: the graph says what is left to embed and enrich."""
        await reconciler.repair(gap)

    # Durable consumers: what arrives while enrich is down waits for it (within the stream's retention;
    # past it, `repair`).
    embed_consumer = event_consumer(
        settings.bus,
        events,
        subscription_spec(
            settings.consumers,
            settings.bus,
            settings.consumers.embed_durable,
            EMBEDDING,
            settings.enrichment.embedding_fetch_size,
            # Upgrading from a release without this stage: enrich's durable has
            # handled the history, which is not replayed; the reconciler picks up
            # whatever it left without a vector.
            fresh_start_if=settings.consumers.enrich_durable,
        ),
        embedding.handle,
        on_gap=repair,
    )

    async def embedding_first() -> None:
        await yield_to_embedding(
            embed_consumer.pending,
            backlog=settings.enrichment.enrichment_yield_backlog,
            max_seconds=settings.enrichment.enrichment_yield_max_seconds,
            poll_seconds=settings.enrichment.enrichment_yield_poll_seconds,
        )

    # What one enrich_ids call takes: the pipeline works through it a batch at a time.
    take = max(settings.enrichment.enrichment_fetch_size, settings.enrichment.enrichment_batch_size)
    consumer = event_consumer(
        settings.bus,
        events,
        subscription_spec(settings.consumers, settings.bus, settings.consumers.enrich_durable, ENRICHMENT, take),
        pipeline.handle,
        before_fetch=embedding_first,
        on_gap=repair,
    )

    async def outstanding() -> int:
        return await embed_consumer.pending() + await consumer.pending()

    reconciler = Reconciler(
        store=graph.enrichment,
        pipeline=pipeline,
        interval_seconds=settings.enrichment.enrichment_reconcile_seconds,
        grace_seconds=settings.enrichment.enrichment_reconcile_grace_seconds,
        batch_size=take,
        embedding=embedding,
        outstanding=outstanding,
        backlog=settings.enrichment.enrichment_yield_backlog,
    )

    reembedder = Reembedder(export=graph.export, pipeline=pipeline, batch_size=take)

    async def warm_up() -> None:
        """Load the models before SERVING, so the first batch is not the slow one.
        A provider that is down now is retried per batch, not fatal here."""
        try:
            await embedder.embed(["warm up"])
        except Exception as exc:
            log.warning("embedder warm-up failed", embedder=embedder.name, error=str(exc))
        await asyncio.to_thread(extractor.extract_many, ["warm up"])

    startups: list[Callable[[], Awaitable[None] | None]] = [
        graph.lifecycle.ensure_schema,
        events.connect,
        warm_up,
        relay.start,
    ]
    if settings.enrichment.enrichment_enabled:
        startups += [embed_consumer.start, consumer.start, reconciler.start]
    return ServiceApp(
        service_name=full_service_name(enrich_service_pb2, "EnrichService"),
        add_servicer=enrich_service_pb2_grpc.add_EnrichServiceServicer_to_server,
        servicer=EnrichServicer(
            pipeline,
            consumer,
            reconciler,
            settings.consumers.enrichment_max_attempts,
            reembedder,
            embedding=embedding,
            embed_consumer=embed_consumer,
            reprocess_max_ids=settings.enrichment.enrichment_reprocess_max_ids,
        ),
        startups=startups,
        shutdowns=[
            reembedder.stop,
            reconciler.stop,
            embed_consumer.stop,
            consumer.stop,
            relay.stop,
            neighbours.close,
            events.close,
            graph.lifecycle.close,
        ]
        + ([extractor.close] if hasattr(extractor, "close") else []),
    )
