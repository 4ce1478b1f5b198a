"""The audit log's routes (docs/api.md 'Audit log'): one memory's history,
the tenant's log page by page, and verification of its hash chain."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from fastapi import APIRouter, Depends, Request

from gateway.auth import Caller
from gateway.envelope import ApiError
from gateway.openapi import BOOLEAN, INTEGER, STRING, array, doc, obj, query
from gateway.responses import JsonRoute
from gateway.routes.calls import call_options, clients
from gateway.routes.query import query_int, query_text
from gateway.routes.roles import require
from gateway.translate import iso
from memgrid.v1 import audit_service_pb2 as audit
from memgrid.v1 import audit_service_pb2_grpc
from services.core.codec import ts_to_pb

router = APIRouter(route_class=JsonRoute)

ENTRY = obj(
    {
        "seq": INTEGER,
        "at": STRING,
        "actor": STRING,
        "kind": STRING,
        "memory_id": STRING,
        "version": INTEGER,
        "before_hash": STRING,
        "after_hash": STRING,
        "diff": {"type": "object", "description": "{field: [before, after]} for an update."},
        "detail": {"type": "object"},
        "event_id": STRING,
        "sealed": BOOLEAN,
        "chain_hash": STRING,
    },
    ("seq", "at", "actor", "kind", "memory_id"),
)
LIMIT = query(
    "limit", INTEGER, "Entries per answer; 0 or omitted: AUDIT_LIST_DEFAULT_LIMIT, at most AUDIT_LIST_MAX_LIMIT."
)


def _entry(entry) -> dict:
    return {
        "seq": entry.seq,
        "at": iso(entry, "at"),
        "actor": entry.actor,
        "kind": entry.kind,
        "memory_id": entry.memory_id,
        "version": entry.version,
        "before_hash": entry.before_hash,
        "after_hash": entry.after_hash,
        "diff": json.loads(entry.diff_json or "{}"),
        "detail": json.loads(entry.detail_json or "{}"),
        "event_id": entry.event_id,
        "sealed": bool(entry.chain_hash),
        "chain_hash": entry.chain_hash,
    }


def _time(request: Request, name: str):
    """An ISO 8601 query parameter as a Timestamp (UTC when it names no zone), None when absent."""
    text = query_text(request, name)
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "+"))
    except ValueError:
        raise ApiError(400, f"'{name}' must be an ISO 8601 time, not {text!r}", "INVALID_TIME") from None
    return ts_to_pb(value if value.tzinfo else value.replace(tzinfo=UTC))


def _audit(request: Request) -> audit_service_pb2_grpc.AuditServiceStub:
    """The audit log's stub (ServiceClients.connect always makes one)."""
    stub = clients(request).audit
    assert stub is not None  # noqa: S101  narrows the type
    return stub


@router.get(
    "/memory/{memory_id}/history",
    **doc(
        ok=obj({"status": {"const": "success"}, "memory_id": STRING, "entries": array(ENTRY)}, ("status", "entries")),
        params=(LIMIT,),
    ),
)
async def history(memory_id: str, request: Request, who: Caller = Depends(require("read"))):
    """Every audit entry of one memory, oldest first (a deleted memory's too)."""
    reply = await _audit(request).History(
        audit.HistoryRequest(memory_id=memory_id, limit=query_int(request, "limit")), **call_options(request, who)
    )
    return {"status": "success", "memory_id": memory_id, "entries": [_entry(e) for e in reply.entries]}


@router.get(
    "/audit",
    **doc(
        ok=obj(
            {"status": {"const": "success"}, "entries": array(ENTRY), "next_page_token": {"type": ["string", "null"]}},
            ("status", "entries", "next_page_token"),
        ),
        params=(
            query("since", STRING, "Entries at or after this time (ISO 8601)."),
            query("until", STRING, "Entries before this time (ISO 8601)."),
            query("kind", STRING, "One event kind: created, updated, deleted, associated, superseded, archived, ..."),
            query("memory_id", STRING, "One memory's entries."),
            LIMIT,
            query("page_token", STRING, "From the previous answer's next_page_token."),
        ),
    ),
)
async def list_audit(request: Request, who: Caller = Depends(require("admin"))):
    """The caller's tenant's audit log in sequence order, a page at a time."""
    message = audit.ListAuditRequest(
        kind=query_text(request, "kind"),
        memory_id=query_text(request, "memory_id"),
        limit=query_int(request, "limit"),
        page_token=query_text(request, "page_token"),
    )
    for name in ("since", "until"):
        if (value := _time(request, name)) is not None:
            getattr(message, name).CopyFrom(value)
    reply = await _audit(request).ListAudit(message, **call_options(request, who))
    return {
        "status": "success",
        "entries": [_entry(e) for e in reply.entries],
        "next_page_token": reply.next_page_token or None,
    }


@router.post(
    "/admin/audit/verify",
    **doc(
        ok=obj(
            {
                "status": {"const": "success"},
                "ok": BOOLEAN,
                "checked": INTEGER,
                "sealed_through": INTEGER,
                "last_seq": INTEGER,
                "broken_seq": {"type": ["integer", "null"]},
                "reason": {"type": ["string", "null"]},
            },
            ("status", "ok", "checked", "sealed_through", "last_seq", "broken_seq"),
        )
    ),
)
async def verify_audit(request: Request, who: Caller = Depends(require("admin"))):
    """Recompute the tenant's hash chain from entry 1; name the first entry edited or removed."""
    reply = await _audit(request).VerifyAudit(audit.VerifyAuditRequest(), **call_options(request, who))
    return {
        "status": "success",
        "ok": reply.ok,
        "checked": reply.checked,
        "sealed_through": reply.sealed_through,
        "last_seq": reply.last_seq,
        "broken_seq": reply.broken_seq or None,
        "reason": reply.reason or None,
    }
