"""Creating memories (docs/api.md): POST /memory and POST /memory/batch,
each with an Idempotency-Key (the client's, or one the gateway makes)."""

from __future__ import annotations

import json
import time
import uuid

from fastapi import APIRouter, Depends, Request

from gateway.auth import Caller
from gateway.envelope import ApiError
from gateway.openapi import (
    BOOLEAN,
    INTEGER,
    NUMBER,
    OBJECT,
    STRING,
    STRINGS,
    TIME,
    doc,
    obj,
    query,
    ref,
)
from gateway.responses import Json, JsonRoute
from gateway.routes.body import json_body
from gateway.routes.calls import call_options, clients, elapsed_ms
from gateway.routes.query import query_bool
from gateway.routes.roles import escalate, require
from gateway.translate import draft_from_json, iso, require_object
from memgrid.v1 import ingest_service_pb2 as ingest

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
