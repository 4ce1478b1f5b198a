"""Tag rules of the memory model."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from services.core.domain.errors import InvalidArgument

_SEPARATORS = re.compile(r"[:/]")


def tag_key(tag: str) -> str:
    """What a tag is matched by: trimmed, lowercase (tag matches ignore case)."""
    return tag.strip().lower()


def tag_prefixes(tags: list[str]) -> list[str]:
    """Lowercase cumulative prefixes of trimmed tags, split on ':' and '/'.

    "project:automem:api" gives project, project:automem, project:automem:api.
    Blank tags are skipped; the result keeps first-seen order without repeats.
    """
    seen: dict[str, None] = {}
    for raw in tags:
        tag = tag_key(raw)
        if not tag:
            continue
        for match in _SEPARATORS.finditer(tag):
            prefix = tag[: match.start()]
            if prefix:
                seen.setdefault(prefix, None)
        seen.setdefault(tag, None)
    return list(seen)


def tag_segments(tag: str) -> int:
    """How many parts a tag has between ':' and '/' (each makes a prefix)."""
    return len(_SEPARATORS.split(tag))


def normalize_tags(tags: list[str] | str) -> list[str]:
    """The PATCH and enrichment normaliser: split comma-separated strings,
    trim, drop blanks and repeats (first occurrence wins)."""
    items = [tags] if isinstance(tags, str) else tags
    seen: dict[str, None] = {}
    for item in items:
        for part in item.split(","):
            part = part.strip()
            if part:
                seen.setdefault(part, None)
    return list(seen)


def required_tag_keys(tags: Iterable[object], field: str = "tags") -> list[str]:
    """The keys (tag_key) of the tags a match by tag names, sorted, without
    blanks, repeats or anything but strings; none is TAGS_REQUIRED."""
    keys = sorted({key for t in tags if isinstance(t, str) and (key := tag_key(t))})
    require_tags(keys, field)
    return keys


def require_tags(tags: Sequence[str], field: str = "tags") -> None:
    """Tags a read or a delete by tag names, already cleaned: none is TAGS_REQUIRED."""
    if not tags:
        raise InvalidArgument("TAGS_REQUIRED", f"'{field}' must name at least one tag", field=field)
