"""Admin routes for tombstones (docs/trust.md): list the tenant's, remove one.
A tombstone keeps rejected content out: storing it again is a 409 unless forced."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gateway.auth import Caller
from gateway.openapi import INTEGER, STRING, doc, lenient_int, obj
from gateway.responses import JsonRoute
from gateway.routes.calls import call_options, clients
from gateway.routes.query import query_int
from gateway.routes.roles import require
from gateway.translate import iso
from memgrid.v1 import ingest_service_pb2 as ingest
from memgrid.v1 import recall_service_pb2 as recall

router = APIRouter(route_class=JsonRoute)


TOMBSTONE = obj(
    {
        "id": STRING,
        "content_hash": {**STRING, "description": "sha256 of the content, lowercase with whitespace collapsed."},
        "reason": {**STRING, "enum": ["rejected", "review_rejected", "invalidated"]},
        "memory_id": {**STRING, "description": "The memory whose rejection left it (it may be gone)."},
        "created_at": {"type": "string", "format": "date-time"},
        "excerpt": {**STRING, "description": "The start of the normalised content."},
    },
    ("id", "content_hash", "reason", "memory_id", "created_at"),
)


@router.get(
    "/admin/tombstones",
    **doc(
        ok=obj(
            {
                "status": {"const": "success"},
                "tombstones": {"type": "array", "items": TOMBSTONE},
                "count": INTEGER,
                "limit": INTEGER,
                "offset": INTEGER,
                "has_more": {"type": "boolean"},
            },
            ("status", "tombstones", "count", "limit", "offset", "has_more"),
        ),
        params=(
            lenient_int("limit", "Tombstones per page, 1..REVIEW_PAGE_MAX (default REVIEW_PAGE_DEFAULT).", minimum=1),
            lenient_int("offset", "Tombstones to skip.", minimum=0),
        ),
    ),
)
async def list_tombstones(request: Request, who: Caller = Depends(require("admin"))):
    """The tenant's tombstones, newest first: content that a store answers 409 for, unless forced."""
    reply = await clients(request).recall.ListTombstones(
        recall.ListTombstonesRequest(limit=query_int(request, "limit"), offset=query_int(request, "offset")),
        **call_options(request, who),
    )
    tombstones = [
        {
            "id": t.id,
            "content_hash": t.content_hash,
            "reason": t.reason,
            "memory_id": t.memory_id,
            "created_at": iso(t, "created_at"),
            "excerpt": t.excerpt,
        }
        for t in reply.tombstones
    ]
    return {
        "status": "success",
        "tombstones": tombstones,
        "count": len(tombstones),
        "limit": reply.limit,
        "offset": reply.offset,
        "has_more": reply.has_more,
    }


@router.delete(
    "/admin/tombstones/{tombstone_id}",
    **doc(ok=obj({"status": {"const": "success"}, "tombstone_id": STRING}, ("status", "tombstone_id"))),
)
async def remove_tombstone(tombstone_id: str, request: Request, who: Caller = Depends(require("admin"))):
    """Remove a tombstone: its content may be stored again."""
    reply = await clients(request).ingest.RemoveTombstone(
        ingest.RemoveTombstoneRequest(id=tombstone_id), **call_options(request, who)
    )
    return {"status": "success", "tombstone_id": reply.id}
