"""Consolidation (served by consolidate): answers 501 in the envelope until
consolidation is built; the translation is ready for it."""

from __future__ import annotations

import json

from fastapi import APIRouter, Depends, Request

from gateway.auth import Caller
from gateway.envelope import ApiError
from gateway.openapi import BOOLEAN, OBJECT, STRING, doc, obj, ref
from gateway.responses import JsonRoute
from gateway.routes.body import optional_json_object
from gateway.routes.calls import call_options, clients
from gateway.routes.roles import require
from gateway.translate import iso
from memgrid.v1 import consolidate_service_pb2 as consolidate

router = APIRouter(route_class=JsonRoute)

NOT_BUILT = {501: ("Consolidation is not built yet.", ref("Error"))}


@router.post(
    "/consolidate",
    **doc(
        ok=obj({"status": {"const": "success"}, "mode": STRING, "dry_run": BOOLEAN, "report": OBJECT}),
        body=obj(
            {"mode": {"enum": ["decay", "creative", "cluster", "forget", "full"]}, "dry_run": BOOLEAN},
        ),
        body_required=False,
        responses=NOT_BUILT,
    ),
)
async def run_consolidation(request: Request, who: Caller = Depends(require("admin"))):
    """Run a consolidation task now: mode decay | creative | cluster | forget | full."""
    body = await optional_json_object(request)
    mode = "" if body.get("mode") is None else body["mode"]
    dry_run = False if body.get("dry_run") is None else body["dry_run"]
    if not isinstance(mode, str):
        raise ApiError(400, "'mode' must be a string", "NOT_A_STRING")
    if not isinstance(dry_run, bool):
        raise ApiError(400, "'dry_run' must be true or false", "NOT_A_BOOLEAN")
    reply = await clients(request).consolidate.RunConsolidation(
        consolidate.RunConsolidationRequest(mode=mode, dry_run=dry_run), **call_options(request, who)
    )
    return {
        "status": "success",
        "mode": reply.mode,
        "dry_run": reply.dry_run,
        "report": json.loads(reply.report_json or "{}"),
    }


@router.get(
    "/consolidate/status",
    **doc(
        ok=obj(
            {
                "status": {"const": "success"},
                "running": BOOLEAN,
                "tasks": {"type": "array"},
                "history": {"type": "array"},
            }
        ),
        responses=NOT_BUILT,
    ),
)
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
