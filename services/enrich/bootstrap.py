"""The enrich service's composition root: settings -> adapters -> the two
stages (embedding, then enrichment), each with its own durable consumer."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import structlog

from memgrid.v1 import enrich_service_pb2, enrich_service_pb2_grpc
from services.core.adapters.embedders import embedder_from
from services.core.adapters.nats_consumer import JetStreamConsumer
from services.core.adapters.spacy_entities import ProcessEntityExtractor, SpacyEntityExtractor
from services.core.grpc.app import ServiceApp, full_service_name
from services.core.settings import Settings
from services.core.wiring import consumer_spec, event_bus, graph_store, language_model, outbox_relay
from services.enrich.embedding import EmbeddingStage, yield_to_embedding
from services.enrich.neighbours import RecallNeighbours
from services.enrich.pipeline import EnrichmentPipeline, EnrichmentPolicy
from services.enrich.reconciler import Reconciler
from services.enrich.reembed import Reembedder
from services.enrich.servicer import EnrichServicer

log = structlog.get_logger()


def build_app(settings: Settings, **overrides) -> ServiceApp:
    """Adapters from settings; tests may pass graph=, events=, embedder=,
    extractor= or neighbours= instead."""
    graph = overrides.get("graph") or graph_store(settings)
    events = overrides.get("events") or event_bus(settings)
    embedder = overrides.get("embedder") or embedder_from(settings, parallel=settings.enrichment_embedding_parallel)
    if "extractor" in overrides:
        extractor = overrides["extractor"]
    elif settings.enrichment_entity_process:
        extractor = ProcessEntityExtractor(
            settings.enrichment_spacy_model, blank=settings.enrichment_spacy_blank, nice=settings.enrichment_entity_nice
        )
    elif settings.enrichment_spacy_blank:
        extractor = SpacyEntityExtractor.blank_english()
    else:
        extractor = SpacyEntityExtractor(settings.enrichment_spacy_model)
    neighbours = overrides.get("neighbours") or RecallNeighbours(
        settings.grpc_target("recall"), settings.grpc_timeout_seconds
    )
    relay = outbox_relay(settings, graph, events, sweeps=False)
    policy = EnrichmentPolicy(
        temporal_window=timedelta(hours=settings.enrichment_temporal_window_hours),
        temporal_limit=settings.enrichment_temporal_limit,
        similarity_limit=settings.enrichment_similarity_limit,
        similarity_threshold=settings.enrichment_similarity_threshold,
        supports_threshold=settings.enrichment_supports_threshold,
        pattern_min_members=settings.enrichment_pattern_min_members,
        pattern_max_members=settings.enrichment_pattern_max_members,
        conflict_retries=settings.write_conflict_retries,
        batch_size=settings.enrichment_batch_size,
    )
    llm = overrides["llm"] if "llm" in overrides else language_model(settings)
    pipeline = EnrichmentPipeline(
        graph=graph,
        embedder=embedder,
        extractor=extractor,
        neighbours=neighbours,
        relay=relay,
        llm=llm,
        policy=policy,
    )
    embedding = EmbeddingStage(
        graph=graph,
        embedder=embedder,
        relay=relay,
        batch_size=settings.embedding_write_batch,
        conflict_retries=settings.write_conflict_retries,
    )
    prefix = settings.nats_subject_prefix
    # Durable consumers: what arrives while enrich is down waits for it.
    embed_consumer = JetStreamConsumer(
        events,
        settings.nats_stream,
        consumer_spec(
            settings,
            settings.embed_durable,
            [f"{prefix}.*.created", f"{prefix}.*.updated"],
            settings.embedding_fetch_size,
            # Upgrading from a release without this stage: enrich's durable has
            # handled the history, which is not replayed; the reconciler picks up
            # whatever it left without a vector.
            fresh_start_if=settings.enrich_durable,
        ),
        embedding.handle,
    )

    async def embedding_first() -> None:
        await yield_to_embedding(
            embed_consumer.pending,
            backlog=settings.enrichment_yield_backlog,
            max_seconds=settings.enrichment_yield_max_seconds,
            poll_seconds=settings.enrichment_yield_poll_seconds,
        )

    # What one enrich_ids call takes: the pipeline works through it a batch at a time.
    take = max(settings.enrichment_fetch_size, settings.enrichment_batch_size)
    consumer = JetStreamConsumer(
        events,
        settings.nats_stream,
        consumer_spec(settings, settings.enrich_durable, [f"{prefix}.*.embedded"], take),
        pipeline.handle,
        before_fetch=embedding_first,
    )

    async def outstanding() -> int:
        return await embed_consumer.pending() + await consumer.pending()

    reconciler = Reconciler(
        graph=graph,
        pipeline=pipeline,
        interval_seconds=settings.enrichment_reconcile_seconds,
        grace_seconds=settings.enrichment_reconcile_grace_seconds,
        batch_size=take,
        embedding=embedding,
        outstanding=outstanding,
        backlog=settings.enrichment_yield_backlog,
    )

    reembedder = Reembedder(graph=graph, pipeline=pipeline, batch_size=take)

    async def warm_up() -> None:
        """Load the models before SERVING, so the first batch is not the slow one.
        A provider that is down now is retried per batch, not fatal here."""
        try:
            await embedder.embed(["warm up"])
        except Exception as exc:
            log.warning("embedder warm-up failed", embedder=embedder.name, error=str(exc))
        await asyncio.to_thread(extractor.extract_many, ["warm up"])

    return ServiceApp(
        service_name=full_service_name(enrich_service_pb2, "EnrichService"),
        add_servicer=enrich_service_pb2_grpc.add_EnrichServiceServicer_to_server,
        servicer=EnrichServicer(
            pipeline,
            consumer,
            reconciler,
            settings.enrichment_max_attempts,
            reembedder,
            embedding=embedding,
            embed_consumer=embed_consumer,
        ),
        startups=[graph.ensure_schema, events.connect, warm_up, relay.start]
        + ([embed_consumer.start, consumer.start, reconciler.start] if settings.enrichment_enabled else []),
        shutdowns=[
            reembedder.stop,
            reconciler.stop,
            embed_consumer.stop,
            consumer.stop,
            relay.stop,
            neighbours.close,
            events.close,
            graph.close,
        ]
        + ([extractor.close] if hasattr(extractor, "close") else []),
    )
