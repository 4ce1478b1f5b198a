"""How GET /recall answers: AutoMem's envelope of a ranked recall, each
result with the fields AutoMem's clients read, and its OpenAPI schema."""

from __future__ import annotations

import json

from gateway.openapi import BOOLEAN, INTEGER, NUMBER, OBJECT, STRING, STRINGS, array, obj, ref
from gateway.translate import memory_to_json, relation_to_json
from memgrid.v1 import recall_service_pb2 as recall


def result_to_json(result: recall.RecallResult) -> dict:
    """A ranked result with the fields AutoMem's clients read. A field
    without a value is left out, as AutoMem leaves it out (its records hold
    no nulls): a strict MCP host holds state_replaces to its declared string."""
    memory = {k: v for k, v in memory_to_json(result.memory, with_embedding=False).items() if v is not None}
    out = {
        "id": result.memory.id,
        "memory": memory,
        "match_type": result.match_type,
        "match_score": result.match_score,
        "final_score": result.final_score,
        "score": result.final_score,
        "score_components": dict(result.score_components),
        "relations": [relation_to_json(r) for r in result.relations],
        "deduped_from": list(result.deduped_from),
        # Beside the memory's own copy, where a client reads match_type too.
        "trust_state": result.memory.trust_state or "active",
    }
    if result.state_replaces:
        out["state_replaces"] = result.state_replaces
    if result.outside_tag_scope:
        out["outside_tag_scope"] = True
    if result.expanded_from_entity:
        out["expanded_from_entity"] = result.expanded_from_entity
    if result.related_to:
        out["related_to"] = [{"type": e.type, "strength": e.strength, "from": e.from_id} for e in result.related_to]
    if result.HasField("relation_score"):
        out["relation_score"] = result.relation_score
    return out


def envelope(reply: recall.SearchMemoriesResponse) -> dict:
    """AutoMem's envelope of a ranked recall, each field under the condition it has there."""
    body: dict = {
        "status": "success",
        "query": reply.query,
        "results": [result_to_json(r) for r in reply.results],
        "count": reply.count,
        "dedup_removed": reply.dedup_removed,
        "sort": reply.sort,
        "state_mode": reply.state_mode,
        "intent": reply.intent,
        "vector_search": {"enabled": reply.vector_enabled, "matched": reply.vector_matched},
    }
    if reply.HasField("expansion"):
        e = reply.expansion
        body["expansion"] = {
            "enabled": True, "seed_count": e.seed_count, "expanded_count": e.expanded_count,
            "relation_limit": e.relation_limit, "expansion_limit": e.expansion_limit, "respect_tags": e.respect_tags,
        }  # fmt: skip
    if reply.HasField("entity_expansion"):
        e = reply.entity_expansion
        body["entity_expansion"] = {
            "enabled": True, "expanded_count": e.expanded_count, "entities_found": list(e.entities_found),
        }  # fmt: skip
    if reply.multi:
        body["queries"] = list(reply.queries)
    elif reply.query:
        body["keywords"] = list(reply.keywords)
    if reply.window_start or reply.window_end:
        body["time_window"] = {"start": reply.window_start or None, "end": reply.window_end or None}
    if reply.tags:
        body["tags"] = list(reply.tags)
        scope = reply.tag_scope
        body["tag_scope"] = {
            "filtered": True,
            "pool_size_hint": scope.pool_size_hint if scope.HasField("pool_size_hint") else None,
            "gated_low_evidence": scope.gated_low_evidence,
        }
        if reply.scope_fallback:
            body["scope_fallback"] = True
    if reply.exclude_tags:
        body["exclude_tags"] = list(reply.exclude_tags)
    if reply.HasField("state_filter"):
        f = reply.state_filter
        body["state_filter"] = {
            "current_only": True, "suppressed_count": f.suppressed_count, "replacement_count": f.replacement_count,
        }  # fmt: skip
        if f.debug:
            body["state_filter"]["suppressed"] = [
                {"id": x.id, "reason": x.reason, **({"replacement_id": x.replacement_id} if x.replacement_id else {})}
                for x in f.suppressed
            ]
            body["state_filter"]["replacements"] = [{"id": x.id, "replaces_id": x.replaces_id} for x in f.replacements]
    body["tag_mode"] = reply.tag_mode
    body["tag_match"] = reply.tag_match
    if reply.HasField("score_filter"):
        f = reply.score_filter
        body["score_filter"] = {
            "min_score": f.min_score if f.HasField("min_score") else None,
            "adaptive_floor": f.adaptive_floor if f.HasField("adaptive_floor") else None,
            "filtered_count": f.filtered_count,
        }
    if reply.HasField("context_priority"):
        c = reply.context_priority
        body["context_priority"] = {
            "language": c.language or None, "context": c.context, "priority_tags": list(c.priority_tags),
            "priority_types": list(c.priority_types), "injected": c.injected,
        }  # fmt: skip
    if reply.state_debug_json:
        body["state_debug"] = json.loads(reply.state_debug_json)
    return body


