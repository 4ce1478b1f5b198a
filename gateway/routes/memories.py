"""The memory routes (docs/api.md): create, batch, get, update, delete, by-tag."""

from __future__ import annotations

import json
import time
import uuid

from fastapi import APIRouter, Depends, Request

from gateway.auth import Caller
from gateway.envelope import ApiError, from_domain
from gateway.openapi import (
    BOOLEAN,
    INTEGER,
    NUMBER,
    OBJECT,
    STATE_MODE,
    STRING,
    STRINGS,
    TAGS,
    TIME,
    TRUST_STATES,
    array,
    doc,
    lenient_int,
    obj,
    query,
    ref,
)
from gateway.responses import Json, JsonRoute
from gateway.routes.body import json_body
from gateway.routes.calls import call_options, clients, elapsed_ms
from gateway.routes.query import query_bool, query_int, query_limit, query_list, query_tags, query_text
from gateway.routes.roles import escalate, require
from gateway.translate import draft_from_json, iso, memory_to_json, relation_to_json, require_object, update_from_json
from memgrid.v1 import ingest_service_pb2 as ingest
from memgrid.v1 import recall_service_pb2 as recall
from services.core.domain.errors import InvalidArgument
from services.core.domain.tags import require_tags

router = APIRouter(route_class=JsonRoute)

IDEMPOTENCY_HEADER = "idempotency-key"
#: Keys the gateway makes for writes sent without one: apart from any a client would send.
GATEWAY_KEY_PREFIX = "gateway:"
SUPERSEDE_FIELDS = ("supersedes_memory_id", "supersede_relation", "supersede_reason")


def _created_body(reply, memory, started: float) -> dict:
    body = {
        "status": "success",
        "memory_id": memory.id,
        "stored_at": iso(memory, "recorded_at"),
        "type": memory.type,
        "confidence": memory.confidence,
        "qdrant": reply.qdrant,
        "embedding_status": reply.embedding_status,
        "enrichment": reply.enrichment,
        "metadata": json.loads(memory.metadata_json or "{}"),
        "timestamp": iso(memory, "timestamp"),
        "updated_at": iso(memory, "updated_at"),
        "last_accessed": iso(memory, "last_accessed"),
        "query_time_ms": elapsed_ms(started),
    }
    if reply.summarized:
        body.update(summarized=True, original_length=reply.original_length, summarized_length=reply.summarized_length)
    return body


def _force(request: Request, body: dict) -> bool:
    """force=true in the body or the query: store content a tombstone holds."""
    value = body.get("force")
    if value is not None and not isinstance(value, bool):
        raise ApiError(400, "'force' must be true or false", "NOT_A_BOOLEAN")
    return bool(value) or query_bool(request, "force")


FORCE = query(
    "force",
    BOOLEAN,
    "Store content a tombstone holds (otherwise 409 naming the tombstone); audited; needs the review role.",
)


def _idempotency_key(request: Request) -> tuple[str, bool]:
    """The write's idempotency key and whether the client sent it. Without
    one the gateway makes one, so a write that reached an ingest replica
    which then died is replayed, not stored again, when gRPC retries it on
    another (services/core/grpc/balancing.py)."""
    sent = request.headers.get(IDEMPOTENCY_HEADER, "")
    return (sent, True) if sent else (f"{GATEWAY_KEY_PREFIX}{uuid.uuid4().hex}", False)


def _replay_headers(replayed: bool, client_key: bool) -> dict[str, str]:
    """Idempotent-Replayed when the client's own key answered; a replay of the gateway's key is the
    answer to the client's only request (its first attempt's reply was lost with the replica)."""
    return {"Idempotent-Replayed": "true"} if replayed and client_key else {}


CREATED = obj(
    {
        "status": {"const": "success"},
        "memory_id": STRING,
        "stored_at": TIME,
        "type": STRING,
        "confidence": NUMBER,
        "qdrant": STRING,
        "embedding_status": STRING,
        "enrichment": STRING,
        "metadata": OBJECT,
        "timestamp": TIME,
        "updated_at": TIME,
        "last_accessed": TIME,
        "query_time_ms": NUMBER,
        "summarized": BOOLEAN,
        "original_length": INTEGER,
        "summarized_length": INTEGER,
        "supersedes_memory_id": STRING,
        "supersede_relation": STRING,
    },
    ("status", "memory_id", "type", "confidence", "enrichment"),
)
BATCH_CREATED = obj(
    {
        "status": {"const": "success"},
        "stored": INTEGER,
        "memory_ids": STRINGS,
        "replayed": {**INTEGER, "description": "Items answered by their idempotency_key's first memory."},
        "qdrant": STRING,
        "enrichment": STRING,
        "query_time_ms": NUMBER,
    },
    ("status", "stored", "memory_ids"),
)
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


