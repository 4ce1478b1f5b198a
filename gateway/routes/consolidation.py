"""Consolidation (served by consolidate): run a task now (POST /consolidate)
and read the tenant's schedule, runs in progress and history
(GET /consolidate/status)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gateway.auth import Caller
from gateway.envelope import ApiError
from gateway.openapi import BOOLEAN, COUNTS, INTEGER, NUMBER, STRING, STRINGS, TIME, array, doc, obj
from gateway.responses import JsonRoute
from gateway.routes.admin import long_call
from gateway.routes.body import optional_json_object
from gateway.routes.calls import call_options, clients
from gateway.routes.roles import every_tenant_flag, require
from gateway.translate import iso
from memgrid.v1 import consolidate_service_pb2 as consolidate

router = APIRouter(route_class=JsonRoute)

MODES = ["full", "decay", "creative", "cluster", "forget"]

CHANGE = obj(
    {"memory_id": STRING, "action": STRING, "before": STRING, "after": STRING},
    ("memory_id", "action", "before", "after"),
)
#: A run's outcome: no errors; errors after it did part of its work (records skipped); errors and nothing
#: done; not finished yet (in the history).
OUTCOMES = ["success", "partial", "failed", "running"]
RUN = obj(
    {
        "status": {"enum": OUTCOMES, "description": "success: no errors; partial or failed: see errors."},
        "task": STRING,
        "tenant": STRING,
        "mode": STRING,
        "dry_run": BOOLEAN,
        "started": TIME,
        "finished": TIME,
        "counts": COUNTS,
        "errors": STRINGS,
        "sample": array(CHANGE),
    },
    ("task", "tenant", "mode", "dry_run", "started", "finished", "counts", "errors"),
)
NEXT_RUN = obj(
    {"task": STRING, "interval_seconds": NUMBER, "last_run": TIME, "next_run": TIME},
    ("task", "interval_seconds", "last_run", "next_run"),
)
RUNNING = obj(
    {
        "task": STRING,
        "tenant": STRING,
        "mode": STRING,
        "dry_run": BOOLEAN,
        "started": TIME,
        "processed": INTEGER,
        "total": INTEGER,
        "counts": COUNTS,
    },
    ("task", "tenant", "mode", "dry_run", "started", "processed", "total", "counts"),
)


def outcome(run: consolidate.ConsolidationRun) -> str:
    """success when the run has no errors; else partial when it counted any work, failed when none."""
    if not run.errors and not run.HasField("finished"):
        return "running"
    if not run.errors:
        return "success"
    return "partial" if any(v for k, v in run.counts.items() if k != "skipped") else "failed"


def run_record(run: consolidate.ConsolidationRun, *, with_sample: bool) -> dict:
    record = {
        "status": outcome(run),
        "task": run.task,
        "tenant": run.tenant,
        "mode": run.mode,
        "dry_run": run.dry_run,
        "started": iso(run, "started"),
        "finished": iso(run, "finished"),
        "counts": dict(run.counts),
        "errors": list(run.errors),
    }
    if with_sample:
        record["sample"] = [
            {"memory_id": c.memory_id, "action": c.action, "before": c.before, "after": c.after} for c in run.sample
        ]
    return record


@router.post(
    "/consolidate",
    **doc(
        ok=obj(
            {
                "status": {
                    "enum": ["success", "partial"],
                    "description": "partial when any run has errors (each run's own status says which).",
                },
                "mode": STRING,
                "dry_run": BOOLEAN,
                "runs": array(RUN),
            },
            ("status", "mode", "dry_run", "runs"),
        ),
        body=obj(
            {
                "mode": {"enum": MODES, "description": "Omitted: full (every task: decay, creative, cluster, forget)."},
                "dry_run": {**BOOLEAN, "description": "Omitted: true (report what would change, change nothing)."},
                "every_tenant": {**BOOLEAN, "description": "Every tenant's memories; an operator's call."},
            },
        ),
        body_required=False,
    ),
)
async def run_consolidation(request: Request, who: Caller = Depends(require("write"))):
    """Run a consolidation task now over the caller's tenant's memories and
    answer with its report: per task, the counts, errors and a sample of the
    changes (before/after). A dry run (the default) changes nothing and
    reports what it would change. 409 when the task is already running."""
    body = await optional_json_object(request)
    mode = "full" if body.get("mode") is None else body["mode"]
    dry_run = True if body.get("dry_run") is None else body["dry_run"]
    if not isinstance(mode, str):
        raise ApiError(400, "'mode' must be a string", "NOT_A_STRING")
    if not isinstance(dry_run, bool):
        raise ApiError(400, "'dry_run' must be true or false", "NOT_A_BOOLEAN")
    who, every_tenant = every_tenant_flag(request, who, body)
    reply = await clients(request).consolidate.RunConsolidation(
        consolidate.RunConsolidationRequest(mode=mode, dry_run=dry_run, every_tenant=every_tenant),
        **long_call(request, who),
    )
    runs = [run_record(run, with_sample=True) for run in reply.runs]
    return {
        "status": "success" if all(run["status"] == "success" for run in runs) else "partial",
        "mode": reply.mode,
        "dry_run": reply.dry_run,
        "runs": runs,
    }


@router.get(
    "/consolidate/status",
    **doc(
        ok=obj(
            {
                "status": {"const": "success"},
                "running": array(RUNNING),
                "next_runs": array(NEXT_RUN),
                "history": array(RUN),
            },
            ("status", "running", "next_runs", "history"),
        ),
    ),
)
async def consolidation_status(request: Request, who: Caller = Depends(require("read"))):
    """The caller's tenant's consolidation: runs in progress (with progress),
    each task's interval and next scheduled run, and recent runs, newest first."""
    reply = await clients(request).consolidate.GetConsolidationStatus(
        consolidate.GetConsolidationStatusRequest(), **call_options(request, who)
    )
    return {
        "status": "success",
        "running": [
            {
                "task": r.task,
                "tenant": r.tenant,
                "mode": r.mode,
                "dry_run": r.dry_run,
                "started": iso(r, "started"),
                "processed": r.processed,
                "total": r.total,
                "counts": dict(r.counts),
            }
            for r in reply.running
        ],
        "next_runs": [
            {
                "task": t.name,
                "interval_seconds": t.interval_seconds,
                "last_run": iso(t, "last_run"),
                "next_run": iso(t, "next_run"),
            }
            for t in reply.next_runs
        ],
        "history": [run_record(run, with_sample=False) for run in reply.history],
    }