_NULLABLE_NUMBER = {"type": ["number", "null"]}
RECALLED = obj(
    {
        "status": {"const": "success"},
        "results": array(ref("RecallResult")),
        "count": INTEGER,
        "dedup_removed": INTEGER,
        "query": STRING,
        "queries": {**STRINGS, "description": "With several queries (queries, or auto_decompose)."},
        "keywords": {**STRINGS, "description": "With a single query: its words."},
        "sort": STRING,
        "state_mode": {"enum": ["current", "history"]},
        "intent": STRING,
        "vector_search": obj({"enabled": BOOLEAN, "matched": BOOLEAN}, ("enabled", "matched")),
        "time_window": obj({"start": {"type": ["string", "null"]}, "end": {"type": ["string", "null"]}}),
        "tags": STRINGS,
        "tag_mode": STRING,
        "tag_match": STRING,
        "exclude_tags": STRINGS,
        "tag_scope": obj(
            {"filtered": BOOLEAN, "pool_size_hint": {"type": ["integer", "null"]}, "gated_low_evidence": INTEGER},
            ("filtered", "pool_size_hint", "gated_low_evidence"),
        ),
        "scope_fallback": {**BOOLEAN, "description": "true when scope_fallback added results."},
        "state_filter": obj(
            {
                "current_only": BOOLEAN,
                "suppressed_count": INTEGER,
                "replacement_count": INTEGER,
                "suppressed": array(obj({"id": STRING, "reason": STRING, "replacement_id": STRING})),
                "replacements": array(obj({"id": STRING, "replaces_id": STRING})),
            },
            ("current_only", "suppressed_count", "replacement_count"),
        ),
        "expansion": obj(
            {
                "enabled": BOOLEAN,
                "seed_count": INTEGER,
                "expanded_count": INTEGER,
                "relation_limit": INTEGER,
                "expansion_limit": INTEGER,
                "respect_tags": BOOLEAN,
            },
            ("enabled", "seed_count", "expanded_count"),
        ),  # fmt: skip
        "entity_expansion": obj(
            {"enabled": BOOLEAN, "expanded_count": INTEGER, "entities_found": STRINGS},
            ("enabled", "expanded_count", "entities_found"),
        ),
        "score_filter": obj(
            {"min_score": _NULLABLE_NUMBER, "adaptive_floor": _NULLABLE_NUMBER, "filtered_count": INTEGER},
            ("min_score", "adaptive_floor", "filtered_count"),
        ),
        "context_priority": obj(
            {
                "language": {"type": ["string", "null"]},
                "context": STRING,
                "priority_tags": STRINGS,
                "priority_types": STRINGS,
                "injected": BOOLEAN,
            }
        ),  # fmt: skip
        "state_debug": OBJECT,
        "query_time_ms": NUMBER,
    },
    ("status", "results", "count", "dedup_removed", "sort", "state_mode", "vector_search", "tag_mode", "tag_match"),
)
