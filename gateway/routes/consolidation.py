"""Consolidation (served by consolidate): answers 501 in the envelope until
consolidation is built; the translation is ready for it."""

from __future__ import annotations

import json

from fastapi import APIRouter, Depends, Request

from gateway.auth import Caller
from gateway.envelope import ApiError
from gateway.routes.admin import optional_body
from gateway.routes.common import call_options, clients, require
from gateway.translate import iso
from memgrid.v1 import consolidate_service_pb2 as consolidate

router = APIRouter()


@router.post("/consolidate")
async def run_consolidation(request: Request, who: Caller = Depends(require("admin"))):
    """Run a consolidation task now: mode decay | creative | cluster | forget | full."""
    body = await optional_body(request)
    mode, dry_run = body.get("mode", ""), body.get("dry_run", False)
    if not isinstance(mode, str) or not isinstance(dry_run, bool):
        raise ApiError(400, "'mode' must be a string and 'dry_run' a boolean", "INVALID_ARGUMENT")
    reply = await clients(request).consolidate.RunConsolidation(
        consolidate.RunConsolidationRequest(mode=mode, dry_run=dry_run), **call_options(request, who)
    )
    return {
        "status": "success",
        "mode": reply.mode,
        "dry_run": reply.dry_run,
        "report": json.loads(reply.report_json or "{}"),
    }


@router.get("/consolidate/status")
async def consolidation_status(request: Request, who: Caller = Depends(require("read"))):
    reply = await clients(request).consolidate.GetConsolidationStatus(
        consolidate.GetConsolidationStatusRequest(), **call_options(request, who)
    )
    return {
        "status": "success",
        "running": reply.running,
        "tasks": [
            {
                "name": t.name,
                "interval_seconds": t.interval_seconds,
                "last_run": iso(t, "last_run"),
                "next_run": iso(t, "next_run"),
            }
            for t in reply.tasks
        ],
        "history": json.loads(reply.history_json or "[]"),
    }
