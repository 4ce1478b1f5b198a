"""GET /stream (server-sent memory events of the caller's tenant) and
GET /stream/status; the relay itself is gateway/stream.py."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse

from gateway.auth import Caller
from gateway.routes.common import require

router = APIRouter()


@router.get("/stream")
async def stream(request: Request, who: Caller = Depends(require("read"))):
    return StreamingResponse(
        request.app.state.stream.events(who.tenant),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "Connection": "keep-alive"},
    )


@router.get("/stream/status")
async def stream_status(request: Request, who: Caller = Depends(require("read"))):
    return {"status": "success", **request.app.state.stream.status(who.tenant)}
