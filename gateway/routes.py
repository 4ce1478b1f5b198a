"""The REST routes: translate, call the service, translate back."""

from __future__ import annotations

import asyncio
import json
import time

import grpc
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from grpc_health.v1 import health_pb2

from gateway.auth import Caller
from gateway.envelope import ApiError
from gateway.translate import draft_from_json, iso, memory_to_json, now_iso, require_object
from memgrid.v1 import ingest_service_pb2, recall_service_pb2
from services.core.grpc.tenant import tenant_metadata
from services.core.settings import SERVICE_NAMES

router = APIRouter()


def caller(request: Request) -> Caller:
    return request.app.state.auth.authenticate(request)


def clients(request: Request):
    return request.app.state.clients


def timeout(request: Request) -> float:
    return request.app.state.settings.grpc_timeout_seconds


async def json_body(request: Request) -> object:
    raw = await request.body()
    if not raw:
        raise ApiError(400, "request body must be a JSON object", "INVALID_ARGUMENT")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ApiError(400, f"malformed JSON: {exc}", "INVALID_ARGUMENT") from None


def elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


@router.post("/memory", status_code=201)
async def create_memory(request: Request, who: Caller = Depends(caller)):
    """Store a memory (spec 003, POST /memory)."""
    started = time.perf_counter()
    draft = draft_from_json(require_object(await json_body(request)))
    reply = await clients(request).ingest.CreateMemory(
        ingest_service_pb2.CreateMemoryRequest(memory=draft),
        metadata=tenant_metadata(who.tenant),
        timeout=timeout(request),
    )
    memory = reply.memory
    body = {
        "status": "success",
        "memory_id": memory.id,
        "stored_at": iso(memory, "recorded_at"),
        "type": memory.type,
        "confidence": memory.confidence,
        "qdrant": reply.qdrant,
        "embedding_status": reply.embedding_status,
        "enrichment": reply.enrichment,
        "metadata": json.loads(memory.metadata_json or "{}"),
        "timestamp": iso(memory, "timestamp"),
        "updated_at": iso(memory, "updated_at"),
        "last_accessed": iso(memory, "last_accessed"),
        "query_time_ms": elapsed_ms(started),
    }
    if reply.summarized:
        body.update(summarized=True, original_length=reply.original_length, summarized_length=reply.summarized_length)
    return JSONResponse(body, status_code=201)


@router.get("/memory/{memory_id}")
async def get_memory(memory_id: str, request: Request, who: Caller = Depends(caller)):
    """One memory with every stored field (spec 003, GET /memory/:id)."""
    reply = await clients(request).recall.GetMemory(
        recall_service_pb2.GetMemoryRequest(id=memory_id),
        metadata=tenant_metadata(who.tenant),
        timeout=timeout(request),
    )
    memory = memory_to_json(reply.memory)
    memory["relations"] = [{"memory_id": r.memory_id, "type": r.type, "strength": r.strength} for r in reply.relations]
    memory["state"] = reply.state or "current"
    if reply.replaced_by:
        memory["replaced_by"] = reply.replaced_by
    return {"status": "success", "memory": memory}


async def _service_health(request: Request, name: str) -> str:
    try:
        reply = await clients(request).health[name].Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0)
    except grpc.aio.AioRpcError:
        return "UNAVAILABLE"
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


@router.get("/health")
async def health(request: Request):
    """No auth. The stores, the four services and the memory count."""
    services = dict(
        zip(SERVICE_NAMES, await asyncio.gather(*(_service_health(request, n) for n in SERVICE_NAMES)), strict=False)
    )
    components: dict[str, dict] = {}
    memory_count = None
    try:
        status = await clients(request).recall.GetSystemStatus(recall_service_pb2.GetSystemStatusRequest(), timeout=2.0)
        memory_count = status.memory_count
        for c in status.components:
            components[c.name] = {"status": c.status, "detail": c.detail, **dict(c.figures)}
    except grpc.aio.AioRpcError as exc:
        components = {
            n: {"status": "unknown", "detail": f"recall unavailable: {exc.code().name}"}
            for n in ("falkordb", "nats", "vector_index")
        }
    healthy = all(s == "SERVING" for s in services.values()) and all(
        c["status"] == "connected" for c in components.values()
    )
    body = {
        "status": "healthy" if healthy else "degraded",
        "falkordb": components.get("falkordb", {}).get("status", "unknown"),
        "nats": components.get("nats", {}).get("status", "unknown"),
        "qdrant": components.get("vector_index", {}).get("status", "unknown"),
        "vector_index": components.get("vector_index", {}),
        "services": services,
        "components": components,
        "memory_count": memory_count,
        "timestamp": now_iso(),
    }
    return JSONResponse(body, status_code=200 if healthy else 503)
