"""From what a client sent to a stored Memory: validation and defaults of
the memory model for POST /memory. Pure: the clock, the id and the classifier's
answer are passed in."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from services.core.domain.classification import Classification
from services.core.domain.errors import InvalidArgument
from services.core.domain.limits import Limits
from services.core.domain.model import Memory
from services.core.domain.tags import tag_prefixes, tag_segments
from services.core.domain.times import parse_iso
from services.core.domain.trust import TrustState, from_metadata

#: The largest finite float32, the type vectors are stored in.
FLOAT32_MAX = 3.4028234663852886e38


@dataclass(slots=True)
class Draft:
    """A create request as received; None means the field was not sent.

    tags and embedding keep their JSON shape (list or string) until validated;
    metadata is the raw JSON text.
    """

    content: Any = None
    type: str | None = None
    confidence: float | None = None
    importance: float | None = None
    tags: Any = None
    metadata_json: str | None = None
    timestamp: str | None = None
    t_valid: str | None = None
    t_invalid: str | None = None
    updated_at: str | None = None
    last_accessed: str | None = None
    embedding: Any = None
    #: PATCH only: True archives, False brings an archived memory back.
    archived: Any = None
    #: PATCH only: "deprecated", or "active" to undo it (trust.PATCHABLE).
    trust_state: Any = None
    #: The text a summary replaced (set by ingest, never by a client): kept in
    #: metadata.original_content, outside the client's metadata limit.
    original_content: str | None = None


def require_content(content: Any, field: str = "content") -> Any:
    """Content that was sent (None is CONTENT_REQUIRED; a batch item's
    message is the spec's, batch.at_index)."""
    if content is None:
        raise InvalidArgument("CONTENT_REQUIRED", f"'{field}' is required", field=field)
    return content


def validate_content(content: Any, limits: Limits, field: str = "content") -> str:
    """1..hard-limit characters of text."""
    if not isinstance(require_content(content, field), str):
        raise InvalidArgument("CONTENT_NOT_TEXT", f"'{field}' must be a string", field=field)
    if not content.strip():
        raise InvalidArgument("CONTENT_EMPTY", f"'{field}' must not be empty", field=field, min_length=1)
    if len(content) > limits.content_hard_limit:
        raise InvalidArgument(
            "CONTENT_TOO_LONG",
            f"'{field}' is {len(content)} characters; the limit is {limits.content_hard_limit}",
            field=field,
            length=len(content),
            limit=limits.content_hard_limit,
        )
    return content


def unit_interval_number(value: Any, field: str) -> int | float:
    """The type half of validate_unit_interval, which the gateway checks a
    JSON body by: a number (booleans are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument("NOT_A_NUMBER", f"'{field}' must be a number between 0 and 1", field=field)
    return value


def validate_unit_interval(value: Any, field: str) -> float:
    """A finite number in 0..1 (booleans are not numbers here)."""
    number = float(unit_interval_number(value, field))
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise InvalidArgument(
            "OUT_OF_RANGE",
            f"'{field}' must be between 0 and 1, got {value}",
            field=field,
            minimum=0,
            maximum=1,
            value=value,
        )
    return number


def validate_tags(tags: Any, field: str = "tags") -> list[str]:
    """A list of strings, or one string stored as one tag; stored as sent."""
    if tags is None:
        return []
    if isinstance(tags, str):
        return [tags]
    if isinstance(tags, list) and all(isinstance(t, str) for t in tags):
        return list(tags)
    raise InvalidArgument("INVALID_TAGS", f"'{field}' must be a list of strings or a string", field=field)


def check_tag_limits(tags: list[str], limits: Limits, field: str = "tags") -> list[str]:
    """At most max_tags tags, each of at most max_tag_chars characters and
    max_tag_segments segments: a tag's prefixes (one per segment, each a
    copy of the tag up to there) would otherwise grow with its square."""
    if len(tags) > limits.max_tags:
        raise InvalidArgument(
            "TOO_MANY_TAGS",
            f"'{field}' holds {len(tags)} tags; the limit is {limits.max_tags}",
            field=field,
            count=len(tags),
            limit=limits.max_tags,
        )
    for index, tag in enumerate(tags):
        if len(tag) > limits.max_tag_chars:
            raise InvalidArgument(
                "TAG_TOO_LONG",
                f"'{field}[{index}]' is {len(tag)} characters; the limit is {limits.max_tag_chars}",
                field=field,
                tag_index=index,
                length=len(tag),
                limit=limits.max_tag_chars,
            )
        if (segments := tag_segments(tag)) > limits.max_tag_segments:
            raise InvalidArgument(
                "TAG_TOO_DEEP",
                f"'{field}[{index}]' has {segments} segments (split on ':' and '/'); "
                f"the limit is {limits.max_tag_segments}",
                field=field,
                tag_index=index,
                segments=segments,
                limit=limits.max_tag_segments,
            )
    return tags


def check_metadata_size(metadata: dict, limits: Limits, field: str = "metadata") -> dict:
    """At most max_metadata_bytes of UTF-8 JSON, as the graph stores it."""
    if not metadata:  # "{}", within any limit: most writes send none
        return metadata
    size = len(json.dumps(metadata, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    if size > limits.max_metadata_bytes:
        raise InvalidArgument(
            "METADATA_TOO_LARGE",
            f"'{field}' is {size} bytes as JSON; the limit is {limits.max_metadata_bytes}",
            field=field,
            size=size,
            limit=limits.max_metadata_bytes,
        )
    return metadata


def validate_metadata(metadata_json: str | None, field: str = "metadata") -> dict:
    """A JSON object (reserved top-level names are refused)."""
    if metadata_json is None:
        return {}
    try:
        value = json.loads(metadata_json)
    except (TypeError, ValueError):
        raise InvalidArgument("INVALID_METADATA", f"'{field}' must be a JSON object", field=field) from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidArgument("INVALID_METADATA", f"'{field}' must be a JSON object", field=field)
    return value


def validate_embedding(embedding: Any, limits: Limits, field: str = "embedding") -> list[float] | None:
    """A list of numbers or a comma-separated string, of the vector size."""
    if embedding is None:
        return None
    if isinstance(embedding, str):
        parts = [p.strip() for p in embedding.split(",") if p.strip()]
        try:
            values = [float(p) for p in parts]
        except ValueError:
            raise InvalidArgument("INVALID_EMBEDDING", f"'{field}' must contain only numbers", field=field) from None
    elif isinstance(embedding, list):
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in embedding):
            raise InvalidArgument("INVALID_EMBEDDING", f"'{field}' must contain only numbers", field=field)
        values = [float(v) for v in embedding]
    else:
        raise InvalidArgument("INVALID_EMBEDDING", f"'{field}' must be a list of numbers", field=field)
    # Vectors are stored as float32: a finite double past its range would become infinity.
    if not all(math.isfinite(v) and abs(v) <= FLOAT32_MAX for v in values):
        raise InvalidArgument(
            "INVALID_EMBEDDING", f"'{field}' must contain only finite numbers within float32 range", field=field
        )
    if len(values) != limits.vector_size:
        raise InvalidArgument(
            "EMBEDDING_DIMENSION_MISMATCH",
            f"'{field}' has {len(values)} dimensions; expected {limits.vector_size}",
            field=field,
            length=len(values),
            expected=limits.vector_size,
        )
    return values


def build_memory(
    draft: Draft,
    *,
    memory_id: str,
    tenant: str,
    now: datetime,
    limits: Limits,
    classify: Callable[[str], Classification],
) -> Memory:
    """Validate a draft and apply the memory model's defaults, within the
    write-side limits (tags, metadata size).

    `classify` is called only when no type was sent. A confidence sent
    without a type is ignored.
    """
    content = validate_content(draft.content, limits)
    importance = (
        limits.default_importance
        if draft.importance is None
        else validate_unit_interval(draft.importance, "importance")
    )
    if draft.type is not None and draft.type.strip():
        mem_type = draft.type
        confidence = (
            limits.explicit_type_confidence
            if draft.confidence is None
            else validate_unit_interval(draft.confidence, "confidence")
        )
    else:
        found = classify(content)
        mem_type, confidence = found.type, found.confidence
    tags = check_tag_limits(validate_tags(draft.tags), limits)
    metadata = check_metadata_size(validate_metadata(draft.metadata_json), limits)
    if draft.original_content is not None:
        metadata = {**metadata, "original_content": draft.original_content}
    embedding = validate_embedding(draft.embedding, limits)

    timestamp = parse_iso(draft.timestamp, "timestamp") if draft.timestamp is not None else now
    t_valid = parse_iso(draft.t_valid, "t_valid") if draft.t_valid is not None else timestamp
    t_invalid = parse_iso(draft.t_invalid, "t_invalid") if draft.t_invalid is not None else None
    updated_at = parse_iso(draft.updated_at, "updated_at") if draft.updated_at is not None else timestamp
    last_accessed = parse_iso(draft.last_accessed, "last_accessed") if draft.last_accessed is not None else updated_at
    return Memory(
        id=memory_id,
        tenant=tenant,
        content=content,
        type=mem_type,
        confidence=confidence,
        importance=importance,
        timestamp=timestamp,
        t_valid=t_valid,
        t_invalid=t_invalid,
        updated_at=updated_at,
        last_accessed=last_accessed,
        recorded_at=now,
        tags=tags,
        tag_prefixes=tag_prefixes(tags),
        metadata=metadata,
        embedding=embedding,
        # The MCP client marks a memory deprecated through metadata keys.
        trust_state=(from_metadata(metadata) or TrustState.ACTIVE).value,
    )


def validate_batch_size(count: int, limits: Limits, field: str = "memories") -> None:
    """1..batch_max_items items."""
    if count < 1:
        raise InvalidArgument("BATCH_EMPTY", f"'{field}' must hold at least one item", field=field, count=count)
    if count > limits.batch_max_items:
        raise InvalidArgument(
            "BATCH_TOO_LARGE",
            f"'{field}' holds {count} items; the limit is {limits.batch_max_items}",
            field=field,
            count=count,
            limit=limits.batch_max_items,
        )
