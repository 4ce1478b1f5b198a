"""The recall service's composition root: settings -> adapters -> servicer."""

from __future__ import annotations

from datetime import UTC, datetime

from memgrid.v1 import audit_service_pb2, audit_service_pb2_grpc, recall_service_pb2, recall_service_pb2_grpc
from services.core.adapters.falkor import FalkorGraph
from services.core.adapters.nats_bus import NatsEventBus
from services.core.domain import recall_text
from services.core.domain.event_consumers import PROJECTION
from services.core.domain.times import to_micros
from services.core.grpc.app import ServiceApp, full_service_name
from services.core.ports.models import Embedder
from services.core.ports.vector import VectorIndex
from services.core.replica import projector_durable, projector_inactive_seconds, stream_durables
from services.core.settings import Settings
from services.core.wiring import embedder as embedder_of
from services.core.wiring import (
    event_bus,
    event_consumer,
    event_watch,
    graph_store,
    subscription_spec,
    vector_index,
    word_embedder,
)
from services.recall.access import AccessRecorder
from services.recall.audit import AuditLimits, AuditReads
from services.recall.audit_servicer import AuditServicer
from services.recall.cache_gauges import watch_caches
from services.recall.convergence import IndexConvergence
from services.recall.current_state import CurrentStatePass
from services.recall.df_warmer import FrequencyWarmer
from services.recall.event_watch import EventWatches
from services.recall.exports import MemoryExports
from services.recall.fresh_reads import FreshReads
from services.recall.graph_views import GraphLimits, GraphViews
from services.recall.index_admin import IndexAdmin
from services.recall.listings import Listings, ReadLimits, StartupRules
from services.recall.projector import Projector
from services.recall.ranked import RankedRecall
from services.recall.readiness import CaughtUp
from services.recall.reads import MemoryReads
from services.recall.rerank_stage import RerankStage, load_model
from services.recall.servicer import RecallServicer
from services.recall.text_arms import TextArms
from services.recall.trust_reads import TrustReads
from services.recall.vector_arm import VectorArm
from services.recall.word_vectors import WordVectors

#: The settings groups this service reads (its main loads only these, with process and plane).
# enrichment: whether anything will embed what is stored without a vector (fresh reads wait for it).
GROUPS = ("process", "plane", "graph", "bus", "vectors", "consumers", "memory", "models", "enrichment", "recall")


