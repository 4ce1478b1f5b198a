"""Backup and restore routes (consolidate's archives, docs/backup.md): write
one, list them, download one, restore one (by name or uploaded). Admin only:
a tenant's admin sees and restores its own tenant's archives; every tenant's
(every_tenant, the archives of other tenants) are an operator's.

A restore ends with the vector index rebuilt from the graph for each tenant
it wrote into (recall's RebuildIndex), and the restored memories that had no
stored vector queued for embedding (enrich's ReembedMemories): a vector
stored in the archive is never computed again."""

from __future__ import annotations

import dataclasses
import time

import grpc
import structlog
from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse

from gateway.auth import Caller
from gateway.envelope import ApiError
from gateway.openapi import BOOLEAN, INTEGER, NUMBER, STRING, array, doc, nullable, obj, query
from gateway.responses import JsonRoute
from gateway.routes.admin import long_call
from gateway.routes.body import decode_json, is_json_media_type, optional_json_object
from gateway.routes.calls import clients
from gateway.routes.query import query_bool, query_text
from gateway.routes.roles import escalate, every_tenant_flag, require
from gateway.translate import require_object
from memgrid.v1 import consolidate_service_pb2 as consolidate
from memgrid.v1 import enrich_service_pb2 as enrich
from memgrid.v1 import recall_service_pb2 as recall

router = APIRouter(route_class=JsonRoute)
log = structlog.get_logger()

#: Media types POST /restore reads as the archive itself.
ARCHIVE_TYPES = ("application/gzip", "application/x-gzip", "application/octet-stream")
#: The largest JSON body POST /restore reads ({"name": ..., "merge": ..., "allow_unsigned": ...}).
RESTORE_MAX_JSON_BYTES = 64 * 1024
#: Ids per ReembedMemories call (a call's message stays far below gRPC's 4 MB).
REEMBED_IDS_PER_CALL = 5000

COUNTS = {"type": "object", "additionalProperties": INTEGER}
INFO_FIELDS = {
    "name": STRING,
    "size_bytes": INTEGER,
    "created_at": nullable(STRING),
    "scope": {"enum": ["tenant", "every_tenant", ""], "description": "Empty: an archive without its manifest file."},
    "tenant": {**nullable(STRING), "description": "Null for an archive of every tenant."},
    "version": INTEGER,
    "sha256": STRING,
    "nodes": {**COUNTS, "description": "Nodes by label."},
    "edges": {**COUNTS, "description": "Edges by type."},
    "tenants": {**COUNTS, "description": "Nodes by tenant."},
}
INFO = obj(INFO_FIELDS, ("name", "size_bytes"))


def info_json(info: consolidate.BackupInfo) -> dict:
    """A BackupInfo as the routes answer it."""
    return {
        "name": info.name,
        "size_bytes": info.size_bytes,
        "created_at": info.created_at.ToJsonString() if info.HasField("created_at") else None,
        "scope": info.scope,
        "tenant": info.tenant or None,
        "version": info.version,
        "sha256": info.sha256,
        "nodes": dict(info.nodes),
        "edges": dict(info.edges),
        "tenants": dict(info.tenants),
    }


BACKUP = obj(
    {
        "status": {"const": "success"},
        **INFO_FIELDS,
        "memories": INTEGER,
        "relations": {**INTEGER, "description": "Edges, every type."},
        "entities": INTEGER,
        "patterns": INTEGER,
    },
    ("status", "name", "memories", "relations", "entities", "patterns"),
)


@router.post(
    "/backup",
    **doc(
        ok=BACKUP,
        body=obj({"every_tenant": {**BOOLEAN, "description": "One archive of every tenant's records; an operator's."}}),
        body_required=False,
    ),
)
async def backup(request: Request, who: Caller = Depends(require("admin"))):
    """Write the tenant's graph (or, with every_tenant, every tenant's) at one
    point in time to a new archive under the data directory's backups/:
    every node with every property, every edge. Older archives beyond
    BACKUP_KEEP per tenant are deleted."""
    body = await optional_json_object(request)
    who, every_tenant = every_tenant_flag(request, who, body)
    return await _create(request, who, every_tenant)


@router.get("/backup", **doc(ok=BACKUP))
async def backup_by_get(request: Request, who: Caller = Depends(require("admin"))):
    """As POST /backup of the caller's tenant (AutoMem's clients call GET)."""
    return await _create(request, who, False)


async def _create(request: Request, who: Caller, every_tenant: bool) -> dict:
    reply = await clients(request).consolidate.CreateBackup(
        consolidate.CreateBackupRequest(every_tenant=every_tenant), **long_call(request, who)
    )
    return {
        "status": "success",
        **info_json(reply.backup),  # its name only: a server path says nothing a client may use
        "memories": reply.memories,
        "relations": reply.relations,
        "entities": reply.entities,
        "patterns": reply.patterns,
    }


