"""Tag rules of the memory model."""

from __future__ import annotations

import re

_SEPARATORS = re.compile(r"[:/]")


def tag_prefixes(tags: list[str]) -> list[str]:
    """Lowercase cumulative prefixes of trimmed tags, split on ':' and '/'.

    "project:automem:api" gives project, project:automem, project:automem:api.
    Blank tags are skipped; the result keeps first-seen order without repeats.
    """
    seen: dict[str, None] = {}
    for raw in tags:
        tag = raw.strip().lower()
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
