"""What enrichment embeds for a memory, pure: its content, and after it the
memory written just before it in the same scope (contextual embedding).

A turn of a conversation ("Yes! It was amazing.") often means little alone;
the turn before it says what it answers. Embedding the two together puts
the exchange's subject into the memory's vector, while the keyword arm
still matches the memory's own words. The memory's own content comes first,
so the embedder's token limit cuts the context, never the memory; the
context is cut to `context_chars` first.

Which memory is "just before": the latest one of the same tenant written
at most the context window earlier (by timestamp, then by the order it was
recorded in: a batch's items are recorded in their order), sharing one of
the memory's own tags when it has any (enrichment's entity tags do not
count), never the memory itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from services.core.domain.entities import ENTITY_TAG_PREFIX
from services.core.domain.model import Memory


def scope_tags(tags: Iterable[str]) -> list[str]:
    """A memory's own tags, the ones its predecessor must share one of."""
    # The tags enrichment derives do not place a memory in a conversation.
    return [t for t in tags if not t.casefold().startswith(ENTITY_TAG_PREFIX)]


@dataclass(frozen=True, slots=True)
class Preceding:
    """What the store looks up for one memory's predecessor."""

    memory_id: str
    timestamp_us: int
    recorded_us: int
    tags: tuple[str, ...]


def preceding_query(memory: Memory, timestamp_us: int, recorded_us: int) -> Preceding:
    return Preceding(memory.id, timestamp_us, recorded_us, tuple(scope_tags(memory.tags)))


def contextual_text(content: str, preceding: str | None, context_chars: int) -> str:
    """The text embedded for a memory: its content, then (on a new line) the
    memory before it, cut to context_chars; the content alone without one."""
    context = (preceding or "").strip()[: max(0, context_chars)].strip()
    return f"{content}\n{context}" if context else content
