"""AuditService over gRPC: proto <-> the audit reads (services/recall/audit.py)."""

from __future__ import annotations

import json

from memgrid.v1 import audit_service_pb2 as pb
from memgrid.v1 import audit_service_pb2_grpc as pb_grpc
from services.core.codec import ts_from_pb, ts_to_pb
from services.core.domain.audit import AuditEntry, with_before_hashes
from services.core.domain.times import from_micros
from services.core.grpc.tenant import require_admin, tenant_of
from services.recall.audit import AuditReads


def _fields(entry: AuditEntry) -> dict:
    record = entry.parsed
    return {
        "actor": record.get("actor", ""),
        "kind": record.get("kind", ""),
        "memory_id": record.get("memory_id", ""),
        "version": int(record.get("version") or 0),
        "before_hash": record.get("before_hash", ""),
        "after_hash": record.get("after_hash", ""),
        "diff": record.get("diff") or {},
        "detail": record.get("detail") or {},
    }


def _to_pb(entry: AuditEntry, fields: dict) -> pb.AuditEntry:
    return pb.AuditEntry(
        seq=entry.seq,
        at=ts_to_pb(from_micros(entry.at_us)),
        actor=fields["actor"],
        kind=fields["kind"],
        memory_id=fields["memory_id"],
        version=fields["version"],
        before_hash=fields["before_hash"],
        after_hash=fields["after_hash"],
        diff_json=json.dumps(fields["diff"], ensure_ascii=False),
        detail_json=json.dumps(fields["detail"], ensure_ascii=False),
        event_id=entry.event_id,
        content_hash=entry.content_hash,
        chain_hash=entry.chain_hash,
        tenant=entry.tenant,
    )


class AuditServicer(pb_grpc.AuditServiceServicer):
    def __init__(self, reads: AuditReads):
        self._reads = reads

    async def History(self, request, context):
        entries = await self._reads.history(tenant_of(context), request.memory_id, request.limit)
        # One memory's entries in order: a before hash its writer did not know is the previous after hash.
        shown = with_before_hashes([_fields(e) for e in entries])
        return pb.AuditEntries(entries=[_to_pb(e, f) for e, f in zip(entries, shown, strict=True)])

    async def ListAudit(self, request, context):
        entries, token = await self._reads.list_entries(
            tenant_of(context),
            since=ts_from_pb(request, "since"),
            until=ts_from_pb(request, "until"),
            kind=request.kind,
            memory_id=request.memory_id,
            limit=request.limit,
            page_token=request.page_token,
        )
        return pb.AuditEntries(entries=[_to_pb(e, _fields(e)) for e in entries], next_page_token=token)

    async def VerifyAudit(self, request, context):
        require_admin(context, "verifying the audit log")
        check, last = await self._reads.verify(tenant_of(context))
        return pb.VerifyAuditResponse(
            ok=check.ok,
            checked=check.checked,
            sealed_through=check.sealed_through,
            last_seq=last,
            broken_seq=check.broken_seq,
            reason=check.reason,
        )
