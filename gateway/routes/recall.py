"""The read routes beyond a single memory (docs/api.md): ranked recall,
startup recall and related memories (served by recall)."""

from __future__ import annotations

import json
import time

from fastapi import APIRouter, Depends, Request

from gateway.auth import Caller
from gateway.openapi import (
    BOOLEAN,
    INTEGER,
    NUMBER,
    OBJECT,
    STATE_MODE,
    STRING,
    STRINGS,
    TAGS,
    TRUST_STATES,
    array,
    doc,
    lenient_int,
    obj,
    query,
    ref,
)
from gateway.responses import JsonRoute
from gateway.routes.calls import call_options, clients, elapsed_ms
from gateway.routes.query import (
    query_bool,
    query_embedding,
    query_float,
    query_int,
    query_limit,
    query_list,
    query_tags,
    query_text,
)
from gateway.routes.roles import require
from gateway.translate import memory_to_json, relation_to_json
from memgrid.v1 import recall_service_pb2 as recall

router = APIRouter(route_class=JsonRoute)


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


def first_text(request: Request, *names: str) -> str:
    """The first of several names (a parameter and its aliases) that is sent non-empty."""
    return next((text for text in (query_text(request, n) for n in names) if text), "")


def first_bool(request: Request, *names: str) -> bool:
    """A flag under any of its names (the first one sent counts)."""
    name = next((n for n in names if query_text(request, n)), names[0])
    return query_bool(request, name)


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


def _optional_floats(request: Request, target, names: tuple[str, ...]) -> None:
    for name in names:
        value = query_float(request, name)
        if value is not None:
            setattr(target, name, value)


#: recency_bias as AutoMem's MCP client sends it: auto and on keep the
#: intent's recency weight (recency is always part of the score), off is 0.
RECENCY_WORDS = {"auto": None, "on": None, "off": 0.0}


def _recency_bias(request: Request, target) -> None:
    word = query_text(request, "recency_bias").lower()
    if word in RECENCY_WORDS:
        if RECENCY_WORDS[word] is not None:
            target.recency_bias = RECENCY_WORDS[word]
        return
    _optional_floats(request, target, ("recency_bias",))


def _number(name: str, description: str) -> dict:
    return query(name, NUMBER, f"{description} Not a number: 400.")


def _flag(name: str, description: str) -> dict:
    return query(name, BOOLEAN, f"{description} true|false (also 1|0, yes|no, on|off).")