@router.get(
    "/backups",
    **doc(ok=obj({"status": {"const": "success"}, "backups": array(INFO)}, ("status", "backups"))),
)
async def list_backups(request: Request, who: Caller = Depends(require("admin"))):
    """The archives on the consolidate host, newest first, with their manifests' counts:
    an operator's every one, a tenant's admin its own tenant's."""
    reply = await clients(request).consolidate.ListBackups(consolidate.ListBackupsRequest(), **long_call(request, who))
    return {"status": "success", "backups": [info_json(b) for b in reply.backups]}


@router.get(
    "/backup/{name}",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "The archive (gzip'd JSON Lines).",
            "content": {"application/gzip": {"schema": {"type": "string", "format": "binary"}}},
        }
    },
)
async def download_backup(name: str, request: Request, who: Caller = Depends(require("admin"))):
    """The archive's bytes, as POST /restore takes them back (404 for a tenant's admin
    asking for another tenant's archive or an every-tenant one, as for an unknown name)."""
    stream = clients(request).consolidate.ReadBackup(
        consolidate.ReadBackupRequest(name=name), **long_call(request, who)
    )
    # The first chunk before the response starts, so an unknown name is a 404 in the envelope.
    first = await stream.read()

    async def chunks():
        message = first
        while message is not grpc.aio.EOF:
            yield message.data
            message = await stream.read()

    return StreamingResponse(
        chunks(),
        media_type="application/gzip",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


TENANT_RESTORED = obj(
    {
        "tenant": STRING,
        "memories": INTEGER,
        "indexed": {**INTEGER, "description": "Points the index rebuild wrote."},
        "reembedding": {**INTEGER, "description": "Memories without a stored vector, queued for embedding."},
    },
    ("tenant", "memories", "indexed", "reembedding"),
)
RESTORED = obj(
    {
        "status": {"const": "success"},
        "merge": BOOLEAN,
        "backup": INFO,
        "nodes": INTEGER,
        "edges": INTEGER,
        "created": INTEGER,
        "updated": {**INTEGER, "description": "Stored nodes the archive's newer version replaced (merge)."},
        "kept": {**INTEGER, "description": "Stored nodes kept, newer than (or as new as) the archive's."},
        "tenants": array(TENANT_RESTORED),
        "signature": {
            "enum": ["signed", "unsigned", "foreign"],
            "description": "Whether this deployment's backup key signed the archive (else allow_unsigned was asked).",
        },
        "skipped": {**INTEGER, "description": "Records left out on their own (and their edges): see problems."},
        "audit_left_out": {**INTEGER, "description": "Audit log nodes left out: a log that did not verify."},
        "problems": {**array(STRING), "description": "Why, for the first records left out (line, field)."},
        "elapsed_seconds": {**NUMBER, "description": "The restore's own time: checking the archive, writing it."},
        "reindex_seconds": {**NUMBER, "description": "Then rebuilding the tenants' vector index."},
    },
    (
        "status",
        "merge",
        "nodes",
        "edges",
        "created",
        "updated",
        "kept",
        "tenants",
        "elapsed_seconds",
        "reindex_seconds",
    ),
)


async def _small_body(request: Request) -> bytes:
    """A JSON request's body, read a chunk at a time and refused (413) past RESTORE_MAX_JSON_BYTES
    without reading on: /restore's body limit is an archive's, far beyond what a name needs."""
    raw = bytearray()
    async for data in request.stream():
        raw += data
        if len(raw) > RESTORE_MAX_JSON_BYTES:
            raise ApiError(
                413,
                f"a JSON body of POST /restore is larger than {RESTORE_MAX_JSON_BYTES} bytes:"
                " send the archive itself as application/gzip",
                "REQUEST_TOO_LARGE",
            )
    return bytes(raw)


async def _upload(request: Request, who: Caller) -> str:
    """Send the request's body (the archive) to consolidate, a chunk per call; its upload handle."""
    size = request.app.state.settings.backup.backup_chunk_bytes
    upload, offset, pending = "", 0, b""

    async def send(data: bytes, complete: bool) -> None:
        nonlocal upload, offset
        reply = await clients(request).consolidate.UploadBackup(
            consolidate.UploadBackupRequest(upload=upload, offset=offset, data=data, complete=complete),
            **long_call(request, who),
        )
        upload, offset = reply.upload, reply.size_bytes

    async for data in request.stream():
        pending += data
        while len(pending) >= size:
            await send(pending[:size], False)
            pending = pending[size:]
    await send(pending, True)
    return upload


@router.post(
    "/restore",
    **doc(
        ok=RESTORED,
        params=(
            query("merge", BOOLEAN, "Into a tenant that holds memories: keep what is newer, add the rest."),
            query("allow_unsigned", BOOLEAN, "Restore an archive this deployment did not sign: an operator's."),
        ),
        body=obj(
            {
                "name": {**STRING, "description": "A backup as GET /backups lists it."},
                "merge": BOOLEAN,
                "allow_unsigned": {
                    **BOOLEAN,
                    "description": "Restore an archive this deployment did not sign: an operator's.",
                },
            },
            ("name",),
        ),
        body_required=False,
    ),
)
async def restore(request: Request, who: Caller = Depends(require("admin"))):
    """Restore an archive: a listed one (`{"name": ...}`) or the archive
    itself as the body (Content-Type application/gzip). It is checked whole
    first, as untrusted input (version, checksum, counts, labels, tenants,
    bounded reads: 400 naming the problem and line); an archive this
    deployment did not sign needs an operator's allow_unsigned; a record
    wrong on its own, or an audit log that does not verify, is left out and
    counted (skipped, audit_left_out, problems); each record
    goes into the tenant it names; a tenant that already holds memories is
    a 409 unless `merge=true`, which never overwrites a stored record newer
    than the archive's. Then each tenant's vector index is rebuilt from the
    graph and memories without a stored vector are queued for embedding."""
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    merge = query_bool(request, "merge") if query_text(request, "merge") else False
    allow_unsigned = query_bool(request, "allow_unsigned") if query_text(request, "allow_unsigned") else False
    name = upload = ""
    if content_type in ARCHIVE_TYPES:
        if allow_unsigned:  # before a byte of the archive is taken
            who = escalate(request, who, "operator", "allow_unsigned")
        upload = await _upload(request, who)
    else:
        if content_type and not is_json_media_type(content_type):  # refused unread
            raise ApiError(
                415,
                "Content-Type must be application/json (a name) or application/gzip (an archive)",
                "UNSUPPORTED_MEDIA_TYPE",
            )
        raw = await _small_body(request)
        if raw.strip() and not is_json_media_type(content_type):
            raise ApiError(
                415,
                "Content-Type must be application/json (a name) or application/gzip (an archive)",
                "UNSUPPORTED_MEDIA_TYPE",
            )
        body = require_object(decode_json(raw)) if raw.strip() else {}
        if body.get("allow_unsigned") is not None:
            if not isinstance(body["allow_unsigned"], bool):
                raise ApiError(400, "'allow_unsigned' must be true or false", "NOT_A_BOOLEAN")
            allow_unsigned = allow_unsigned or body["allow_unsigned"]
        if allow_unsigned:
            who = escalate(request, who, "operator", "allow_unsigned")
        given = body.get("name")
        if not isinstance(given, str) or not given:
            raise ApiError(
                400,
                "'name' must name a backup (GET /backups), or send the archive as application/gzip",
                "NAME_REQUIRED",
            )
        name = given
        if body.get("merge") is not None:
            if not isinstance(body["merge"], bool):
                raise ApiError(400, "'merge' must be true or false", "NOT_A_BOOLEAN")
            merge = merge or body["merge"]
    stream = clients(request).consolidate.RestoreBackup(
        # Into every tenant the archive names: an operator's; a tenant's admin restores its own tenant's records only.
        consolidate.RestoreBackupRequest(
            name=name, upload=upload, merge=merge, every_tenant=who.operator, allow_unsigned=allow_unsigned
        ),
        **long_call(request, who),
    )
    last = None
    async for progress in stream:
        last = progress
        log.info(
            "restore progress",
            phase=progress.phase,
            nodes=progress.nodes_done,
            of_nodes=progress.nodes_total,
            edges=progress.edges_done,
            of_edges=progress.edges_total,
        )
    if last is None or not last.done:
        raise ApiError(502, "the restore ended before it finished", "RESTORE_INCOMPLETE")
    started = time.perf_counter()
    tenants = [await _reindex(request, who, t) for t in last.tenants]
    reindex_seconds = time.perf_counter() - started
    return {
        "status": "success",
        "merge": merge,
        "backup": info_json(last.backup),
        "nodes": last.nodes_done,
        "edges": last.edges_done,
        "created": last.created,
        "updated": last.updated,
        "kept": last.kept,
        "tenants": tenants,
        "signature": last.signature,
        "skipped": last.skipped,
        "audit_left_out": last.audit_left_out,
        "problems": list(last.problems),
        "elapsed_seconds": round(last.elapsed_seconds, 3),
        "reindex_seconds": round(reindex_seconds, 3),
    }


async def _reindex(request: Request, who: Caller, restored: consolidate.RestoredTenant) -> dict:
    """Rebuild the tenant's vector index from the graph, and queue the memories without a vector for embedding."""
    as_tenant = dataclasses.replace(who, tenant=restored.tenant)
    indexed = 0
    # Options (a claim) per call: a claim lives SERVICE_CLAIM_TTL_SECONDS, less than a large rebuild takes.
    async for progress in clients(request).recall.RebuildIndex(
        recall.RebuildIndexRequest(), **long_call(request, as_tenant)
    ):
        indexed = progress.indexed
    ids = list(restored.unembedded_ids)
    queued = 0
    for start in range(0, len(ids), REEMBED_IDS_PER_CALL):  # never an empty list: that would mean every memory
        reply = await clients(request).enrich.ReembedMemories(
            enrich.ReembedMemoriesRequest(ids=ids[start : start + REEMBED_IDS_PER_CALL]),
            **long_call(request, as_tenant),
        )
        queued += reply.queued
    log.info("restore reindexed", tenant=restored.tenant, indexed=indexed, reembedding=queued)
    return {"tenant": restored.tenant, "memories": restored.memories, "indexed": indexed, "reembedding": queued}
