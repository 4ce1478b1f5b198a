"""What enrichment adds to a memory, pure.

Enrichment owns: the embedding (when missing; the embedding stage writes it
first), summary, enriched_at, factuality, metadata.entities,
metadata.enrichment, and the entity:<category>:<slug> tags it appends. It
writes them with a version check, so a concurrent PATCH is never overwritten.
In metadata it writes only the two keys reserved for it (entities,
enrichment); what else it derives (factuality) is a field of its own, so the
client's metadata reads back as sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime

from services.core.domain.entities import EntityMap, entity_tags, merge_tags
from services.core.domain.factuality import Factuality
from services.core.domain.model import Memory
from services.core.domain.tags import tag_prefixes
from services.core.domain.times import format_iso

#: The summary is the first sentence, at most this many characters.
SUMMARY_MAX_CHARS = 240
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def first_sentence(text: str, limit: int = SUMMARY_MAX_CHARS) -> str:
    """The first sentence of the text, cut at a word boundary to `limit`."""
    sentence = _SENTENCE_END.split(text.strip(), maxsplit=1)[0].strip()
    if len(sentence) <= limit:
        return sentence
    cut = sentence[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:")
    return (cut or sentence[: limit - 1]) + "…"


@dataclass(slots=True)
class LinkCounts:
    temporal_links: int = 0
    semantic_neighbors: int = 0
    patterns_detected: int = 0


@dataclass(slots=True)
class Enrichment:
    """What the pipeline computed for one memory's content."""

    content: str
    embedding: list[float] | None
    #: The model that embedded this content for this run (here or in the
    #: embedding stage before it); None when an existing vector was kept.
    embedding_model: str | None
    entities: EntityMap
    factuality: Factuality
    links: LinkCounts = field(default_factory=LinkCounts)


def enrich(memory: Memory, result: Enrichment, *, forced: bool, now: datetime, max_tags: int | None = None) -> Memory:
    """The memory with enrichment's fields written; everything else as it was.
    The entity tags it adds stop at `max_tags` in all (the client's own tags
    come first), so a client that sends a memory's tags back in a PATCH stays
    within the write limit. The entity tags of the previous enrichment
    (metadata.entities) are replaced, not added to."""
    # The entity tags the last enrichment derived go (they may name what the
    # old text mentioned); the client's own tags and the new entity tags stay.
    previous = memory.metadata.get("entities") if isinstance(memory.metadata, dict) else None
    derived = {tag.casefold() for tag in entity_tags(previous)} if isinstance(previous, dict) else set()
    tags = merge_tags([t for t in memory.tags if t.casefold() not in derived], entity_tags(result.entities))
    if max_tags is not None:
        tags = tags[: max(max_tags, len(memory.tags))]
    metadata = {
        **memory.metadata,
        "entities": result.entities,
        "enrichment": {
            "last_run": format_iso(now),
            "forced": forced,
            "temporal_links": result.links.temporal_links,
            "patterns_detected": result.links.patterns_detected,
            "semantic_neighbors": result.links.semantic_neighbors,
            "embedding_model": result.embedding_model,
        },
    }
    return replace(
        memory,
        embedding=result.embedding if result.embedding is not None else memory.embedding,
        summary=first_sentence(memory.content),
        enriched_at=now,
        metadata=metadata,
        factuality=result.factuality.to_dict(),
        tags=tags,
        tag_prefixes=tag_prefixes(tags),
        version=memory.version + 1,
    )