RECALL_PARAMS = (
    query("query", STRING, "Free text; `q` is an alias."),
    query("q", STRING, "Alias of query."),
    query("queries", STRINGS, "Several queries at once, merged (repeatable)."),
    query(
        "embedding",
        array(NUMBER),
        "A query vector of the index's dimension, comma-separated (brackets allowed).",
        explode=False,
    ),
    lenient_int("limit", "Results, 1..100 (default 5; 0 or less is 1, more than 100 is 100).", minimum=1, maximum=100),
    TAGS,
    query("tag_mode", {"enum": ["any", "all"]}, "Any (default) or all of the tags."),
    query("tag_match", {"enum": ["prefix", "exact"]}, "Prefix (default: `a` matches `a:b`) or exact."),
    query("exclude_tags", STRINGS, "Leave out memories with any of these tags."),
    query(
        "time_query",
        STRING,
        "A window over the memories' timestamp, in UTC: today, yesterday, this morning|afternoon|evening, tonight, "
        "last night, this|last week|weekend|month|quarter|year, Q1-Q4 (Q3 2024), a season (last summer, winter 2024; "
        "meteorological, northern hemisphere), last N hours|days|weeks|months|years, N days ago, a month name "
        "(march 2024), a year, an ISO date, since|before|after <phrase or date>, between <phrase or date> and "
        "<phrase or date>. Anything else is a 400 listing these forms; start and end override its bounds.",
    ),
    query("start", STRING, "Window start, ISO 8601."),
    query("end", STRING, "Window end, ISO 8601."),
    query("sort", {"enum": ["score", "time_desc", "time_asc", "updated_desc", "updated_asc"]}, "Default: score."),
    query("order_by", {"enum": ["score", "time_desc", "time_asc", "updated_desc", "updated_asc"]}, "Alias of sort."),
    STATE_MODE,
    TRUST_STATES,
    query("current_only", {"enum": ["true", "false"]}, "Legacy: false is state_mode=history."),
    _flag("state_debug", "Add state_debug (the current-state pass and stage timings)."),
    query("priority_ids", STRINGS, "Memory ids to rank first when they match."),
    query("context_tags", STRINGS, "Tags of the current context (the context score)."),
    query("context_types", STRINGS, "Memory types of the current context."),
    _flag("expand_relations", "Append memories one edge away from the results (match_type relation)."),
    _flag("expand_associations", "Alias of expand_relations."),
    _flag("expand", "Alias of expand_relations."),
    lenient_int("relation_limit", "Relations listed per result, and followed per result by expansion.", minimum=0),
    lenient_int("expansion_limit", "Memories each expansion appends at most.", minimum=0),
    lenient_int("relation_expansion_limit", "Alias of expansion_limit.", minimum=0),
    _flag("expand_entities", "Append memories sharing the results' entities (match_type entity_expansion)."),
    _flag("entity_expansion", "Alias of expand_entities."),
    _flag(
        "expand_respect_tags", "Expansion stays within the tags (by default only exclude_tags and the window apply)."
    ),
    _flag("auto_decompose", "A single question is searched again for its names and topics (multi-hop)."),
    lenient_int("per_query_limit", "Results each query contributes at most (default: limit).", minimum=1),
    _flag("scope_fallback", "With tags and too few results, fill from outside the tags (outside_tag_scope)."),
    _flag("adaptive_floor", "Leave out results below a sharp drop of the scores (default RECALL_ADAPTIVE_FLOOR)."),
    query("context", STRING, "A context label (coding-style, architecture...): its tags, or style notes, are boosted."),
    query("language", STRING, "A programming language: its style notes are boosted; `lang` is an alias."),
    query("lang", STRING, "Alias of language."),
    query("active_path", STRING, "The file being edited: its extension names the language."),
    query("file_path", STRING, "Alias of active_path."),
    query("focus_path", STRING, "Alias of active_path."),
    query("as_of", STRING, "Recall what was current at this ISO 8601 time."),
    query("intent", {"enum": ["recall", "browse"]}, "The weight set (default recall)."),
    _number("min_score", "Leave out results scoring lower."),
    _number("expand_min_strength", "Least relation strength for expansion."),
    _number("expand_min_importance", "Least importance of an expanded memory."),
    query(
        "recency_bias",
        {"anyOf": [{"type": "number", "minimum": 0}, {"enum": ["auto", "on", "off"]}]},
        "The recency weight; auto and on keep the intent's, off is 0 (the words AutoMem's MCP client sends).",
    ),
    _number("diversity_factor", "Interleaving over sources, 0 (off) .. 1 (default 0.15)."),
    *(
        query(name, schema, "Sent by AutoMem's MCP client; accepted and ignored.")
        for name, schema in (
            ("format", STRING),
            ("offset", INTEGER),
        )
    ),
)
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


@router.get("/recall", **doc(ok=RECALLED, params=RECALL_PARAMS))
async def recall_memories(request: Request, who: Caller = Depends(require("read"))):
    """Hybrid recall; by default only what is current (superseded memories
    are replaced by the head of their chain). `format` and `offset`, which
    some clients send, are accepted and ignored."""
    started = time.perf_counter()
    search = recall.SearchMemoriesRequest(
        query=query_text(request, "query") or query_text(request, "q"),
        queries=query_list(request, "queries"),
        embedding=query_embedding(request),
        limit=query_limit(request),
        tags=query_tags(request, "tags"),
        tag_mode=query_text(request, "tag_mode"),
        tag_match=query_text(request, "tag_match"),
        exclude_tags=query_tags(request, "exclude_tags"),
        time_query=first_text(request, "time_query", "time"),
        start=query_text(request, "start"),
        end=query_text(request, "end"),
        sort=first_text(request, "sort", "order_by"),
        state_mode=query_text(request, "state_mode"),
        current_only=query_text(request, "current_only"),
        state_debug=query_bool(request, "state_debug"),
        priority_ids=query_list(request, "priority_ids"),
        context_tags=query_tags(request, "context_tags"),
        context_types=query_list(request, "context_types"),
        expand_relations=first_bool(request, "expand_relations", "expand_associations", "expand"),
        relation_limit=query_int(request, "relation_limit"),
        expansion_limit=query_int(request, "expansion_limit") or query_int(request, "relation_expansion_limit"),
        expand_entities=first_bool(request, "expand_entities", "entity_expansion"),
        as_of=query_text(request, "as_of"),
        intent=query_text(request, "intent"),
        auto_decompose=query_bool(request, "auto_decompose"),
        per_query_limit=query_int(request, "per_query_limit"),
        scope_fallback=query_bool(request, "scope_fallback"),
        expand_respect_tags=query_bool(request, "expand_respect_tags"),
        context=query_text(request, "context"),
        language=first_text(request, "language", "lang"),
        active_path=first_text(request, "active_path", "file_path", "focus_path"),
        trust_states=query_list(request, "trust_states"),
    )
    if query_text(request, "adaptive_floor"):
        search.adaptive_floor = query_bool(request, "adaptive_floor")
    _optional_floats(request, search, ("min_score", "expand_min_strength", "expand_min_importance", "diversity_factor"))
    _recency_bias(request, search)
    reply = await clients(request).recall.SearchMemories(search, **call_options(request, who))
    body = envelope(reply)
    body["query_time_ms"] = elapsed_ms(started)
    return body


