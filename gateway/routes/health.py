"""GET /health: no auth; the stores, the four services and the memory count.

The count is the caller's tenant's when a valid token comes with the
request. With many tenants (a tokens file), an anonymous caller gets no
count, and only an operator gets the figures that count every tenant's data
(the graph's memories, the stream's messages, the index's points): a probe,
or a tenant's own admin, learns whether memgrid is up, not how much others store.

Each component's `detail` (the FalkorDB host and port, the NATS URL, which
may hold a password, error strings) is shown to an operator only (a
tokens-file operator, or the API token with X-Admin-Token): everyone else
gets the statuses and figures alone."""

from __future__ import annotations

import asyncio

import grpc
from fastapi import APIRouter, Request
from grpc_health.v1 import health_pb2

from gateway.envelope import ApiError
from gateway.openapi import doc, obj
from gateway.responses import Json, JsonRoute
from gateway.routes.calls import clients
from gateway.translate import now_iso
from memgrid.v1 import recall_service_pb2
from services.core.settings import SERVICE_NAMES

router = APIRouter(route_class=JsonRoute)

#: Component figures that count every tenant's data.
EVERY_TENANTS_FIGURES = frozenset(
    {"memories", "messages", "points", "lag", "repaired_tenants", "repaired_points", "events_lost"}
)


def _is_operator(request: Request) -> bool:
    """Whether the request carries an operator's credential (what crosses tenants)."""
    try:
        request.app.state.auth.authorize(request, "operator")
    except ApiError:
        return False
    return True


async def _service_health(request: Request, name: str) -> str:
    try:
        reply = (
            await clients(request)
            .health[name]
            .Check(
                health_pb2.HealthCheckRequest(service=""),
                timeout=request.app.state.settings.gateway.health_check_timeout_seconds,
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
        "components": {
            "type": "object",
            "description": "Per store: status and figures; its detail (where it runs, errors) to an admin only."
            " nats.consumers_behind: durable consumers that lost events to the stream's retention and have"
            " not finished their repair from the graph (docs/operations.md, Retention); nats.events_lost: their"
            " lost sequences, at most.",
        },
        "memory_count": {"type": ["integer", "null"]},
        "vector_count": {"type": ["integer", "null"]},
        "sync_status": {"enum": ["synced", "drift_detected", "orphaned_vectors", "unknown"]},
        "vector_dimensions": {
            "type": "object",
            "properties": {
                "configured": {"type": "integer"},
                "effective": {"type": ["integer", "null"]},
                "collection": {"type": ["integer", "null"]},
                "mismatch": {"type": "boolean"},
            },
        },
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
    auth = request.app.state.auth
    try:
        caller = auth.authenticate(request)
    except ApiError:
        caller = None  # /health answers everyone; a token only scopes the count
    admin = caller is not None and _is_operator(request)
    every_tenants_figures = not auth.many_tenants or admin
    statuses = await asyncio.gather(*(_service_health(request, n) for n in SERVICE_NAMES))
    services = dict(zip(SERVICE_NAMES, statuses, strict=True))
    components: dict[str, dict] = {}
    memory_count = None
    try:
        status = await clients(request).recall.GetSystemStatus(
            recall_service_pb2.GetSystemStatusRequest(),
            # No caller: the gateway's own every-tenant call (it shows the count only where that is everyone's).
            metadata=clients(request).signer("recall").metadata(caller.tenant, caller.role)
            if caller is not None
            # A tenantless read claim: the one method taking it is this one (services/core/grpc/method_roles.py).
            else clients(request).signer("recall").metadata(None, "read"),
            timeout=request.app.state.settings.gateway.health_status_timeout_seconds,
        )
        if caller is not None or not auth.many_tenants:
            memory_count = status.memory_count
        for c in status.components:
            figures = {k: v for k, v in c.figures.items() if every_tenants_figures or k not in EVERY_TENANTS_FIGURES}
            components[c.name] = {"status": c.status, **({"detail": c.detail} if admin else {}), **figures}
    except grpc.aio.AioRpcError as exc:
        detail = {"detail": f"recall unavailable: {exc.code().name}"} if admin else {}
        components = {n: {"status": "unknown", **detail} for n in ("falkordb", "nats", "vector_index")}
    healthy = all(s == "SERVING" for s in services.values()) and all(
        c["status"] == "connected" for c in components.values()
    )
    vector = components.get("vector_index", {})
    vector_count = int(vector["points"]) if "points" in vector else None
    dimension = int(vector["dimension"]) if "dimension" in vector else None
    configured = request.app.state.settings.vectors.vector_size
    body = {
        "status": "healthy" if healthy else "degraded",
        "falkordb": components.get("falkordb", {}).get("status", "unknown"),
        "nats": components.get("nats", {}).get("status", "unknown"),
        "qdrant": components.get("vector_index", {}).get("status", "unknown"),
        "vector_index": components.get("vector_index", {}),
        "services": services,
        "components": components,
        "memory_count": memory_count,
        # AutoMem's figures, which its MCP client reports: the index's points
        # beside the graph's memories (compared only where both count every tenant).
        "vector_count": vector_count,
        "sync_status": sync_status(memory_count if not auth.many_tenants else None, vector_count),
        "vector_dimensions": {
            "configured": configured,
            "effective": dimension,
            "collection": dimension,
            "mismatch": dimension is not None and dimension != configured,
        },
        "timestamp": now_iso(),
    }
    return Json(body, status_code=200 if healthy else 503)


def sync_status(memories: int | None, points: int | None) -> str:
    """AutoMem's sync_status: synced, drift_detected (fewer points than
    memories: some not embedded or projected yet), orphaned_vectors, or unknown."""
    if memories is None or points is None:
        return "unknown"
    if points == memories:
        return "synced"
    return "drift_detected" if points < memories else "orphaned_vectors"
