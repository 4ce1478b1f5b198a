"""The read routes of spec 003 beyond a single memory: ranked recall,
startup recall and related memories (served by recall)."""

from __future__ import annotations

import json
import math
import time

from fastapi import APIRouter, Depends, Request

from gateway.auth import Caller
from gateway.envelope import ApiError
from gateway.openapi import (
    BOOLEAN,
    INTEGER,
    NUMBER,
    OBJECT,
    STATE_MODE,
    STRING,
    STRINGS,
    TAGS,
    array,
    doc,
    lenient_int,
    obj,
    query,
    ref,
)
from gateway.responses import JsonRoute
from gateway.routes.common import call_options, clients, elapsed_ms, query_int, query_list, query_text, require
from gateway.translate import memory_to_json, relation_to_json
from memgrid.v1 import recall_service_pb2 as recall

router = APIRouter(route_class=JsonRoute)

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off", "")


def query_float(request: Request, name: str) -> float | None:
    text = query_text(request, name)
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ApiError(400, f"'{name}' must be a number, not {text!r}", "INVALID_ARGUMENT") from None
    if not math.isfinite(value):
        raise ApiError(400, f"'{name}' must be a finite number", "INVALID_ARGUMENT")
    return value


def query_bool(request: Request, name: str) -> bool:
    text = query_text(request, name).lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ApiError(400, f"'{name}' must be true or false, not {text!r}", "INVALID_ARGUMENT")


def query_embedding(request: Request) -> list[float]:
    """`embedding` as comma-separated numbers (or a JSON list)."""
    text = query_text(request, "embedding").strip("[]")
    if not text:
        return []
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise ApiError(400, "'embedding' must be a comma-separated list of numbers", "INVALID_ARGUMENT") from None
    if not all(math.isfinite(v) for v in values):
        raise ApiError(400, "'embedding' must hold finite numbers", "INVALID_ARGUMENT")
    return values