@router.get(
    "/startup-recall",
    **doc(
        ok=obj(
            {
                "status": {"const": "success"},
                "critical_lessons": array(ref("Memory")),
                "system_rules": array(ref("Memory")),
                "lesson_count": INTEGER,
                "has_critical": BOOLEAN,
                "summary": STRING,
                "results": array(ref("RecallResult")),
                "count": INTEGER,
            },
            ("status", "critical_lessons", "system_rules", "lesson_count", "has_critical", "summary", "results"),
        ),
        params=(TAGS, lenient_int("limit", "Results (default 10).", minimum=1), STATE_MODE),
    ),
)
async def startup_recall(request: Request, who: Caller = Depends(require("read"))):
    """AutoMem's startup answer: the current lessons (tagged critical, lesson
    or ai-assistant) and system rules (system, memory-recall), with
    lesson_count, has_critical and a summary; plus `results`, the most
    important current memories within the tags when given."""
    reply = await clients(request).recall.StartupRecall(
        recall.StartupRecallRequest(
            tags=query_tags(request, "tags"),
            limit=query_int(request, "limit"),
            state_mode=query_text(request, "state_mode"),
        ),
        **call_options(request, who),
    )
    lessons = [memory_to_json(r.memory, with_embedding=False) for r in reply.critical_lessons]
    rules = [memory_to_json(r.memory, with_embedding=False) for r in reply.system_rules]
    results = [result_to_json(r) for r in reply.results]
    return {
        "status": "success",
        "critical_lessons": lessons,
        "system_rules": rules,
        "lesson_count": len(lessons),
        "has_critical": reply.has_critical,
        "summary": f"Recalled {len(lessons)} lesson(s) and {len(rules)} system rule(s)",
        "results": results,
        "count": len(results),
    }


RELATED = obj(
    {
        "id": STRING,
        "memory": ref("Memory"),
        "relation_type": STRING,
        "direction": {"enum": ["outgoing", "incoming"]},
        "strength": NUMBER,
        "properties": OBJECT,
        "state_replaces": {**STRING, "description": "Only on a head standing in for a superseded neighbour."},
    },
    ("id", "memory", "relation_type", "direction", "strength"),
)


@router.get(
    "/memories/{memory_id}/related",
    **doc(
        ok=obj(
            {"status": {"const": "success"}, "memory_id": STRING, "related": array(RELATED), "count": INTEGER},
            ("status", "memory_id", "related", "count"),
        ),
        params=(
            query(
                "relation_types", STRINGS, "Only these relation types; `types` and `relationship_types` are aliases."
            ),
            query("types", STRINGS, "Alias of relation_types."),
            query("relationship_types", STRINGS, "Alias of relation_types (AutoMem's name)."),
            lenient_int(
                "max_depth", "Edges walked out, 1..3 (default 1); nearer memories first.", minimum=1, maximum=3
            ),
            lenient_int("limit", "Related memories (default 20).", minimum=1),
            _number("min_strength", "Least relation strength."),
            STATE_MODE,
        ),
    ),
)
async def related_memories(memory_id: str, request: Request, who: Caller = Depends(require("read"))):
    """The memories one edge away, strongest first; superseded ones are
    replaced by the head of their chain (state_replaces names the old one)."""
    related = recall.ListRelatedMemoriesRequest(
        id=memory_id,
        relation_types=query_list(request, "relation_types")
        or query_list(request, "types")
        or query_list(request, "relationship_types"),
        max_depth=query_int(request, "max_depth"),
        limit=query_int(request, "limit"),
        state_mode=query_text(request, "state_mode"),
    )
    _optional_floats(request, related, ("min_strength",))
    reply = await clients(request).recall.ListRelatedMemories(related, **call_options(request, who))
    items = []
    for item in reply.related:
        relation = relation_to_json(item.relation)
        items.append(
            {
                "id": item.relation.memory.id,
                "memory": memory_to_json(item.relation.memory, with_embedding=False),
                "relation_type": relation["type"],
                "direction": relation["direction"],
                "strength": relation["strength"],
                "properties": relation["properties"],
                **({"state_replaces": item.state_replaces} if item.state_replaces else {}),
            }
        )
    return {"status": "success", "memory_id": memory_id, "related": items, "count": len(items)}
