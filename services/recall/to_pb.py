"""RecallService's answers as protobuf: recall results and their search
response, graph views, and the items of an event watch (services/recall/servicer.py)."""

from __future__ import annotations

import json

from memgrid.v1 import recall_service_pb2 as pb
from services.core.codec import event_to_pb, memory_to_pb, relation_seen_from, ts_to_pb
from services.core.domain.model import Relation
from services.core.domain.recall_ranking import EXPANSIONS, Candidate
from services.core.domain.times import format_iso
from services.core.domain.watch import SequencedEvent, WatchGap, WatchHeartbeat, WatchOpened
from services.recall.graph_views import GraphView
from services.recall.ranked import RecallOutcome

#: Entities (entity_expansion) and priority tags (context_priority) an answer lists at most, as AutoMem's.
ENTITIES_REPORTED = 10


def result_to_pb(candidate: Candidate, relations=()) -> pb.RecallResult:
    return pb.RecallResult(
        memory=memory_to_pb(candidate.hydrated, with_embedding=False),
        match_type=candidate.match_type,
        match_score=candidate.match_score,
        final_score=candidate.final,
        score_components=candidate.components,
        relations=[relation_seen_from(candidate.id, r) for r in relations],
        state_replaces=candidate.state_replaces or "",
        deduped_from=candidate.deduped_from,
        outside_tag_scope=candidate.outside_tag_scope,
        expanded_from_entity=candidate.expanded_from_entity or "",
        related_to=[pb.ExpansionEdge(type=t, strength=s, from_id=f) for t, s, f in candidate.edges],
        relation_score=candidate.relation if candidate.via in EXPANSIONS else None,
    )


def state_filter_to_pb(outcome: RecallOutcome) -> pb.StateFilter | None:
    """The current-state pass's counts (and, with state_debug, its lists); None in history mode."""
    if outcome.request.scope.history:
        return None
    withheld, replaced = outcome.debug.get("withheld", []), outcome.debug.get("replaced", [])
    debug = outcome.request.state_debug
    return pb.StateFilter(
        suppressed_count=len(withheld) + len(replaced),
        replacement_count=len(replaced),
        suppressed=[pb.SuppressedResult(id=w["id"], reason=w["state"]) for w in withheld]
        + [pb.SuppressedResult(id=r["id"], reason="superseded", replacement_id=r["head"]) for r in replaced]
        if debug
        else [],
        replacements=[pb.ReplacementResult(id=r["head"], replaces_id=r["id"]) for r in replaced] if debug else [],
        debug=debug,
    )


def search_to_pb(outcome: RecallOutcome) -> pb.SearchMemoriesResponse:
    """The results of a ranked recall and the envelope AutoMem's clients read."""
    recall = outcome.request
    scope = recall.scope
    results = [result_to_pb(c, outcome.relations.get(c.id, ())) for c in outcome.results]
    reply = pb.SearchMemoriesResponse(
        results=results,
        query=" | ".join(recall.asked),
        queries=list(recall.asked),
        count=len(results),
        state_debug_json=json.dumps(outcome.debug) if recall.state_debug else "",
        window_start=format_iso(scope.window.start) or "",
        window_end=format_iso(scope.window.end) or "",
        sort=recall.sort,
        state_mode="history" if scope.history else "current",
        intent=recall.intent,
        dedup_removed=outcome.dedup_removed,
        vector_enabled=outcome.vector_enabled,
        vector_matched=outcome.vector_matched,
        keywords=[] if recall.multi else list(recall.keywords),
        multi=recall.multi,
        tags=list(scope.tags),
        tag_mode=scope.tag_mode,
        tag_match=scope.tag_match,
        exclude_tags=list(scope.exclude_tags),
        state_filter=state_filter_to_pb(outcome),
        scope_fallback=outcome.scope_fallback,
    )
    if recall.expand_relations:
        reply.expansion.CopyFrom(
            pb.RelationExpansion(
                seed_count=outcome.seed_count,
                expanded_count=outcome.relation_expanded,
                relation_limit=recall.relation_limit,
                expansion_limit=recall.expansion_limit,
                respect_tags=recall.expand_respect_tags,
            )
        )
    if recall.expand_entities:
        reply.entity_expansion.CopyFrom(
            pb.EntityExpansion(
                expanded_count=outcome.entity_expanded, entities_found=outcome.entities_found[:ENTITIES_REPORTED]
            )
        )
    if scope.tags:
        reply.tag_scope.CopyFrom(pb.TagScope(pool_size_hint=outcome.pool_size_hint, gated_low_evidence=0))
    if recall.min_score is not None or outcome.score_floor is not None:
        reply.score_filter.CopyFrom(
            pb.ScoreFilter(
                min_score=recall.min_score, adaptive_floor=outcome.score_floor, filtered_count=outcome.filtered_count
            )
        )
    if recall.context:
        profile = recall.context
        reply.context_priority.CopyFrom(
            pb.ContextPriority(
                language=profile.language or "",
                context=profile.label,
                priority_tags=sorted(profile.tags)[:ENTITIES_REPORTED],
                priority_types=sorted(t.title() for t in profile.types),
                injected=outcome.context_injected,
            )
        )
    return reply


def edge_to_pb(relation: Relation) -> pb.GraphEdge:
    return pb.GraphEdge(
        source_id=relation.source_id,
        target_id=relation.target_id,
        type=relation.type,
        strength=relation.strength,
        properties_json=json.dumps(relation.properties, ensure_ascii=False),
        created_at=ts_to_pb(relation.created_at),
    )


def view_to_pb(view: GraphView) -> tuple[list[pb.GraphNode], list[pb.GraphEdge]]:
    nodes = [
        pb.GraphNode(
            memory=memory_to_pb(n.memory, with_embedding=False), state=n.state.value, replaced_by=n.replaced_by or ""
        )
        for n in view.nodes
    ]
    return nodes, [edge_to_pb(e) for e in view.edges]


def watch_item_to_pb(item: WatchOpened | WatchGap | SequencedEvent | WatchHeartbeat) -> pb.WatchMemoryEventsResponse:
    """One message of a watch: opened, an event with its sequence, a gap or a heartbeat."""
    if isinstance(item, WatchHeartbeat):
        return pb.WatchMemoryEventsResponse(heartbeat=pb.WatchHeartbeat())
    if isinstance(item, SequencedEvent):
        return pb.WatchMemoryEventsResponse(
            event=pb.SequencedMemoryEvent(sequence=item.sequence, event=event_to_pb(item.event))
        )
    if isinstance(item, WatchGap):
        return pb.WatchMemoryEventsResponse(
            gap=pb.WatchGap(requested_after=item.requested_after, resumed_after=item.resumed_after, reason=item.reason)
        )
    return pb.WatchMemoryEventsResponse(
        opened=pb.WatchOpened(
            after_sequence=item.after_sequence, first_sequence=item.first_sequence, last_sequence=item.last_sequence
        )
    )
