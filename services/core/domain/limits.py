"""Limits and defaults the domain rules use, injected from settings."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    """The numbers behind the memory model's validation rules."""

    content_soft_limit: int = 500
    content_hard_limit: int = 2000
    default_importance: float = 0.5
    explicit_type_confidence: float = 0.9
    vector_size: int = 384
    batch_max_items: int = 500
    #: Write-side bounds on what a client sends: tags per memory, characters
    #: and segments (split on ':' and '/') per tag, metadata bytes as JSON.
    max_tags: int = 50
    max_tag_chars: int = 128
    max_tag_segments: int = 10
    max_metadata_bytes: int = 16 * 1024
