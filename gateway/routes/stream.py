"""GET /stream (server-sent memory events of the caller's tenant) and
GET /stream/status; the relay itself is gateway/stream.py."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse

from gateway.auth import Caller
from gateway.openapi import INTEGER, STRING, array, doc, obj
from gateway.responses import JsonRoute
from gateway.routes.common import require

router = APIRouter(route_class=JsonRoute)


@router.get(
    "/stream",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "Server-sent events of the caller's tenant: `ready` first, then one per memory event "
            "(`event: <kind>`, data a JSON object), `dropped`, `interrupted` and `resumed` when events are lost, "
            "and a keepalive comment when idle. It never ends by itself.",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        }
    },
)
async def stream(request: Request, who: Caller = Depends(require("read"))):
    """Server-sent memory events of the caller's tenant."""
    return StreamingResponse(
        request.app.state.stream.events(who.tenant),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "Connection": "keep-alive"},
    )


@router.get(
    "/stream/status",
    **doc(
        ok=obj(
            {
                "status": {"const": "success"},
                "tenant": STRING,
                "nats": STRING,
                "subscribers": INTEGER,
                "delivered": INTEGER,
                "dropped": INTEGER,
                "per_subscriber": array(
                    obj({"id": {}, "delivered": INTEGER, "dropped": INTEGER, "buffered": INTEGER}),
                ),
            },
            ("status", "tenant", "subscribers", "delivered", "dropped"),
        )
    ),
)
async def stream_status(request: Request, who: Caller = Depends(require("read"))):
    return {"status": "success", **request.app.state.stream.status(who.tenant)}
