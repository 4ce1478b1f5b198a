"""Human review (docs/trust.md): the tenant's queue of memories a review rule
held back, and the decisions on them. Deciding takes the review role (or
admin); the queue is read with the same role, as it shows what recall withholds."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gateway.auth import Caller
from gateway.envelope import ApiError
from gateway.openapi import INTEGER, STRING, array, doc, lenient_int, obj, ref
from gateway.responses import JsonRoute
from gateway.routes.body import optional_json_object
from gateway.routes.calls import call_options, clients
from gateway.routes.query import query_int
from gateway.routes.roles import require
from gateway.translate import memory_to_json
from memgrid.v1 import ingest_service_pb2 as ingest
from memgrid.v1 import recall_service_pb2 as recall

router = APIRouter(route_class=JsonRoute)

QUEUE = obj(
    {
        "status": {"const": "success"},
        "memories": array(ref("Memory")),
        "count": INTEGER,
        "limit": INTEGER,
        "offset": INTEGER,
        "has_more": {"type": "boolean"},
    },
    ("status", "memories", "count", "limit", "offset", "has_more"),
)
DECIDED = obj(
    {
        "status": {"const": "success"},
        "memory_id": STRING,
        "trust_state": {"enum": ["verified", "rejected"]},
        "tombstone_id": {**STRING, "description": "Only on a rejection: the tombstone that keeps the content out."},
        "memory": ref("Memory"),
    },
    ("status", "memory_id", "trust_state", "memory"),
)
NOTE = obj({"note": {**STRING, "description": "Kept on the review's event (the audit log reads it)."}})


@router.get(
    "/review",
    **doc(
        ok=QUEUE,
        params=(
            lenient_int("limit", "Memories per page, 1..REVIEW_PAGE_MAX (default REVIEW_PAGE_DEFAULT).", minimum=1),
            lenient_int("offset", "Memories to skip.", minimum=0),
        ),
    ),
)
async def review_queue(request: Request, who: Caller = Depends(require("review"))):
    """The tenant's memories waiting for review, oldest first; each names the
    rule that held it back (review_rule)."""
    reply = await clients(request).recall.ListReviewQueue(
        recall.ListReviewQueueRequest(limit=query_int(request, "limit"), offset=query_int(request, "offset")),
        **call_options(request, who),
    )
    memories = [memory_to_json(m, with_embedding=False) for m in reply.memories]
    return {
        "status": "success",
        "memories": memories,
        "count": len(memories),
        "limit": reply.limit,
        "offset": reply.offset,
        "has_more": reply.has_more,
    }


async def _decide(request: Request, who: Caller, memory_id: str, approve: bool, body: dict) -> dict:
    note = body.get("note") or ""
    if not isinstance(note, str):
        raise ApiError(400, "'note' must be a string", "NOT_A_STRING")
    reply = await clients(request).ingest.ReviewMemory(
        ingest.ReviewMemoryRequest(id=memory_id, approve=approve, note=note), **call_options(request, who)
    )
    result = {
        "status": "success",
        "memory_id": reply.memory.id,
        "trust_state": reply.memory.trust_state,
        "memory": memory_to_json(reply.memory, with_embedding=False),
    }
    if reply.tombstone_id:
        result["tombstone_id"] = reply.tombstone_id
    return result


@router.post("/review/{memory_id}/approve", **doc(ok=DECIDED, body=NOTE, body_required=False))
async def approve(memory_id: str, request: Request, who: Caller = Depends(require("review"))):
    """The memory becomes verified: recall shows it from now on."""
    return await _decide(request, who, memory_id, True, await optional_json_object(request))


@router.post("/review/{memory_id}/reject", **doc(ok=DECIDED, body=NOTE, body_required=False))
async def reject(memory_id: str, request: Request, who: Caller = Depends(require("review"))):
    """The memory becomes rejected (withheld, kept as history) and a tombstone
    keeps its content out: storing it again is a 409 unless force=true."""
    return await _decide(request, who, memory_id, False, await optional_json_object(request))
