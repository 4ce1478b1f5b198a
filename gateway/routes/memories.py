"""The memory routes (docs/api.md): get, update, delete, by-tag, export
(creating one or a batch: memory_create.py)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gateway.auth import Caller
from gateway.envelope import from_domain
from gateway.openapi import (
    BOOLEAN,
    INTEGER,
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
from gateway.routes.body import json_body
from gateway.routes.calls import call_options, clients
from gateway.routes.query import query_bool, query_int, query_limit, query_list, query_tags, query_text
from gateway.routes.roles import require
from gateway.translate import memory_to_json, relation_to_json, require_object, update_from_json
from memgrid.v1 import ingest_service_pb2 as ingest
from memgrid.v1 import recall_service_pb2 as recall
from services.core.domain.errors import InvalidArgument
from services.core.domain.tags import require_tags

router = APIRouter(route_class=JsonRoute)

BY_TAG = obj(
    {
        "status": {"const": "success"},
        "tags": STRINGS,
        "memories": array(
            {
                "allOf": [
                    ref("Memory"),
                    obj(
                        {
                            "state": {
                                **STRING,
                                "enum": ["current", "superseded", "expired", "not_yet_valid", "archived"],
                            },
                            "replaced_by": STRING,
                            "state_replaces": STRING,
                        },
                        ("state",),
                    ),
                ]
            }
        ),
        "count": INTEGER,
        "limit": INTEGER,
        "offset": INTEGER,
        "has_more": BOOLEAN,
    },
    ("status", "tags", "memories", "count", "limit", "offset", "has_more"),
)


@router.get(
    "/memory/by-tag",
    **doc(
        ok=BY_TAG,
        params=(
            {**TAGS, "required": True},
            lenient_int("limit", "Memories per page, 1..200 (default 20; 0 or less is 1).", minimum=1, maximum=200),
            lenient_int("offset", "Memories to skip.", minimum=0),
            {
                **STATE_MODE,
                "description": "history (default): every memory with the tag, archived ones too, each flagged with "
                "its state (and replaced_by when superseded), as delete-by-tag would remove them; current: only what "
                "is current, a superseded memory replaced by its head.",
            },
            TRUST_STATES,
        ),
    ),
)
async def list_by_tag(request: Request, who: Caller = Depends(require("read"))):
    """Memories with any of the tags (exact, case-insensitive), ordered
    importance desc, timestamp desc, id asc, paged with limit (1..200,
    default 20) and offset; each flagged with its state (and replaced_by)."""
    tags = query_tags(request, "tags")
    try:
        require_tags(tags)
    except InvalidArgument as error:
        raise from_domain(error) from None
    reply = await clients(request).recall.ListMemoriesByTag(
        recall.ListMemoriesByTagRequest(
            tags=tags,
            limit=query_limit(request),
            offset=query_int(request, "offset"),
            state_mode=query_text(request, "state_mode"),
            trust_states=query_list(request, "trust_states"),
        ),
        **call_options(request, who),
    )
    memories = []
    for index, result in enumerate(reply.results):
        memory = memory_to_json(result.memory, with_embedding=False)
        flag = reply.flags[index] if index < len(reply.flags) else None
        memory["state"] = flag.state if flag and flag.state else "current"
        if flag and flag.replaced_by:
            memory["replaced_by"] = flag.replaced_by
        if result.state_replaces:
            memory["state_replaces"] = result.state_replaces
        memories.append(memory)
    return {
        "status": "success",
        "tags": tags,
        "memories": memories,
        "count": len(memories),
        "limit": reply.limit,
        "offset": reply.offset,
        "has_more": reply.has_more,
    }


EXPORTED = obj(
    {
        "status": {"const": "success"},
        "memories": array(ref("Memory")),
        "count": INTEGER,
        "limit": INTEGER,
        "next_page_token": {"anyOf": [STRING, {"type": "null"}]},
    },
    ("status", "memories", "count", "limit", "next_page_token"),
)


@router.get(
    "/memories/export",
    **doc(
        ok=EXPORTED,
        params=(
            query("page_token", STRING, "The next_page_token of the page before; absent: the first page."),
            lenient_int("limit", "Memories per page, 1..EXPORT_MAX_LIMIT (default EXPORT_DEFAULT_LIMIT).", minimum=1),
            query("with_embedding", BOOLEAN, "Include each memory's embedding (default false)."),
        ),
    ),
)
async def export_memories(request: Request, who: Caller = Depends(require("read"))):
    """Every memory of the tenant (archived, superseded and expired ones
    too), in id order, a page at a time: follow next_page_token until it is null."""
    with_embedding = query_bool(request, "with_embedding")
    reply = await clients(request).recall.ExportMemories(
        recall.ExportMemoriesRequest(
            page_token=query_text(request, "page_token"),
            limit=query_int(request, "limit"),
            with_embedding=with_embedding,
        ),
        **call_options(request, who),
    )
    memories = [memory_to_json(m, with_embedding=with_embedding) for m in reply.memories]
    return {
        "status": "success",
        "memories": memories,
        "count": len(memories),
        "limit": reply.limit,
        "next_page_token": reply.next_page_token or None,
    }


@router.delete(
    "/memory/by-tag",
    **doc(
        ok=obj(
            {"status": {"const": "success"}, "tags": STRINGS, "deleted_count": INTEGER},
            ("status", "tags", "deleted_count"),
        ),
        params=({**TAGS, "required": True},),
    ),
)
async def delete_by_tag(request: Request, who: Caller = Depends(require("write"))):
    """Delete every memory with any of the tags (exact, case-insensitive)."""
    tags = query_tags(request, "tags")
    reply = await clients(request).ingest.DeleteMemoriesByTag(
        ingest.DeleteMemoriesByTagRequest(tags=tags), **call_options(request, who)
    )
    return {"status": "success", "tags": tags, "deleted_count": reply.deleted_count}


@router.get(
    "/memory/{memory_id}",
    **doc(
        ok=obj({"status": {"const": "success"}, "memory": ref("MemoryRead")}, ("status", "memory")),
        params=(STATE_MODE,),
    ),
)
async def get_memory(memory_id: str, request: Request, who: Caller = Depends(require("read"))):
    """One memory with every stored field."""
    reply = await clients(request).recall.GetMemory(
        recall.GetMemoryRequest(id=memory_id, state_mode=query_text(request, "state_mode")),
        **call_options(request, who),
    )
    memory = memory_to_json(reply.memory)
    memory["relations"] = [relation_to_json(r) for r in reply.relations]
    memory["state"] = reply.state or "current"
    if reply.replaced_by:
        memory["replaced_by"] = reply.replaced_by
    return {"status": "success", "memory": memory}


@router.patch(
    "/memory/{memory_id}",
    **doc(
        ok=obj(
            {"status": {"const": "success"}, "memory_id": STRING, "content_changed": BOOLEAN, "memory": ref("Memory")},
            ("status", "memory_id", "memory"),
        ),
        body=ref("MemoryPatch"),
    ),
)
async def update_memory(memory_id: str, request: Request, who: Caller = Depends(require("write"))):
    """A partial update: only the fields sent change; metadata is replaced."""
    draft, mask = update_from_json(require_object(await json_body(request)))
    request_pb = ingest.UpdateMemoryRequest(id=memory_id, memory=draft)
    request_pb.update_mask.paths.extend(mask)
    reply = await clients(request).ingest.UpdateMemory(request_pb, **call_options(request, who))
    return {
        "status": "success",
        "memory_id": reply.memory.id,
        "content_changed": reply.content_changed,
        "memory": memory_to_json(reply.memory, with_embedding=False),
    }


@router.delete(
    "/memory/{memory_id}",
    **doc(
        ok=obj({"status": {"const": "success"}, "memory_id": STRING, "tombstone_id": STRING}, ("status", "memory_id")),
        params=(
            query("reason", {"enum": ["rejected"]}, "rejected: leave a tombstone, so the content cannot come back."),
            query("tombstone", BOOLEAN, "Leave a tombstone whatever the reason."),
        ),
    ),
)
async def delete_memory(memory_id: str, request: Request, who: Caller = Depends(require("write"))):
    """Delete a memory, its edges and its vector; with reason=rejected (or
    tombstone=true) a tombstone keeps its content out (409 on a new store)."""
    reply = await clients(request).ingest.DeleteMemory(
        ingest.DeleteMemoryRequest(
            id=memory_id, reason=query_text(request, "reason"), tombstone=query_bool(request, "tombstone")
        ),
        **call_options(request, who),
    )
    if reply.tombstone_id:
        return {"status": "success", "memory_id": reply.id, "tombstone_id": reply.tombstone_id}
    return {"status": "success", "memory_id": reply.id}