IDEMPOTENCY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "schema": {"type": "string"},
    "description": "A retry with the same key answers the first result (Idempotent-Replayed: true) instead of "
    "storing again; the same key with another body is a 409.",
}


@router.post(
    "/memory", status_code=201, **doc(ok=CREATED, status=201, body=ref("MemoryIn"), params=(IDEMPOTENCY, FORCE))
)
async def create_memory(request: Request, who: Caller = Depends(require("write"))):
    """Store a memory; with supersedes_memory_id, replace an old one in one step."""
    started = time.perf_counter()
    body = require_object(await json_body(request))
    draft = draft_from_json(body)
    for name in SUPERSEDE_FIELDS:
        if body.get(name) is not None and not isinstance(body[name], str):
            raise ApiError(400, f"'{name}' must be a string", "NOT_A_STRING")
    force = _force(request, body)
    if force:  # past a reviewer's rejection: the review role's call
        who = escalate(request, who, "review", "force")
    key, client_key = _idempotency_key(request)
    if body.get("supersedes_memory_id") is not None:
        reply = await clients(request).ingest.SupersedeMemory(
            ingest.SupersedeMemoryRequest(
                old_memory_id=body["supersedes_memory_id"],
                replacement=draft,
                relation=body.get("supersede_relation") or "",
                reason=body.get("supersede_reason") or "",
                # Only the client's key: a supersede is a compare-and-set on the old memory's version, so a
                # retry after a lost reply is refused, never stored twice, and a key of the gateway's would
                # turn a lost race with enrichment (the old memory's version moved) into IDEMPOTENT_RESULT_GONE.
                idempotency_key=key if client_key else "",
                force=force,
            ),
            **call_options(request, who),
        )
        result = _created_body(reply, reply.replacement, started)
        result.update(supersedes_memory_id=reply.superseded.id, supersede_relation=reply.relation)
        return Json(result, 201, headers=_replay_headers(reply.replayed, client_key))
    reply = await clients(request).ingest.CreateMemory(
        ingest.CreateMemoryRequest(memory=draft, idempotency_key=key, force=force),
        **call_options(request, who),
    )
    return Json(_created_body(reply, reply.memory, started), 201, headers=_replay_headers(reply.replayed, client_key))


@router.post(
    "/memory/batch",
    status_code=201,
    **doc(ok=BATCH_CREATED, status=201, body=ref("MemoryBatchIn"), params=(IDEMPOTENCY, FORCE)),
)
async def batch_create(request: Request, who: Caller = Depends(require("write"))):
    """Store 1..500 memories in one request: all of them or none."""
    started = time.perf_counter()
    body = await json_body(request)
    if not isinstance(body, dict) or not isinstance(body.get("memories"), list):
        raise ApiError(400, "request body must be a JSON object with a 'memories' list", "MEMORIES_REQUIRED")
    drafts, item_keys = [], []
    for index, item in enumerate(body["memories"]):
        where = f"Memory at index {index}: "
        if not isinstance(item, dict):
            raise ApiError(400, f"{where}must be a JSON object", "NOT_AN_OBJECT")
        drafts.append(draft_from_json(item, index=index))
        key = item.get("idempotency_key")
        if key is not None and not isinstance(key, str):
            raise ApiError(400, f"{where}'idempotency_key' must be a string", "NOT_A_STRING")
        item_keys.append(key or "")
    force = _force(request, body)
    if force:  # past a reviewer's rejection: the review role's call
        who = escalate(request, who, "review", "force")
    key, client_key = _idempotency_key(request)
    reply = await clients(request).ingest.BatchCreateMemories(
        ingest.BatchCreateMemoriesRequest(
            memories=drafts,
            idempotency_key=key,
            force=force,
            item_idempotency_keys=item_keys if any(item_keys) else [],
        ),
        **call_options(request, who),
    )
    result = {
        "status": "success",
        "stored": len(reply.memory_ids),
        "memory_ids": list(reply.memory_ids),
        "replayed": reply.replayed_count,
        "qdrant": reply.qdrant,
        "enrichment": reply.enrichment,
        "query_time_ms": elapsed_ms(started),
    }
    return Json(result, 201, headers=_replay_headers(reply.replayed, client_key))


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
