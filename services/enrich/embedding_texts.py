"""What enrichment embeds, for both of its embedders (the embedding stage
and a forced enrichment run): each memory's content and, with a context
window, the content of the memory just before it (domain/embedding_text.py),
read in one query for the batch."""

from __future__ import annotations

from dataclasses import dataclass

from services.core.domain.embedding_text import contextual_text, preceding_query
from services.core.domain.model import Memory
from services.core.domain.times import to_micros
from services.core.ports.enrichment import PrecedingContents


@dataclass(frozen=True, slots=True)
class EmbeddingContext:
    """EMBEDDING_CONTEXT_SECONDS and EMBEDDING_CONTEXT_CHARS: 0 seconds embeds the content alone."""

    seconds: float = 0.0
    chars: int = 0

    async def texts(self, store: PrecedingContents, memories: list[Memory]) -> list[str]:
        """The text to embed for each memory (all of one tenant), in order."""
        if not memories:
            return []
        preceding: dict[str, str] = {}
        if self.seconds > 0:
            queries = [preceding_query(m, to_micros(m.timestamp), to_micros(m.recorded_at)) for m in memories]
            preceding = await store.preceding_contents(memories[0].tenant, queries, int(self.seconds * 1_000_000))
        return [contextual_text(m.content, preceding.get(m.id), self.chars) for m in memories]
