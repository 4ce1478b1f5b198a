"""PATCH /memory/{id}: a partial update of a stored memory, pure.

`archived` is the lifecycle's one client-side switch: true archives the
memory (archived_at = now; every read mode but history withholds it),
false brings an archived memory back (archived_at and its decayed
relevance_score cleared, last_accessed now), as forgetting archives and a
user undoes it."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from services.core.domain.drafts import (
    Draft,
    check_metadata_size,
    check_tag_limits,
    validate_content,
    validate_embedding,
    validate_metadata,
    validate_unit_interval,
)
from services.core.domain.errors import InvalidArgument
from services.core.domain.limits import Limits
from services.core.domain.model import EventKind, Memory
from services.core.domain.state import is_archived
from services.core.domain.tags import normalize_tags, tag_prefixes
from services.core.domain.times import parse_iso
from services.core.domain.trust import TrustState, from_metadata, parse_patch_state, require_move, trust_of

#: The fields a PATCH may change; id, tenant and system times are immutable.
UPDATABLE_FIELDS = frozenset(
    {
        "content", "type", "confidence", "importance", "tags", "metadata", "embedding",
        "timestamp", "t_valid", "t_invalid", "updated_at", "last_accessed", "archived", "trust_state",
    }
)  # fmt: skip
#: Fields a PATCH may clear by sending null.
CLEARABLE_FIELDS = frozenset({"t_invalid", "metadata", "tags", "embedding"})


def apply_update(
    memory: Memory, draft: Draft, fields: set[str], *, now: datetime, limits: Limits
) -> tuple[Memory, bool]:
    """The memory after the update, and whether its content changed.

    `fields` names what the request sent (null included); a field sent as
    null clears it where that makes sense (t_invalid, metadata, tags,
    embedding) and is refused elsewhere. Metadata is replaced wholesale,
    tags are normalised, and updated_at moves to `now` unless it was sent.
    """
    unknown = fields - UPDATABLE_FIELDS
    if unknown:
        name = sorted(unknown)[0]
        raise InvalidArgument("FIELD_NOT_UPDATABLE", f"'{name}' cannot be updated", field=name)
    if not fields:
        raise InvalidArgument("EMPTY_UPDATE", "the update names no field to change", field="body")
    sent = {name: _value(draft, name) for name in fields}
    for name, value in sent.items():
        if value is None and name not in CLEARABLE_FIELDS:
            raise InvalidArgument("NULL_NOT_ALLOWED", f"'{name}' cannot be null", field=name)

    changes: dict = {}
    if "content" in sent:
        changes["content"] = validate_content(sent["content"], limits)
    if "type" in sent:
        if not isinstance(sent["type"], str) or not sent["type"].strip():
            raise InvalidArgument("INVALID_TYPE", "'type' must be a non-empty string", field="type")
        changes["type"] = sent["type"]
    for name in ("importance", "confidence"):
        if name in sent:
            changes[name] = validate_unit_interval(sent[name], name)
    if "tags" in sent:
        changes["tags"] = check_tag_limits(_tags(sent["tags"]), limits)
        changes["tag_prefixes"] = tag_prefixes(changes["tags"])
    if "metadata" in sent:
        changes["metadata"] = check_metadata_size(validate_metadata(sent["metadata"]), limits)
    if "embedding" in sent:
        changes["embedding"] = validate_embedding(sent["embedding"], limits)
    if "archived" in sent:  # before the times: a sent last_accessed wins over a restore's
        changes.update(_archive_changes(memory, sent["archived"], now))
    trust = _trust_change(memory, sent, changes.get("metadata"))
    if trust is not None:
        changes["trust_state"] = trust.value
    for name in ("timestamp", "t_valid", "t_invalid", "updated_at", "last_accessed"):
        if name in sent:
            changes[name] = None if sent[name] is None else parse_iso(sent[name], name)
    changes.setdefault("updated_at", now)

    content_changed = "content" in changes and changes["content"] != memory.content
    if content_changed and "embedding" not in changes:
        changes["embedding"] = None  # the old vector describes the old text; enrichment re-embeds
    if content_changed:
        # Not enriched since: the reconciler re-drives it should the events'
        # enrichment fail (dead-lettered), and the old text's summary goes.
        changes["enriched_at"] = None
        changes["summary"] = ""
    return replace(memory, **changes, version=memory.version + 1), content_changed


def _trust_change(memory: Memory, sent: dict, metadata: dict | None) -> TrustState | None:
    """The trust state a PATCH moves the memory to: trust_state as sent
    (deprecated, or active to undo it), else what the MCP client's metadata
    keys mean (deprecated, superseded_by); None: unchanged. A move the
    memory's state does not allow (a pending memory deprecated) is refused."""
    current = trust_of(memory.trust_state)
    if "trust_state" in sent:
        return require_move(current, parse_patch_state(sent["trust_state"]))
    meant = from_metadata(metadata) if metadata is not None else None
    if meant is None or meant == current:
        return None
    return require_move(current, meant, field="metadata")


def update_kind(before: Memory, after: Memory, content_changed: bool) -> EventKind:
    """The event of an update: ARCHIVED or RESTORED when the update flips the
    archived flag, UPDATED otherwise, and always when the content changed
    (enrichment re-embeds on UPDATED with content_changed; the projector
    re-reads the record on every kind, so the point's lifecycle follows)."""
    if content_changed:
        return EventKind.UPDATED
    if before.archived == after.archived:
        # A PATCH that deprecates (or un-deprecates) says so, for the audit.
        return EventKind.TRUST_CHANGED if before.trust_state != after.trust_state else EventKind.UPDATED
    return EventKind.ARCHIVED if after.archived else EventKind.RESTORED


def validate_archived(value: Any) -> bool:
    """archived as a PATCH sends it: true or false (the gateway checks a JSON body by it)."""
    if not isinstance(value, bool):
        raise InvalidArgument("INVALID_ARCHIVED", "'archived' must be true or false", field="archived")
    return value


def _archive_changes(memory: Memory, value, now: datetime) -> dict:
    if not validate_archived(value):
        if not memory.archived:
            return {"archived": False, "archived_at": None}
        # A restore is a use (last_accessed, which decay counts), and its old
        # score is dropped: forgetting judges only scored memories, so the
        # next forget pass cannot archive it again before decay re-scores it.
        return {"archived": False, "archived_at": None, "relevance_score": None, "last_accessed": now}
    if is_archived(memory, now):
        return {}  # archived already: its archived_at stays
    return {"archived": True, "archived_at": now}


def _value(draft: Draft, name: str):
    if name == "metadata":
        return draft.metadata_json
    return getattr(draft, name)


def _tags(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or (isinstance(value, list) and all(isinstance(t, str) for t in value)):
        return normalize_tags(value)
    raise InvalidArgument("INVALID_TAGS", "'tags' must be a list of strings or a string", field="tags")
