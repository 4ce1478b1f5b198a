"""The recall service's composition root: settings -> adapters -> servicer."""

from __future__ import annotations

from datetime import UTC, datetime

from memgrid.v1 import recall_service_pb2, recall_service_pb2_grpc
from services.core.adapters.embedders import embedder_from
from services.core.adapters.nats_consumer import JetStreamConsumer
from services.core.domain.times import to_micros
from services.core.grpc.app import ServiceApp, full_service_name
from services.core.settings import Settings
from services.core.wiring import consumer_spec, event_bus, graph_store, vector_index
from services.recall.access import AccessRecorder
from services.recall.df_warmer import FrequencyWarmer
from services.recall.graph_views import GraphLimits, GraphViews
from services.recall.handlers import ReadLimits, RecallHandlers, StartupRules
from services.recall.projector import Projector
from services.recall.servicer import RecallServicer


def build_app(settings: Settings, **overrides) -> ServiceApp:
    """Adapters from settings; tests may pass `graph=`, `events=` or `vectors=`."""
    graph = overrides.get("graph") or graph_store(settings)
    events = overrides.get("events") or event_bus(settings)
    vectors = overrides.get("vectors") or vector_index(settings)
    embedder = overrides.get("embedder") or embedder_from(settings)
    access = AccessRecorder(
        graph.touch_memories,
        flush_seconds=settings.recall_access_flush_ms / 1000,
        batch_size=settings.recall_access_batch_size,
        clock_us=lambda: to_micros(datetime.now(UTC)),
    )
    handlers = RecallHandlers(
        graph=graph,
        vectors=vectors,
        events=events,
        policy=settings.recall_policy,
        limits=ReadLimits(
            by_tag_default=settings.by_tag_default_limit,
            by_tag_max=settings.by_tag_max_limit,
            startup_default=settings.startup_recall_default_limit,
            related_default=settings.related_default_limit,
        ),
        embedder=embedder,
        query_cache_size=settings.recall_query_cache_size,
        startup=StartupRules(
            lesson_tags=tuple(settings.startup_lesson_tags),
            lesson_limit=settings.startup_lesson_limit,
            system_tags=tuple(settings.startup_system_tags),
            system_limit=settings.startup_system_limit,
            critical_importance=settings.startup_critical_importance,
        ),
        access=access,
        df_warm_tenants=settings.recall_df_warm_tenants,
        df_recent_seconds=settings.recall_df_cache_seconds,
    )

    views = GraphViews(
        graph=graph,
        verdicts=handlers.verdicts,
        limits=GraphLimits(
            snapshot_default=settings.graph_snapshot_default_limit,
            snapshot_max=settings.graph_snapshot_max_limit,
            neighbors_default=settings.graph_neighbors_default_limit,
            neighbors_max=settings.graph_neighbors_max_limit,
            max_depth=settings.graph_max_depth,
            max_edges=settings.graph_max_edges,
            analysis_top=settings.analysis_top,
            state_max_hops=settings.recall_state_max_hops,
        ),
    )

    async def warm_embedder() -> None:
        """Load the query embedder now, not on the first recall."""
        await embedder.embed(["warm-up"])

    warmer = FrequencyWarmer(
        lambda: handlers.warm_document_frequencies(
            settings.recall_df_warm_sample,
            settings.recall_df_warm_words,
            chunk=settings.recall_df_warm_chunk,
            pause_seconds=settings.recall_df_warm_pause_seconds,
        ),
        settings.recall_df_warm_seconds,
    )
    projector = Projector(graph=graph, vectors=vectors)
    consumer = JetStreamConsumer(
        events,
        settings.nats_stream,
        consumer_spec(
            settings,
            settings.projector_durable,
            [f"{settings.nats_subject_prefix}.*.*"],
            settings.projector_batch_size,
        ),
        projector.handle,
    )
    return ServiceApp(
        service_name=full_service_name(recall_service_pb2, "RecallService"),
        add_servicer=recall_service_pb2_grpc.add_RecallServiceServicer_to_server,
        servicer=RecallServicer(handlers, settings.recall_default_limit, settings.reindex_batch_size, views),
        startups=[
            vectors.open,
            vectors.optimize,
            graph.ensure_schema,
            warm_embedder,
            events.connect,
            consumer.start,
            warmer.start,
            access.start,
        ],
        # What recall returned is written before the graph closes.
        shutdowns=[warmer.stop, access.stop, consumer.stop, events.close, vectors.close, graph.close],
    )
