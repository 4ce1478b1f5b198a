"""PATCH /memory/{id}: a partial update of a stored memory, pure."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

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
from services.core.domain.model import Memory
from services.core.domain.tags import normalize_tags, tag_prefixes
from services.core.domain.times import parse_iso

#: The fields a PATCH may change; id, tenant and system times are immutable.
UPDATABLE_FIELDS = frozenset(
    {
        "content", "type", "confidence", "importance", "tags", "metadata", "embedding",
        "timestamp", "t_valid", "t_invalid", "updated_at", "last_accessed",
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
    for name in ("timestamp", "t_valid", "t_invalid", "updated_at", "last_accessed"):
        if name in sent:
            changes[name] = None if sent[name] is None else parse_iso(sent[name], name)
    changes.setdefault("updated_at", now)

    content_changed = "content" in changes and changes["content"] != memory.content
    if content_changed and "embedding" not in changes:
        changes["embedding"] = None  # the old vector describes the old text; enrichment re-embeds
    return replace(memory, **changes, version=memory.version + 1), content_changed


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
