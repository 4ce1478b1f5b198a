"""GET /health: no auth; the stores, the four services and the memory count."""

from __future__ import annotations

import asyncio

import grpc
from fastapi import APIRouter, Request
from grpc_health.v1 import health_pb2

from gateway.openapi import doc, obj
from gateway.responses import Json, JsonRoute
from gateway.routes.common import clients
from gateway.translate import now_iso
from memgrid.v1 import recall_service_pb2
from services.core.settings import SERVICE_NAMES

router = APIRouter(route_class=JsonRoute)


async def _service_health(request: Request, name: str) -> str:
    try:
        reply = (
            await clients(request)
            .health[name]
            .Check(
                health_pb2.HealthCheckRequest(service=""),
                timeout=request.app.state.settings.health_check_timeout_seconds,
            )
        )
    except grpc.aio.AioRpcError:
        return "UNAVAILABLE"
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


HEALTH = obj(
    {
        "status": {"enum": ["healthy", "degraded"]},
        "falkordb": {"type": "string"},
        "nats": {"type": "string"},
        "qdrant": {"type": "string"},
        "vector_index": {"type": "object"},
        "services": {"type": "object", "additionalProperties": {"type": "string"}},
        "components": {"type": "object"},
        "memory_count": {"type": ["integer", "null"]},
        "timestamp": {"type": "string"},
    },
    ("status", "falkordb", "nats", "qdrant", "services", "memory_count", "timestamp"),
)


@router.get(
    "/health",
    **doc(ok=HEALTH, responses={503: ("Degraded: a service or store is down (named); the same body.", HEALTH)}),
)
async def health(request: Request):
    """No auth: the stores, the four services and the memory count; 503 when any is down."""
    statuses = await asyncio.gather(*(_service_health(request, n) for n in SERVICE_NAMES))
    services = dict(zip(SERVICE_NAMES, statuses, strict=True))
    components: dict[str, dict] = {}
    memory_count = None
    try:
        status = await clients(request).recall.GetSystemStatus(
            recall_service_pb2.GetSystemStatusRequest(),
            timeout=request.app.state.settings.health_status_timeout_seconds,
        )
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
    return Json(body, status_code=200 if healthy else 503)
