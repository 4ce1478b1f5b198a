"""The read routes beyond a single memory (docs/api.md): ranked recall,
startup recall and related memories (served by recall). GET /recall's
parameters are in recall_params.py, its answer's shape in recall_answer.py."""

from __future__ import annotations

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
    array,
    doc,
    lenient_int,
    obj,
    query,
    ref,
)
from gateway.responses import JsonRoute
from gateway.routes.calls import call_options, clients, elapsed_ms
from gateway.routes.query import query_float, query_int, query_list, query_tags, query_text
from gateway.routes.recall_answer import RECALLED, envelope, result_to_json
from gateway.routes.recall_params import openapi_parameters, search_request
from gateway.routes.roles import require
from gateway.translate import memory_to_json, relation_to_json
from memgrid.v1 import recall_service_pb2 as recall

router = APIRouter(route_class=JsonRoute)


def _optional_floats(request: Request, target, names: tuple[str, ...]) -> None:
    for name in names:
        value = query_float(request, name)
        if value is not None:
            setattr(target, name, value)


def _number(name: str, description: str) -> dict:
    return query(name, NUMBER, f"{description} Not a number: 400.")


@router.get("/recall", **doc(ok=RECALLED, params=openapi_parameters()))
async def recall_memories(request: Request, who: Caller = Depends(require("read"))):
    """Hybrid recall; by default only what is current (superseded memories
    are replaced by the head of their chain). `format` and `offset`, which
    some clients send, are accepted and ignored."""
    started = time.perf_counter()
    search = search_request(request)  # a malformed parameter is answered before any call
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
