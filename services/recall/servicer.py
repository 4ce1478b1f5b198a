"""RecallService: protobuf in, domain handlers, protobuf out."""

from __future__ import annotations

import json

from memgrid.v1 import recall_service_pb2 as pb
from memgrid.v1 import recall_service_pb2_grpc as pb_grpc
from services.core.codec import memory_to_pb, relation_seen_from, status_to_pb, ts_to_pb
from services.core.grpc.tenant import require_operator, tenant_if_any, tenant_of
from services.recall.event_watch import EventWatches
from services.recall.exports import MemoryExports
from services.recall.graph_views import GraphViews
from services.recall.index_admin import IndexAdmin
from services.recall.listings import Listings
from services.recall.ranked import RankedRecall
from services.recall.reads import MemoryReads
from services.recall.to_pb import edge_to_pb, result_to_pb, search_to_pb, view_to_pb, watch_item_to_pb
from services.recall.trust_reads import TrustReads


def _optional(request, name: str) -> float | None:
    return getattr(request, name) if request.HasField(name) else None


class RecallServicer(pb_grpc.RecallServiceServicer):
    """RPCs not overridden here answer UNIMPLEMENTED."""

    def __init__(
        self,
        *,
        reads: MemoryReads,
        ranked: RankedRecall,
        listings: Listings,
        index: IndexAdmin,
        views: GraphViews,
        default_limit: int,
        rebuild_batch_size: int = 1000,
        watches: EventWatches | None = None,
        exports: MemoryExports | None = None,
        trust: TrustReads | None = None,
    ):
        self._reads = reads
        self._ranked = ranked
        self._listings = listings
        self._index = index
        self._views = views
        self._default_limit = default_limit
        self._rebuild_batch_size = rebuild_batch_size
        self._watches = watches
        self._exports = exports
        self._trust = trust

    async def GetMemory(self, request: pb.GetMemoryRequest, context) -> pb.GetMemoryResponse:
        read = await self._reads.get_memory(tenant_of(context), request.id, request.state_mode)
        return pb.GetMemoryResponse(
            memory=memory_to_pb(read.memory),
            relations=[relation_seen_from(read.memory.id, r) for r in read.relations],
            state=read.state.value,
            replaced_by=read.replaced_by or "",
        )

    async def SearchMemories(self, request: pb.SearchMemoriesRequest, context) -> pb.SearchMemoriesResponse:
        recall = self._ranked.request(
            tenant_of(context),
            query=request.query,
            queries=list(request.queries),
            embedding=list(request.embedding),
            limit=request.limit,
            tags=list(request.tags),
            tag_mode=request.tag_mode,
            tag_match=request.tag_match,
            exclude_tags=list(request.exclude_tags),
            time_query=request.time_query,
            start=request.start,
            end=request.end,
            sort=request.sort,
            state_mode=request.state_mode,
            current_only=request.current_only,
            state_debug=request.state_debug,
            min_score=_optional(request, "min_score"),
            priority_ids=list(request.priority_ids),
            context_tags=list(request.context_tags),
            context_types=list(request.context_types),
            expand_relations=request.expand_relations,
            relation_limit=request.relation_limit,
            expansion_limit=request.expansion_limit,
            expand_min_strength=_optional(request, "expand_min_strength"),
            expand_min_importance=_optional(request, "expand_min_importance"),
            expand_entities=request.expand_entities,
            recency_bias=_optional(request, "recency_bias"),
            as_of=request.as_of,
            intent=request.intent,
            diversity_factor=_optional(request, "diversity_factor"),
            auto_decompose=request.auto_decompose,
            per_query_limit=request.per_query_limit,
            scope_fallback=request.scope_fallback,
            expand_respect_tags=request.expand_respect_tags,
            adaptive_floor=_optional(request, "adaptive_floor"),
            context=request.context,
            language=request.language,
            active_path=request.active_path,
            trust_states=list(request.trust_states),
        )
        return search_to_pb(await self._ranked.search(recall))

    async def ListMemoriesByTag(self, request: pb.ListMemoriesByTagRequest, context) -> pb.ListMemoriesByTagResponse:
        page, has_more, limit, offset = await self._listings.list_by_tag(
            tenant_of(context), list(request.tags), limit=request.limit, offset=request.offset,
            state_mode=request.state_mode, trust_states=list(request.trust_states),
        )  # fmt: skip
        return pb.ListMemoriesByTagResponse(
            results=[result_to_pb(t.candidate) for t in page],
            flags=[pb.MemoryStateFlag(state=t.state.value, replaced_by=t.replaced_by or "") for t in page],
            has_more=has_more,
            limit=limit,
            offset=offset,
        )

    def _trust_reads(self) -> TrustReads:
        if self._trust is None:
            raise RuntimeError("this recall service was built without trust reads")
        return self._trust

    async def ListReviewQueue(self, request: pb.ListReviewQueueRequest, context) -> pb.ListReviewQueueResponse:
        page = await self._trust_reads().review_queue(tenant_of(context), limit=request.limit, offset=request.offset)
        return pb.ListReviewQueueResponse(
            memories=[memory_to_pb(m, with_embedding=False) for m in page.items],
            has_more=page.has_more,
            limit=page.limit,
            offset=page.offset,
        )

    async def ListTombstones(self, request: pb.ListTombstonesRequest, context) -> pb.ListTombstonesResponse:
        page = await self._trust_reads().tombstones(tenant_of(context), limit=request.limit, offset=request.offset)
        return pb.ListTombstonesResponse(
            tombstones=[
                pb.Tombstone(
                    id=t.id,
                    content_hash=t.content_hash,
                    reason=t.reason,
                    memory_id=t.memory_id,
                    created_at=ts_to_pb(t.created_at),
                    excerpt=t.excerpt,
                )
                for t in page.items
            ],
            has_more=page.has_more,
            limit=page.limit,
            offset=page.offset,
        )

    async def ExportMemories(self, request: pb.ExportMemoriesRequest, context) -> pb.ExportMemoriesResponse:
        if self._exports is None:
            raise RuntimeError("this recall service was built without exports")
        memories, next_token, limit = await self._exports.page(tenant_of(context), request.page_token, request.limit)
        return pb.ExportMemoriesResponse(
            memories=[memory_to_pb(m, with_embedding=request.with_embedding) for m in memories],
            next_page_token=next_token,
            limit=limit,
        )

    async def StartupRecall(self, request: pb.StartupRecallRequest, context) -> pb.StartupRecallResponse:
        found = await self._listings.startup(
            tenant_of(context), list(request.tags), limit=request.limit, state_mode=request.state_mode
        )
        return pb.StartupRecallResponse(
            results=[result_to_pb(c) for c in found.results],
            critical_lessons=[result_to_pb(c) for c in found.lessons],
            system_rules=[result_to_pb(c) for c in found.system_rules],
            has_critical=found.has_critical,
        )

    async def ListRelatedMemories(
        self, request: pb.ListRelatedMemoriesRequest, context
    ) -> pb.ListRelatedMemoriesResponse:
        found = await self._listings.related(
            tenant_of(context),
            request.id,
            relation_types=list(request.relation_types),
            limit=request.limit,
            min_strength=_optional(request, "min_strength"),
            state_mode=request.state_mode,
            max_depth=request.max_depth,
        )
        related = []
        for relation, memory, replaces in found:
            # Seen from the end nearer the memory asked about (itself, one edge out).
            reached = replaces or memory.id
            seen = relation_seen_from(
                relation.target_id if relation.source_id == reached else relation.source_id, relation
            )
            seen.memory.CopyFrom(memory_to_pb(memory, with_embedding=False))
            related.append(pb.RelatedMemory(relation=seen, state_replaces=replaces or ""))
        return pb.ListRelatedMemoriesResponse(related=related)

    async def RebuildIndex(self, request: pb.RebuildIndexRequest, context):
        if request.every_tenant:
            require_operator(context, "a rebuild of every tenant's index")
        tenant = None if request.every_tenant else tenant_of(context)
        batch_size = request.batch_size or self._rebuild_batch_size
        async for progress in self._index.rebuild_index(batch_size, tenant):
            yield pb.RebuildIndexProgress(
                indexed=progress.indexed,
                skipped=progress.skipped,
                total=progress.total,
                done=progress.done,
                elapsed_seconds=progress.elapsed_seconds,
            )

    async def FindSimilar(self, request: pb.FindSimilarRequest, context) -> pb.FindSimilarResponse:
        found = await self._index.find_similar(
            tenant_of(context),
            [(q.exclude_id, list(q.embedding)) for q in request.queries],
            limit=request.limit or self._default_limit,
            min_score=request.min_score,
        )
        return pb.FindSimilarResponse(
            results=[
                pb.FindSimilarResponse.Neighbours(
                    memories=[
                        pb.SimilarMemory(id=h.id, score=h.score, source=(h.payload or {}).get("source") or "")
                        for h in hits
                    ]
                )
                for hits in found
            ]
        )

    async def GetSystemStatus(self, request: pb.GetSystemStatusRequest, context) -> pb.GetSystemStatusResponse:
        count, components = await self._index.system_status(tenant_if_any(context))
        return pb.GetSystemStatusResponse(memory_count=count, components=[status_to_pb(c) for c in components])

    # The graph views and the analysis (services/recall/graph_views.py) ------------------------------

    async def ListMemoryTypes(self, request: pb.ListMemoryTypesRequest, context) -> pb.ListMemoryTypesResponse:
        types, fallback = self._views.memory_types()
        return pb.ListMemoryTypesResponse(types=types, fallback=fallback)

    async def ListRelationTypes(self, request: pb.ListRelationTypesRequest, context) -> pb.ListRelationTypesResponse:
        types = self._views.relation_types()
        return pb.ListRelationTypesResponse(authorable=types.authorable, system=types.system)

    async def GetGraphStats(self, request: pb.GetGraphStatsRequest, context) -> pb.GetGraphStatsResponse:
        stats = await self._views.stats(tenant_of(context))
        return pb.GetGraphStatsResponse(
            memory_count=stats.memories,
            relation_count=stats.relations,
            memories_by_type=stats.memories_by_type,
            relations_by_type=stats.relations_by_type,
        )

    async def GetGraphSnapshot(self, request: pb.GetGraphSnapshotRequest, context) -> pb.GetGraphSnapshotResponse:
        view = await self._views.snapshot(
            tenant_of(context),
            limit=request.limit,
            state_mode=request.state_mode,
            include_patterns=request.include_patterns,
        )
        nodes, edges = view_to_pb(view)
        assert view.stats is not None  # noqa: S101  narrows the type: a snapshot always counts the graph
        return pb.GetGraphSnapshotResponse(
            nodes=nodes,
            edges=[*edges, *(edge_to_pb(e) for p in view.patterns for e in p.edges)],
            limit=view.limit,
            total_memories=view.stats.memories,
            total_relations=view.stats.relations,
            patterns=[pb.GraphPattern(id=p.id, summary=p.summary, size=p.size) for p in view.patterns],
        )

    async def ListNeighbors(self, request: pb.ListNeighborsRequest, context) -> pb.ListNeighborsResponse:
        view = await self._views.neighbors(
            tenant_of(context), request.id, depth=request.depth, limit=request.limit, state_mode=request.state_mode
        )
        nodes, edges = view_to_pb(view)
        return pb.ListNeighborsResponse(nodes=nodes, edges=edges, depth=view.depth, limit=view.limit)

    async def AnalyzeMemories(self, request: pb.AnalyzeMemoriesRequest, context) -> pb.AnalyzeMemoriesResponse:
        return pb.AnalyzeMemoriesResponse(analysis_json=json.dumps(await self._views.analyze(tenant_of(context))))

    # Event watches (services/recall/event_watch.py) ------------------------------------------------

    async def WatchMemoryEvents(self, request: pb.WatchMemoryEventsRequest, context):
        if self._watches is None:
            raise NotImplementedError
        after = request.after_sequence if request.HasField("after_sequence") else None
        async for item in self._watches.watch(tenant_of(context), after, list(request.kinds)):
            yield watch_item_to_pb(item)
