"""The SSE frames of GET /stream (gateway/stream.py): a memory event as the
stream's data, and the `gap`, `interrupted` and `resumed` events."""

from __future__ import annotations

import json

from gateway.stream_subscriber import Notice
from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.times import format_iso
from services.core.domain.watch import WatchGap

#: AutoMem's names for the kinds it streams (its clients switch on `type`).
_AUTOMEM_TYPES = {
    EventKind.CREATED: "memory.store",
    EventKind.UPDATED: "memory.update",
    EventKind.DELETED: "memory.delete",
    EventKind.ASSOCIATED: "memory.associate",
    EventKind.ENRICHED: "enrichment.complete",
}


def event_json(event: MemoryEvent) -> dict:
    """A memory event as the stream's data (thin, like the event itself)."""
    relation = event.relation
    return {
        "event_id": event.event_id,
        "kind": event.kind.value,
        "type": _AUTOMEM_TYPES.get(event.kind, f"memory.{event.kind.value}"),
        "memory_id": event.memory_id,
        "version": event.version,
        "occurred_at": format_iso(event.occurred_at),
        "timestamp": format_iso(event.occurred_at),
        "tenant": event.tenant,
        "content_changed": event.content_changed,
        "has_embedding": event.has_embedding,
        "relation": None
        if relation is None
        else {
            "source_id": relation.source_id,
            "target_id": relation.target_id,
            "type": relation.type,
            "strength": relation.strength,
        },
    }


def sse(kind: str, data: dict, event_id: int | None = None) -> str:
    """One SSE frame; with `event_id`, the id a reconnecting client sends back as Last-Event-ID."""
    head = "" if event_id is None else f"id: {event_id}\n"
    return f"{head}event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


KEEPALIVE = ": keepalive\n\n"


def gap_json(gap: WatchGap) -> dict:
    """The `gap` event: events after the client's Last-Event-ID it will never
    get (`reread`: what it holds may be stale; read again what it needs, from
    the memories' routes, then go on from this event's id)."""
    if gap.reason == "reset":
        why = "the requested event id is beyond the event stream's end (the stream was recreated); new events follow"
    else:
        why = "the event stream no longer holds events this old (retention); the oldest it holds follow"
    return {
        "requested_after": gap.requested_after,
        "resumed_after": gap.resumed_after,
        "reason": gap.reason,
        "message": f"{why}. Events were lost: re-read the memories you hold (GET /memory/{{id}}, /memories/export)",
        "reread": True,
    }


def notice_json(notice: Notice) -> dict:
    if notice.kind == "resumed":
        why = "the watch on recall was re-opened after the last event received; nothing was lost"
    else:
        why = "the gateway lost its watch on recall; it calls again from the last event received"
    data: dict[str, object] = {"reason": why, "since": format_iso(notice.since), "until": format_iso(notice.until)}
    if notice.after_sequence is not None:
        data["last_event_id"] = notice.after_sequence
    return data
