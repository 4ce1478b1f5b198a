"""GET /stream (server-sent memory events of the caller's tenant) and
GET /stream/status; the relay itself is gateway/stream.py."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse

from gateway.auth import Caller
from gateway.envelope import ApiError
from gateway.openapi import BOOLEAN, INTEGER, STRING, array, doc, obj, query
from gateway.responses import JsonRoute
from gateway.routes.query import query_list, query_text
from gateway.routes.roles import require

router = APIRouter(route_class=JsonRoute)

#: The largest event id: a JetStream stream sequence is an unsigned 64-bit number.
MAX_EVENT_ID = 2**64 - 1


def resume_point(header: str | None, query: str | None) -> int | None:
    """The stream sequence a reconnecting client has seen: the Last-Event-ID
    header (what EventSource sends back by itself) or `?last_event_id=`;
    None for a new stream (events from now on)."""
    for where, text in (("Last-Event-ID", header), ("last_event_id", query)):
        if text is None or not text.strip():
            continue
        text = text.strip()
        # An event id is a stream sequence (64 bits): a longer one is no id of ours, not a 500 further on.
        if not (text.isascii() and text.isdigit()) or len(text) > 20 or int(text) > MAX_EVENT_ID:
            raise ApiError(
                400,
                f"'{where}' must be an event id from this stream (a whole number from 0 to {MAX_EVENT_ID})",
                "INVALID_EVENT_ID",
            )
        return int(text)
    return None


@router.get(
    "/stream",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "Server-sent events of the caller's tenant: `ready` first, then one per memory event "
            "(`id: <stream sequence>`, `event: <kind>`, data a JSON object); `dropped` when this stream's buffer "
            "overflowed, `gap` when a resumed stream asked for events the event stream no longer holds, "
            "`interrupted` and `resumed` around a lost watch (nothing is lost), and a keepalive comment when idle. "
            "Reconnect with `Last-Event-ID` (or `?last_event_id=`) to resume after that event. "
            "It never ends by itself. 429 when recall serves as many streams as it may (RECALL_MAX_WATCHES), "
            "503 when recall is unavailable.",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
    },
    **doc(
        params=(
            {
                "name": "Last-Event-ID",
                "in": "header",
                "required": False,
                "schema": INTEGER,
                "description": "resume after this event (EventSource sends it back when it reconnects)",
            },
            query("last_event_id", INTEGER, "resume after this event id, as Last-Event-ID"),
            query("kinds", array(STRING), "event kinds wanted (created, updated, ...); default every kind"),
        )
    ),
)
async def stream(request: Request, who: Caller = Depends(require("read"))):
    """Server-sent memory events of the caller's tenant."""
    after = resume_point(request.headers.get("last-event-id"), query_text(request, "last_event_id") or None)
    wanted = query_list(request, "kinds")
    hub = request.app.state.stream
    # Opened before the response starts, so a refusal (429, 503) is an answer in the envelope.
    try:
        watch = await hub.open(who.tenant, after, wanted)
    except TimeoutError:
        raise ApiError(503, "recall did not open the event watch in time; retry later", "WATCH_OPEN_TIMEOUT") from None
    return StreamingResponse(
        hub.events(watch),
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
                "source": STRING,
                "subscribers": INTEGER,
                "interrupted": INTEGER,
                "delivered": INTEGER,
                "dropped": INTEGER,
                "per_subscriber": array(
                    obj(
                        {
                            "id": {},
                            "delivered": INTEGER,
                            "dropped": INTEGER,
                            "buffered": INTEGER,
                            "watching": BOOLEAN,
                            "last_received": INTEGER,
                        }
                    ),
                ),
            },
            ("status", "tenant", "subscribers", "delivered", "dropped"),
        )
    ),
)
async def stream_status(request: Request, who: Caller = Depends(require("read"))):
    return {"status": "success", **request.app.state.stream.status(who.tenant)}
