"""The graph views and the analysis (served by recall): /graph/types,
/graph/relations, /graph/stats, /graph/snapshot, /graph/neighbors/{id}, /analyze."""

from __future__ import annotations

import json
import time

from fastapi import APIRouter, Depends, Request

from gateway.auth import Caller
from gateway.openapi import (
    BOOLEAN,
    COUNTS,
    INTEGER,
    NUMBER,
    OBJECT,
    STATE_MODE,
    STRING,
    STRINGS,
    TIME,
    array,
    doc,
    lenient_int,
    obj,
    query,
    ref,
)
from gateway.responses import JsonRoute
from gateway.routes.calls import call_options, clients, elapsed_ms
from gateway.routes.query import query_bool, query_int, query_text
from gateway.routes.roles import require
from gateway.translate import iso, memory_to_json
from memgrid.v1 import recall_service_pb2 as recall

router = APIRouter(route_class=JsonRoute)


def node_to_json(node: recall.GraphNode) -> dict:
    """A memory as a node: every field but the embedding, with its state."""
    return {
        **memory_to_json(node.memory, with_embedding=False),
        "state": node.state,
        "replaced_by": node.replaced_by or None,
    }


def pattern_to_json(pattern: recall.GraphPattern) -> dict:
    """A MetaPattern as a node: never a memory, told apart by its kind."""
    return {"id": pattern.id, "kind": "meta_pattern", "summary": pattern.summary, "size": pattern.size}


def edge_to_json(edge: recall.GraphEdge) -> dict:
    return {
        "id": f"{edge.source_id}-{edge.type}-{edge.target_id}",
        "source": edge.source_id,
        "target": edge.target_id,
        "type": edge.type,
        "strength": edge.strength,
        "properties": json.loads(edge.properties_json or "{}"),
        "created_at": iso(edge, "created_at"),
    }


SUCCESS = {"const": "success"}
META = obj({"depth": INTEGER, "limit": INTEGER, "query_time_ms": NUMBER}, ("limit",))


@router.get(
    "/graph/types",
    **doc(ok=obj({"status": SUCCESS, "types": STRINGS, "fallback": STRING}, ("status", "types", "fallback"))),
)
async def memory_types(request: Request, who: Caller = Depends(require("read"))):
    reply = await clients(request).recall.ListMemoryTypes(recall.ListMemoryTypesRequest(), **call_options(request, who))
    return {"status": "success", "types": list(reply.types), "fallback": reply.fallback}


@router.get(
    "/graph/relations",
    **doc(
        ok=obj(
            {"status": SUCCESS, "relations": STRINGS, "authorable": STRINGS, "system": STRINGS},
            ("status", "relations", "authorable", "system"),
        )
    ),
)
async def relation_types(request: Request, who: Caller = Depends(require("read"))):
    reply = await clients(request).recall.ListRelationTypes(
        recall.ListRelationTypesRequest(), **call_options(request, who)
    )
    return {
        "status": "success",
        "relations": [*reply.authorable, *reply.system],
        "authorable": list(reply.authorable),
        "system": list(reply.system),
    }


@router.get(
    "/graph/stats",
    **doc(
        ok=obj(
            {
                "status": SUCCESS,
                "totals": obj({"nodes": INTEGER, "edges": INTEGER}, ("nodes", "edges")),
                "by_type": COUNTS,
                "by_relationship": COUNTS,
                "query_time_ms": NUMBER,
            },
            ("status", "totals", "by_type", "by_relationship"),
        )
    ),
)
async def graph_stats(request: Request, who: Caller = Depends(require("read"))):
    started = time.perf_counter()
    reply = await clients(request).recall.GetGraphStats(recall.GetGraphStatsRequest(), **call_options(request, who))
    return {
        "status": "success",
        "totals": {"nodes": reply.memory_count, "edges": reply.relation_count},
        "by_type": dict(reply.memories_by_type),
        "by_relationship": dict(reply.relations_by_type),
        "query_time_ms": elapsed_ms(started),
    }


