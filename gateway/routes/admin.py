"""Admin routes: rebuild the vector index (recall), re-embed memories
(enrich), back the tenant's graph up (consolidate)."""

from __future__ import annotations

import json

import structlog
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from gateway.auth import Caller
from gateway.envelope import ApiError
from gateway.routes.common import call_options, clients, require
from gateway.translate import require_object
from memgrid.v1 import consolidate_service_pb2 as consolidate
from memgrid.v1 import enrich_service_pb2 as enrich
from memgrid.v1 import recall_service_pb2 as recall

router = APIRouter()
log = structlog.get_logger()


async def optional_body(request: Request) -> dict:
    """The JSON object sent, or {} when the body is empty."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        return require_object(json.loads(raw))
    except ValueError as exc:
        raise ApiError(400, f"malformed JSON: {exc}", "INVALID_ARGUMENT") from None


def body_count(body: dict, name: str) -> int:
    value = body.get(name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"'{name}' must be a whole number", "INVALID_ARGUMENT")
    return value


def long_call(request: Request, who: Caller) -> dict:
    """Call options with the admin deadline (a rebuild or a backup outlasts a read)."""
    return {**call_options(request, who), "timeout": request.app.state.settings.admin_timeout_seconds}


@router.post("/admin/reindex")
async def reindex(request: Request, who: Caller = Depends(require("admin"))):
    """Rebuild recall's vector index from the graph (every tenant's points:
    the index is one projection); answers when the rebuild is done."""
    body = await optional_body(request)
    stream = clients(request).recall.RebuildIndex(
        recall.RebuildIndexRequest(batch_size=body_count(body, "batch_size")), **long_call(request, who)
    )
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


@router.post("/admin/reembed", status_code=202)
async def reembed(request: Request, who: Caller = Depends(require("admin"))):
    """Queue a re-embed of the tenant's memories (or of `ids`), a batch at a time."""
    body = await optional_body(request)
    ids = body.get("ids") or []
    if isinstance(ids, str):
        ids = [i.strip() for i in ids.split(",") if i.strip()]
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ApiError(400, "'ids' must be a list of memory ids", "INVALID_ARGUMENT")
    reply = await clients(request).enrich.ReembedMemories(
        enrich.ReembedMemoriesRequest(ids=ids, batch_size=body_count(body, "batch_size")),
        **call_options(request, who),
    )
    return JSONResponse({"status": "queued", "count": reply.queued}, status_code=202)


@router.api_route("/backup", methods=["GET", "POST"])
async def backup(request: Request, who: Caller = Depends(require("admin"))):
    """Write the tenant's graph (memories with every field, edges, entity and
    pattern nodes) to a JSON file under the data directory's backups/."""
    reply = await clients(request).consolidate.CreateBackup(
        consolidate.CreateBackupRequest(), **long_call(request, who)
    )
    return {
        "status": "success",
        "path": reply.path,
        "memories": reply.memories,
        "relations": reply.relations,
        "entities": reply.entities,
        "patterns": reply.patterns,
    }