def build_app(
    settings: Settings,
    *,
    graph: FalkorGraph | None = None,
    events: NatsEventBus | None = None,
    vectors: VectorIndex | None = None,
    embedder: Embedder | None = None,
) -> ServiceApp:
    """The service from settings; tests may pass any adapter instead (None: built from settings)."""
    graph = graph or graph_store(settings.graph, settings.process, recall=settings.recall)
    events = events or event_bus(settings.bus, settings.process, durables=stream_durables(settings))
    vectors = vectors or vector_index(settings.vectors, settings.process)
    embedder = embedder or embedder_of(
        settings.models, settings.vectors.vector_size, parallel=settings.recall.recall_embed_parallel, part_size=1
    )
    # The store operations recall may use, by port: reads and their access
    # times, the full-text arms, the index rebuild's scan, the graph views.
    reader, text, lifecycle = graph.reader, graph.text, graph.lifecycle
    policy = settings.recall.policy(settings.limits)
    access = AccessRecorder(
        reader.touch_memories,
        flush_seconds=settings.recall.recall_access_flush_ms / 1000,
        batch_size=settings.recall.recall_access_batch_size,
        clock_us=lambda: to_micros(datetime.now(UTC)),
    )
    state = CurrentStatePass(reader, policy.max_hops)
    text_arms = TextArms(
        text=text,
        lookup=reader,
        policy=policy,
        df_warm_tenants=settings.recall.recall_df_warm_tenants,
        df_recent_seconds=settings.recall.recall_df_cache_seconds,
        corpus_count_seconds=settings.recall.recall_corpus_count_seconds,
        corpus_tenants=settings.recall.recall_corpus_tenants,
    )
    vector_arm = VectorArm(vectors=vectors, embedder=embedder, query_cache_size=settings.recall.recall_query_cache_size)
    words = WordVectors(
        word_embedder(embedder, settings.models),
        max_words=settings.recall.recall_related_cache_words,
        new_per_recall=settings.recall.recall_related_new_words,
    )
    recall_text.bound_stem_caches(settings.recall.recall_stem_cache_words, settings.recall.recall_stem_cache_texts)
    watch_caches(
        {
            "query_vectors": lambda: vector_arm.cached_queries,
            "word_vectors": words.__len__,
            "document_frequencies": text.cached,
            "stems": lambda: recall_text.stem.cache_info().currsize,
            "text_stems": lambda: recall_text.text_stems.cache_info().currsize,
        },
        reopens=lambda: getattr(vectors, "reopens", 0),
        resident=getattr(vectors, "resident", None),
    )
    # Fresh reads need every event in this process (the embedded index's own projector), and
    # something to embed what is stored without a vector (enrichment on).
    waits = not settings.vectors.qdrant_url and settings.enrichment.enrichment_enabled
    fresh = FreshReads(settings.recall.fresh_policy()) if waits else None
    ranked = RankedRecall(
        reader=reader,
        fresh=fresh,
        text=text_arms,
        vector=vector_arm,
        words=words,
        state=state,
        policy=policy,
        access=access,
        rerank=RerankStage(
            load_model(settings.recall.recall_rerank_model) if settings.recall.recall_rerank_depth > 1 else None,
            settings.recall.recall_rerank_depth,
        ),
    )
    listings = Listings(
        reader=reader,
        state=state,
        policy=policy,
        limits=ReadLimits(
            by_tag_default=settings.recall.by_tag_default_limit,
            by_tag_max=settings.recall.by_tag_max_limit,
            startup_default=settings.recall.startup_recall_default_limit,
            related_default=settings.recall.related_default_limit,
        ),
        startup=StartupRules(
            lesson_tags=tuple(settings.recall.startup_lesson_tags),
            lesson_limit=settings.recall.startup_lesson_limit,
            system_tags=tuple(settings.recall.startup_system_tags),
            system_limit=settings.recall.startup_system_limit,
            critical_importance=settings.recall.startup_critical_importance,
        ),
        access=access,
    )
    views = GraphViews(
        reader=reader,
        views=graph.views,
        state=state,
        limits=GraphLimits(
            snapshot_default=settings.recall.graph_snapshot_default_limit,
            snapshot_max=settings.recall.graph_snapshot_max_limit,
            neighbors_default=settings.recall.graph_neighbors_default_limit,
            neighbors_max=settings.recall.graph_neighbors_max_limit,
            max_depth=settings.recall.graph_max_depth,
            max_edges=settings.recall.graph_max_edges,
            analysis_top=settings.recall.analysis_top,
        ),
    )
    index_admin = IndexAdmin(source=graph.index_source, vectors=vectors, lifecycle=lifecycle, events=events)
    convergence = IndexConvergence(
        source=graph.index_source,
        vectors=vectors,
        rebuild_tenant=lambda tenant: index_admin.project_anew(settings.recall.reindex_batch_size, tenant),
        lock=index_admin.rebuild_lock,
        interval_seconds=settings.recall.recall_index_check_seconds,
        settle_seconds=settings.recall.recall_index_check_settle_seconds,
        batch_size=settings.recall.reindex_batch_size,
        max_tenants=settings.recall.recall_index_check_tenants,
        rebuild_waiting=index_admin.rebuild_waiting,
    )
    index_admin.convergence_figures = convergence.figures
    servicer = RecallServicer(
        reads=MemoryReads(reader=reader, state=state, relation_limit=policy.relation_limit),
        ranked=ranked,
        listings=listings,
        index=index_admin,
        views=views,
        default_limit=settings.recall.recall_default_limit,
        rebuild_batch_size=settings.recall.reindex_batch_size,
        watches=EventWatches(
            event_watch(settings.bus, settings.recall, settings.process, events),
            max_watches=settings.recall.recall_max_watches,
            max_per_tenant=settings.recall.recall_max_watches_per_tenant,
            heartbeat_seconds=settings.recall.recall_watch_heartbeat_seconds,
        ),
        exports=MemoryExports(
            export=graph.export,
            lookup=reader,
            default_limit=settings.recall.export_default_limit,
            max_limit=settings.recall.export_max_limit,
        ),
        trust=TrustReads(
            graph.trust, page_default=settings.recall.review_page_default, page_max=settings.recall.review_page_max
        ),
    )

    async def warm_embedder() -> None:
        """Load the query embedder now, not on the first recall."""
        await embedder.embed(["warm-up"])

    warmer = FrequencyWarmer(
        lambda: text_arms.warm_document_frequencies(
            settings.recall.recall_df_warm_sample,
            settings.recall.recall_df_warm_words,
            chunk=settings.recall.recall_df_warm_chunk,
            pause_seconds=settings.recall.recall_df_warm_pause_seconds,
        ),
        settings.recall.recall_df_warm_seconds,
    )
    projector = Projector(lookup=reader, vectors=vectors, fresh=fresh)
    consumer = event_consumer(
        settings.bus,
        events,
        subscription_spec(
            settings.consumers,
            settings.bus,
            # this replica's own with the embedded index, else the shared one
            projector_durable(settings),
            PROJECTION,
            settings.consumers.projector_batch_size,
            inactive_seconds=projector_inactive_seconds(settings),
        ),
        projector.handle,
        # Events lost to retention (a change, a deletion): every tenant projected anew from the graph.
        on_gap=convergence.repair_all,
    )
    # The projection consumer's backlog is the index's: this replica's own (the embedded index), or the shared
    # one's (a Qdrant server); a starting replica serves reads once that is small (RECALL_READY_*).
    caught_up = CaughtUp(
        consumer.pending,
        max_pending=settings.recall.recall_ready_max_pending,
        timeout_seconds=settings.recall.recall_ready_timeout_seconds,
        poll_seconds=settings.recall.recall_ready_poll_seconds,
    )

    async def ready() -> bool:
        """Caught up with the projection, and the index's start-up check done
        (a lost shard refilled), each within RECALL_READY_TIMEOUT_SECONDS."""
        caught = await caught_up.wait()
        return await convergence.first_check(settings.recall.recall_ready_timeout_seconds) and caught

    return ServiceApp(
        service_name=full_service_name(recall_service_pb2, "RecallService"),
        ready=ready,
        add_servicer=recall_service_pb2_grpc.add_RecallServiceServicer_to_server,
        servicer=servicer,
        startups=[
            vectors.open,
            vectors.optimize,
            lifecycle.ensure_schema,
            warm_embedder,
            events.connect,
            consumer.start,
            convergence.start,
            warmer.start,
            access.start,
        ],
        # What recall returned is written before the graph closes.
        shutdowns=[
            convergence.stop,
            warmer.stop,
            access.stop,
            consumer.stop,
            events.close,
            vectors.close,
            lifecycle.close,
        ],  # fmt: skip
        extra_services=[
            (
                full_service_name(audit_service_pb2, "AuditService"),
                audit_service_pb2_grpc.add_AuditServiceServicer_to_server,
                AuditServicer(
                    AuditReads(
                        graph.audit,
                        AuditLimits(
                            default_limit=settings.recall.audit_list_default_limit,
                            max_limit=settings.recall.audit_list_max_limit,
                            verify_page=settings.recall.audit_verify_page,
                        ),
                    )
                ),
            )
        ],
    )
