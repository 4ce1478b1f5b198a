"""Enrichment's admin surface: status and reprocessing."""

from __future__ import annotations

import json

from fastapi import APIRouter, Depends, Request

from gateway.auth import Caller
from gateway.envelope import ApiError
from gateway.openapi import IDS, INTEGER, OBJECT, STRING, STRINGS, doc, obj
from gateway.responses import Json, JsonRoute
from gateway.routes.body import json_body
from gateway.routes.calls import call_options, clients
from gateway.routes.roles import require
from gateway.translate import require_object
from memgrid.v1 import enrich_service_pb2 as enrich

router = APIRouter(route_class=JsonRoute)


STATUS = obj(
    {
        "status": STRING,
        "queue_size": INTEGER,
        "pending": INTEGER,
        "inflight": INTEGER,
        "processed": INTEGER,
        "failed": INTEGER,
        "max_attempts": INTEGER,
        "stats": OBJECT,
    },
    ("status", "queue_size", "pending", "inflight", "processed", "failed"),
)


@router.get("/enrichment/status", **doc(ok=STATUS))
async def status(request: Request, who: Caller = Depends(require("read"))):
    """The enrich service's queues and counters, and how many of the caller's
    memories wait for enrichment (pending) and for a vector (stats.embedding.pending)."""
    reply = await clients(request).enrich.GetEnrichmentStatus(
        enrich.GetEnrichmentStatusRequest(), **call_options(request, who)
    )
    return {
        "status": reply.status,
        "queue_size": reply.queue_size,
        "pending": reply.pending,
        "inflight": reply.inflight,
        "processed": reply.processed,
        "failed": reply.failed,
        "max_attempts": reply.max_attempts,
        "stats": json.loads(reply.stats_json or "{}"),
    }


@router.post(
    "/enrichment/reprocess",
    status_code=202,
    **doc(
        ok=obj({"status": {"const": "queued"}, "count": INTEGER, "ids": STRINGS}, ("status", "count", "ids")),
        status=202,
        body=obj({"ids": IDS}, ("ids",)),
    ),
)
async def reprocess(request: Request, who: Caller = Depends(require("admin"))):
    body = require_object(await json_body(request))
    ids = body.get("ids")
    if isinstance(ids, str):
        ids = [i.strip() for i in ids.split(",") if i.strip()]
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ApiError(400, "'ids' must be a list of memory ids", "NOT_A_LIST")
    reply = await clients(request).enrich.ReprocessMemories(
        enrich.ReprocessMemoriesRequest(ids=ids), **call_options(request, who)
    )
    return Json({"status": "queued", "count": reply.count, "ids": list(reply.ids)}, status_code=202)