def result_to_json(result: recall.RecallResult) -> dict:
    """A ranked result with the fields AutoMem's clients read."""
    memory = memory_to_json(result.memory, with_embedding=False)
    return {
        "id": result.memory.id,
        "memory": memory,
        "match_type": result.match_type,
        "match_score": result.match_score,
        "final_score": result.final_score,
        "score": result.final_score,
        "score_components": dict(result.score_components),
        "relations": [relation_to_json(r) for r in result.relations],
        "state_replaces": result.state_replaces or None,
        "deduped_from": list(result.deduped_from),
    }


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
    lenient_int("limit", "Results, 1..100 (default 5).", minimum=1, maximum=100),
    TAGS,
    query("tag_mode", {"enum": ["any", "all"]}, "Any (default) or all of the tags."),
    query("tag_match", {"enum": ["prefix", "exact"]}, "Prefix (default: `a` matches `a:b`) or exact."),
    query("exclude_tags", STRINGS, "Leave out memories with any of these tags."),
    query("time_query", STRING, "today, yesterday, this|last week|month|year, last N hours|days|weeks|months|years."),
    query("start", STRING, "Window start, ISO 8601."),
    query("end", STRING, "Window end, ISO 8601."),
    query("sort", {"enum": ["score", "time_desc", "time_asc", "updated_desc", "updated_asc"]}, "Default: score."),
    STATE_MODE,
    query("current_only", {"enum": ["true", "false"]}, "Legacy: false is state_mode=history."),
    _flag("state_debug", "Add state_debug (the current-state pass and stage timings)."),
    query("priority_ids", STRINGS, "Memory ids to rank first when they match."),
    query("context_tags", STRINGS, "Tags of the current context (the context score)."),
    query("context_types", STRINGS, "Memory types of the current context."),
    _flag("expand_relations", "Add memories one edge away from the results."),
    lenient_int("relation_limit", "Relations listed per result.", minimum=0),
    lenient_int("expansion_limit", "Memories added by expansion.", minimum=0),
    _flag("expand_entities", "Add memories sharing the results' entities."),
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
            ("per_query_limit", INTEGER),
            ("expand_respect_tags", BOOLEAN),
            ("auto_decompose", BOOLEAN),
            ("scope_fallback", BOOLEAN),
            ("adaptive_floor", BOOLEAN),
            ("context", STRING),
            ("language", STRING),
            ("active_path", STRING),
        )
    ),
)
RECALLED = obj(
    {
        "status": {"const": "success"},
        "results": array(ref("RecallResult")),
        "count": INTEGER,
        "query": STRING,
        "queries": STRINGS,
        "sort": STRING,
        "state_mode": STRING,
        "intent": STRING,
        "time_window": obj({"start": {"type": ["string", "null"]}, "end": {"type": ["string", "null"]}}),
        "state_debug": OBJECT,
        "query_time_ms": NUMBER,
    },
    ("status", "results", "count"),
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
        limit=query_int(request, "limit"),
        tags=query_list(request, "tags"),
        tag_mode=query_text(request, "tag_mode"),
        tag_match=query_text(request, "tag_match"),
        exclude_tags=query_list(request, "exclude_tags"),
        time_query=query_text(request, "time_query"),
        start=query_text(request, "start"),
        end=query_text(request, "end"),
        sort=query_text(request, "sort"),
        state_mode=query_text(request, "state_mode"),
        current_only=query_text(request, "current_only"),
        state_debug=query_bool(request, "state_debug"),
        priority_ids=query_list(request, "priority_ids"),
        context_tags=query_list(request, "context_tags"),
        context_types=query_list(request, "context_types"),
        expand_relations=query_bool(request, "expand_relations"),
        relation_limit=query_int(request, "relation_limit"),
        expansion_limit=query_int(request, "expansion_limit"),
        expand_entities=query_bool(request, "expand_entities"),
        as_of=query_text(request, "as_of"),
        intent=query_text(request, "intent"),
    )
    _optional_floats(request, search, ("min_score", "expand_min_strength", "expand_min_importance", "diversity_factor"))
    _recency_bias(request, search)
    reply = await clients(request).recall.SearchMemories(search, **call_options(request, who))
    body: dict = {
        "status": "success",
        "results": [result_to_json(r) for r in reply.results],
        "count": reply.count,
        "query": reply.query,
        "queries": list(reply.queries),
        "sort": reply.sort,
        "state_mode": reply.state_mode,
        "intent": reply.intent,
    }
    if reply.window_start or reply.window_end:
        body["time_window"] = {"start": reply.window_start or None, "end": reply.window_end or None}
    if reply.state_debug_json:
        body["state_debug"] = json.loads(reply.state_debug_json)
    body["query_time_ms"] = elapsed_ms(started)
    return body


@router.get(
    "/startup-recall",
    **doc(
        ok=obj(
            {"status": {"const": "success"}, "results": array(ref("RecallResult")), "count": INTEGER},
            ("status", "results", "count"),
        ),
        params=(TAGS, lenient_int("limit", "Results (default 20).", minimum=1), STATE_MODE),
    ),
)
async def startup_recall(request: Request, who: Caller = Depends(require("read"))):
    """The most important current memories, within the tags when given."""
    reply = await clients(request).recall.StartupRecall(
        recall.StartupRecallRequest(
            tags=query_list(request, "tags"),
            limit=query_int(request, "limit"),
            state_mode=query_text(request, "state_mode"),
        ),
        **call_options(request, who),
    )
    results = [result_to_json(r) for r in reply.results]
    return {"status": "success", "results": results, "count": len(results)}


RELATED = obj(
    {
        "id": STRING,
        "memory": ref("Memory"),
        "relation_type": STRING,
        "direction": {"enum": ["outgoing", "incoming"]},
        "strength": NUMBER,
        "properties": OBJECT,
        "state_replaces": {"type": ["string", "null"]},
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
            query("relation_types", STRINGS, "Only these relation types; `types` is an alias."),
            query("types", STRINGS, "Alias of relation_types."),
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
        relation_types=query_list(request, "relation_types") or query_list(request, "types"),
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
                "state_replaces": item.state_replaces or None,
            }
        )
    return {"status": "success", "memory_id": memory_id, "related": items, "count": len(items)}
