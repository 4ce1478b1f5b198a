"""Admin routes: rebuild the vector index (recall), re-embed memories
(enrich). Backups and restores are in gateway/routes/backups.py."""

from __future__ import annotations

import structlog
from fastapi import APIRouter, Depends, Request

from gateway.auth import Caller
from gateway.envelope import ApiError
from gateway.openapi import BOOLEAN, IDS, INTEGER, NUMBER, doc, obj
from gateway.responses import Json, JsonRoute
from gateway.routes.body import body_count, optional_json_object
from gateway.routes.calls import call_options, clients
from gateway.routes.roles import every_tenant_flag, require
from memgrid.v1 import enrich_service_pb2 as enrich
from memgrid.v1 import recall_service_pb2 as recall

router = APIRouter(route_class=JsonRoute)
log = structlog.get_logger()


def long_call(request: Request, who: Caller) -> dict:
    """Call options with the admin deadline (a rebuild or a backup outlasts a read)."""
    return {**call_options(request, who), "timeout": request.app.state.settings.gateway.admin_timeout_seconds}


BATCH_SIZE = {"type": "integer", "minimum": 0, "description": "Per batch; 0 or omitted: the default."}


@router.post(
    "/admin/reindex",
    **doc(
        ok=obj(
            {
                "status": {"const": "complete"},
                "indexed": INTEGER,
                "skipped": INTEGER,
                "total": INTEGER,
                "elapsed_seconds": NUMBER,
            },
            ("status", "indexed", "skipped", "total", "elapsed_seconds"),
        ),
        body=obj(
            {
                "batch_size": BATCH_SIZE,
                "every_tenant": {**BOOLEAN, "description": "Every tenant's points (as `make reindex`); an operator's."},
            }
        ),
        body_required=False,
    ),
)
async def reindex(request: Request, who: Caller = Depends(require("admin"))):
    """Rebuild the caller's tenant's part of recall's vector index from the
    graph (other tenants' points stay as they are; with every_tenant, an
    operator's call as `make reindex` is, every tenant's); answers when the
    rebuild is done, with its counts."""
    body = await optional_json_object(request)
    who, every_tenant = every_tenant_flag(request, who, body)
    rebuild = recall.RebuildIndexRequest(batch_size=body_count(body, "batch_size"), every_tenant=every_tenant)
    stream = clients(request).recall.RebuildIndex(rebuild, **long_call(request, who))
    last = None
    async for progress in stream:
        last = progress
        log.info("reindex progress", indexed=progress.indexed, skipped=progress.skipped, total=progress.total)
    if last is None or not last.done:
        raise ApiError(502, "the index rebuild ended before it finished", "REBUILD_INCOMPLETE")
    return {
        "status": "complete",
        "indexed": last.indexed,
        "skipped": last.skipped,
        "total": last.total,
        "elapsed_seconds": round(last.elapsed_seconds, 3),
    }


@router.post(
    "/admin/reembed",
    status_code=202,
    **doc(
        ok=obj({"status": {"const": "queued"}, "count": INTEGER}, ("status", "count")),
        status=202,
        body=obj(
            {
                "ids": {**IDS, "description": "Omitted or empty: every memory of the tenant."},
                "batch_size": BATCH_SIZE,
            }
        ),
        body_required=False,
    ),
)
async def reembed(request: Request, who: Caller = Depends(require("admin"))):
    """Queue a re-embed of the tenant's memories (or of `ids`), a batch at a time."""
    body = await optional_json_object(request)
    ids = [] if body.get("ids") is None else body["ids"]  # a falsy wrong type (0, false, {}) is no "every memory"
    if isinstance(ids, str):
        ids = [i.strip() for i in ids.split(",") if i.strip()]
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ApiError(400, "'ids' must be a list of memory ids", "NOT_A_LIST")
    reply = await clients(request).enrich.ReembedMemories(
        enrich.ReembedMemoriesRequest(ids=ids, batch_size=body_count(body, "batch_size")),
        **call_options(request, who),
    )
    return Json({"status": "queued", "count": reply.queued}, status_code=202)