@router.get(
    "/graph/snapshot",
    **doc(
        ok=obj(
            {
                "status": SUCCESS,
                "nodes": array({"anyOf": [ref("GraphNode"), ref("PatternNode")]}),
                "edges": array(ref("GraphEdge")),
                "stats": obj(
                    {
                        "total_nodes": INTEGER,
                        "total_edges": INTEGER,
                        "returned_nodes": INTEGER,
                        "returned_edges": INTEGER,
                        "sampled": BOOLEAN,
                    },
                    ("total_nodes", "total_edges", "returned_nodes", "returned_edges", "sampled"),
                ),
                "meta": META,
            },
            ("status", "nodes", "edges", "stats", "meta"),
        ),
        params=(
            lenient_int("limit", "Nodes, most important first (default 200, at most 2000).", minimum=1),
            STATE_MODE,
            query(
                "include_patterns",
                BOOLEAN,
                "Add consolidation's MetaPatterns with a member shown (kind meta_pattern) and their member edges.",
            ),
        ),
    ),
)
async def graph_snapshot(request: Request, who: Caller = Depends(require("read"))):
    """The most important memories and the edges between them, for a viewer;
    state_mode=history shows superseded and expired memories too (flagged);
    include_patterns=true adds the MetaPatterns over them (after the memories)."""
    started = time.perf_counter()
    reply = await clients(request).recall.GetGraphSnapshot(
        recall.GetGraphSnapshotRequest(
            limit=query_int(request, "limit"),
            state_mode=query_text(request, "state_mode"),
            include_patterns=query_bool(request, "include_patterns"),
        ),
        **call_options(request, who),
    )
    return {
        "status": "success",
        "nodes": [*(node_to_json(n) for n in reply.nodes), *(pattern_to_json(p) for p in reply.patterns)],
        "edges": [edge_to_json(e) for e in reply.edges],
        "stats": {
            "total_nodes": reply.total_memories,
            "total_edges": reply.total_relations,
            "returned_nodes": len(reply.nodes),
            "returned_edges": len(reply.edges),
            "sampled": len(reply.nodes) < reply.total_memories,
        },
        "meta": {"limit": reply.limit, "query_time_ms": elapsed_ms(started)},
    }


@router.get(
    "/graph/neighbors/{memory_id}",
    **doc(
        ok=obj(
            {
                "status": SUCCESS,
                "center": ref("GraphNode"),
                "graph_neighbors": array(ref("GraphNode")),
                "edges": array(ref("GraphEdge")),
                "meta": META,
            },
            ("status", "center", "graph_neighbors", "edges", "meta"),
        ),
        params=(
            lenient_int("depth", "Hops, 1..3 (default 1).", minimum=1, maximum=3),
            lenient_int("limit", "Neighbours, nearest first (default 50, at most 500).", minimum=1),
            STATE_MODE,
        ),
    ),
)
async def graph_neighbors(memory_id: str, request: Request, who: Caller = Depends(require("read"))):
    """The memory and its neighbours up to `depth` hops (1..3), nearest first."""
    started = time.perf_counter()
    reply = await clients(request).recall.ListNeighbors(
        recall.ListNeighborsRequest(
            id=memory_id,
            depth=query_int(request, "depth"),
            limit=query_int(request, "limit"),
            state_mode=query_text(request, "state_mode"),
        ),
        **call_options(request, who),
    )
    nodes = [node_to_json(n) for n in reply.nodes]
    return {
        "status": "success",
        "center": nodes[0],
        "graph_neighbors": nodes[1:],
        "edges": [edge_to_json(e) for e in reply.edges],
        "meta": {"depth": reply.depth, "limit": reply.limit, "query_time_ms": elapsed_ms(started)},
    }


@router.get(
    "/analyze",
    **doc(
        ok=obj(
            {
                "status": SUCCESS,
                "analytics": obj(
                    {
                        "total_memories": INTEGER,
                        "memory_types": OBJECT,
                        "tag_frequency": COUNTS,
                        "entity_frequency": COUNTS,
                        "states": COUNTS,
                        "patterns": {"type": "array"},
                    },
                    ("total_memories", "memory_types", "tag_frequency"),
                ),
                "generated_at": TIME,
                "query_time_ms": NUMBER,
            },
            ("status", "analytics"),
        )
    ),
)
async def analyze(request: Request, who: Caller = Depends(require("read"))):
    """Counts over the tenant's memories: types, tags, entities, time, averages."""
    started = time.perf_counter()
    reply = await clients(request).recall.AnalyzeMemories(recall.AnalyzeMemoriesRequest(), **call_options(request, who))
    analytics = json.loads(reply.analysis_json)
    # AutoMem answers generated_at beside analytics; memgrid's document carries it inside too.
    return {
        "status": "success",
        "analytics": analytics,
        "generated_at": analytics.get("generated_at"),
        "query_time_ms": elapsed_ms(started),
    }
